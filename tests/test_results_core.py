"""flows.parquet, links.parquet and the summary's flow and link figures come
from the core (crates/fabriclab-io, issue 13). Checked here against numpy
and pyarrow, computed independently from the files the run wrote: the
summary's means and percentiles must be numpy's own (its pairwise sum and
linear percentile), bit for bit, and the tables must have the documented
columns and types (docs/scenario.md, "Outputs") with fct_ps = end_ps -
start_ps and slowdown = fct_ps / ideal_fct_ps."""

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fabriclab import simulate
from fabriclab._core import fct_stats
from fabriclab.sim.results import LARGE_MIN_BYTES, SMALL_MAX_BYTES
from fabriclab.scenario.model import Scenario

FLOW_TYPES = {"flow_id": pa.uint32(), "src": pa.uint32(), "dst": pa.uint32(), "size_bytes": pa.uint64(),
              "class": pa.uint8(), "tag": pa.string(), "start_ps": pa.uint64(), "end_ps": pa.uint64(),
              "fct_ps": pa.uint64(), "ideal_fct_ps": pa.uint64(), "slowdown": pa.float64(),
              "retransmits": pa.uint64()}
LINK_TYPES = {"link_id": pa.uint32(), "src_node": pa.string(), "dst_node": pa.string(), "rate_bps": pa.uint64(),
              "bytes": pa.uint64(), "packets": pa.uint64(), "utilization": pa.float64(), "drops": pa.uint64(),
              "ecn_marks": pa.uint64(), "max_queue_bytes": pa.uint64(), "mean_queue_bytes": pa.float64(),
              "pause_frames_sent": pa.uint64(), "paused_ps": pa.uint64()}


def numpy_stats(fct: np.ndarray, slow: np.ndarray) -> dict:
    """The summary's figures as numpy computes them (the definition they follow)."""
    done = ~np.isnan(fct)
    out = {"flows": len(fct), "finished": int(done.sum())}
    if done.any():
        f, s = fct[done], slow[done]
        out.update(fct_mean_ps=float(f.mean()), fct_p50_ps=float(np.percentile(f, 50)),
                   fct_p99_ps=float(np.percentile(f, 99)), fct_p999_ps=float(np.percentile(f, 99.9)),
                   slowdown_mean=float(s.mean()), slowdown_p99=float(np.percentile(s, 99)))
    return out


@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 127, 128, 129, 1000, 4099])
def test_fct_stats_equal_numpys_bit_for_bit(n):
    rng = np.random.default_rng(n)
    fct = rng.lognormal(15, 2, n)
    fct[rng.random(n) < 0.1] = np.nan  # unfinished flows
    slow = fct / rng.uniform(1e5, 1e7, n)
    assert fct_stats(fct.tolist(), slow.tolist()) == numpy_stats(fct, slow)


def test_fct_stats_of_no_finished_flow():
    assert fct_stats([math.nan, math.nan], [math.nan, math.nan]) == {"flows": 2, "finished": 0}
    assert fct_stats([], []) == {"flows": 0, "finished": 0}
    with pytest.raises(ValueError, match="one slowdown per FCT"):
        fct_stats([1.0], [])


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    # Two classes and a stop before the end, so that some flows are unfinished.
    s = Scenario.from_dict({
        "name": "results-core", "seed": 3, "stop_ps": "30ms",
        "topology": {"kind": "star", "hosts": 4, "link_rate_bps": "10Gbps", "link_delay_ps": "2us"},
        "traffic": [{"load": 0.5, "duration_ps": "40ms", "class": 0},
                    {"load": 0.3, "duration_ps": "40ms", "class": 2}],
    })
    out = tmp_path_factory.mktemp("run")
    simulate(s).write(out, force=True)
    return out


def test_tables_have_the_documented_columns_and_types(run):
    for name, types in (("flows", FLOW_TYPES), ("links", LINK_TYPES)):
        t = pq.read_table(run / f"{name}.parquet")
        assert t.schema.names == list(types), name
        assert [f.type for f in t.schema] == list(types.values()), name


def test_flow_columns_follow_their_definitions(run):
    t = pq.read_table(run / "flows.parquet").to_pydict()
    n = len(t["flow_id"])
    assert t["flow_id"] == list(range(n))
    unfinished = [i for i in range(n) if t["end_ps"][i] is None]
    assert unfinished, "the stop should leave flows unfinished"
    for i in range(n):
        if t["end_ps"][i] is None:
            assert t["fct_ps"][i] is None and t["slowdown"][i] is None
        else:
            assert t["fct_ps"][i] == t["end_ps"][i] - t["start_ps"][i]
            assert t["slowdown"][i] == t["fct_ps"][i] / max(t["ideal_fct_ps"][i], 1)


