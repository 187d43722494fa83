"""``REPRODUCTIONS``: one entry per ``fabriclab reproduce NAME``, with its
full run's note, its quick mode's measured wall time and the CI test that
runs it; ``QUICK_MEASURED``: when the quick values were measured."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reproduction:
    name: str  # fabriclab reproduce NAME
    seed: str
    full: str  # how long the full run takes, as documented
    quick_s: float | None  # wall seconds of --quick as measured (see QUICK_MEASURED)
    ci: str  # the test that runs the quick mode in CI and holds it to its bands ("": on demand only)
    runs_on: str = ""  # what its full run simulates on: backend, flow model or congestion control, or no network

    @property
    def command(self) -> str:
        return f"fabriclab reproduce {self.name}"

    @property
    def quick_command(self) -> str:
        return f"{self.command} --quick"



# Wall seconds of each --quick run (--workers 1), measured one after another
# on this 2-core machine while other work loaded it (load average 4-5), on
# QUICK_MEASURED's commit: upper bounds. Every quick value in QUICK is from
# these runs. 20 of 23 quick modes run in CI (``ci``: the test that runs and
# checks each; three of them, C4P figs 8, 9 and 13, about 28 s, only in
# tests/test_registry.py); panama-fig8-1024 (33 s), c4p-fig11 (21-44 s) and
# c4p-fig13-llm (37 s) run on demand: ``fabriclab reproduce all --quick``.
# clockwork-nccl and clockwork-ray were measured later (2026-11-28, branch
# rrepro, load 4-5), c4p-fig13-llm on 2026-11-29 (branch llmrep, load 6; its Job1 and Job2 values again on
# branch megafix after the tied embedding was counted once for pp = 1: 13.69 -> 12.56, 41.42 -> 38.29).
QUICK_MEASURED = "2026-11-28, commit 9d4a4e5 (main), this 2-core box at load average 4-5"
# Blink's quick values are from 2026-11-28 after run_plan's flow model became "fluid" (branch r29;
# docs/reproductions.md, "Why the numbers below moved"): 65.1 s at load average 5.

REPRODUCTIONS: tuple[Reproduction, ...] = (
    Reproduction("blink", "Blink", "about 6 min", 65.1, "tests/test_collective_sim.py", runs_on="flow backend, fluid"),
    Reproduction("thesis-ch4", "Thesis", "3.5 s", 8.3, "tests/test_jobs.py", runs_on="flow backend, tcp model, DCTCP"),
    Reproduction("thesis-ch5", "Thesis", "14 min 55 s", 33.9, "tests/test_jobs.py",
                 runs_on="packet, NewReno, strict priority, drop-tail"),
    Reproduction("thesis-slack", "Thesis", "35 min 6 s", 49.2, "tests/test_jobs.py",
                 runs_on="packet, NewReno, strict priority, drop-tail"),
    Reproduction("panama-fig8", "PANAMA", "158 s", 26.7, "tests/test_panama_sim.py",
                 runs_on="packet, DCTCP, PFC for aggregation"),
    # On demand: the flow backend's k = 16 twin of panama-fig8's quick run, the slowest not yet in CI.
    Reproduction("panama-fig8-1024", "PANAMA", "not stated", 33.1, "", runs_on="flow backend, fluid"),
    Reproduction("panama-fig9", "PANAMA", "40.5 s", 19.3, "tests/test_panama_sim.py", runs_on="packet, DCTCP"),
    Reproduction("panama-fig10", "PANAMA", "8.9 s", 7.3, "tests/test_panama_sim.py", runs_on="packet, DCTCP"),
    Reproduction("c4-table3", "C4", "3 s", 3.0, "tests/test_downtime.py",
                 runs_on="no network: closed form and Monte Carlo"),
    Reproduction("c4p-fig8", "C4", "168 s", 5.5, "tests/test_registry.py", runs_on="flow backend, fluid"),
    Reproduction("c4p-fig9", "C4", "169 s", 10.1, "tests/test_registry.py", runs_on="flow backend, fluid"),
    Reproduction("c4p-fig10", "C4", "69 s", 6.8, "tests/test_c4p_training.py", runs_on="packet, DCQCN over PFC"),
    # On demand: 21-44 s, and its quick run is too short for DLB to act (gain -2.1 %).
    Reproduction("c4p-fig11", "C4", "16 min 9 s at load average 13 (figure 12 too; 5.4 GB)", 21.3, "",
                 runs_on="flow backend, fluid"),
    Reproduction("c4p-fig13", "C4", "631 s", 12.2, "tests/test_registry.py",
                 runs_on="flow backend, fluid, compute analytic"),
    Reproduction("c4p-fig13-llm", "C4",
                 "4 min 17 s at load average 6 (169 s CPU); 9 min 24 s at 6-8 beside another run", 37.3, "",
                 runs_on="flow backend, fluid; whole LLM jobs"),
    Reproduction("c4-diagnosis", "C4", "8 min 51 s", 23.3, "tests/test_c4_faults.py", runs_on="packet, DCTCP"),
    Reproduction("c4-recovery", "C4", "2 min 19 s", 25.3, "tests/test_repro_c4_recovery.py", runs_on="packet, DCTCP"),
    Reproduction("clock-sync", "Clockwork", "16 min 27 s (--workers 2, load 3-6)", 7.1, "tests/test_repro_clock_sync.py",
                 runs_on="packet, DCTCP"),
    Reproduction("colocation", "Clockwork", "2 min 31 s (--workers 2)", 6.1, "tests/test_colocation.py",
                 runs_on="packet, DCTCP, [cloud]"),
    Reproduction("bottleneck", "Clockwork", "26.5 s-168 s (--workers 2)", 9.2, "tests/test_bottleneck.py",
                 runs_on="packet, DCTCP"),
    Reproduction("clockwork-nccl", "Clockwork", "3 min 50 s (--workers 2, idle machine; 8 min 2 s at load average 5-6)", 37.8,
                 "tests/test_clockwork_talk.py", runs_on="packet, CUBIC, [cloud]"),
    Reproduction("clockwork-ray", "Clockwork", "11 min 54 s (--workers 1, beside the test suite)", 21.4,
                 "tests/test_clockwork_talk.py", runs_on="packet, CUBIC, [cloud]"),
    Reproduction("megatron-weak-scaling", "Megatron-LM",
                 "11 min 21 s at load average 6-8 (322 s CPU); 14 min 21 s at 12; 13 min 45 s at 5-8 beside another run",
                 37.3, "tests/test_megatron.py", runs_on="flow backend, fluid; whole LLM jobs"),
)

_RUNS_ON = {r.name: r.runs_on for r in REPRODUCTIONS}
