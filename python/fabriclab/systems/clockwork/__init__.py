"""Clockwork / Huygens reproductions (docs/clockwork.md, issue 26).

``repro_sync``: ``fabriclab reproduce clock-sync``, the sync-accuracy
benchmark: every host's clock error against true time, per method (Huygens,
Huygens without the network effect, NTP-style, PTP-style), on a leaf-spine
and a k = 8 fat-tree carrying web-search background and a small training job
at 0, 40 and 80 % load, with NIC and software stamps, K = 5, 10, 20 peers.
"""
