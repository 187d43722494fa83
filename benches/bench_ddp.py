"""A DDP training step through fabriclab.torch's hook against DDP's own Gloo
allreduce, alternating in one sitting (issue 31). Every rank runs this:

    fabriclab launch -n 4 -- python benches/bench_ddp.py --model mlp --steps 12 --rounds 2
    fabriclab launch -n 4 -- python benches/bench_ddp.py --model resnet18 --steps 12 --rounds 2

Models: ``mlp`` is 1024-4096-2048-10 (12,609,546 parameters, issue 31's
12.6 M-parameter MLP) on batches of 32; ``resnet18`` is a set of parameters
shaped like torchvision's ResNet-18 (11,689,512 parameters; no download, no
convolutions), whose loss is a fixed linear function of the parameters, so
the step is almost all gradient allreduce. DDP's default 25 MB buckets.

Each round runs ``--steps`` steps with Gloo, then as many through the hook
(one warm-up step per arm first); a step is zero_grad, forward, backward and
the optimizer, timed on each rank, and a step's time is the slowest rank's.
Rank 0 prints every round's median per arm and the ratio hook / gloo, and
with ``--json`` writes the step times.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

RESNET18_PARAMS = 11_689_512


def resnet18_shapes() -> list[tuple[int, ...]]:
    """The parameter shapes of torchvision's resnet18 (conv weights, batch-norm
    weights and biases, the classifier), in registration order."""
    shapes = [(64, 3, 7, 7), (64,), (64,)]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        for block in range(2):
            first = block == 0
            shapes += [(cout, cin if first else cout, 3, 3), (cout,), (cout,), (cout, cout, 3, 3), (cout,), (cout,)]
            if first and (stride != 1 or cin != cout):
                shapes += [(cout, cin, 1, 1), (cout,), (cout,)]
        cin = cout
    return shapes + [(1000, 512), (1000,)]


class TensorSet(nn.Module):
    """Parameters of the given shapes; loss = sum of p * w with fixed w."""

    def __init__(self, shapes):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.ps = nn.ParameterList([nn.Parameter(torch.randn(s, generator=g) * 0.01) for s in shapes])
        for i, s in enumerate(shapes):
            self.register_buffer(f"w{i}", torch.randn(s, generator=g))

    def forward(self, x):
        return sum((p * getattr(self, f"w{i}")).sum() for i, p in enumerate(self.ps)) + x.sum()


def build(model: str) -> tuple[nn.Module, callable]:
    torch.manual_seed(0)
    if model == "mlp":
        net = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 2048), nn.ReLU(), nn.Linear(2048, 10))
        x, y = torch.randn(32, 1024), torch.randn(32, 10)
        return net, lambda m: nn.functional.mse_loss(m(x), y)
    net = TensorSet(resnet18_shapes())
    assert sum(p.numel() for p in net.parameters()) == RESNET18_PARAMS
    x = torch.zeros(1)
    return net, lambda m: m(x)


def steps(model, loss_fn, k: int) -> list[float]:
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    out = []
    for _ in range(k):
        t = time.perf_counter()
        opt.zero_grad()
        loss_fn(model).backward()
        opt.step()
        out.append(time.perf_counter() - t)
    return out


def slowest(ts: list[float]) -> list[float]:
    v = torch.tensor(ts, dtype=torch.float64)
    dist.all_reduce(v, op=dist.ReduceOp.MAX)
    return v.tolist()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=("mlp", "resnet18"), default="mlp")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--algo", default="ring")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    import fabriclab.torch as fl

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    net, loss_fn = build(a.model)
    gloo = DDP(net)
    net2, _ = build(a.model)
    hooked = DDP(net2)
    hook = fl.register(hooked, algo=a.algo)
    res = {"gloo": [], "hook": []}
    for _ in range(a.rounds):
        for arm, m in (("gloo", gloo), ("hook", hooked)):
            steps(m, loss_fn, 1)
            dist.barrier()
            res[arm].append(slowest(steps(m, loss_fn, a.steps)))
    hook.close()
    if dist.get_rank() == 0:
        n = dist.get_world_size()
        for i in range(a.rounds):
            g, h = (statistics.median(res[arm][i]) * 1e3 for arm in ("gloo", "hook"))
            print(f"{a.model} n={n} round {i}: median step gloo {g:.1f} ms, hook {h:.1f} ms, hook/gloo {h / g:.3f}")
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"model": a.model, "n": n, "steps_s": res}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
