"""`fabriclab runtime bench --baseline mpi|gloo`: the baselines run for real
(skipped when mpi4py/mpirun or torch is not installed: scripts/install-baselines.sh)
and print nccl-tests' table with busbw = algbw x 2(n-1)/n on the printed time."""

from __future__ import annotations

import importlib.util
import re
import shutil

import pytest

# size, count, type, redop, root, then time, algbw, busbw, #wrong out of place (6-9) and in place (10-13)
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)" + r"\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)" * 2 + r"\s*$")
HAVE = {"mpi": importlib.util.find_spec("mpi4py") is not None and shutil.which("mpirun") is not None,
        "gloo": importlib.util.find_spec("torch") is not None}


@pytest.mark.parametrize("baseline", ["mpi", "gloo"])
def test_baseline_table(cli, baseline):
    if not HAVE[baseline]:
        pytest.skip(f"{baseline} baseline not installed (scripts/install-baselines.sh {baseline})")
    n = 3
    r = cli("runtime", "bench", "--baseline", baseline, "-n", str(n), "--sizes", "1K:64K", "--factor", "64",
            "--iters", "3", "--warmup", "1")
    assert r.returncode == 0, r.stderr
    assert f"algo {baseline} (baseline)" in r.stdout
    rows = [ROW.match(x) for x in r.stdout.splitlines() if ROW.match(x)]
    assert [int(m.group(1)) for m in rows] == [1024, 65536]
    for m in rows:
        size, count = int(m.group(1)), int(m.group(2))
        assert count == size // 4
        for g in (6, 10):  # out of place, in place
            t_us, algbw, busbw, wrong = float(m.group(g)), float(m.group(g + 1)), float(m.group(g + 2)), int(m.group(g + 3))
            assert wrong == 0  # every rank's checked allreduce was exact
            assert abs(algbw - size / (t_us * 1e-6) / 1e9) <= 0.005 + 1e-9
            assert abs(busbw - size / (t_us * 1e-6) / 1e9 * 2 * (n - 1) / n) <= 0.005 + 1e-9
    assert "# Out of bounds values : 0 OK" in r.stdout


def test_baseline_refuses_other_collectives(cli):
    r = cli("runtime", "bench", "--baseline", "mpi", "--op", "broadcast", "-n", "2", "--sizes", "1K:1K")
    assert r.returncode == 2 and r.stderr.startswith("error: --baseline: baselines run --op allreduce only")
