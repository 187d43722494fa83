"""Mutations of valid scenarios for the fuzzing harness: 12 kinds (remove,
rename, unknown field, wrong type, boundary numbers, units, indices, paths,
cross-field rules, oversized resources, files, table shapes), each a small
function of (scenario dict, seeded random, topology context). Split from
strategies.py, which walks the schema and draws the valid scenarios."""

from __future__ import annotations

import copy

from hypothesis import assume
from hypothesis import strategies as st

from schema_model import FieldSpec, T, resolve_model, root_spec, spec_at  # noqa: E402
from strategies import (  # noqa: E402
    BAD_FILE_NAMES,
    Ctx,
    FuzzScenario,
    HOST_INDEX,
    STRING_HINTS,
    _UNIT_STR,
    _qual,
    valid_scenarios,
)


# --------------------------------------------------------------------------- mutations


def _walk(d, path=()):
    """Every (path, value) below d (tables, lists and leaves)."""
    if isinstance(d, dict):
        for k, v in d.items():
            yield path + (k,), v
            yield from _walk(v, path + (k,))
    elif isinstance(d, list):
        for i, v in enumerate(d):
            yield path + (i,), v
            yield from _walk(v, path + (i,))


def _tables(d, path=()):
    if isinstance(d, dict):
        yield path, d
        for k, v in d.items():
            yield from _tables(v, path + (k,))
    elif isinstance(d, list):
        for i, v in enumerate(d):
            yield from _tables(v, path + (i,))


def _get(d, path):
    for p in path:
        d = d[p]
    return d


def _set(d, path, value):
    _get(d, path[:-1])[path[-1]] = value


def _fmt(path) -> str:
    s = ""
    for p in path:
        s += f"[{p}]" if isinstance(p, int) else (("." if s else "") + str(p))
    return s or "(top level)"


def _slots(d) -> list[tuple[tuple, FieldSpec, T, bool]]:
    """Every schema field that is present in d, or could be added to a table
    of d: (path, field, type, present)."""
    out = []
    for tpath, table in _tables(d):
        if tpath:
            _, t = spec_at(d, tpath)
            if t is None:
                continue
            ms = resolve_model(t, table) if t.kind in ("model", "union") else None
        else:
            ms = root_spec()
        if ms is None:
            continue
        for key, f in ms.fields.items():
            out.append((tpath + (key,), f, f.type, key in table))
    # schema tables not present at all (e.g. [transport]) : their fields
    for key, f in root_spec().fields.items():
        if f.type.kind == "model" and key not in d:
            for k2, f2 in f.type.model.fields.items():
                out.append(((key, k2), f2, f2.type, False))
    return out


def _ensure_parent(d, path):
    cur = d
    for p in path[:-1]:
        if isinstance(cur, dict):
            cur = cur.setdefault(p, {})
        else:
            cur = cur[p]
    return cur


EXTREME_NUMBERS = (-1, 0, 1, -(2**31), 2**31 - 1, 2**32 - 1, 2**32, 2**53 + 1, 2**63 - 1, 2**63, -(2**63),
                   -(2**63) - 1, 2**64 - 1, 2**64, 2**64 + 1, 10**30, 1e9, 1e30, -1e30, 1e308, 1e-300, 0.5, -0.0,
                   1.5, float("inf"), float("-inf"), float("nan"))
BIG_COUNTS = (64, 128, 1000, 10**4, 10**5, 10**6, 10**9, 1e9, 2**32 - 1, 2**32)


def _boundary_values(t: T) -> list:
    b = t.bounds
    vals = []
    for x in (b.ge, b.gt, b.le, b.lt):
        if x is not None:
            vals += [x, x - 1, x + 1] if t.kind != "float" else [x, x - 1e-9, x + 1e-9, x * 2]
    return vals


