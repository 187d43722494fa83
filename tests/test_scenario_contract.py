"""One scenario contract (issue 9, section 6): the pydantic schema is the one
source, and the core reads exactly what ``core_spec(Scenario)`` emits.

The core's side is its JSON Schema derived from the serde types themselves
(``_core.core_schema()``, schemars). The checks:

- field sets: every pydantic model's fields (pydantic's JSON schema) against
  the core object it resolves to; the fields resolved into other fields are
  listed below (TRANSLATED) with what they become, so a field added on one
  side only fails until it is wired through;
- emitted keys: for a scenario filling every section and optional field,
  the keys of every object ``core_spec()`` emits equal the properties of the
  core's schema object at that place (``$ref`` and ``anyOf``/``oneOf``
  resolved), every required property among them, enum and const values
  allowed, integers within the core's type, and every core object refuses
  unknown properties (``additionalProperties: false``);
- unknown fields are refused on both sides: a key injected into any object
  of the emitted JSON makes ``Simulator`` raise ValueError naming it; a key
  injected into any table of the TOML makes pydantic raise ScenarioError
  naming it."""

from __future__ import annotations

import copy
import json
import re

import pytest

from fabriclab import _core
from fabriclab._core import Simulator
from fabriclab.collectives.rings import ring_allreduce
from fabriclab.scenario.model import Scenario, ScenarioError
from fabriclab.sim.pipeline import core_spec
from test_chakra import COMP, allreduce, node, write_trace

UNKNOWN = "zz_not_a_field"


@pytest.fixture(scope="module")
def core_schema():
    return json.loads(_core.core_schema())


# ---------------------------------------------------------------- a full scenario
# [[node_overrides]] is refused together with [pfc] (a CPU's backlog is not lossless), so the full
# scenario gives [pfc] and the tests below add this in its place.
NODE_OVERRIDES = [{"node": "leaf1", "forwarding_pps": 2_000_000, "forwarding_queue_packets": 500}]


def with_cpu(s: Scenario) -> Scenario:
    """The full scenario with a node's forwarding capacity in place of [pfc]."""
    return s.replace(pfc=None, node_overrides=NODE_OVERRIDES)


