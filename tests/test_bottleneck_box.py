"""Bottleneck naming on a real run (root only, ~15 s): a cluster-in-a-box leaf-spine of 3 leaves x 2
hosts under one spine at 200 Mbit/s, whose leaf0-spine0 link is reshaped to 50 Mbit/s both ways after
`cluster up` (the htb classes of both ends, as docs/runtime.md shows for a host link), the runtime's ring
allreduce over 6 ranks (rank i in host i) with telemetry, then `fabriclab bottleneck` with the box's
static routes. All namespaces share CLOCK_REALTIME, so the uncorrected delays are exact.

By hand: the ring's connections h1 -> h2 (leaf0 up to the spine) and h5 -> h0 (down from it) cross
leaf0-spine0 and nothing else carries it; their messages take 4x the others' (50 against 200 Mbit/s), so
they are elevated (above 2x the expected delay) and the link without direction is crossed by both: it
must be named, not a host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import why_no_box

FAST, SLOW = 200_000_000, 50_000_000
PY = sys.executable
NAME = "bn" + str(os.getpid() % 10**6)
HOSTS = ",".join(f"h{i}" for i in range(6))

reason = why_no_box()
pytestmark = pytest.mark.skipif(reason is not None, reason=reason or "")


def fl(*args, timeout=120):
    return subprocess.run([PY, "-m", "fabriclab.cli", *args], capture_output=True, text=True, timeout=timeout)


def shape(name: str, ns: str, dev: str, rate_bps: int) -> None:
    for cls in (["parent", "2:", "classid", "2:1"], ["parent", "2:1", "classid", "2:a"]):
        r = fl("cluster", "exec", "--name", name, ns, "--", "tc", "class", "change", "dev", dev, *cls, "htb",
               "rate", f"{rate_bps}bit", "ceil", f"{rate_bps}bit", "overhead", "24", "quantum", "1514")
        assert r.returncode == 0, r.stderr


def test_box_names_the_shaped_link(tmp_path):
    scen = tmp_path / "ls.toml"
    scen.write_text(textwrap.dedent(f"""
        [topology]
        kind = "leaf_spine"
        leaves = 3
        hosts_per_leaf = 2
        spines = 1
        link_rate_bps = "{FAST // 10**6}Mbps"
        spine_link_rate_bps = "{FAST // 10**6}Mbps"
        link_delay_ps = "0us"
        [queue]
        ecn_threshold_packets = "off"
        [transport]
        cc = "newreno"
    """))
    fl("cluster", "down", "--name", NAME)
    r = fl("cluster", "up", str(scen), "--name", NAME)
    assert r.returncode == 0, r.stderr
    try:
        shape(NAME, "leaf0", "up0", SLOW)
        shape(NAME, "spine0", "down0", SLOW)
        d = tmp_path / "tel"
        r = fl("runtime", "bench", "--cluster", NAME, "-n", "6", "--sizes", "768K:768K", "--iters", "4",
               "--warmup", "1", "--telemetry", str(d))
        assert r.returncode == 0, r.stderr
    finally:
        fl("cluster", "down", "--name", NAME)
    r = fl("bottleneck", str(d), "--hosts", HOSTS, "--scenario", str(scen))
    assert r.returncode == 0, r.stderr
    v = json.loads((d / "bottleneck.json").read_text())["verdict"]
    assert (v["kind"], v["component"]) == ("link", "leaf0-spine0"), r.stdout
    assert {(c[0], c[1]) for c in v["connections"]} == {("h1", "h2"), ("h5", "h0")}