def _unit_strings(unit: str | None) -> list[str]:
    wrong = {"time": "10Gbps", "rate": "10us", "size": "10Gbps", None: "10us"}[unit]
    good = {"time": "us", "rate": "Gbps", "size": "MB", None: "us"}[unit]
    return [wrong, "12", "", " ", "off", "none", "Gbps", f"1e400{good}", f"1e-400{good}", f"1e30{good}",
            f"1e19{good}", f"18446744073709551616{_UNIT_STR.get(unit, _UNIT_STR['time'])[0][0]}",
            f"0.5{_UNIT_STR.get(unit, _UNIT_STR['time'])[0][0]}", f"-5{good}", f"  10 {good}  ", f"10{good.lower()}",
            f"10{good.upper()}", f"nan{good}", f"inf{good}", f"1_000_{good}", f"1__0{good}", f"0x10{good}",
            f"1e{good}", f".5{good}", f"1.{good}", f"10 {good} extra", f"10{good}/s", "10 Gbit/s", "10GiB",
            f"1e3", f"٣{good}", f"{'9' * 400}{good}", f"10{good}\x00"]


def _rename(key: str, rnd) -> str:
    return rnd.choice(([k for k in [key + "s", key.upper(), key.replace("_", "-"), key[:-1] or "x", key + "_",
                                 "_" + key, key.replace("_ps", "_us").replace("_bps", "_gbps")
                                 .replace("_bytes", "_mb"), key.capitalize()] if k != key]))


def _mut_remove(d, rnd, ctx: Ctx):
    paths = [p for p, _ in _walk(d)]
    if not paths:
        return None
    p = rnd.choice((paths))
    parent = _get(d, p[:-1])
    if isinstance(parent, list):
        parent.pop(p[-1])
    else:
        del parent[p[-1]]
    return f"remove {_fmt(p)}"


def _mut_rename(d, rnd, ctx: Ctx):
    paths = [p for p, _ in _walk(d) if isinstance(p[-1], str)]
    if not paths:
        return None
    p = rnd.choice((paths))
    parent = _get(d, p[:-1])
    new = _rename(p[-1], rnd)
    parent[new] = parent.pop(p[-1])
    return f"rename {_fmt(p)} -> {new!r}"


def _mut_unknown(d, rnd, ctx: Ctx):
    tables = [p for p, _ in _tables(d)]
    p = rnd.choice((tables))
    # a real field name from elsewhere in the schema (e.g. fat_tree's k on a star), or junk
    names = sorted({f.key for _, f, _, _ in _slots(d)}) + ["colour", "", " ", "kind", "class_", "Name", "é",
                                                           "a.b", "[x]", "1"]
    key = rnd.choice((names))
    if key in _get(d, p):
        key = key + "_x"
    val = rnd.choice([rnd.randint(-3, 10), "".join(rnd.choice("ab é\t\"'\\") for _ in range(rnd.randint(0, 4))),
                      rnd.random() < 0.5, {"a": 1}, [1]])
    _get(d, p)[key] = val
    return f"unknown {_fmt(p + (key,))} = {val!r}"


def _wrong_values(v) -> list:
    cands = [True, False, "x", "", "10", [1, 2], [], {"a": 1}, {}, 1.5, 0, -1, "10Gbps", [{"a": 1}], "all",
             "off", 3]
    return [c for c in cands if type(c) is not type(v) or c != v]


def _mut_wrong_type(d, rnd, ctx: Ctx):
    paths = [p for p, _ in _walk(d)] + [(k,) for k in root_spec().fields if k not in d]
    p = rnd.choice((paths))
    cur = _get(d, p) if _exists(d, p) else None
    v = rnd.choice((_wrong_values(cur)))
    _ensure_parent(d, p)
    _set(d, p, v)
    return f"wrong type {_fmt(p)} = {v!r}"


def _exists(d, path) -> bool:
    try:
        _get(d, path)
        return True
    except (KeyError, IndexError, TypeError):
        return False


def _mut_number(d, rnd, ctx: Ctx):
    slots = [s for s in _slots(d) if s[2].kind in ("int", "float", "quantity")]
    if not slots:
        return None
    p, f, t, _ = rnd.choice((slots))
    v = rnd.choice((list(EXTREME_NUMBERS) + _boundary_values(t)))
    _ensure_parent(d, p)
    _set(d, p, v)
    return f"number {_fmt(p)} = {v!r}"


