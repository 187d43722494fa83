"""fabriclab.torch: DDP's gradient allreduce through the runtime, on 2 to 4
CPU processes. The parameters after a few SGD steps must equal those of DDP's
own (gloo) allreduce, and those of one process trained on every rank's batch
at once (the average of equal-sized batches' mean-loss gradients is the
gradient of the whole batch's mean loss). tests/torch_worker.py trains."""

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("torch", reason="the torch extra is not installed (pip install -e '.[torch]')")

CASES = [
    (2, "ring", None),
    (3, "tree", None),
    (4, "planner:halving-doubling", None),
    (3, "ring", "bfloat16"),
    (2, "tree", "float16"),
    (3, "trees", None),
]


@pytest.mark.parametrize("n,algo,compress", CASES)
def test_ddp_hook_matches_ddp_and_single_process(tmp_path, n, algo, compress):
    cmd = [sys.executable, "-m", "fabriclab.cli", "launch", "-n", str(n), "--",
           sys.executable, "tests/torch_worker.py", str(tmp_path), algo] + ([compress] if compress else [])
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr[-3000:]
    ranks = [np.load(tmp_path / f"rank{r}.npz") for r in range(n)]
    names = [k[len("hook/"):] for k in ranks[0].files if k.startswith("hook/")]
    assert sorted(names) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    # 5 steps. DDP's first iteration puts every gradient in one bucket; then it rebuilds
    # buckets of bucket_cap_mb = 0.0008 MB = 838 bytes, filling each in reverse parameter
    # order until it reaches the cap: 2.bias + 2.weight + 0.bias (5 + 185 + 37 floats =
    # 908 bytes), then 0.weight (481 floats). So 1 + 4 x 2 allreduces.
    assert int(ranks[0]["buckets"]) == 1 + 4 * 2
    tol = dict(rtol=1e-5, atol=1e-6) if compress is None else dict(rtol=0, atol=2e-2)
    for name in names:
        hook = ranks[0][f"hook/{name}"]
        assert np.abs(hook - ranks[0][f"init/{name}"]).max() > 1e-3  # training moved it
        for r in ranks[1:]:
            np.testing.assert_array_equal(r[f"hook/{name}"], hook)  # every rank holds the same model
        np.testing.assert_allclose(hook, ranks[0][f"ddp/{name}"], **tol)
        np.testing.assert_allclose(hook, ranks[0][f"ref/{name}"], **tol)
    if compress is not None:  # 16 bits on the wire: close, but not bit-equal to float32's result
        assert max(np.abs(ranks[0][f"hook/{k}"] - ranks[0][f"ddp/{k}"]).max() for k in names) > 1e-6


def test_bad_arguments_are_named():
    import torch

    import fabriclab.torch as fl
    from fabriclab.runtime import RuntimeInputError

    with pytest.raises(RuntimeInputError, match="^model: must be a torch.nn.parallel.DistributedDataParallel"):
        fl.register(torch.nn.Linear(2, 2))
    with pytest.raises(RuntimeInputError, match="^comm: must be a fabriclab.runtime.Communicator"):
        fl.FabriclabHook(object())
    from fabriclab.runtime import Communicator
    from fabriclab.runtime.launch import free_port

    with Communicator(0, 1, "127.0.0.1", free_port(), "t") as comm:
        with pytest.raises(RuntimeInputError, match="^algo: must be one of ring"):
            fl.FabriclabHook(comm, "rings")
        with pytest.raises(RuntimeInputError, match="^compress: must be one of float16, bfloat16"):
            fl.FabriclabHook(comm, compress="int8")
        hook = fl.FabriclabHook(comm)
        with pytest.raises(RuntimeInputError, match="^tensor: dtype torch.uint8 is not supported"):
            hook.allreduce_(torch.zeros(3, dtype=torch.uint8))
        x = torch.arange(5, dtype=torch.bfloat16)  # one rank: the sum is the tensor itself
        assert torch.equal(hook.allreduce_(x.clone()), x)
        hook.close(close_comm=False)
