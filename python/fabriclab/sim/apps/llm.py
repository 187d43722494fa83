"""LLM jobs (``[[llm_jobs]]``): a model's shape and its tensor, pipeline
and data parallelism (with ZeRO) lowered onto the core's dependency-graph
job (``graph_jobs``, crates/fabriclab-core/src/apps/graph/); after the
run, their rows of ``jobs.parquet``, ``timeline.parquet`` and
``ccl.parquet``, ``groups.parquet`` and a summary, collected by
``fabriclab.sim.apps.graph`` (docs/llm.md).

Ranks of one pipeline stage run one program; a rank names its groups
(slot 0 its tensor-parallel group, 1 its data-parallel group) and its
pipeline peers (the previous stage's rank, then the next's) through its own
lists, so the graph's size grows with the stages, not with the GPUs."""

from __future__ import annotations

import csv

from ...scenario.base import ScenarioError
from ...scenario.llm import GPU_PEAK_FLOPS
from ..app import Resolving
from ..limits import BYTES_PER_FLOW, BYTES_PER_TIMELINE_ROW
from .graph import GraphApp, GraphBuild, rank_slowdowns

TP, DP, EP = 0, 1, 2  # group slots


class Llm(GraphApp):
    name = "llm"
    section = "llm_jobs"

    def jobs(self, s) -> list:
        return s.llm_jobs

    def resolve(self, r: Resolving) -> None:
        self.add(r, [lower(r.scenario, i, j, r.topology) for i, j in enumerate(r.scenario.llm_jobs)])

    def estimate(self, s, est, hosts: int, rate_bps: float) -> None:
        for i, j in enumerate(s.llm_jobs):
            rows, msgs, _ = _size(s, i, j)
            est.add(f"llm_jobs[{i}].micro_batches", rows * BYTES_PER_TIMELINE_ROW + msgs * BYTES_PER_FLOW,
                    f"an LLM job of {j.tp * j.pp * j.dp} ranks: about {est.count(rows)} timeline rows and "
                    f"{est.count(msgs)} messages per run")

    def events(self, s, t, est) -> None:
        for i, j in enumerate(s.llm_jobs):
            rows, msgs, nbytes = _size(s, i, j)
            est.add(f"llm_jobs[{i}]", 2 * rows)
            n = j.tp * j.pp * j.dp
            ranks = list(range(len(t.hosts))) if j.hosts == "all" else list(j.hosts)
            est.load(f"llm_jobs[{i}]", nbytes, msgs, est.hops.mean(ranks[:n]))

def _size(s, i: int, j) -> tuple[int, int, float]:
    """Job ``i``'s node runs, messages and bytes sent in a run, counted
    from its stages' programs (a collective node's messages as a ring's:
    2 (n - 1) per member for an allreduce, n - 1 otherwise)."""
    low = _Lowering(s, i, j)
    per_stage = [low.program(p, 0) for p in range(j.pp)]
    reps = j.iterations * j.tp * j.dp
    sizes = {TP: j.tp, DP: j.dp, EP: j.ep}
    rows = reps * sum(len(p) for p in per_stage)
    msgs = nbytes = 0.0
    for p in per_stage:
        for nd in p:
            if nd["kind"] == "send":
                msgs, nbytes = msgs + 1, nbytes + nd["bytes"]
            elif nd["kind"] == "collective":
                n = sizes[nd["slot"]]
                k = 2 if low.plans[nd["plan"]]["op"] == "allreduce" else 1
                msgs += k * (n - 1) * (j.dp_channels if nd["slot"] == DP else 1)
                nbytes += k * nd["bytes"] * (n - 1) / n
    return rows, int(reps * msgs), reps * nbytes


# ---------------------------------------------------------------- lowering
def _ranks(j) -> list[tuple[int, int, int]]:
    """(tp, dp, pp) index of every rank, in rank order."""
    out = []
    if j.order == "tp-dp-pp":
        for p in range(j.pp):
            for d in range(j.dp):
                out += [(t, d, p) for t in range(j.tp)]
    else:
        for d in range(j.dp):
            for p in range(j.pp):
                out += [(t, d, p) for t in range(j.tp)]
    return out