def _mut_unit(d, rnd, ctx: Ctx):
    slots = [s for s in _slots(d) if s[2].kind == "quantity"]
    if not slots:
        return None
    p, f, t, _ = rnd.choice((slots))
    v = rnd.choice((_unit_strings(t.unit)))
    _ensure_parent(d, p)
    _set(d, p, v)
    return f"unit {_fmt(p)} = {v!r}"


def _mut_index(d, rnd, ctx: Ctx):
    n = ctx.nhosts
    bad = [n, n + 1, 2**16, 2**32 - 1, 2**32, 2**63, 2**64, -1]
    choices = []
    for p, v in _walk(d):
        fs, _ = spec_at(d, p)
        q = _qual(fs) if fs else ""
        if q in HOST_INDEX:
            choices.append(("host", p))
        if q in ("QueueConfig.priomap", "JobConfig.layer_class") or (fs and fs.key in ("class", "urgent_class")):
            choices.append(("class", p))
        if q == "JobConfig.slowdown":
            choices.append(("slowdown", p))
    if not choices:
        # add a flow with an out-of-range host
        d.setdefault("flows", []).append({"src": 0, "dst": rnd.choice((bad)), "size_bytes": 1000})
        return f"index flows[-1].dst out of range (hosts 0..{n - 1})"
    what, p = rnd.choice((choices))
    cur = _get(d, p)
    if what == "host":
        if isinstance(cur, list) or cur == "all":
            v = rnd.choice(([[0, rnd.choice((bad))], [], [0], [1, 1], [0, 0, 1], "none", "ALL"]))
        else:
            v = rnd.choice((bad + [cur]))  # cur: makes src == dst for flows sometimes
            if p[-1] in ("src", "dst"):
                other = "dst" if p[-1] == "src" else "src"
                parent = _get(d, p[:-1])
                if (rnd.random() < 0.5) and other in parent:
                    v = parent[other]
        _set(d, p, v)
    elif what == "class":
        if isinstance(cur, list):
            v = copy.deepcopy(cur)
            if v and (rnd.random() < 0.5):
                v[rnd.randint(0, len(v) - 1)] = rnd.choice(([8, 255, 256, -1, 2**64]))
            else:
                v = v + [0] if (rnd.random() < 0.5) else v[:-1]
        else:
            v = rnd.choice(([8, 255, 256, -1, 2**64]))
        _set(d, p, v)
    else:
        v = {rnd.choice((["-1", "99", str(2**64), "x", "", " 0", "0.0", "٣"])):
             rnd.choice(([2.0, 0.0, -1.0, float("nan"), float("inf"), 1e308]))}
        _set(d, p, v)
    return f"index {_fmt(p)} = {v!r}"


def _mut_path(d, rnd, ctx: Ctx):
    if ctx.nhosts < 2:
        return None
    flows = d.get("flows")
    if not isinstance(flows, list) or not flows or not all(isinstance(f, dict) for f in flows):
        d["flows"] = flows = [{"src": 0, "dst": 1, "size_bytes": 1000}]
    i = rnd.randint(0, len(flows) - 1)
    fl = flows[i]
    src = fl.get("src", 0) if isinstance(fl.get("src"), int) and 0 <= fl.get("src", 0) < ctx.nhosts else 0
    dst = fl.get("dst", 1) if isinstance(fl.get("dst"), int) and 0 <= fl.get("dst", 1) < ctx.nhosts else 1
    if src == dst:
        dst = (src + 1) % ctx.nhosts
    fl["src"], fl["dst"] = src, dst
    hosts = ctx.hosts
    route = ctx.route(src, dst) or [hosts[src], hosts[dst]]
    others = [h for k, h in enumerate(hosts) if k not in (src, dst)]
    name = ctx.names
    kind = rnd.choice((["through_host", "reversed", "no_dst", "no_src", "unknown", "index_oob", "empty",
                                 "cycle", "single", "skip", "switches_only", "bool", "float", "nested"]))
    if kind == "through_host" and others:
        mid = rnd.choice((others))
        sw = route[1] if len(route) > 2 else route[0]
        path = [name[hosts[src]], name[sw], name[mid], name[sw], name[hosts[dst]]]
    elif kind == "reversed":
        path = [name[n] for n in route[::-1]]
    elif kind == "no_dst":
        path = [name[n] for n in route[:-1]]
    elif kind == "no_src":
        path = [name[n] for n in route[1:]]
    elif kind == "unknown":
        path = [name[route[0]], "nosuchnode", name[route[-1]]]
    elif kind == "index_oob":
        path = [route[0], len(name), route[-1]] if (rnd.random() < 0.5) else [route[0], 2**40, route[-1]]
    elif kind == "empty":
        path = []
    elif kind == "cycle" and len(route) > 2:
        path = [name[n] for n in route[:2] + route[1:2] + route[1:]]
    elif kind == "single":
        path = [name[route[0]]]
    elif kind == "skip" and len(route) > 3:
        path = [name[route[0]]] + [name[route[2]]] + [name[n] for n in route[3:]]
    elif kind == "switches_only":
        path = [name[n] for n in route[1:-1]] or ["s0"]
    elif kind == "bool":
        path = [True, False]
    elif kind == "float":
        path = [float(n) for n in route]
    elif kind == "nested":
        path = [[name[n]] for n in route]
    else:
        path = [name[hosts[src]], name[hosts[src]], name[hosts[dst]]]
    fl["path"] = path
    return f"path flows[{i}].path ({kind}) = {path!r}"


