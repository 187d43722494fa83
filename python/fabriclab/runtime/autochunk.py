"""The pipelining chunk tuned by the communicator itself:
``Communicator(..., chunk_bytes="auto")`` (docs/runtime.md, "Blink at run
time"). One :class:`~fabriclab.runtime.miad.ChunkMIAD` per (collective,
algorithm, size bucket); a bucket holds the sizes in (2^(b-1), 2^b] bytes.

**Agreement between ranks.** Every rank must build the same plan for the
same call, so the chunk of a key changes only at a *sync point*: the end of
a window of that key's calls whose length every rank derives from state all
ranks share (``samples`` calls while searching, ``sync_every`` once
converged). At a sync point each rank writes its window's durations
(integer nanoseconds) and a digest of its tuner state into its own slots of
a small int64 vector; one sum-allreduce of it (a fixed chunk, never tuned)
leaves the same bytes on every rank. Each rank then feeds the slowest
rank's time of each call to its own copy of the controller. The controller
is a pure function of its state and inputs (integers and IEEE-754 double
arithmetic), so every copy takes rank 0's decision without a second
message. The digests (the chunk the window ran with and a CRC of the
controller's whole state and settings) are compared at every sync: equal
states before equal inputs give equal states after, and a difference raises
:class:`TuningDiverged` before a decision is taken from it. One extra
collective per window, never one per call.

**Slowest rank's time.** A collective is done for the job when its last
rank is done; rank 0's own time misstates it whenever rank 0 finishes
early (a broadcast's root hands off its last chunk and returns) or arrives
late (it then waits less than the others).
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .errors import RuntimeFailure, RuntimeInputError
from .miad import ChunkMIAD
from .plans import DEFAULT_CHUNK_BYTES

ALIGN = 8  # chunks are multiples of every element size the runtime knows


class TuningDiverged(RuntimeFailure):
    """Ranks' chunk tuners disagree (different settings, or a bug): never silently run different plans."""


