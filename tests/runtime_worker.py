"""Helper for tests/test_runtime_*.py (not a test): one rank that runs a list
of cases and saves its outputs, and the inputs every rank starts from.

    python tests/runtime_worker.py cases.json OUT_DIR    (env from the test)
"""

from __future__ import annotations

import json
import os
import signal
import sys

import numpy as np


def make_input(case: dict, rank: int) -> np.ndarray:
    """Rank ``rank``'s input for ``case``: seeded by (case id, rank)."""
    rng = np.random.default_rng([case["id"], rank])
    if case["dtype"] == "int32":
        return rng.integers(-1_000_000, 1_000_000, case["count"], dtype=np.int32)
    return rng.standard_normal(case["count"]).astype(case["dtype"])


def run_cases(cases, out_dir):
    from fabriclab.runtime import Communicator, PeerFailure

    c = Communicator.from_env(checksum=True)
    outs = {}
    for case in cases:
        x = make_input(case, c.rank)
        if case.get("kill_rank") == c.rank:
            os.kill(os.getpid(), signal.SIGKILL)
        if case.get("stop_rank") == c.rank:
            os.kill(os.getpid(), signal.SIGSTOP)  # frozen: alive, connections open, silent
        try:
            for _ in range(case.get("repeat", 1)):
                c.collective(case["op"], x, case["algo"], case.get("root", 0))
        except PeerFailure as e:
            print(f"PEERFAILURE peer={e.peer} {e}", flush=True)
            sys.exit(3)
        outs[f"case{case['id']}"] = x
    np.savez(os.path.join(out_dir, f"rank{c.rank}.npz"), **outs)
    c.close()


if __name__ == "__main__":
    run_cases(json.loads(open(sys.argv[1]).read()), sys.argv[2])