def _mut_cross(d, rnd, ctx: Ctx):
    """Cross-field inconsistencies: min_* > max_*, both/neither of exclusive
    options, lengths that must agree, times after the stop."""
    opts = []
    # generic: min_X / max_X pairs (and initial_X) of any table in the schema
    for tpath, table in list(_tables(d)) + [((k,), None) for k in root_spec().fields]:
        if table is None:
            fs, t = spec_at(d, tpath)
            if t is None or t.kind != "model" or tpath[0] in d:
                continue
            ms = t.model
        else:
            _, t = spec_at(d, tpath) if tpath else (None, T("model", model=root_spec()))
            ms = resolve_model(t, table) if t is not None and t.kind in ("model", "union") else None
        if ms is None:
            continue
        for k in ms.fields:
            for pre in ("min_", "initial_"):
                if k.startswith(pre) and "max_" + k[len(pre):] in ms.fields:
                    opts.append(("order", tpath, k, "max_" + k[len(pre):]))
    for i, t in enumerate(d.get("traffic", []) if isinstance(d.get("traffic"), list) else []):
        if isinstance(t, dict):
            opts += [("both_rates", ("traffic", i)), ("no_rate", ("traffic", i)), ("after_stop", ("traffic", i))]
    for i, j in enumerate(d.get("jobs", []) if isinstance(d.get("jobs"), list) else []):
        if isinstance(j, dict):
            opts += [("layer_class_len", ("jobs", i)), ("plan_ranks", ("jobs", i)), ("tiny_fusion", ("jobs", i)),
                     ("one_worker", ("jobs", i))]
    opts += [("bands_priomap",), ("stop_tiny",), ("limit_below_mtu",), ("outputs_off",)]
    o = rnd.choice((opts))
    kind = o[0]
    if kind == "order":
        _, tpath, lo_k, hi_k = o
        table = _ensure_parent(d, tpath + (lo_k,))
        table[lo_k], table[hi_k] = "2s", "1ms"
        return f"cross {_fmt(tpath + (lo_k,))} > {hi_k}"
    if kind == "both_rates":
        t = _get(d, o[1])
        t["load"], t["flows_per_s"] = 0.5, 1000.0
    elif kind == "no_rate":
        t = _get(d, o[1])
        t.pop("load", None)
        t.pop("flows_per_s", None)
    elif kind == "after_stop":
        t = _get(d, o[1])
        d["stop_ps"] = "1ms"
        t["start_ps"] = "2ms"
    elif kind == "layer_class_len":
        j = _get(d, o[1])
        j["layers"] = 3
        j["layer_class"] = rnd.choice(([[0], [0, 1, 2, 3], [], [9, 9, 9]]))
    elif kind == "plan_ranks":
        j = _get(d, o[1])
        j["allreduce"] = rnd.choice((["plan3.json", "plan2.json", "nonexistent.json", "tree"]))
        j["workers"] = rnd.choice(([[0, 1], [0, 1, 2], "all"]))
    elif kind == "tiny_fusion":
        j = _get(d, o[1])
        j["fusion_bytes"] = 1
        j["allreduce_chunk_bytes"] = rnd.choice(([1, 2, "1GB"]))
        j["allreduce"] = rnd.choice((["ring-plan", "tree", "direct", "halving-doubling", "ring"]))
    elif kind == "one_worker":
        j = _get(d, o[1])
        j["workers"] = rnd.choice(([[0], [], [0, 0]]))
    elif kind == "bands_priomap":
        q = d.setdefault("queue", {}) if isinstance(d.get("queue", {}), dict) else {}
        q["discipline"] = "prio"
        q["bands"] = 1
        q.pop("priomap", None)
    elif kind == "stop_tiny":
        d["stop_ps"] = rnd.choice(([1, "1ps", "1ns"]))
    elif kind == "limit_below_mtu":
        q = d.setdefault("queue", {}) if isinstance(d.get("queue", {}), dict) else {}
        q["limit_bytes"] = rnd.choice(([1, 100, 1499]))
        q["limit_packets"] = rnd.choice(([1, "off"]))
    elif kind == "outputs_off":
        d["outputs"] = {"flows": False, "links": False}
    return f"cross {kind} at {_fmt(o[1]) if len(o) > 1 else '(top level)'}"