def full_scenario(tmp_path) -> tuple[Scenario, dict]:
    """A scenario giving every section and every optional field (values
    chosen to be valid together), and its raw TOML-like dict."""
    plan = ring_allreduce(2, 2000)
    for steps in plan.ranks:  # pin every send over leaf0 (names, as a plan file gives them)
        for st in steps:
            if st.op == "send":
                hosts = {0: 1, 1: 2}  # the collective's hosts = [1, 2]
                st.path = [f"h{hosts[1 - st.peer]}", "leaf0", f"h{hosts[st.peer]}"]
    (tmp_path / "ring.json").write_text(plan.to_json())
    (tmp_path / "sizes.csv").write_text("size_bytes,cdf\n1000,0.5\n20000,1\n")
    (tmp_path / "llm.csv").write_text("layer,forward_ps,backward_ps\n0,1000,2000\n1,1000,2000\n")
    write_trace(tmp_path / "chakra", [[node(1, "a", COMP, dur_us=1), allreduce(2, 4096, [1], pg="dp"),
                                       node(3, "b", COMP, [2], ctrl=[1], dur_us=1)]] * 2)
    raw = {
        "name": "contract", "seed": 7, "backend": "packet", "flow_model": "fluid", "stop_ps": "50ms",
        "topology": {"kind": "leaf_spine", "leaves": 2, "hosts_per_leaf": 4, "spines": 2,
                     "link_rate_bps": "10Gbps", "link_delay_ps": "1us", "oversubscription": 1.0,
                     "spine_link_rate_bps": "20Gbps", "host_ports": 2},
        "queue": {"discipline": "prio", "bands": 3, "priomap": [0, 1, 2, 2, 2, 2, 2, 2], "limit_bytes": "1MB",
                  "limit_packets": 1000, "ecn_threshold_bytes": "100KB", "ecn_threshold_packets": 65,
                  "ecn_kmin_bytes": "200KB", "ecn_kmax_bytes": "800KB", "ecn_pmax": 0.2},
        "host_queue": {"discipline": "fifo", "limit_packets": 5000, "ecn_threshold_packets": "off"},
        "queue_overrides": [{"node": "leaf0", "limit_packets": 500},
                            {"node": "spine0", "to": "leaf1", "ecn_threshold_packets": 30}],
        "pfc": {"classes": [1], "xoff_bytes": "200KB", "xon_bytes": "100KB", "headroom_bytes": "50KB",
                "pause_quanta": 1000, "xoff_fraction": 0.25},
        "switch_buffer": {"bytes": "4MB", "alpha": 2.0},
        "link_events": [{"at_ps": "1ms", "link": ["leaf1", "spine1"], "action": "down"},
                        {"at_ps": "2ms", "link": ["leaf1", "spine1"], "action": "up"},
                        {"at_ps": "3ms", "link": ["leaf0", "spine0"], "action": "rate", "rate_bps": "5Gbps"},
                        {"at_ps": "4ms", "link": ["leaf0", "spine1"], "action": "loss", "loss": 0.001}],
        "switch_logic": [{"kind": "tap", "node": "leaf1", "class": 2, "mirror_to": "spine0", "absorb": False}],
        "transport": {"cc": "dctcp", "mss_bytes": 1460, "init_cwnd_packets": 10, "min_rto_ps": "1ms",
                      "initial_rto_ps": "1ms", "max_rto_ps": "1s", "dupack_threshold": 3, "dctcp_g": 0.0625,
                      "dctcp_initial_alpha": 1.0, "cubic_fast_convergence": False, "tsq_limit_bytes": 131072,
                      "persistent_connections": True, "handshake": True, "sack": True,
                      "packet_rocket_threshold_ps": "20us", "packet_rocket_clock": "estimated",
                      "packet_rocket_correction": [{"host": 1, "from_local_ps": "-2us", "offset_ps": "30us",
                                                    "drift_ppm": 4.5}],
                      "packet_rocket_correction_for": "sha256:0123456789abcdef",
                      "packet_rocket_calibration": "loaded",
                      "packet_rocket_ignore": "extend", "packet_rocket_hosts": [0, 2],
                      "dcqcn": {"g": 0.0625, "alpha_interval_ps": "55us", "decrease_interval_ps": "4us",
                                "increase_interval_ps": "1500us", "fast_recovery_steps": 5, "rate_ai_bps": "5Mbps",
                                "rate_hai_bps": "50Mbps", "min_rate_bps": "100Mbps", "clamp_target": False,
                                "cnp_interval_ps": "50us"}},
        "routing": {"ecmp_hash_seed": 3, "convergence_ps": "100us", "resilient_hash": True},
        "traffic": [{"kind": "poisson", "load": 0.1, "cdf": "sizes.csv", "start_ps": 0, "duration_ps": "2ms",
                     "hosts": [0, 1, 2], "class": 2, "tag": "bg"},
                    {"flows_per_s": 1000, "duration_ps": "1ms"}],
        "flows": [{"src": 0, "dst": 3, "size_bytes": "10KB", "start_ps": "1us", "class": 1,
                   "path": ["h0", "leaf1", "h3"]}],
        "collectives": [{"name": "file", "plan": "ring.json", "hosts": [1, 2], "start_ps": "10us", "class": 1,
                         "reduce_bps": "100Gbps", "send_overhead_ps": "1us", "persistent_connections": True},
                        {"name": "hd", "planner": "halving-doubling", "op": "allreduce", "size_bytes": "64KB",
                         "ranks": 4, "qps": [{"rank": 0, "peer": 1, "src_ports": [50000, 50001],
                                  "repaths": [{"at_ps": "5us", "qp": 1, "src_port": 50002}]}],
                         "balance": "dlb", "qp_depth": 2},
                        {"name": "rs", "planner": "ring", "op": "reduce_scatter", "size_bytes": "32KB",
                         "chunk_bytes": "4KB", "hosts": [3, 2, 1, 0], "group": "tp0"}],
        "jobs": [{"name": "j", "workers": [0, 1, 2, 3], "profile": "thesis-resnet50", "layers": 4,
                  "model_bytes": "100KB", "compute_ps": "1ms", "iterations": 2, "fusion_bytes": "50KB",
                  "barrier": True, "queue": "priority", "max_inflight": 2, "class": 1, "layer_class": [1, 1, 2, 2],
                  "start_ps": 0, "slowdown": {"1": 1.5}, "jitter": 0.1, "reduce_bps": "1Tbps",
                  "send_overhead_ps": "1us", "slack_aware": True, "urgent_class": 0, "slack_factor": 1.5,
                  "slack_lag_rounds": 1, "persistent_connections": True, "allreduce": "tree",
                  "allreduce_chunk_bytes": "10KB", "checkpoint_iterations": 1, "checkpoint_ps": "10us"},
                 {"name": "agg", "workers": [0, 1], "layers": 2, "model_bytes": "20KB", "compute_ps": "100us",
                  "iterations": 1, "allreduce": "panama", "class": 3,
                  "aggregation": {"trees": ["leaf0"], "window_packets": 4, "window_cap": True, "sync_fraction": 0.5,
                                  "g": 0.125, "initial_alpha": 1.0}},
                 {"name": "sml", "workers": [2, 3], "layers": 2, "model_bytes": "20KB", "compute_ps": "100us",
                  "iterations": 1, "allreduce": "switchml", "aggregation": {"trees": 1}, "end_run": False}],
        "llm_jobs": [{"name": "llm", "model": "custom", "shape": {"hidden": 64, "layers": 2, "heads": 2, "kv_heads": 1,
                                                             "ffn_hidden": 128, "gated_mlp": True, "vocab": 100,
                                                             "seq_len": 16, "experts": 2, "top_k": 1},
                      "tp": 2, "pp": 1, "dp": 2, "ep": 1, "ep_skew": 0.5, "micro_batches": 2, "micro_batch_size": 1,
                      "schedule": "gpipe", "zero": 3, "sequence_parallel": True, "activation_recompute": True,
                      "hosts": [3, 2, 1, 0], "order": "tp-pp-dp", "gpu": "h100", "efficiency": 0.4,
                      "profile": "llm.csv", "grad_bytes_per_param": 4, "bucket_bytes": "1MB", "layers_per_node": 1,
                      "dp_channels": 2, "qps": [{"rank": 0, "peer": 1, "src_ports": [1025, 1026]}], "iterations": 2, "start_ps": "1us", "class": 1, "reduce_bps": "1Tbps",
                      "send_overhead_ps": "1us", "persistent_connections": False, "slowdown": {"1": 1.5},
                      "telemetry": True, "end_run": False}],
        "trace_jobs": [{"name": "chakra", "path": "chakra", "hosts": [1, 0], "groups": {"dp": [0, 1]},
                        "ctrl_deps": True, "cpu_ops": "serial", "peak_flops": 1e12, "memory_bps": "1Tbps",
                        "iterations": 2, "start_ps": "1us", "class": 1,
                        "reduce_bps": "1Tbps", "send_overhead_ps": "1us", "persistent_connections": False,
                        "slowdown": {"1": 1.5}, "telemetry": True, "end_run": False}],
        "aggregation": {"memory_bytes": "1MB", "vector_bytes": 512, "timeout_ps": "1ms", "functional": True},
        "faults": [{"kind": "compute_slow", "at_ps": "1ms", "job": "j", "rank": 1, "factor": 1.5},
                   {"kind": "flapping", "at_ps": "1ms", "link": ["leaf0", "spine0"], "period_ps": "1ms",
                    "until_ps": "3ms"},
                   {"kind": "link_degraded", "at_ps": "1ms", "link": ["leaf0", "spine1"], "loss": 0.01},
                   {"kind": "pcie_slow", "at_ps": "2ms", "host": 1, "factor": 2.0}],
        "clocks": {"offset_sigma_ps": "50us", "drift_sigma_ppm": 5.0, "wander_ppm": 0.02, "wander_every_ps": "500us",
                   "stamping": "nic", "nic_sigma_ps": "10ns", "software_median_ps": "2us", "software_shape": 0.5,
                   "hosts": {"h0": {"offset_ps": "-5us", "drift_ppm": 3.0, "stamping": "software"}},
                   "groups": [["h1", "h2"]]},
        "probes": {"peers": 3, "pair_every_ps": "1ms", "spacing_ps": "5us", "size_bytes": 64, "class": 2,
                   "start_ps": "10us", "duration_ps": "2ms", "hosts": [3, 0, 1, 2]},
        "outputs": {"flows": True, "links": True, "messages": True, "queues_every_ps": "1ms"},
    }
    s = Scenario.from_dict(copy.deepcopy(raw))
    s._base_dir = tmp_path
    return s, raw


