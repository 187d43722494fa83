"""Chunk-size tuning by MIAD (multiplicative increase, additive decrease),
after Blink (Wang et al., MLSys 2020: CodeGen, "auto chunk size selection
with MIAD"; seed 003, the design recap slide). A pure controller: it is fed
the measured throughput of each iteration run with the chunk it asked for
and answers the next chunk. Nothing here measures or sends anything.

The rule (docs/runtime.md, "Blink at run time"):

1. **Multiplicative increase.** Start at ``initial``; while a chunk's
   throughput beats the best so far by more than ``tolerance`` (relative),
   multiply the chunk by ``factor`` (2). Small chunks pay a fixed cost per
   message; larger ones amortise it, so throughput grows.
2. **Overshoot, with lookahead.** The first chunk that does not beat the
   best by more than ``tolerance`` is the overshoot candidate. Before
   believing it, try up to ``lookahead`` (1) further multiplicative steps
   (overshoot x factor, x factor^2, ...): if one of them beats the best by
   more than ``tolerance``, it becomes the best and the increase goes on
   from it (the flat step was a plateau, not the peak). If none does (or
   ``max_chunk`` stops them), the first overshoot stands: the pipelining
   loss of big chunks now outweighs the per-message gain, and the best
   chunk lies between best/factor and the overshoot (for a unimodal
   curve). The lookahead chunks change nothing else (not the best, not the
   decrease), so where they do not beat the best the search ends where it
   ended without them, up to ``lookahead`` decisions later (each one run
   at a chunk that is probably worse). ``lookahead=0`` is the rule without
   lookahead.
3. **Additive decrease.** From the (first) overshoot, subtract a fixed step,
   ``step = best_chunk / steps_per_octave`` (the octave above the best in
   ``steps_per_octave`` pieces), while the throughput does not fall by more
   than ``tolerance`` from the previous chunk's; stop at the first fall, or
   below best/factor.
4. **Converged.** Use the best chunk seen. A later throughput below the
   converged one by more than ``retune_drop`` for ``retune_after``
   consecutive iterations (the network changed) starts over from step 1 at
   the converged chunk.

Each chunk is measured ``samples`` times and the median is used, so one
noisy iteration does not steer the search. Chunks are whole multiples of
``align`` (the element size) within ``[min_chunk, max_chunk]``.
"""

from __future__ import annotations

import statistics

from .errors import RuntimeInputError