@dataclass(frozen=True)
class AutoChunk:
    """Settings of ``chunk_bytes="auto"`` (pass an instance instead of the string to change them).

    Messages below ``min_bytes`` use the fixed default chunk (tuning them
    would cost more than it gains). ``initial``, ``samples``, ``tolerance``,
    ``retune_drop``, ``retune_after`` and ``lookahead`` (steps tried past
    the first non-improving chunk before it is taken as the overshoot; 0:
    none) are ChunkMIAD's. ``cost``, when
    given, replaces the measured time of a call: ``cost(chunk_bytes,
    nbytes) -> seconds`` (tests, what-if runs); the collective still runs."""

    initial: int = 64 << 10
    samples: int = 3
    sync_every: int = 16
    min_bytes: int = 256 << 10
    min_chunk: int = 4 << 10
    tolerance: float = 0.02
    retune_drop: float = 0.25
    retune_after: int = 3
    lookahead: int = 1
    cost: Callable[[int, int], float] | None = field(default=None, compare=False)

    def __post_init__(self):
        for name in ("initial", "samples", "sync_every", "min_bytes", "min_chunk", "retune_after"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise RuntimeInputError(f"chunk_bytes: AutoChunk.{name} must be an integer >= 1, got {v!r}")
        if not self.min_chunk <= self.initial:
            raise RuntimeInputError(f"chunk_bytes: AutoChunk.initial must be >= min_chunk ({self.min_chunk}), got {self.initial}")
        if not self.min_chunk <= self.min_bytes:
            raise RuntimeInputError(f"chunk_bytes: AutoChunk.min_bytes must be >= min_chunk ({self.min_chunk}), got {self.min_bytes}")
        if self.cost is not None and not callable(self.cost):
            raise RuntimeInputError(f"chunk_bytes: AutoChunk.cost must be callable(chunk_bytes, nbytes) or None, got {self.cost!r}")
        self.controller(1 << 30)  # ChunkMIAD checks tolerance, the retune settings and lookahead

    def controller(self, max_chunk: int) -> ChunkMIAD:
        try:
            return ChunkMIAD(min(self.initial, max_chunk), samples=self.samples, min_chunk=self.min_chunk,
                             max_chunk=max_chunk, tolerance=self.tolerance, align=ALIGN,
                             retune_drop=self.retune_drop, retune_after=self.retune_after,
                             lookahead=self.lookahead)
        except RuntimeInputError as e:
            raise RuntimeInputError(f"chunk_bytes: AutoChunk.{e}") from None


@dataclass
class _Key:
    ctl: ChunkMIAD
    calls: int = 0
    window: list = field(default_factory=list)  # (nbytes, ns) of this window's calls
    changes: list = field(default_factory=list)  # (call index, chunk from that call on)


class ChunkTuner:
    """One communicator's tuning state (``comm.tuning`` shows it)."""

    def __init__(self, settings: AutoChunk, rank: int, world_size: int):
        self.settings, self.rank, self.n = settings, rank, world_size
        self._keys: dict[tuple, _Key] = {}
        fixed = {k: v for k, v in vars(settings).items() if k != "cost"}
        self._settings_crc = zlib.crc32(repr(sorted(fixed.items())).encode())

    def chunk_for(self, op: str, algo: str, nbytes: int) -> tuple[tuple | None, int]:
        """(key, chunk) for the next call; key None: not tuned (small message)."""
        if nbytes < self.settings.min_bytes:
            return None, DEFAULT_CHUNK_BYTES
        key = (op, algo, (nbytes - 1).bit_length())
        st = self._keys.get(key)
        if st is None:
            st = self._keys[key] = _Key(self.settings.controller(1 << key[2]))
            st.changes.append((0, st.ctl.chunk))
        return key, st.ctl.chunk

    def timed(self, key: tuple, nbytes: int, run: Callable[[], None], sync: Callable[[np.ndarray], None]) -> None:
        """Runs one call of ``key`` (``run``), times it, and at the window's end syncs and decides."""
        st = self._keys[key]
        t0 = time.perf_counter_ns()
        run()
        ns = time.perf_counter_ns() - t0
        if self.settings.cost is not None:
            ns = int(self.settings.cost(st.ctl.chunk, nbytes) * 1e9)
        st.window.append((nbytes, max(1, ns)))
        st.calls += 1
        k = self.settings.sync_every if st.ctl.converged else self.settings.samples
        if len(st.window) >= k:
            self._decide(st, k, sync)

    def _decide(self, st: _Key, k: int, sync) -> None:
        ran = st.ctl.chunk
        digest = zlib.crc32(repr(st.ctl.state()).encode(), self._settings_crc)
        vec = np.zeros((self.n, k + 2), np.int64)
        vec[self.rank, :k] = [ns for _, ns in st.window]
        vec[self.rank, k:] = (ran, digest)
        sync(vec.reshape(-1))
        if (vec[:, k] != ran).any() or (vec[:, k + 1] != digest).any():
            raise TuningDiverged(f"chunk tuning: ranks disagree at call {st.calls} (chunks {vec[:, k].tolist()}, "
                                 "state digests differ: different AutoChunk settings on different ranks?)", "tuning")
        for (nbytes, _), ns in zip(st.window, vec[:, :k].max(axis=0).tolist()):
            was = st.ctl.converged
            st.ctl.update(nbytes / (ns * 1e-9))
            if was and not st.ctl.converged:
                break  # retune: the rest of the window ran with the old chunk, not the search's next one
        st.window.clear()
        if st.ctl.chunk != ran:
            st.changes.append((st.calls, st.ctl.chunk))

    def state(self) -> dict:
        """Per key ``"op:algo:<=bytes"``: the current chunk, converged or not, calls so far,
        the controller's decisions (chunk, slowest-rank bytes/s) and the chunk changes (call index, chunk)."""
        return {f"{op}:{algo}:<={1 << b}": {"chunk": st.ctl.chunk, "converged": st.ctl.converged, "calls": st.calls,
                                            "decisions": list(st.ctl.history), "changes": list(st.changes)}
                for (op, algo, b), st in self._keys.items()}