# ---------------------------------------------------------------- schema walking
def _deref(schema: dict, root: dict) -> dict:
    while "$ref" in schema:
        name = schema["$ref"].removeprefix("#/$defs/")
        schema = {**root["$defs"][name], **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def _types(schema: dict) -> set:
    t = schema.get("type")
    return set() if t is None else ({t} if isinstance(t, str) else set(t))


def _json_type(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def check(value, schema: dict, root: dict, where: str, objects: list) -> list[str]:
    """Problems of ``value`` against the core's ``schema`` (empty: it fits);
    appends the name of every core definition it fits to ``objects``."""
    if "$ref" in schema:
        objects.append(schema["$ref"].removeprefix("#/$defs/"))
    schema = _deref(schema, root)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            tries = []
            for branch in schema[key]:
                seen: list = []
                errs = check(value, {**{k: v for k, v in schema.items() if k != key}, **branch}, root, where, seen)
                if not errs:
                    objects.extend(seen)
                    return []
                tries.append(errs)
            return [f"{where}: fits no branch of {key}: {tries}"]
    jt = _json_type(value)
    types = _types(schema)
    if types and jt not in types and not (jt == "integer" and "number" in types):
        return [f"{where}: {jt} where the core reads {sorted(types)}"]
    if "const" in schema and value != schema["const"]:
        return [f"{where}: {value!r} is not {schema['const']!r}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{where}: {value!r} is not one of the core's {schema['enum']}"]
    errs = []
    if jt == "integer":
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            errs.append(f"{where}: {value} outside the core's range [{lo}, {hi}]")
    elif jt == "object":
        props = schema.get("properties", {})
        if schema.get("additionalProperties") is not False:
            errs.append(f"{where}: the core does not refuse unknown fields here")
        if set(value) != set(props):
            errs.append(f"{where}: emitted {sorted(value)} but the core reads {sorted(props)} "
                        f"(only emitted: {sorted(set(value) - set(props))}, "
                        f"only in the core: {sorted(set(props) - set(value))})")
        missing = set(schema.get("required", [])) - set(value)
        if missing:
            errs.append(f"{where}: required by the core but not emitted: {sorted(missing)}")
        for k, v in value.items():
            if k in props:
                errs += check(v, props[k], root, f"{where}.{k}", objects)
    elif jt == "array":
        if "prefixItems" in schema:
            items = schema["prefixItems"]
            if len(items) != len(value):
                errs.append(f"{where}: {len(value)} items where the core reads {len(items)}")
            for i, (v, s) in enumerate(zip(value, items)):
                errs += check(v, s, root, f"{where}[{i}]", objects)
        elif "items" in schema:
            for i, v in enumerate(value):
                errs += check(v, schema["items"], root, f"{where}[{i}]", objects)
    return errs


# ---------------------------------------------------------------- emitted keys
def test_full_scenario_fills_every_section(tmp_path):
    s, raw = full_scenario(tmp_path)
    core = core_spec(s)
    for key in ("host_queue", "pfc", "switch_buffer", "stop_ps"):
        assert core[key] is not None, key
    for key in ("queue_overrides", "link_events", "switch_logic", "traffic", "flows", "collectives", "jobs",
                "graph_jobs"):
        assert core[key], key
    assert {e["action"] for e in core["link_events"]} == {"down", "up", "rate", "loss"}
    assert core["jobs"][0]["allreduce_plan"] is not None and core["jobs"][0]["slack_aware"] is not None
    assert any(st["path"] for r in core["collectives"][0]["steps"] for st in r)
    assert {o["to"] is None for o in core["queue_overrides"]} == {True, False}
    # Every field of every pydantic model is given (so each optional one is exercised).
    pyd = Scenario.model_json_schema(by_alias=True)["$defs"]
    for section, model in (("queue", "QueueConfig"), ("pfc", "PfcConfig"), ("switch_buffer", "SwitchBufferConfig"),
                           ("transport", "TransportConfig"),
                           ("routing", "RoutingConfig"), ("outputs", "OutputsConfig")):
        assert set(raw[section]) == set(pyd[model]["properties"]), section
    assert set(raw["topology"]) == set(pyd["LeafSpineTopology"]["properties"])
    assert set().union(*raw["jobs"]) == set(pyd["JobConfig"]["properties"])
    assert set(raw["llm_jobs"][0]) == set(pyd["LlmJobConfig"]["properties"])
    assert set(raw["llm_jobs"][0]["shape"]) == set(pyd["ModelShape"]["properties"])
    assert set(raw["trace_jobs"][0]) == set(pyd["TraceJobConfig"]["properties"])
    assert set(raw["aggregation"]) == set(pyd["AggregationConfig"]["properties"])
    assert set(raw["jobs"][1]["aggregation"]) == set(pyd["JobAggregationConfig"]["properties"])
    assert set(raw["flows"][0]) == set(pyd["FlowConfig"]["properties"])
    assert set(raw["switch_logic"][0]) == set(pyd["TapLogicConfig"]["properties"])
    assert set(raw["traffic"][0]) | {"flows_per_s"} == set(pyd["PoissonTrafficConfig"]["properties"])
    assert set().union(*raw["collectives"]) == set(pyd["CollectiveConfig"]["properties"])
    assert set().union(*raw["faults"]) == set(pyd["FaultConfig"]["properties"])
    assert set(raw["clocks"]) == set(pyd["ClocksConfig"]["properties"])
    assert set(raw["clocks"]["hosts"]["h0"]) == set(pyd["HostClockConfig"]["properties"])
    assert set(raw["probes"]) == set(pyd["ProbesConfig"]["properties"])
    assert core["clocks"] is not None and core["probes"] is not None
    assert core["jobs"][0]["faults"], "a rank fault reaches its job"
    # [recovery] needs a scenario of one job and no collectives (tested in test_recovery_section_is_python_only);
    # [cloud] builds the topology in place of [topology] (tested in test_cloud_lowers_onto_what_the_core_reads);
    # [[node_overrides]] excludes [pfc] (given by with_cpu in the tests below).
    assert set(raw) - {"flows_csv", "fabriclab_version"} == set(Scenario.model_json_schema()["properties"]) - {
        "flows_csv", "fabriclab_version", "recovery", "cloud", "node_overrides"}
    assert set(NODE_OVERRIDES[0]) == set(pyd["NodeOverrideConfig"]["properties"])


def test_emitted_json_is_exactly_what_the_core_reads(tmp_path, core_schema):
    s, _ = full_scenario(tmp_path)
    core = json.loads(json.dumps(core_spec(s)))  # as the core receives it (tuples are arrays)
    objects: list = []
    errs = check(core, core_schema, core_schema, "scenario", objects)
    errs += check(json.loads(json.dumps(core_spec(with_cpu(s)))), core_schema, core_schema, "scenario", objects)
    assert not errs, "\n".join(errs)
    # Every object definition of the core was visited (nothing the core reads is left unchecked).
    assert set(core_schema["$defs"]) - set(objects) == set(), "core definitions the full scenario never emits"
    # And the core builds and runs it.
    sim = Simulator(json.dumps(core))
    sim.run_until(1_000_000_000)


def test_check_catches_a_field_on_one_side(tmp_path, core_schema):
    """The checker itself: an extra emitted key, a missing one, a bad enum value."""
    s, _ = full_scenario(tmp_path)
    core = json.loads(json.dumps(core_spec(s)))
    bad = copy.deepcopy(core)
    bad["transport"]["extra"] = 1
    assert any("only emitted: ['extra']" in e for e in check(bad, core_schema, core_schema, "scenario", []))
    bad = copy.deepcopy(core)
    del bad["collectives"][0]["steps"][0][0]["deps"]
    assert any("only in the core: ['deps']" in e for e in check(bad, core_schema, core_schema, "scenario", []))
    bad = copy.deepcopy(core)
    bad["link_events"][0]["action"] = "flap"
    assert check(bad, core_schema, core_schema, "scenario", [])


# ---------------------------------------------------------------- field sets
# Pydantic model -> (the core's definition it resolves to, fields of the model
# resolved into other fields, core fields derived from them). Everything else
# must have the same name on both sides.
TRANSLATED = {
    # faults -> jobs[].faults and link_events
    # recovery: Python runs the job in segments (systems/c4/recovery.py)
    # cloud: Python builds the topology, hypervisor queues, neighbours' traffic and clock groups (scenario/cloud.py)
    # llm_jobs -> graph_jobs (sim/apps/llm.py lowers each job's shape onto a dependency graph)
    "Scenario": ("FabricSpec", {"name", "flows_csv", "outputs", "fabriclab_version", "faults", "recovery", "cloud",
                                "llm_jobs", "trace_jobs"}, {"graph_jobs"}),
    # trace_jobs -> graph_jobs (sim/apps/trace.py lowers each rank's Chakra nodes onto the same graph)
    "TraceJobConfig": ("GraphJobSpec", {"path", "hosts", "groups", "ctrl_deps", "cpu_ops", "peak_flops",
                                        "memory_bps", "slowdown"},
                       {"ranks", "groups", "programs", "plans", "labels", "qps"}),  # qps: traces name no queue pairs (always empty)
    # the shape and parallelism -> ranks, groups, programs (compute from FLOPs or the profile), plans and labels
    "LlmJobConfig": ("GraphJobSpec", {"model", "shape", "tp", "pp", "dp", "ep", "ep_skew", "micro_batches", "micro_batch_size",
                                      "schedule", "zero", "sequence_parallel", "activation_recompute", "hosts",
                                      "order", "gpu", "efficiency", "profile", "grad_bytes_per_param",
                                      "bucket_bytes", "layers_per_node", "dp_channels", "slowdown"},
                     {"ranks", "groups", "programs", "plans", "labels"}),
    "QueueConfig": ("QueueSpec", set(), set()),
    # node/to names -> from/to indices; the inherited queue fields -> queue
    "QueueOverrideConfig": ("QueueOverride", {"node", "discipline", "bands", "priomap", "limit_bytes",
                                              "limit_packets", "ecn_threshold_bytes", "ecn_threshold_packets",
                                              "ecn_kmin_bytes", "ecn_kmax_bytes", "ecn_pmax"},
                            {"from", "queue"}),
    "NodeOverrideConfig": ("NodeOverride", set(), set()),  # node: a name -> its index
    "PfcConfig": ("PfcSpec", set(), set()),
    "LinkEventConfig": ("LinkEventSpec", set(), set()),
    "TapLogicConfig": ("SwitchLogicSpec", set(), set()),
    "SwitchBufferConfig": ("SwitchBufferSpec", set(), set()),
    # packet_rocket_calibration: Python's calibration pass (observe/clock/calibrate.py) makes the correction table
    "TransportConfig": ("TransportSpec", {"packet_rocket_calibration", "packet_rocket_correction_for"}, set()),
    "DcqcnConfig": ("DcqcnSpec", set(), set()),
    "CorrectionPieceConfig": ("CorrectionPiece", set(), set()),
    "RoutingConfig": ("RoutingSpec", set(), set()),
    # flows_per_s -> load; kind selects the generator
    "PoissonTrafficConfig": ("PoissonSpec", {"kind", "flows_per_s"}, set()),
    "FlowConfig": ("FlowSpec", set(), set()),
    # the plan (file or planner) -> steps; hosts -> rank_hosts
    "CollectiveConfig": ("CollectiveSpec", {"plan", "planner", "op", "size_bytes", "chunk_bytes", "ranks", "hosts", "group"},
                         {"steps", "rank_hosts", "op", "algorithm"}),  # the resolved plan's collective and algorithm
    # profile & co -> layers (a list of LayerSpec); queue -> priority_queue; the
    # slack-aware knobs -> slack_aware (SlackAware); allreduce -> allreduce_plan
    # checkpoint_iterations and checkpoint_ps -> checkpoint (Checkpoint)
    "JobConfig": ("JobSpec", {"profile", "model_bytes", "compute_ps", "queue", "urgent_class", "slack_factor",
                              "slack_lag_rounds", "allreduce", "allreduce_chunk_bytes", "checkpoint_iterations",
                              "checkpoint_ps"},
                  {"priority_queue", "seed", "allreduce_plan", "faults", "checkpoint"}),  # faults from [[faults]]
    # the controller builds each aggregating job's trees, window and timeout
    "AggregationConfig": ("AggregationSpec", {"timeout_ps"}, {"jobs"}),
    "QpGroupConfig": ("QpGroupSpec", set(), set()),
    "LlmQps": ("GraphQps", set(), set()),
    "QpRepathConfig": ("RepathSpec", set(), set()),
    # stamping (every host's default) -> hosts[].stamping; hosts by name -> one entry per host; groups of
    # names -> of host indices
    "ClocksConfig": ("ClockSpec", {"stamping"}, set()),
    "HostClockConfig": ("HostClockSpec", set(), set()),
    "ProbesConfig": ("ProbeSpec", set(), set()),
}
# Models the core never sees as such (resolved into other data, or Python-only).
NOT_IN_CORE = {"CloudConfig": "built into topology, queue_overrides, traffic and clocks.groups (scenario/cloud.py)",
               "StarTopology": "built into topology.nodes/links", "LeafSpineTopology": "built into topology.nodes/links",
               "FatTreeTopology": "built into topology.nodes/links",
               "GpuClusterTopology": "built into topology.nodes/links",
               "ModelShape": "lowered into graph_jobs[].programs (compute times, bytes)", "FileTopology": "read into topology.nodes/links",
               "OutputsConfig": "what Python writes; queue sampling is Simulator.sample_queues",
               "JobAggregationConfig": "built by the controller into aggregation.jobs (trees, window, sync_fraction)",
               "FaultConfig": "compiled into jobs[].faults (WorkerFault) and link_events (scenario/faults.py and sim/apps/faults.py)",
               "RecoveryConfig": "Python runs the job in segments, each a scenario of its own (systems/c4/recovery.py)"}


def _core_props(core_schema: dict, name: str) -> set:
    d = _deref(core_schema["$defs"][name] if name in core_schema["$defs"] else core_schema, core_schema)
    props = set()
    for branch in d.get("oneOf", [d]):
        props |= set(_deref(branch, core_schema)["properties"])
    return props


def test_field_sets_match(core_schema):
    pyd = Scenario.model_json_schema(by_alias=True)
    models = {"Scenario": set(pyd["properties"])}
    models.update({name: set(d.get("properties", {})) for name, d in pyd["$defs"].items() if "properties" in d})
    assert set(models) == set(TRANSLATED) | set(NOT_IN_CORE), "a pydantic model with no entry in TRANSLATED"
    for model, (core_name, py_only, core_only) in TRANSLATED.items():
        core = _core_props(core_schema, core_name) if core_name != "FabricSpec" else set(core_schema["properties"])
        assert py_only <= models[model], f"{model}: TRANSLATED names fields it no longer has"
        assert core_only <= core, f"{core_name}: TRANSLATED names fields it no longer has"
        assert models[model] - py_only == core - core_only, (
            f"{model} vs the core's {core_name}: only in pydantic {sorted(models[model] - py_only - core)}, "
            f"only in the core {sorted(core - core_only - models[model])}")


# ---------------------------------------------------------------- unknown fields
def _object_paths(value, path=()):
    """Paths of every object in ``value`` (the first item of each list stands for the others)."""
    if isinstance(value, dict):
        yield path
        for k, v in value.items():
            yield from _object_paths(v, path + (k,))
    elif isinstance(value, list) and value:
        yield from _object_paths(value[0], path + (0,))


def test_core_refuses_unknown_fields_everywhere(tmp_path):
    s, _ = full_scenario(tmp_path)
    cores = [core_spec(s), core_spec(with_cpu(s))]
    paths = [(c, p) for c in cores for p in _object_paths(c)]
    assert len(paths) >= 20
    for core, path in paths:
        bad = copy.deepcopy(core)
        obj = bad
        for k in path:
            obj = obj[k]
        obj[UNKNOWN] = 1
        with pytest.raises(ValueError, match=UNKNOWN):
            Simulator(json.dumps(bad))


def test_pydantic_refuses_unknown_fields_everywhere(tmp_path):
    _, raw = full_scenario(tmp_path)
    raw["node_overrides"] = NODE_OVERRIDES  # an unknown field is refused before the [pfc] combination is
    # slowdown, trace_jobs' groups and clocks.hosts are maps (their keys are ranks, group and host names)
    paths = [p for p in _object_paths(raw) if not (p and p[-1] in ("slowdown", "groups"))
             and p != ("clocks", "hosts")]
    assert len(paths) >= 15
    for path in paths:
        bad = copy.deepcopy(raw)
        obj = bad
        for k in path:
            obj = obj[k]
        obj[UNKNOWN] = 1
        where = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path).lstrip(".")
        field = f"{where}.{UNKNOWN}" if where else UNKNOWN
        with pytest.raises(ScenarioError, match=re.escape(f"{field}: unknown field")):
            Scenario.from_dict(bad)


def test_cloud_lowers_onto_what_the_core_reads(core_schema):
    """[cloud] with every field given lowers onto sections the core reads
    (its topology, hypervisor queues and CPUs, neighbours' traffic, clock
    groups and the tenant's probe mesh), exactly as the schema says; an unknown field
    is refused naming it."""
    raw = {"stop_ps": "5ms",
           "cloud": {"fabric": {"kind": "fat_tree", "k": 4, "link_rate_bps": "10Gbps"}, "vms_per_host": 2,
                     "vm_egress_bps": "4Gbps", "vm_link_delay_ps": "1us",
                     "hypervisor_queue": {"limit_packets": 500, "ecn_threshold_packets": "off"},
                     "hypervisor_pps": 500_000, "hypervisor_backlog_packets": 200,
                     "tenant_vms": 6, "occupancy": 0.5, "busy_share": 1.0, "neighbour_load": 0.2,
                     "neighbour_cdf": "websearch", "neighbour_class": 1, "neighbour_start_ps": "1ms",
                     "neighbour_duration_ps": "2ms", "tenant_machines": [0, 0, 1, 2, 3, 4],
                     "busy_machines": [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]},
           "clocks": {}, "probes": {"peers": 2, "pair_every_ps": "1ms", "duration_ps": "2ms"}}
    pyd = Scenario.model_json_schema(by_alias=True)["$defs"]
    assert set(raw["cloud"]) == set(pyd["CloudConfig"]["properties"])
    s = Scenario.from_dict(copy.deepcopy(raw))
    core = json.loads(json.dumps(core_spec(s)))
    errs = check(core, core_schema, core_schema, "scenario", [])
    assert not errs, "\n".join(errs)
    assert core["traffic"] and core["queue_overrides"] and core["clocks"]["groups"]
    assert core["node_overrides"] and core["node_overrides"][0]["forwarding_queue_packets"] == 200
    assert core["probes"]["hosts"] == list(range(6))
    Simulator(json.dumps(core))
    raw["cloud"][UNKNOWN] = 1
    with pytest.raises(ScenarioError, match=f"cloud.{UNKNOWN}"):
        Scenario.from_dict(raw)


def test_recovery_section_is_python_only():
    """[recovery] reaches the core as nothing but the spare check: every
    field given, the emitted JSON is the scenario's without it; an unknown
    field is refused naming it."""
    raw = {"topology": {"kind": "star", "hosts": 4},
           "jobs": [{"workers": [0, 1], "compute_ps": "1ms", "layers": 2, "checkpoint_iterations": 2}],
           "recovery": {"detector": "watchdog", "watchdog_timeout_ps": "2s", "isolation_ps": "1s",
                        "manual_diagnosis_ps": "1s", "reinit_ps": "1s", "spares": [2], "max_restarts": 1}}
    pyd = Scenario.model_json_schema(by_alias=True)["$defs"]
    assert set(raw["recovery"]) == set(pyd["RecoveryConfig"]["properties"])
    with_rec = core_spec(Scenario.from_dict(copy.deepcopy(raw)))
    raw.pop("recovery")
    assert with_rec == core_spec(Scenario.from_dict(raw))
    raw["recovery"] = {UNKNOWN: 1}
    with pytest.raises(ScenarioError, match=f"recovery.{UNKNOWN}"):
        Scenario.from_dict(raw)
