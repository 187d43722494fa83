"""Hypothesis strategies for scenario files, generated from the schema.

Everything here is derived by walking the pydantic models of
:class:`fabriclab.scenario.model.Scenario`: field names and aliases, types,
``gt/ge/lt/le`` and length constraints, ``Literal`` choices, the discriminated
topology union, lists, dicts, ``Optional`` (never written: TOML has no null),
fields whose ``mode="before"`` validator turns ``"off"`` into ``None``, and the
unit-carrying quantities ``TimePs`` / ``RateBps`` / ``SizeBytes`` (recognised
by their parser, not by name), which take an integer or a string with a unit.
A field added to the schema is fuzzed without touching this file.

What is *not* in the schema lives in three small tables below, each entry
optional: ``TUNING`` keeps valid scenarios quick to simulate (ranges for a few
fields; anything not listed gets a range derived from its constraints),
``STRING_HINTS`` gives names that mean something for free-text fields (CDFs,
profiles, planners, fixture files), and ``_fixups`` applies the cross-field
rules that validators enforce (priomap within bands, ``src != dst``, paths
that exist, exactly one of load/flows_per_s, ...). New cross-field rules
simply make some "valid" examples refused: still within the contract.

Two families:

* :func:`valid_scenarios` — small scenarios that pass schema validation
  (few hosts, short traffic, ``stop_ps`` <= 5 ms most of the time, small jobs).
* :func:`mutations.mutated_scenarios` — a valid one with 1-3 mutations: a field
  removed, renamed or unknown, a wrong type, boundary and out-of-range
  numbers, bad unit strings, host indices out of range, paths through hosts,
  cross-field inconsistencies, oversized resources, bad file references.

Both return :class:`FuzzScenario`: a plain ``dict`` (TOML-serialisable with
``tomli_w``; NaN and inf are legal TOML floats) that also carries
``.mutations``, a list of human-readable descriptions of what was changed.

Some string fields name files (``cdf = "cdf.csv"``): they are resolved next
to the scenario, where the harness writes :data:`fixtures.FIXTURES` (see
:func:`fixtures.write_fixtures`). The schema walk is in :mod:`schema_model`.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

from fabriclab import scenario as S
from fabriclab.scenario import units as U

from fixtures import fixture_dir
from schema_model import FieldSpec, ModelSpec, T, root_spec


def _builtin(mod: str, attr: str, fallback: tuple) -> tuple:
    try:
        m = __import__(f"fabriclab.{mod}", fromlist=[attr])
        return tuple(getattr(m, attr))
    except Exception:
        return fallback


# Free-text fields that name something, by TOML key (owner-qualified wins).
STRING_HINTS: dict[str, tuple] = {
    "PoissonTrafficConfig.cdf": _builtin("cdfs", "BUILTIN", ("websearch", "datamining")) + ("cdf.csv",),
    "JobConfig.profile": _builtin("profiles", "BUILTIN", ("thesis-resnet50",)) + ("profile.csv",),
    "JobConfig.allreduce": tuple(getattr(S, "JOB_ALLREDUCE", ("ring",))) + ("plan2.json",),
    "Scenario.flows_csv": ("flows.csv",),
    "FileTopology.path": ("topo.toml", "topo.json"),
}
# Values for file-like string fields in mutations.
BAD_FILE_NAMES = ("nonexistent.csv", "", ".", "/", "/dev/null", "s.toml", "cdf_bad.csv", "cdf_nan.csv",
                  "cdf_huge.csv", "flows_bad.csv", "profile_bad.csv", "topo_bad.toml", "topo_weird.toml",
                  "empty.csv", "garbage.bin", "plan3.json", "../", "a" * 300, "dir/../cdf.csv", "nul\x00byte",
                  "~/x.csv", "topo.toml", "flows.csv", "cdf.csv", "profile.csv", "plan2.json")

MS = 10**9
US = 10**6

# Ranges that keep valid scenarios quick, by "Model.key" or "key" or unit kind.
# (lo, hi) inclusive, or a tuple of choices via ("choices", ...).
TUNING: dict[str, Any] = {
    "StarTopology.hosts": (2, 6),
    "LeafSpineTopology.leaves": (1, 3),
    "LeafSpineTopology.hosts_per_leaf": (1, 3),
    "LeafSpineTopology.spines": (1, 2),
    "LeafSpineTopology.oversubscription": (0.25, 4.0),
    "FatTreeTopology.k": ("choices", 2, 4),
    "GpuClusterTopology.leaves": (1, 2),
    "GpuClusterTopology.servers_per_leaf": (1, 2),
    "GpuClusterTopology.gpus_per_server": (1, 4),
    "GpuClusterTopology.spines": (1, 2),
    "link_rate_bps": (10**9, 100 * 10**9),
    "spine_link_rate_bps": (10**9, 100 * 10**9),
    "link_delay_ps": (0, 20 * US),
    "QueueConfig.limit_bytes": (9100, 2 * 10**6),
    "QueueConfig.limit_packets": (8, 2000),
    "QueueConfig.ecn_threshold_packets": (0, 300),
    "QueueConfig.ecn_threshold_bytes": (0, 10**6),
    "TransportConfig.min_rto_ps": (100 * US, 10 * MS),
    "TransportConfig.initial_rto_ps": (100 * US, 10 * MS),
    "TransportConfig.max_rto_ps": (10 * MS, 1000 * MS),
    "TransportConfig.init_cwnd_packets": (1, 64),
    "TransportConfig.dupack_threshold": (1, 5),
    "TransportConfig.tsq_limit_bytes": (1, 10**6),
    "Scenario.stop_ps": (10 * US, 5 * MS),
    "Scenario.traffic": ("len", 0, 2),
    "Scenario.flows": ("len", 0, 3),
    "Scenario.jobs": ("len", 0, 1),
    # LLM jobs: small custom shapes (a named model's default shape lowers to thousands of nodes); _fixups
    # makes the parallelism fit the shape and the hosts. tests/test_llm_fuzz.py checks their bytes.
    "Scenario.llm_jobs": ("len", 0, 1),
    "LlmJobConfig.tp": (1, 2),
    "LlmJobConfig.pp": (1, 2),
    "LlmJobConfig.dp": (1, 3),
    "LlmJobConfig.ep": (1, 2),
    "LlmJobConfig.ep_skew": (0.0, 2.0),
    "LlmJobConfig.micro_batches": (1, 3),
    "LlmJobConfig.micro_batch_size": (1, 2),
    "LlmJobConfig.layers_per_node": (1, 2),
    "LlmJobConfig.iterations": (1, 2),
    "LlmJobConfig.dp_channels": (1, 2),
    "LlmJobConfig.bucket_bytes": (1000, 10**6),
    "LlmJobConfig.start_ps": (0, 1 * MS),
    "LlmJobConfig.send_overhead_ps": (0, 10 * US),
    "LlmJobConfig.reduce_bps": (10**9, 10 * 10**12),
    "LlmJobConfig.slowdown": ("len", 0, 2),
    "ModelShape.hidden": (1, 64),
    "ModelShape.layers": (1, 4),
    "ModelShape.heads": (1, 4),
    "ModelShape.kv_heads": (1, 4),
    "ModelShape.ffn_hidden": (1, 128),
    "ModelShape.vocab": (1, 128),
    "ModelShape.seq_len": (1, 16),
    "ModelShape.experts": (1, 4),
    "ModelShape.top_k": (1, 2),
    # Jobs replayed from Chakra traces need trace files; tests/test_chakra.py covers their bad input.
    "Scenario.trace_jobs": ("len", 0, 0),
    "PoissonTrafficConfig.duration_ps": (10 * US, 2 * MS),
    "PoissonTrafficConfig.start_ps": (0, 1 * MS),
    "PoissonTrafficConfig.flows_per_s": (100.0, 1e6),
    "FlowConfig.size_bytes": (1, 10**6),
    "FlowConfig.start_ps": (0, 2 * MS),
    "JobConfig.layers": (1, 6),
    "JobConfig.model_bytes": (1000, 2 * 10**6),
    "JobConfig.compute_ps": (10 * US, 1 * MS),
    "JobConfig.iterations": (1, 2),
    "JobConfig.fusion_bytes": (1000, 4 * 10**6),
    "JobConfig.allreduce_chunk_bytes": (64 * 1024, 10**6),
    "JobConfig.max_inflight": (1, 3),
    "JobConfig.start_ps": (0, 1 * MS),
    "JobConfig.send_overhead_ps": (0, 10 * US),
    "JobConfig.reduce_bps": (10**9, 10 * 10**12),
    "JobConfig.slack_factor": (0.1, 4.0),
    "JobConfig.slack_lag_rounds": (0, 3),
    "JobConfig.slowdown": ("len", 0, 2),
    "time": (0, 1 * MS),
    "rate": (10**9, 100 * 10**9),
    "size": (1, 10**6),
}
# Fields that valid scenarios always set (the defaults are too slow to simulate).
ALWAYS = {"PoissonTrafficConfig.duration_ps", "JobConfig.model_bytes", "JobConfig.compute_ps",
          "JobConfig.iterations", "JobConfig.fusion_bytes"}
# Host-index fields (int or list of int): values come from the topology.
HOST_INDEX = {"FlowConfig.src", "FlowConfig.dst", "PoissonTrafficConfig.hosts", "JobConfig.workers"}
INCLUDE_P = {"Scenario.stop_ps": 0.75, "Scenario.flows_csv": 0.1, "FlowConfig.path": 0.3,
             "JobConfig.layer_class": 0.2}


def _tuning(f: FieldSpec | None, unit: str | None = None):
    if f is not None:
        for k in (f"{f.owner}.{f.key}", f.key):
            if k in TUNING:
                return TUNING[k]
    if unit is not None:
        return TUNING.get(unit)
    return None


def _qual(f: FieldSpec) -> str:
    return f"{f.owner}.{f.key}"


# --------------------------------------------------------------------------- topology context


@dataclass
class Ctx:
    nhosts: int = 8
    names: list[str] = field(default_factory=list)  # node names, index = node id
    kinds: list[str] = field(default_factory=list)
    adj: dict[int, list[int]] = field(default_factory=dict)
    host_rates: list[int] = field(default_factory=list)

    @property
    def hosts(self) -> list[int]:
        return [i for i, k in enumerate(self.kinds) if k == "host"]

    def route(self, src: int, dst: int) -> list[int] | None:
        """Node ids of a shortest path from host src to host dst through switches."""
        hs = self.hosts
        a, b = hs[src], hs[dst]
        prev = {a: None}
        q = [a]
        while q:
            nq = []
            for u in q:
                if u == b:
                    break
                if u != a and self.kinds[u] == "host":
                    continue
                for v in self.adj.get(u, []):
                    if v not in prev:
                        prev[v] = u
                        nq.append(v)
            q = nq
        if b not in prev:
            return None
        path, u = [], b
        while u is not None:
            path.append(u)
            u = prev[u]
        return path[::-1]


@functools.lru_cache(maxsize=256)
def _ctx_cached(key: str) -> Ctx | None:
    import json

    try:
        s = S.Scenario.model_validate({"topology": json.loads(key)})
        s._base_dir = fixture_dir()
        t = s.build_topology()
    except Exception:
        return None
    ctx = Ctx(names=[n["name"] for n in t.nodes], kinds=[n["kind"] for n in t.nodes])
    for lk in t.links:
        ctx.adj.setdefault(lk["a"], []).append(lk["b"])
        ctx.adj.setdefault(lk["b"], []).append(lk["a"])
    ctx.nhosts = len(t.hosts)
    ctx.host_rates = [t.host_rate_bps(h) for h in range(len(t.hosts))]
    return ctx


def topology_ctx(topology: dict | None) -> Ctx | None:
    import json

    return _ctx_cached(json.dumps(topology or {"kind": "star"}, sort_keys=True, default=str))


# --------------------------------------------------------------------------- value strategies


class FuzzScenario(dict):
    """A scenario dict with the list of mutations applied to it (``.mutations``)."""

    mutations: list[str]
    family: str
    ctx: "Ctx | None"  # the topology of the valid scenario it came from

    def __init__(self, *a, mutations=None, family="valid", ctx=None, **kw):
        super().__init__(*a, **kw)
        self.mutations = list(mutations or [])
        self.family = family
        self.ctx = ctx

    def __deepcopy__(self, memo):
        return FuzzScenario(copy.deepcopy(dict(self), memo), mutations=self.mutations, family=self.family,
                            ctx=self.ctx)


_UNIT_STR = {
    "time": (("ps", 1), ("ns", 10**3), ("us", 10**6), ("ms", 10**9), ("s", 10**12)),
    "rate": (("bps", 1), ("Kbps", 10**3), ("Mbps", 10**6), ("Gbps", 10**9), ("Tbps", 10**12), ("Gbit/s", 10**9)),
    "size": (("B", 1), ("KB", 10**3), ("MB", 10**6), ("GB", 10**9), ("KiB", 2**10), ("MiB", 2**20), ("GiB", 2**30)),
}


@st.composite
def quantity_value(draw, unit: str, lo: int, hi: int):
    """An integer in [lo, hi] written as an int or as a string with a unit."""
    v = draw(st.integers(lo, hi))
    if draw(st.booleans()):
        return v
    # largest unit that divides v exactly (strings must be whole base units)
    units = [(n, m) for n, m in _UNIT_STR[unit] if v % m == 0 and v // m >= 1] or [_UNIT_STR[unit][0]]
    name, mult = draw(st.sampled_from(units))
    return f"{v // mult}{name}"


def _num_range(t: T, f: FieldSpec | None, is_int: bool):
    lo, hi = t.bounds.int_range() if is_int else (t.bounds.ge if t.bounds.ge is not None else t.bounds.gt,
                                                  t.bounds.le if t.bounds.le is not None else t.bounds.lt)
    tune = _tuning(f, t.unit)
    if isinstance(tune, tuple) and tune and tune[0] == "choices":
        return tune
    if isinstance(tune, tuple) and len(tune) == 2:
        tlo, thi = tune
        lo = tlo if lo is None else max(lo, tlo)
        hi = thi if hi is None else min(hi, thi)
        if hi < lo:
            hi = lo
        return lo, hi
    if lo is None:
        lo = 0
    if hi is None:
        hi = lo + (10 if is_int else 10.0)
    return lo, hi


def value_strategy(t: T, f: FieldSpec | None, ctx: Ctx, path: tuple) -> st.SearchStrategy:
    """A valid-looking value of type ``t`` (tuned by field ``f``); ``"off"``
    too where the field takes it."""
    s = _value_strategy(t, f, ctx, path)
    if f is not None and f.off:
        s = st.one_of(s, st.just("off"))
    return s


def _value_strategy(t: T, f: FieldSpec | None, ctx: Ctx, path: tuple) -> st.SearchStrategy:
    qual = _qual(f) if f is not None else ""
    if f is not None and qual in HOST_INDEX:
        idx = st.integers(0, max(ctx.nhosts - 1, 0))
        if t.kind in ("int",):
            return idx
        lst = st.lists(idx, min_size=min(2, ctx.nhosts), max_size=min(ctx.nhosts, 6), unique=True)
        if t.kind == "union":
            return st.one_of(st.just("all"), lst)
        return lst
    if t.kind == "literal":
        return st.sampled_from(t.choices)
    if t.kind == "bool":
        return st.booleans()
    if t.kind == "str":
        hints = STRING_HINTS.get(qual)
        if hints:
            return st.sampled_from(hints)
        return st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
    if t.kind == "int":
        r = _num_range(t, f, True)
        if r[0] == "choices":
            return st.sampled_from(r[1:])
        return st.integers(int(r[0]), int(r[1]))
    if t.kind == "float":
        r = _num_range(t, f, False)
        if r[0] == "choices":
            return st.sampled_from(r[1:])
        lo, hi = float(r[0]), float(r[1])
        excl_lo = t.bounds.gt is not None and lo <= t.bounds.gt
        excl_hi = t.bounds.lt is not None and hi >= t.bounds.lt
        return st.floats(lo, hi, exclude_min=excl_lo, exclude_max=excl_hi, allow_nan=False, allow_infinity=False)
    if t.kind == "quantity":
        r = _num_range(t, f, True)
        return quantity_value(t.unit, int(r[0]), int(r[1]))
    if t.kind == "list":
        item = t.item or T("any")
        tune = _tuning(f)
        lo = t.bounds.min_len or 0
        hi = t.bounds.max_len if t.bounds.max_len is not None else 3
        if isinstance(tune, tuple) and tune and tune[0] == "len":
            lo, hi = max(lo, tune[1]), min(hi, tune[2])
        return st.lists(value_strategy(item, None, ctx, path + (0,)), min_size=lo, max_size=hi)
    if t.kind == "dict":
        tune = _tuning(f)
        hi = tune[2] if isinstance(tune, tuple) and tune and tune[0] == "len" else 2
        return st.dictionaries(st.text(st.characters(whitelist_categories=("Nd", "Ll")), min_size=1, max_size=3),
                               value_strategy(t.item or T("any"), None, ctx, path), max_size=hi)
    if t.kind == "model":
        return model_strategy(t.model, ctx, path)
    if t.kind == "union":
        models = [o.model for o in t.options if o.kind == "model"]
        others = [o for o in t.options if o.kind != "model"]
        parts = [model_strategy(m, ctx, path, force={t.discriminator} if t.discriminator else set()) for m in models]
        parts += [value_strategy(o, f, ctx, path) for o in others]
        return st.one_of(parts)
    return _any_value()


def _any_value():
    return st.one_of(st.integers(-5, 100), st.booleans(), st.text(max_size=5), st.floats(0, 10))


@st.composite
def model_strategy(draw, ms: ModelSpec, ctx: Ctx, path: tuple = (), force: set = frozenset()):
    out = {}
    for key, f in ms.fields.items():
        q = _qual(f)
        include = f.required or key in force or q in ALWAYS
        if not include:
            include = draw(st.booleans()) if q not in INCLUDE_P else draw(
                st.integers(0, 99)) < INCLUDE_P[q] * 100
        if not include:
            continue
        v = draw(value_strategy(f.type, f, ctx, path + (key,)))
        out[key] = v
    return out


# --------------------------------------------------------------------------- cross-field fixups


@functools.lru_cache(maxsize=None)
def _adapter(unit: str):
    from pydantic import TypeAdapter

    return TypeAdapter({"time": U.TimePs, "rate": U.RateBps, "size": U.SizeBytes}[unit])


def _base_units(value, unit: str) -> int | None:
    """A quantity (int or "10us") in its base unit, or None if it does not parse."""
    try:
        return _adapter(unit).validate_python(value)
    except Exception:
        return None


def _fixups(d: dict, ctx: Ctx, draw) -> None:
    """The rules validators enforce across fields, for valid scenarios."""
    q = d.get("queue")
    if isinstance(q, dict) and "priomap" in q:
        bands = q.get("bands", S.QueueConfig.model_fields["bands"].default)
        q["priomap"] = [b % bands for b in q["priomap"]]
    elif isinstance(q, dict) and "bands" in q:
        default = S.QueueConfig.model_fields["priomap"].default_factory()
        if any(b >= q["bands"] for b in default):
            q["priomap"] = [min(b, q["bands"] - 1) for b in default]
    tr = d.get("transport")
    if isinstance(tr, dict):
        def ps(key):
            if key not in tr:
                return S.TransportConfig.model_fields[key].default
            return _base_units(tr[key], "time")
        lo = [ps("min_rto_ps"), ps("initial_rto_ps")]
        hi = ps("max_rto_ps")
        if None not in lo and hi is not None and max(lo) > hi:
            tr["max_rto_ps"] = max(lo)
    for t in d.get("traffic", []):
        has_load, has_fps = "load" in t, "flows_per_s" in t
        if has_load == has_fps:
            if has_load and draw(st.booleans()):
                del t["load"]
            elif has_load:
                del t["flows_per_s"]
            else:
                t["load"] = draw(st.floats(0.01, 1.0))
        if "flows_per_s" in t:
            # keep the offered load <= 1: mean flow size of the CDF over the hosts' rate
            try:
                from fabriclab._core import cdf_mean
                from fabriclab.scenario.cdfs import load_cdf

                mean = cdf_mean(load_cdf(t.get("cdf", "websearch"), fixture_dir()))
                hosts = range(ctx.nhosts) if t.get("hosts", "all") == "all" else set(t["hosts"])
                rate = sum(ctx.host_rates[h] for h in hosts)
                t["flows_per_s"] = min(t["flows_per_s"], 0.99 * rate / (8 * mean))
            except Exception:
                pass
    for fl in d.get("flows", []):
        if ctx.nhosts >= 2 and fl.get("src") == fl.get("dst"):
            fl["dst"] = (fl["src"] + 1) % ctx.nhosts
        if "path" in fl:
            r = ctx.route(fl["src"], fl["dst"]) if ctx.nhosts >= 2 else None
            if r is None:
                del fl["path"]
            else:
                style = draw(st.sampled_from(["names", "ids", "mixed"]))
                fl["path"] = [ctx.names[n] if style == "names" or (style == "mixed" and i % 2) else n
                              for i, n in enumerate(r)]
    for j in d.get("llm_jobs", []):
        _fix_llm_job(j, ctx, draw)
    for j in d.get("jobs", []):
        workers = list(range(ctx.nhosts)) if j.get("workers", "all") == "all" else j["workers"]
        if j.get("allreduce", "").endswith(".json") and ctx.nhosts >= 2:
            j["workers"] = workers = draw(st.permutations(range(ctx.nhosts)))[:2]
        if "slowdown" in j:
            j["slowdown"] = {str(i): draw(st.floats(0.5, 3.0)) for i in
                             draw(st.lists(st.integers(0, max(len(workers) - 1, 0)), max_size=2, unique=True))}
        if "layer_class" in j:
            try:
                from fabriclab.scenario.profiles import build_profile

                n = len(build_profile(j.get("profile", "thesis-resnet50"), 10**9, 10**6, j.get("layers"),
                                      base_dir=fixture_dir()))
                j["layer_class"] = draw(st.lists(st.integers(0, 7), min_size=n, max_size=n)) if n <= 200 else None
                if j["layer_class"] is None:
                    del j["layer_class"]
            except Exception:
                del j["layer_class"]
        if "allreduce_chunk_bytes" in j and "fusion_bytes" in j:
            # few chunks per fusion
            fb = _base_units(j["fusion_bytes"], "size") or 1
            cb = _base_units(j["allreduce_chunk_bytes"], "size") or 1
            if fb // max(cb, 1) > 64:
                j["allreduce_chunk_bytes"] = fb // 64 + 1


def _fix_llm_job(j: dict, ctx: Ctx, draw) -> None:
    """A custom shape, every field given, that the drawn parallelism fits
    (tp divides heads and ffn, pp the layers, ep the experts and dp,
    dp_channels dp), on tp x pp x dp of the topology's hosts; queue pairs
    between distinct ranks."""
    while j.get("tp", 1) * j.get("pp", 1) * j.get("dp", 1) > ctx.nhosts:
        k = next(x for x in ("dp", "pp", "tp") if j.get(x, 1) > 1)
        j[k] -= 1
    tp, pp, dp = j.get("tp", 1), j.get("pp", 1), j.get("dp", 1)
    sh = j.get("shape") if isinstance(j.get("shape"), dict) else {}
    j["model"] = "custom"
    j["shape"] = sh
    for k, lo in (("hidden", 8), ("layers", 1), ("heads", 1), ("ffn_hidden", 8), ("vocab", 8), ("seq_len", 4)):
        sh.setdefault(k, lo)
    sh["heads"] *= tp
    sh["ffn_hidden"] *= tp
    sh["layers"] = pp * max(1, sh["layers"] // pp)
    if j.get("ep", 1) > 1 and dp % j["ep"] == 0:
        sh["experts"] = j["ep"] * max(1, sh.get("experts", 1) // j["ep"])
    else:
        j.pop("ep", None)
    if dp % j.get("dp_channels", 1):
        j.pop("dp_channels")
    j.pop("profile", None)
    n = tp * pp * dp
    if isinstance(j.get("qps"), list) and n >= 2:
        j["qps"] = [dict(q, rank=k % n, peer=(k + 1) % n) for k, q in enumerate(j["qps"][:n])]
    else:
        j.pop("qps", None)
    j["hosts"] = "all" if n == ctx.nhosts and draw(st.booleans()) else draw(st.permutations(range(ctx.nhosts)))[:n]
    if "slowdown" in j:
        j["slowdown"] = {str(i): draw(st.floats(0.5, 3.0)) for i in
                         draw(st.lists(st.integers(0, n - 1), max_size=2, unique=True))}


def _schema_ok(d: dict) -> bool:
    """False only when the schema itself refuses ``d`` (a ScenarioError);
    anything else (a crash) is kept, for the harness to report."""
    try:
        S.Scenario.from_dict(dict(d))
    except S.ScenarioError:
        return False
    except Exception:
        return True
    return True


@st.composite
def valid_scenarios(draw) -> FuzzScenario:
    """Small, quick scenarios that pass schema validation."""
    rs = root_spec()
    topo_f = rs.fields.get("topology")
    topo = None
    if topo_f is not None and draw(st.integers(0, 9)) > 0:
        topo = draw(value_strategy(topo_f.type, topo_f, Ctx(), ("topology",)))
    ctx = topology_ctx(topo)
    assume(ctx is not None)
    rest = ModelSpec(rs.cls, {k: f for k, f in rs.fields.items() if k != "topology"})
    d = draw(model_strategy(rest, ctx))
    if topo is not None:
        d = {"topology": topo, **d}
    _fixups(d, ctx, draw)
    assume(_schema_ok(d))
    return FuzzScenario(d, family="valid", ctx=ctx)


def to_toml(d: dict) -> str:
    """The TOML text of a scenario dict."""
    import tomli_w

    return tomli_w.dumps(_plain(d))


def _plain(v):
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items() if x is not None}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v if x is not None]
    return v