def test_summary_figures_are_numpys_of_the_written_tables(run):
    summary = json.loads((run / "summary.json").read_text())
    f = pq.read_table(run / "flows.parquet").to_pandas()
    fct = f["fct_ps"].to_numpy(dtype=np.float64, na_value=np.nan)
    slow = f["slowdown"].to_numpy(dtype=np.float64, na_value=np.nan)
    size, cls = f["size_bytes"].to_numpy(), f["class"].to_numpy()
    want = {"all": numpy_stats(fct, slow)}
    for name, sel in (("small", size < SMALL_MAX_BYTES), ("medium", (size >= SMALL_MAX_BYTES) &
                                                                    (size <= LARGE_MIN_BYTES)),
                      ("large", size > LARGE_MIN_BYTES)):
        want[name] = numpy_stats(fct[sel], slow[sel])
    assert summary["fct"] == want
    assert summary["fct_by_class"] == {str(c): numpy_stats(fct[cls == c], slow[cls == c]) for c in np.unique(cls)}
    assert set(summary["fct_by_class"]) == {"0", "2"}
    assert summary["flows_total"] == len(f) and summary["flows_finished"] == int((~np.isnan(fct)).sum())
    assert summary["retransmits"] == int(f["retransmits"].sum())

    links = pq.read_table(run / "links.parquet").to_pandas()
    dur = summary["sim_time_ps"]
    util = links["bytes"].to_numpy(np.float64) * 8 / (links["rate_bps"].to_numpy(np.float64) * dur / 1e12)
    assert links["utilization"].tolist() == util.tolist()
    assert summary["links"] == {"max_utilization": float(np.nanmax(util)), "mean_utilization": float(np.nanmean(util)),
                                "drops": int(links["drops"].sum()), "ecn_marks": int(links["ecn_marks"].sum()),
                                "max_queue_bytes": int(links["max_queue_bytes"].max())}


def test_results_read_the_core_bytes_back(run):
    s = json.loads((run / "summary.json").read_text())
    r = simulate(Scenario.load(run / "scenario.resolved.toml"))
    assert r.flows_parquet == (run / "flows.parquet").read_bytes()  # deterministic bytes
    assert len(r.flows) == s["flows_total"] and r.links_arrow.num_rows == len(pq.read_table(run / "links.parquet"))


MESSAGE_TYPES = {"msg_id": pa.uint32(), "app": pa.string(), "tag": pa.uint64(), "src": pa.uint32(),
                 "dst": pa.uint32(), "src_node": pa.string(), "dst_node": pa.string(), "size_bytes": pa.uint64(),
                 "class": pa.uint8(), "start_ps": pa.uint64(), "first_byte_ps": pa.uint64(), "end_ps": pa.uint64(),
                 "fct_ps": pa.uint64(), "retransmits": pa.uint64(), "cnps": pa.uint64(), "path": pa.string(),
                 "reroutes": pa.uint32(), "route_lost": pa.bool_()}
QUEUE_TYPES = {"time_ps": pa.uint64(), "link_id": pa.uint32(), "src_node": pa.string(), "dst_node": pa.string(),
               "band": pa.uint8(), "queue_bytes": pa.uint64(), "tx_bytes": pa.uint64(), "drops": pa.uint64(),
               "ecn_marks": pa.uint64(), "paused": pa.bool_()}
CLASS_TYPES = {"time_ps": pa.uint64(), "link_id": pa.uint32(), "src_node": pa.string(), "dst_node": pa.string(),
               "class": pa.uint8(), "tx_bytes": pa.uint64()}


def test_messages_queues_and_classes_tables(run, tmp_path):
    # The same scenario with queue sampling: messages.parquet (written by
    # default), queues.parquet and classes.parquet.
    s = Scenario.load(run / "scenario.resolved.toml").model_copy()
    raw = s.resolved_dict()
    raw["outputs"]["queues_every_ps"] = 100_000_000
    simulate(Scenario.from_dict(raw)).write(tmp_path / "q", force=True)
    for name, types in (("messages", MESSAGE_TYPES), ("queues", QUEUE_TYPES), ("classes", CLASS_TYPES)):
        t = pq.read_table(tmp_path / "q" / f"{name}.parquet")
        assert t.schema.names == list(types), name
        assert [f.type for f in t.schema] == list(types.values()), name
        assert t.num_rows > 0, name
    m = pq.read_table(tmp_path / "q" / "messages.parquet").to_pydict()
    f = pq.read_table(run / "flows.parquet").to_pydict()
    # Every flow is one message of the traffic app, in the same order.
    assert m["start_ps"] == f["start_ps"] and m["end_ps"] == f["end_ps"] and m["fct_ps"] == f["fct_ps"]
    assert all(p.startswith(a + " > ") and p.endswith(" > " + b)
               for p, a, b, e in zip(m["path"], m["src_node"], m["dst_node"], m["end_ps"]) if e is not None)
    summary = json.loads((tmp_path / "q" / "summary.json").read_text())
    assert summary["queue_samples"]["rows"] == pq.read_table(tmp_path / "q" / "queues.parquet").num_rows


def test_a_table_assigned_to_results_is_what_gets_written(run, tmp_path):
    r = simulate(Scenario.load(run / "scenario.resolved.toml"))
    n = r.flows_arrow.num_rows
    r.flows_arrow = r.flows_arrow.slice(0, 1)
    r.messages_arrow = None
    r.write(tmp_path / "w")
    assert pq.read_table(tmp_path / "w" / "flows.parquet").num_rows == 1 < n
    assert not (tmp_path / "w" / "messages.parquet").exists()
    assert pq.read_table(tmp_path / "w" / "links.parquet").equals(pq.read_table(run / "links.parquet"))