def _mut_oversize(d, rnd, ctx: Ctx):
    """Resources far beyond a laptop: the contract wants a refusal naming the
    field (or a run that ends in time), never an OOM kill or a hang."""
    kind = rnd.choice((["fat_tree", "star", "leaf_spine", "iterations", "layers", "count", "long_traffic",
                                 "huge_flow", "many_flows", "slow_link", "chunks"]))
    if kind == "fat_tree":
        k = rnd.choice(([64, 128, 1000, 2**16]))
        d["topology"] = {"kind": "fat_tree", "k": k}
        return f"oversize topology.k = {k}"
    if kind == "star":
        h = rnd.choice(([10**5, 10**6, 2**32 - 1]))
        d["topology"] = {"kind": "star", "hosts": h}
        return f"oversize topology.hosts = {h}"
    if kind == "leaf_spine":
        v = rnd.choice(([10**4, 10**6]))
        d["topology"] = {"kind": "leaf_spine", "leaves": v, "spines": v}
        return f"oversize topology.leaves = spines = {v}"
    if kind in ("iterations", "layers"):
        jobs = d.get("jobs") if isinstance(d.get("jobs"), list) else None
        if not jobs or not isinstance(jobs[0], dict):
            d["jobs"] = jobs = [{"compute_ps": "1ms", "model_bytes": "1MB"}]
        v = rnd.choice(([10**6, 10**9, 1e9, 2**32 - 1]))
        jobs[0][kind] = v
        return f"oversize jobs[0].{kind} = {v!r}"
    if kind == "count":
        slots = [s for s in _slots(d) if s[2].kind == "int"]
        if not slots:
            return None
        p, f, t, _ = rnd.choice((slots))
        v = rnd.choice((BIG_COUNTS))
        _ensure_parent(d, p)
        _set(d, p, v)
        return f"oversize {_fmt(p)} = {v!r}"
    if kind == "long_traffic":
        # Durations whose flows do not fit in the harness's memory limit (a
        # 10 s run at full load fits, and is a legitimate run of a minute or
        # so on a busy machine: a time bound, not a contract case).
        d.pop("stop_ps", None)
        d["traffic"] = [{"load": 1.0, "duration_ps": rnd.choice((["1000s", "10000s", 2**63]))}]
        return f"oversize traffic[0].duration_ps = {d['traffic'][0]['duration_ps']!r} (no stop_ps)"
    if kind == "huge_flow":
        if (rnd.random() < 0.5):
            d.pop("stop_ps", None)
        v = rnd.choice((["1TB", "100GB", 2**62]))
        d.setdefault("flows", []) if isinstance(d.get("flows"), list) else d.__setitem__("flows", [])
        d["flows"].append({"src": 0, "dst": 1, "size_bytes": v})
        return f"oversize flows[-1].size_bytes = {v!r} (stop_ps {'kept' if 'stop_ps' in d else 'removed'})"
    if kind == "many_flows":
        n = rnd.choice(([2000, 20000]))
        d["flows"] = [{"src": 0, "dst": 1, "size_bytes": 100}] * n
        return f"oversize {n} flows"
    if kind == "slow_link":
        t = d.get("topology") if isinstance(d.get("topology"), dict) else None
        if t is None:
            d["topology"] = t = {"kind": "star", "hosts": 2}
        if "link_rate_bps" not in model_spec_for_table(d, ("topology",)):
            return None
        t["link_rate_bps"] = rnd.choice(([1, "1bps", "1Kbps"]))
        d.pop("stop_ps", None)
        d.setdefault("flows", []) if isinstance(d.get("flows"), list) else d.__setitem__("flows", [])
        d["flows"].append({"src": 0, "dst": 1, "size_bytes": "1MB"})
        return f"oversize topology.link_rate_bps = {t['link_rate_bps']!r} with a 1 MB flow, no stop_ps"
    if kind == "chunks":
        d["jobs"] = [{"compute_ps": "1ms", "model_bytes": "100MB", "fusion_bytes": "100MB",
                      "allreduce": rnd.choice((["ring-plan", "tree", "direct"])),
                      "allreduce_chunk_bytes": 1, "iterations": 1}]
        return "oversize jobs[0].allreduce_chunk_bytes = 1 with fusion_bytes = 100MB"
    return None


