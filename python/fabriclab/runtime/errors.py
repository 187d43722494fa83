"""The runtime's errors. Bad input derives from :class:`fabriclab.errors.InputError`
(the message names the field); failures of the job (a peer that died,
stalled or sent a corrupted message, a refused handshake) derive from
:class:`RuntimeFailure` and carry ``peer``, the rank blamed, when there is one."""

from __future__ import annotations

from ..errors import InputError


class RuntimeInputError(InputError):
    """Bad arguments to the runtime: the message names the field or variable."""


class RuntimeFailure(RuntimeError):
    """The collective could not complete. ``kind`` and ``peer`` say why and whom."""

    def __init__(self, message: str, kind: str = "", peer: int | None = None):
        super().__init__(message)
        self.kind = kind
        self.peer = peer


class PeerFailure(RuntimeFailure):
    """A peer died, closed its connection, stalled past the timeout, or was reported failed."""


class CorruptMessage(RuntimeFailure):
    """A message failed its checksum, was truncated, or did not match the plan."""


class JoinRefused(RuntimeFailure):
    """A handshake was refused (wrong join token, duplicate rank, other world size)."""


class BootstrapError(RuntimeFailure):
    """The rendezvous or the pairwise connections failed (unreachable master, timeout)."""


_KINDS = {"peer_failed": PeerFailure, "corrupt": CorruptMessage, "refused": JoinRefused, "bootstrap": BootstrapError}


def translate(exc: Exception) -> Exception:
    """The binding's ``RtError(kind, peer, message)`` as one of the classes above."""
    kind, peer, message = exc.args
    if kind == "input":
        return RuntimeInputError(message)
    return _KINDS.get(kind, RuntimeFailure)(message, kind, peer)