def layer_costs(s, i: int, j) -> dict:
    """Per transformer layer, one micro-batch, one tensor-parallel rank:
    forward attention and MLP time, the backward factor, the logit layer's
    forward time, and parameters (of a whole layer, of the embedding)."""
    m = j.resolved_shape()
    b, sq, h = j.micro_batch_size, m["seq_len"], m["hidden"]
    kv = h * m["kv_heads"] // m["heads"]
    attn_params = 2 * h * h + 2 * h * kv
    mlp_one = (3 if m["gated_mlp"] else 2) * h * m["ffn_hidden"]
    experts = m["experts"] or 1
    # Megatron-LM's count (Narayanan et al., SC'21, appendix): 2 FLOPs per
    # parameter and token for each matrix multiply, plus the attention
    # scores and their weighted sum, 2 x 2 b s^2 h.
    attn_flops = 2 * b * sq * attn_params + 4 * b * sq * sq * h
    mlp_flops = 2 * b * sq * mlp_one * (m["top_k"] or 1)
    rate = GPU_PEAK_FLOPS[j.gpu] * j.efficiency * j.tp / 1e12  # FLOPs per ps over the TP group
    costs = {"attn_ps": [round(attn_flops / rate)] * m["layers"], "mlp_ps": [round(mlp_flops / rate)] * m["layers"],
             "head_ps": round(2 * b * sq * h * m["vocab"] / rate),
             # An EP rank holds experts / ep of the experts.
             "layer_params": attn_params + mlp_one * experts // j.ep, "embed_params": m["vocab"] * h,
             "act_bytes": b * sq * h * 2, "backward_factor": 3 if j.activation_recompute else 2,
             # Each token to its top_k experts, h values in bf16; split over TP ranks under sequence parallelism.
             "a2a_bytes": b * sq * (m["top_k"] or 1) * h * 2 // (j.tp if j.sequence_parallel else 1)}
    if j.profile is not None:
        costs.update(_profile(s, i, j, m["layers"]))
    return costs


def _profile(s, i: int, j, layers: int) -> dict:
    """Forward and backward times per layer from a measured CSV."""
    path = s._resolve_path(j.profile)
    field = f"llm_jobs[{i}].profile"
    try:
        rows = list(csv.DictReader(path.read_text().splitlines()))
        fwd = {int(r["layer"]): int(r["forward_ps"]) for r in rows}
        bwd = {int(r["layer"]): int(r["backward_ps"]) for r in rows}
    except (OSError, KeyError, ValueError, TypeError) as e:
        raise ScenarioError(f"{field}: {path}: needs columns layer,forward_ps,backward_ps of integers ({e})") from None
    if sorted(fwd) != list(range(layers)) or min(list(fwd.values()) + list(bwd.values())) < 0:
        raise ScenarioError(f"{field}: {path}: needs one row per layer 0..{layers - 1} with non-negative times")
    # Each half of a layer (attention, MLP) takes half its time; the backward as given.
    return {"attn_ps": [fwd[k] // 2 for k in range(layers)], "mlp_ps": [fwd[k] - fwd[k] // 2 for k in range(layers)],
            "bwd_ps": [bwd[k] for k in range(layers)], "head_ps": 0}


class _Program:
    """One stage's program: nodes in the core's form, with each group's
    collectives chained in program order (a communicator runs its
    operations in the order they were issued, as NCCL's stream does)."""

    def __init__(self, job):
        self.job = job
        self.nodes: list[dict] = []
        self.last_on: dict[int, int] = {}

    def add(self, kind, deps, label, index, duration_ps=0, slot=0, plan=0, nbytes=0) -> int:
        self.nodes.append({"kind": kind, "deps": sorted({d for d in deps if d is not None}),
                           "duration_ps": int(duration_ps), "slot": slot, "plan": plan, "bytes": int(nbytes),
                           "label": self.job.label(label), "index": index})
        return len(self.nodes) - 1

    def coll(self, slot, op, nbytes, label, index, deps) -> int:
        plan = self.job.plan(op, self.job.group_size[slot], self.job.j.dp_channels if slot == DP else 1)
        k = self.add("collective", list(deps) + [self.last_on.get(slot)], label, index, slot=slot, plan=plan,
                     nbytes=nbytes)
        self.last_on[slot] = k
        return k


class _Lowering(GraphBuild):
    def __init__(self, s, i, j):
        super().__init__()
        self.s, self.i, self.j = s, i, j
        self.group_size = {TP: j.tp, DP: j.dp, EP: j.ep}
        self.c = layer_costs(s, i, j)
        self.moe = j.ep > 1
        # Token routing: the share of tokens sent to EP rank e, Zipf-like in the skew (0: uniform).
        w = [1 / (e + 1) ** j.ep_skew for e in range(j.ep)]
        self.expert_weights = [x / sum(w) for x in w]

    def plan(self, op: str, n: int, channels: int = 1, adjust=None) -> int:
        if op != "alltoall":
            return super().plan(op, n, channels)

        def skew(steps):  # skewed routing: the block for rank e carries its share of the tokens (uniform: 1/n each)
            for r in steps:
                for st in r:
                    if st["op"] == "send":
                        st["bytes"] = max(1, round(st["bytes"] * n * self.expert_weights[st["peer"]]))
        return super().plan(op, n, adjust=skew)

    def schedule(self, stage: int) -> list[tuple[str, int]]:
        m, p = self.j.micro_batches, self.j.pp
        if self.j.schedule == "gpipe":
            return [("F", k) for k in range(m)] + [("B", k) for k in range(m)]
        warm = min(p - stage - 1, m)
        ops = [("F", k) for k in range(warm)]
        for k in range(m - warm):
            ops += [("F", warm + k), ("B", k)]
        return ops + [("B", k) for k in range(m - warm, m)]

    def program(self, stage: int, expert_rank: int) -> list[dict]:
        """Stage ``stage``'s program; ``expert_rank``: the rank's index in its EP group (its experts' share
        of the routed tokens differs under skew)."""
        j, c = self.j, self.c
        moe = self.moe
        a2a = c["a2a_bytes"]
        expert_load = self.expert_weights[expert_rank] * j.ep if moe else 1.0
        ls = j.resolved_shape()["layers"] // j.pp
        first, last = stage == 0, stage == j.pp - 1
        prev_slot, next_slot = 0, (1 if not first else 0)
        lo = stage * ls
        chunks = [list(range(a, min(a + j.layers_per_node, lo + ls))) for a in range(lo, lo + ls, j.layers_per_node)]
        # Parameters of each chunk on one TP rank: the embedding with the first layer; the logit layer, tied to
        # the embedding (Megatron-LM, GPT-2), is a second copy of it on the last stage only when that is not the
        # first (pp > 1); with pp = 1 the one copy counts once, as in Narayanan et al.'s eq. (2).
        params = [len(ch) * c["layer_params"] for ch in chunks]
        if first:
            params[0] += c["embed_params"]
        if last and not first:
            params[-1] += c["embed_params"]
        pbytes = [-(-x // j.tp) * 2 for x in params]
        gbytes = [-(-x // j.tp) * j.grad_bytes_per_param for x in params]
        bf = c["backward_factor"]
        bwd = c.get("bwd_ps")
        act, tp_on, dp_on, sp = c["act_bytes"], j.tp > 1, j.dp > 1, j.sequence_parallel
        g = _Program(self)
        chain = [None]
        hist: list = [None, None]  # the chain before each of the last two compute chunks (ZeRO-3 prefetch)
        ops = self.schedule(stage)
        bucket = [0, 0]  # bytes in the open bucket, buckets closed

        def tp_coll(mb, deps, nbytes):
            if not tp_on:
                return deps
            if sp:  # sequence parallelism: an allgather before, a reduce-scatter after (Korthikanti et al. 2022)
                return [g.coll(TP, "reduce_scatter", nbytes, "tp_reduce_scatter", mb, deps)]
            return [g.coll(TP, "allreduce", nbytes, "tp_allreduce", mb, deps)]

        def tp_pre(mb, deps, nbytes):
            if tp_on and sp:
                return [g.coll(TP, "allgather", nbytes, "tp_allgather", mb, deps)]
            return deps

        def parts(ch, durations, mlp_first):
            """A layer's two halves (attention, MLP), each with its TP collectives; a coarse chunk of
            several layers as one part carrying all their bytes. Each: (attention time, MLP time, TP bytes,
            MLP layers in it)."""
            if len(ch) > 1:
                return [(durations[0], durations[1], 2 * act * len(ch), len(ch))]
            halves = [(durations[0], 0, act, 0), (0, durations[1], act, 1)]
            return halves[::-1] if mlp_first else halves

        def part(kind, mb, x, attn_d, mlp_d, nbytes, mlp_layers):
            """One part: its TP allgather (sequence parallelism), compute, TP collective; an MoE part's expert
            compute between the all-to-alls that dispatch its tokens and combine them (GShard, Lepikhin et al.
            2020), the hot experts' ranks computing their routed share. With activation recomputation a
            backward part first repeats the forward's TP collectives (the recomputed forward's; Megatron-LM's
            full recomputation reruns the layer, its collectives included)."""
            if kind == "backward" and j.activation_recompute:
                # The order is approximate, the sum exact: Megatron-LM reruns attention, its allreduce, the MLP,
                # its allreduce, then the backward; here the recomputed collective comes first and the compute
                # below carries the recomputed forward's time (backward_factor 3). With blocking TP collectives
                # on one serial chain the total is the same. MoE all-to-alls are not repeated (docs/llm.md).
                x = tp_coll(mb, tp_pre(mb, x, nbytes), nbytes)
            x = tp_pre(mb, x, nbytes)
            if moe and mlp_layers:
                x = [g.coll(EP, "alltoall", a2a * mlp_layers, f"ep_alltoall_{kind}", mb, x)]
                x = [compute(kind, attn_d + round(mlp_d * expert_load), mb, x)]
                x = [g.coll(EP, "alltoall", a2a * mlp_layers, f"ep_alltoall_{kind}", mb, x)]
                return tp_coll(mb, x, nbytes)
            return tp_coll(mb, [compute(kind, attn_d + mlp_d, mb, x)], nbytes)

        def zero3_gather(k, mb):
            if j.zero == 3 and dp_on:
                return g.coll(DP, "allgather", pbytes[k], "zero3_allgather", mb, [hist[-2]])
            return None

        def compute(kind, dur, mb, deps):
            hist.append(chain[0])
            return g.add("compute", deps, kind, mb, duration_ps=dur)

        for what, mb in ops:
            final_b = what == "B" and mb == j.micro_batches - 1  # every schedule ends with it
            if what == "F":
                if not first:
                    chain[0] = g.add("recv", [chain[0]], "pp_recv_activation", mb, slot=prev_slot)
                for k, ch in enumerate(chunks):
                    x = [chain[0], zero3_gather(k, mb)]
                    halves = [sum(c[half][layer] for layer in ch) for half in ("attn_ps", "mlp_ps")]
                    for pt in parts(ch, halves, False):
                        x = part("forward", mb, x, *pt)
                    chain[0] = x[0]
                if last:
                    chain[0] = compute("forward", c["head_ps"], mb, [chain[0]])
                if not last:
                    g.add("send", [chain[0]], "pp_send_activation", mb, slot=next_slot, nbytes=-(-act // j.tp))
                continue
            if not last:
                chain[0] = g.add("recv", [chain[0]], "pp_recv_gradient", mb, slot=next_slot)
            if last:  # the logit layer is not recomputed (Megatron recomputes transformer layers): 2x its forward
                chain[0] = compute("backward", c["head_ps"] * 2, mb, [chain[0]])
            for k in reversed(range(len(chunks))):
                ch = chunks[k]
                x = [chain[0], zero3_gather(k, mb)]
                halves = [sum(bwd[layer] // 2 if bwd else c[half][layer] * bf for layer in ch)
                          for half in ("attn_ps", "mlp_ps")]
                for pt in parts(ch, halves, True):
                    x = part("backward", mb, x, *pt)
                chain[0] = x[0]
                if j.zero == 3 and dp_on:
                    g.coll(DP, "reduce_scatter", gbytes[k], "zero3_reduce_scatter", mb, [chain[0]])
                elif final_b and dp_on:
                    bucket[0] += gbytes[k]
                    if bucket[0] >= j.bucket_bytes or k == 0:
                        op = "allreduce" if j.zero == 0 else "reduce_scatter"
                        g.coll(DP, op, bucket[0], f"dp_{op}", bucket[1], [chain[0]])
                        bucket[0], bucket[1] = 0, bucket[1] + 1
            if not first:
                g.add("send", [chain[0]], "pp_send_gradient", mb, slot=prev_slot, nbytes=-(-act // j.tp))
        if j.zero in (1, 2) and dp_on:
            # The updated parameters' shards gathered back, bucket by bucket, after the optimizer step.
            total = sum(pbytes)
            n = -(-total // j.bucket_bytes)
            for b in range(n):
                g.coll(DP, "allgather", min(j.bucket_bytes, total - b * j.bucket_bytes), "dp_allgather", b, [])
        return g.nodes


def lower(s, i: int, j, t) -> dict:
    """LLM job ``i`` of scenario ``s`` as the core's graph job on topology ``t``."""
    n = j.tp * j.pp * j.dp
    nh = len(t.hosts)
    if j.hosts == "all":
        if nh != n:
            raise ScenarioError(f"llm_jobs[{i}].hosts: 'all' gives the topology's {nh} hosts, but tp x pp x dp = "
                                f"{j.tp} x {j.pp} x {j.dp} = {n} ranks; give {n} hosts")
        hosts = list(range(nh))
    else:
        hosts = list(j.hosts)
        bad = [h for h in hosts if not 0 <= h < nh]
        if bad:
            raise ScenarioError(f"llm_jobs[{i}].hosts: host index {bad[0]} out of range (0..{nh - 1})")
        if len(set(hosts)) != n:
            raise ScenarioError(f"llm_jobs[{i}].hosts: needs {n} distinct hosts")
    slow = rank_slowdowns(f"llm_jobs[{i}]", j.slowdown, n)
    low = _Lowering(s, i, j)
    coords = _ranks(j)
    index = {x: r for r, x in enumerate(coords)}
    groups, gid = [], {}
    tp_label, dp_label = low.label("tp"), low.label("dp")

    def group(key, label, members):
        if key not in gid:
            gid[key] = len(groups)
            groups.append({"label": label, "ranks": members})
        return gid[key]

    # Under routing skew the EP ranks of a stage compute different shares: a program per (stage, EP rank).
    variants = j.ep if j.ep > 1 and j.ep_skew > 0 else 1
    programs = [low.program(p, e) for p in range(j.pp) for e in range(variants)]
    ranks = []
    for r, (a, d, p) in enumerate(coords):
        tg = group(("tp", d, p), tp_label, [index[(x, d, p)] for x in range(j.tp)])
        dg = group(("dp", a, p), dp_label, [index[(a, x, p)] for x in range(j.dp)])
        # EP groups: consecutive data-parallel ranks, ep at a time (Megatron-LM's expert parallelism).
        e0 = d - d % j.ep
        eg = [group(("ep", a, p, e0), low.label("ep"), [index[(a, x, p)] for x in range(e0, e0 + j.ep)])
              ] if j.ep > 1 else []
        peers = ([index[(a, d, p - 1)]] if p > 0 else []) + ([index[(a, d, p + 1)]] if p < j.pp - 1 else [])
        ranks.append({"host": hosts[r], "program": p * variants + (d % j.ep if variants > 1 else 0),
                      "groups": [tg, dg, *eg], "peers": peers, "slowdown": slow[r]})
    return low.job(j, ranks, groups, programs, [q.model_dump() for q in j.qps])


LLM = Llm()
