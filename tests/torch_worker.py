"""Helper for tests/test_torch_ddp.py (not a test): one rank trains a tiny
model three ways and saves the parameters:

- ``ddp``: DistributedDataParallel with its own (gloo) allreduce;
- ``hook``: the same, with gradients allreduced by fabriclab.torch;
- ``ref`` (rank 0 only): one process, no DDP, trained on every rank's batch
  at once. With equal batch sizes and a mean loss, its gradient is the
  average of the ranks' gradients, which is what DDP computes.

    fabriclab launch -n N -- python tests/torch_worker.py OUT_DIR ALGO [COMPRESS]

ALGO is a runtime algorithm name, ``trees`` (probe, then TreeGen), or
``planner:NAME`` to hand the hook a planner callable that builds NAME's plan itself.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS, BATCH = 5, 8


def net() -> nn.Module:
    torch.manual_seed(0)
    # 13*37 + 37 + 37*5 + 5 = 708 parameters: no world size of 2..4 but 2 and 4 divides it evenly into buckets
    return nn.Sequential(nn.Linear(13, 37), nn.Tanh(), nn.Linear(37, 5))


def batch(step: int, rank: int):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(BATCH, 13, generator=g), torch.randn(BATCH, 5, generator=g)


def train(model, batches) -> dict:
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for x, y in batches:
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    inner = model.module if isinstance(model, DDP) else model
    return {k: v.detach().numpy().copy() for k, v in inner.state_dict().items()}


def main(out_dir: str, algo: str, compress: str | None) -> None:
    import fabriclab.torch as fl

    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    mine = [batch(s, rank) for s in range(STEPS)]
    # bucket_cap_mb tiny: the 708 parameters arrive in several buckets of odd sizes
    out = {"ddp": train(DDP(net(), bucket_cap_mb=0.0008), mine)}
    model = DDP(net(), bucket_cap_mb=0.0008)
    if algo.startswith("planner:"):
        from fabriclab.runtime import plan_json

        name = algo.split(":", 1)[1]
        algo = lambda count, itemsize, world: plan_json("allreduce", name, world, count, itemsize)  # noqa: E731
    comm = None
    if algo == "trees":  # Blink: TreeGen on this job's links, measured at start-up
        comm = fl.communicator_from_env()
        comm.probe(nbytes=64 << 10, pings=2)
    hook = fl.register(model, comm=comm, algo=algo, compress=compress)
    out["hook"] = train(model, mine)
    hook.close()
    if rank == 0:
        every = [[batch(s, r) for r in range(n)] for s in range(STEPS)]
        out["ref"] = train(net(), [(torch.cat([b[0] for b in bs]), torch.cat([b[1] for b in bs])) for bs in every])
    out["init"] = {k: v.detach().numpy().copy() for k, v in net().state_dict().items()}
    flat = {f"{kind}/{k}": v for kind, d in out.items() for k, v in d.items()}
    flat["buckets"] = np.array(hook.buckets)
    np.savez(os.path.join(out_dir, f"rank{rank}.npz"), **flat)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