class ChunkMIAD:
    def __init__(self, initial: int = 64 << 10, *, factor: float = 2.0, steps_per_octave: int = 4,
                 min_chunk: int = 4 << 10, max_chunk: int = 256 << 20, tolerance: float = 0.02,
                 samples: int = 1, align: int = 1, retune_drop: float = 0.25, retune_after: int = 3,
                 lookahead: int = 1):
        checks = (("initial", initial, 1), ("min_chunk", min_chunk, 1), ("max_chunk", max_chunk, 1),
                  ("steps_per_octave", steps_per_octave, 1), ("samples", samples, 1), ("align", align, 1),
                  ("retune_after", retune_after, 1), ("lookahead", lookahead, 0))
        for name, v, lo in checks:
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise RuntimeInputError(f"{name}: must be an integer >= {lo}, got {v!r}")
        if not min_chunk <= initial <= max_chunk:
            raise RuntimeInputError(f"initial: must be within min_chunk..max_chunk ({min_chunk}..{max_chunk}), got {initial}")
        if not factor > 1:
            raise RuntimeInputError(f"factor: must be > 1, got {factor!r}")
        if not 0 <= tolerance < 1 or not 0 < retune_drop < 1:
            raise RuntimeInputError("tolerance: must be within [0, 1) (and retune_drop within (0, 1))")
        self.factor, self.spo, self.tol, self.samples = float(factor), steps_per_octave, float(tolerance), samples
        self.min_chunk, self.max_chunk, self.align = min_chunk, max_chunk, align
        self.retune_drop, self.retune_after = float(retune_drop), retune_after
        self.lookahead = lookahead
        self.history: list[tuple[int, float]] = []  # (chunk, median throughput) per decision
        self._restart(self._clamp(initial))

    # ------------------------------------------------------------ helpers
    def _clamp(self, c: float) -> int:
        c = int(round(c / self.align)) * self.align
        lo = -(-self.min_chunk // self.align) * self.align
        hi = self.max_chunk // self.align * self.align
        return max(lo, min(hi, max(self.align, c)))

    def _restart(self, chunk: int) -> None:
        self.phase = "increase"
        self.chunk = chunk
        self.best: tuple[int, float] | None = None
        self.prev: float | None = None
        self.step = 0
        self._lowest = 0
        self._overshoot: tuple[int, float] | None = None  # the first non-improving chunk, while looking past it
        self._ahead = 0  # lookahead steps taken past it
        self._pending: list[float] = []
        self._low_count = 0

    @property
    def converged(self) -> bool:
        return self.phase == "converged"

    def state(self) -> tuple:
        """Everything the next decisions depend on (settings included): two
        controllers with equal states fed equal throughputs decide alike."""
        return (self.factor, self.spo, self.tol, self.samples, self.min_chunk, self.max_chunk, self.align,
                self.retune_drop, self.retune_after, self.lookahead, self.phase, self.chunk, self.best, self.prev,
                self.step, self._lowest, self._overshoot, self._ahead, tuple(self._pending), self._low_count,
                len(self.history))

    # ------------------------------------------------------------ the rule
    def update(self, throughput: float) -> int:
        """Feed the throughput (any unit, higher is better) of one iteration
        run with ``self.chunk``; returns the chunk for the next iteration."""
        if isinstance(throughput, bool) or not isinstance(throughput, (int, float)) or not throughput >= 0 \
                or throughput == float("inf"):
            raise RuntimeInputError(f"throughput: must be a finite number >= 0, got {throughput!r}")
        if self.phase == "converged":
            bc, bt = self.best
            self._low_count = self._low_count + 1 if throughput < bt * (1 - self.retune_drop) else 0
            if self._low_count >= self.retune_after:
                self._restart(bc)
            return self.chunk
        self._pending.append(float(throughput))
        if len(self._pending) < self.samples:
            return self.chunk
        t = statistics.median(self._pending)
        self._pending = []
        c = self.chunk
        self.history.append((c, t))
        if self.phase == "increase":
            if self.best is None or t > self.best[1] * (1 + self.tol):
                # a gain (also from a lookahead chunk: the flat step was a plateau): go on increasing
                self.best = (c, t)
                self._overshoot, self._ahead = None, 0
                nxt = self._clamp(c * self.factor)
                if nxt == c:  # at max_chunk
                    return self._settle()
                self.chunk = nxt
                return nxt
            if self._overshoot is None:
                self._overshoot = (c, t)
            if self._ahead < self.lookahead:
                nxt = self._clamp(c * self.factor)
                if nxt != c:  # look one step further past the overshoot
                    self._ahead += 1
                    self.chunk = nxt
                    return nxt
            # no gain within the lookahead: decrease additively from the first overshoot
            oc, ot = self._overshoot
            self._overshoot, self._ahead = None, 0
            bc = self.best[0]
            self.phase = "decrease"
            self.step = max(self.align, self._clamp(bc / self.spo))
            self._lowest = bc / self.factor
            self.prev = ot
            return self._next_down(oc)
        # decrease
        if t > self.best[1]:
            self.best = (c, t)
        if t < self.prev * (1 - self.tol):
            return self._settle()
        self.prev = t
        return self._next_down(c)

    def _next_down(self, c: int) -> int:
        nxt = self._clamp(c - self.step)
        if nxt >= c or nxt <= self._lowest:
            return self._settle()
        self.chunk = nxt
        return nxt

    def _settle(self) -> int:
        self.phase = "converged"
        self.chunk = self.best[0]
        self._low_count = 0
        return self.chunk