def model_spec_for_table(d, path) -> dict:
    _, t = spec_at(d, path)
    ms = resolve_model(t, _get(d, path)) if t is not None and t.kind in ("model", "union") else None
    return ms.fields if ms else {}


def _mut_file(d, rnd, ctx: Ctx):
    slots = [s for s in _slots(d) if s[2].kind == "str" and _qual(s[1]) in STRING_HINTS]
    if not slots:
        return None
    p, f, t, _ = rnd.choice((slots))
    if p[0] == "topology":
        d["topology"] = {"kind": "file"}
        p = ("topology", "path")
    v = rnd.choice((BAD_FILE_NAMES))
    _ensure_parent(d, p)
    _set(d, p, v)
    return f"file {_fmt(p)} = {v!r}"


def _mut_table_shape(d, rnd, ctx: Ctx):
    """Tables where lists are expected and the other way round; empty tables."""
    keys = [k for k, f in root_spec().fields.items() if f.type.kind in ("list", "model", "union")]
    k = rnd.choice((keys))
    v = rnd.choice(([{}, [], [{}], [[]], {"0": {}}, [1], "x"]))
    d[k] = v
    return f"shape {k} = {v!r}"


MUTATIONS = {
    "remove": _mut_remove,
    "rename": _mut_rename,
    "unknown": _mut_unknown,
    "wrong_type": _mut_wrong_type,
    "number": _mut_number,
    "unit": _mut_unit,
    "index": _mut_index,
    "path": _mut_path,
    "cross": _mut_cross,
    "oversize": _mut_oversize,
    "file": _mut_file,
    "shape": _mut_table_shape,
}


@st.composite
def mutated_scenarios(draw, mutations: tuple[str, ...] = tuple(MUTATIONS)) -> FuzzScenario:
    """A valid scenario with 1-3 mutations (``.mutations`` says which).

    The mutation plan is drawn first and the choices inside a mutation come
    from a seeded ``random.Random``: Hypothesis fills the tail of a long
    example with its simplest choices, which would make nearly every
    mutation "remove the first field"."""
    import random

    plan = draw(st.lists(st.sampled_from(mutations), min_size=1, max_size=3))
    rnd = random.Random(draw(st.integers(0, 2**64 - 1)))
    base = draw(valid_scenarios())
    d = copy.deepcopy(dict(base))
    ctx = base.ctx or Ctx(nhosts=8)  # never built from mutated data: that may be huge
    applied = []
    for name in plan:
        try:
            desc = MUTATIONS[name](d, rnd, ctx)
        except (KeyError, IndexError, TypeError, AttributeError, ValueError):
            # an earlier mutation changed the shape this one expects
            desc = None
        if desc:
            applied.append(desc)
    assume(applied)
    return FuzzScenario(d, mutations=applied, family="mutated")
