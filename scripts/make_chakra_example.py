"""Writes examples/chakra/tp_dp.{0..3}.et: a small Chakra execution trace
(the format ASTRA-sim consumes) of one training step on 4 ranks, tensor
parallel in pairs (process groups "tp0" = ranks 0, 1 and "tp1" = 2, 3) and
data parallel across them ("dp0" = 0, 2 and "dp1" = 1, 3), as
examples/chakra_tp_dp.toml runs it (docs/llm.md, "Chakra traces").

Per rank, for each of 4 layers: a forward GEMM (200 us, a GPU kernel under
its CPU-side operator), an allreduce of the 4 MiB activation over the TP
group; then backward, layer by layer from the last: a GEMM of 400 us, the
TP allreduce of the activation gradient, and the layer's 16 MiB gradient
allreduced over the DP group while the next layer's backward computes; the
optimizer step (300 us) waits for every gradient. Durations and sizes are
made up for the example, of the order of a small transformer's.

    PYTHONPATH=python python scripts/make_chakra_example.py
"""

from __future__ import annotations

from pathlib import Path

from fabriclab.sim.apps.chakra import COMM_TYPES, TraceNode, write_rank

OUT = Path(__file__).resolve().parents[1] / "examples" / "chakra"
LAYERS = 4
ACT_BYTES = 4 << 20
GRAD_BYTES = 16 << 20


def rank_nodes(rank: int) -> list[TraceNode]:
    tp, dp = f"tp{rank // 2}", f"dp{rank % 2}"
    nodes: list[TraceNode] = []

    def add(name, typ, deps=(), dur=0, ctrl=(), **attrs) -> int:
        nid = len(nodes) + 1
        nodes.append(TraceNode(nid, name, typ, list(deps), list(ctrl), dur, attrs))
        return nid

    def allreduce(size, pg, deps):
        return add("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "COMM_COLL_NODE", deps, is_cpu_op=False,
                   comm_type=COMM_TYPES.index("ALL_REDUCE"), comm_size=size, pg_name=pg)

    step = add("ProfilerStep#1", "COMP_NODE", dur=20, is_cpu_op=True)
    x = step
    for layer in range(LAYERS):  # forward
        op = add(f"aten::linear (layer {layer})", "COMP_NODE", [x], 15, is_cpu_op=True)
        k = add("sm80_xmma_gemm_bf16bf16_bf16f32", "COMP_NODE", [op], 200, ctrl=[op], is_cpu_op=False)
        x = allreduce(ACT_BYTES, tp, [k])
    grads = []
    for layer in reversed(range(LAYERS)):  # backward
        op = add(f"autograd::engine::evaluate_function: MmBackward0 (layer {layer})", "COMP_NODE", [x], 15,
                 is_cpu_op=True)
        k = add("sm80_xmma_gemm_bf16bf16_bf16f32", "COMP_NODE", [op], 400, ctrl=[op], is_cpu_op=False)
        x = allreduce(ACT_BYTES, tp, [k])
        grads.append(allreduce(GRAD_BYTES, dp, [k]))
    add("Optimizer.step#AdamW.step", "COMP_NODE", [x, *grads], 300, is_cpu_op=False)
    return nodes


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for rank in range(4):
        write_rank(OUT / f"tp_dp.{rank}.et", rank_nodes(rank))
    print(f"wrote {OUT}/tp_dp.{{0..3}}.et")


if __name__ == "__main__":
    main()
