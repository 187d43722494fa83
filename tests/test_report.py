"""fabriclab report: a self-contained HTML page for a run or a sweep.

Most tests build a result folder by hand (small tables, values chosen so the
expected figures can be worked out on paper) and read the tables back out of
the page; the expected texts below are those hand computations."""

import html
import json
import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fabriclab.errors import InputError
from fabriclab.observe.report import build_report
from fabriclab.observe.report.sections import queue_series

US, MS = 10**6, 10**9  # picoseconds


# ------------------------------------------------------------------ reading the page

def _section(page: str, anchor: str) -> str:
    start = page.index(f'<h2 id="{anchor}">')
    end = page.find("<h2 ", start + 1)
    return page[start:end if end >= 0 else len(page)]


def _rows(fragment: str) -> list[list[str]]:
    """Cells (text) of every row of the flat tables in ``fragment``."""
    return [[html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", r)]
            for r in re.findall(r"<tr>(.*?)</tr>", fragment)]


def _text(page: str) -> str:
    """The page without its inline images (whose base64 may hold anything)."""
    return re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", page)


def _cells(page: str) -> str:
    """The text of every table cell of the page, one a line."""
    return "\n".join(html.unescape(re.sub(r"<[^>]+>", " ", c))
                     for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", page, flags=re.S))


SCIENTIFIC = re.compile(r"\d(\.\d+)?[eE][+-]?\d")


def _pngs(page: str) -> int:
    return len(re.findall(r"data:image/png;base64,", page))


# ------------------------------------------------------------------ hand-made result files

def _flows() -> pa.Table:
    # id, size, class, fct (None: unfinished), ideal fct
    rows = [
        (0, 1_000, 0, 10 * US, 5 * US),            # small, class 0, slowdown 2.0
        (1, 50_000, 0, 14 * US, 10 * US),          # small, class 0, slowdown 1.4
        (2, 100_000, 0, 200 * US, 100 * US),       # exactly 100 KB: medium; slowdown 2.0
        (3, 1_000_000, 1, 1_500 * US, 1_200 * US),  # medium, class 1, slowdown 1.25
        (4, 20_000_000, 0, 25 * MS, 16 * MS),      # large, class 0, slowdown 1.5625
        (5, 20_000_000, 1, None, 16 * MS),         # large, class 1, unfinished
    ]
    start = 1 * MS
    return pa.table({
        "flow_id": pa.array([r[0] for r in rows], pa.uint32()),
        "src": pa.array([0] * 6, pa.uint32()), "dst": pa.array([1] * 6, pa.uint32()),
        "size_bytes": pa.array([r[1] for r in rows], pa.uint64()),
        "class": pa.array([r[2] for r in rows], pa.uint8()),
        "tag": pa.array(["t"] * 6, pa.string()),
        "start_ps": pa.array([start] * 6, pa.uint64()),
        "end_ps": pa.array([None if r[3] is None else start + r[3] for r in rows], pa.uint64()),
        "fct_ps": pa.array([r[3] for r in rows], pa.uint64()),
        "ideal_fct_ps": pa.array([r[4] for r in rows], pa.uint64()),
        "slowdown": pa.array([None if r[3] is None else r[3] / r[4] for r in rows], pa.float64()),
        "retransmits": pa.array([0] * 6, pa.uint64()),
    })


def _links(n: int = 20) -> pa.Table:
    # link i: utilization i %, so links 19..5 are the 15 busiest; link 19 is the one checked.
    return pa.table({
        "link_id": pa.array(range(n), pa.uint32()),
        "src_node": pa.array([f"a{i}" for i in range(n)]), "dst_node": pa.array([f"b{i}" for i in range(n)]),
        "rate_bps": pa.array([10_000_000_000] * n, pa.uint64()),
        "bytes": pa.array([i * 1_000_000 for i in range(n)], pa.uint64()),
        "packets": pa.array([i * 1000 for i in range(n)], pa.uint64()),
        "utilization": pa.array([i / 100 for i in range(n)], pa.float64()),
        "drops": pa.array([i * 3 for i in range(n)], pa.uint64()),
        "ecn_marks": pa.array([i * 1234 for i in range(n)], pa.uint64()),
        "max_queue_bytes": pa.array([i * 1500 for i in range(n)], pa.uint64()),
        "mean_queue_bytes": pa.array([i * 100.0 for i in range(n)], pa.float64()),
    })


def _messages() -> pa.Table:
    # app, size, start, first byte, end (None: unfinished), retransmits
    rows = [
        ("allreduce", 1_000_000, 0, 1 * US, 2 * US, 0),
        ("allreduce", 1_000_000, 10 * US, 11 * US, 14 * US, 1),
        ("allreduce", 1_000_000, 20 * US, 21 * US, 26 * US, 2),
        ("ps", 500, 0, 3 * US, 8 * US, 0),
        ("ps", 500, 0, None, None, 0),
    ]
    n = len(rows)
    return pa.table({
        "msg_id": pa.array(range(n), pa.uint32()), "app": pa.array([r[0] for r in rows], pa.string()),
        "tag": pa.array([0] * n, pa.uint64()), "src": pa.array([0] * n, pa.uint32()), "dst": pa.array([1] * n, pa.uint32()),
        "src_node": pa.array(["h0"] * n), "dst_node": pa.array(["h1"] * n),
        "size_bytes": pa.array([r[1] for r in rows], pa.uint64()), "class": pa.array([0] * n, pa.uint8()),
        "start_ps": pa.array([r[2] for r in rows], pa.uint64()),
        "first_byte_ps": pa.array([r[3] for r in rows], pa.uint64()),
        "end_ps": pa.array([r[4] for r in rows], pa.uint64()),
        "fct_ps": pa.array([None if r[4] is None else r[4] - r[2] for r in rows], pa.uint64()),
        "retransmits": pa.array([r[5] for r in rows], pa.uint64()),
        "path": pa.array(["h0 > s0 > h1"] * n),
    })


def _queues(ports: int = 8, bands=(0,)) -> pa.Table:
    # port i holds (i+1) * 10 KB in each band at t = (i+1) us, empty before and after.
    t, lid, band, q = [], [], [], []
    for i in range(ports):
        for b in bands:
            for time, qb in ((0, 0), ((i + 1) * US, (i + 1) * 10_000), (20 * US, 0)):
                t.append(time), lid.append(i), band.append(b), q.append(qb)
    return pa.table({
        "time_ps": pa.array(t, pa.uint64()), "link_id": pa.array(lid, pa.uint32()),
        "src_node": pa.array([f"s{i}" for i in lid]), "dst_node": pa.array([f"h{i}" for i in lid]),
        "band": pa.array(band, pa.uint8()), "queue_bytes": pa.array(q, pa.uint64()),
    })


def _jobs() -> pa.Table:
    # job j, 2 workers, 3 iterations; per iteration the slowest worker ends at 32, 62, 95 ms:
    # iteration times 32 (first), 30, 33 ms.
    ends = {0: (30, 60, 95), 1: (32, 62, 90)}
    rows = []
    for w, e in ends.items():
        prev = 0
        for it, end in enumerate(e):
            rows.append((w, it, prev, end * MS))
            prev = end * MS
    return pa.table({
        "job": pa.array(["j"] * len(rows)), "worker": pa.array([r[0] for r in rows], pa.uint32()),
        "iteration": pa.array([r[1] for r in rows], pa.uint32()),
        "start_ps": pa.array([r[2] for r in rows], pa.uint64()), "end_ps": pa.array([r[3] for r in rows], pa.uint64()),
        "iteration_time_ps": pa.array([r[3] - r[2] for r in rows], pa.uint64()),
    })


SUMMARY = {
    "scenario": "hand-made",
    "backend": "packet",
    "seed": 7,
    "sim_time_ps": 2_500_000_000_000,
    "events": 1_234_567,
    "flows_total": 6,
    "flows_finished": 5,
    "links": {"max_queue_bytes": 1_500, "mean_utilization": 0.25, "max_utilization": 0.19, "drops": 12_345,
              "ecn_marks": 0},
    "jobs": {"j": {"iteration_times_ps": [float(i * MS) for i in range(1, 21)], "ring_bytes": 144_000_000}},
    "performance": {"wall_time_s": 0.5, "events_per_s": 2_469_134.0},
}

SCENARIO = 'name = "a<b & c>"\nseed = 7\n[topology]\nkind = "star"\n'


def make_run(folder, flows=True, links=True, messages=False, queues=False, jobs=False, summary=True,
             scenario=True):
    folder.mkdir(parents=True, exist_ok=True)
    if flows:
        pq.write_table(_flows(), folder / "flows.parquet")
    if links:
        pq.write_table(_links(), folder / "links.parquet")
    if messages:
        pq.write_table(_messages(), folder / "messages.parquet")
    if queues is not False:
        pq.write_table(queues if isinstance(queues, pa.Table) else _queues(), folder / "queues.parquet")
    if jobs:
        pq.write_table(_jobs(), folder / "jobs.parquet")
    if summary:
        (folder / "summary.json").write_text(json.dumps(SUMMARY))
    if scenario:
        (folder / "scenario.resolved.toml").write_text(SCENARIO)
    return folder


@pytest.fixture(scope="module")
def full_page(tmp_path_factory):
    folder = make_run(tmp_path_factory.mktemp("full") / "run", messages=True, queues=True, jobs=True)
    return build_report(folder).read_text()


# ------------------------------------------------------------------ the sections

def test_sections_in_order(full_page):
    anchors = ["run", "flows", "fct", "links", "messages", "queues", "jobs", "scenario", "summary"]
    where = [full_page.index(f'<h2 id="{a}">') for a in anchors]
    assert where == sorted(where)
    assert full_page.startswith("<!doctype html>")


def test_headline(full_page):
    rows = dict(r for r in _rows(_section(full_page, "run")) if len(r) == 2)
    assert rows["scenario"] == "hand-made"
    assert rows["simulated time"] == "2.50 s"
    assert rows["events"] == "1,234,567 in 500 ms of wall time (2,469,134/s)"
    assert rows["flows finished / total"] == "5 / 6 (83.3%)"
    assert rows["messages finished / total"] == "4 / 5 (80.0%)"
    assert rows["training jobs"] == "j (3 of 3 iterations)"
    assert rows["link utilization mean / max"] == "25.0% / 19.0%"
    assert rows["drops"] == "12,345"
    assert rows["max queue"] == "1.5 KB (1,500 B)"


def test_flows_by_bucket_and_class(full_page):
    rows = _rows(_section(full_page, "flows"))
    assert rows[0] == ["bucket", "class", "flows", "finished", "mean FCT", "p50 FCT", "p99 FCT", "p99.9 FCT",
                       "mean slowdown", "p99 slowdown"]
    by = {(r[0], r[1]): r[2:] for r in rows[1:]}
    # small, class 0: FCTs 10 and 14 us; slowdowns 2.0 and 1.4.
    # p99 = 10 + 0.99 * 4 = 13.96 us; p99.9 = 13.996 us; slowdown p99 = 1.4 + 0.99 * 0.6 = 1.994
    assert by[("small", "0")] == ["2", "2 (100.0%)", "12.0 us", "12.0 us", "14.0 us", "14.0 us", "×1.70", "×1.99"]
    # exactly 100 KB is medium (results.BUCKETS), not small
    assert by[("medium", "0")] == ["1", "1 (100.0%)"] + ["200 us"] * 4 + ["×2.00"] * 2
    assert by[("medium", "1")] == ["1", "1 (100.0%)"] + ["1.50 ms"] * 4 + ["×1.25"] * 2
    assert by[("large", "0")] == ["1", "1 (100.0%)"] + ["25.0 ms"] * 4 + ["×1.56"] * 2
    assert by[("large", "1")] == ["1", "0 (0%)"] + ["—"] * 6  # unfinished: no statistics
    # all sizes, class 0: FCTs 10, 14, 200, 25000 us: mean 6306 us, p50 (14 + 200) / 2 = 107 us,
    # p99 at rank 2.97: 200 + 0.97 * 24800 = 24256 us; slowdowns 2, 1.4, 2, 1.5625: mean 1.740625
    a = by[("all", "0")]
    assert a[:5] == ["4", "4 (100.0%)", "6.31 ms", "107 us", "24.3 ms"]
    assert a[6] == "×1.74"
    assert by[("all", "1")][:3] == ["2", "1 (50.0%)", "1.50 ms"]
    assert ("small", "1") not in by  # no such flows: no row
    assert "small &lt; 100 KB, medium 100 KB .. 10 MB, large &gt; 10 MB" in _section(full_page, "flows")


def test_cdf_plots(full_page):
    fct = _section(full_page, "fct")
    assert _pngs(fct) == 2
    assert "FCT CDF per size bucket" in fct and "slowdown CDF per size bucket" in fct


def test_busiest_links(full_page):
    sec = _section(full_page, "links")
    rows = _rows(sec)
    assert rows[0] == ["link", "rate", "utilization", "throughput", "bytes", "drops", "ECN marks", "max queue",
                       "mean queue"]
    assert len(rows) == 1 + 15
    # link 19: 19 % of 10 Gbit/s, 19 MB, 57 drops, 23,446 marks, 28,500 B max queue, 1,900 B mean
    assert rows[1] == ["a19 → b19", "10 Gbit/s", "19.0%", "1.90 Gbit/s", "19 MB", "57", "23,446", "28.5 KB", "1.90 KB"]
    assert rows[-1][0] == "a5 → b5"
    assert "a4 → b4" not in sec
    assert _pngs(sec) == 1


def test_messages_per_app(full_page):
    rows = _rows(_section(full_page, "messages"))
    by = {r[0]: r[1:] for r in rows[1:]}
    # allreduce: FCTs 2, 4, 6 us; p99 at rank 1.98: 4 + 0.98 * 2 = 5.96 us; first byte 1 us after each start
    assert by["allreduce"] == ["3", "3 (100.0%)", "3 MB", "4.00 us", "4.00 us", "5.96 us", "6.00 us", "1.00 us", "3"]
    assert by["ps"] == ["2", "1 (50.0%)", "1 KB", "8.00 us", "8.00 us", "8.00 us", "8.00 us", "3.00 us", "0"]


def test_queue_section_lists_the_six_fullest_ports(full_page):
    sec = _section(full_page, "queues")
    rows = _rows(sec)
    assert [r[1] for r in rows[1:]] == ["7", "6", "5", "4", "3", "2"]
    assert rows[1] == ["s7→h7", "7", "80.0 KB", "8.00 us", "3"]
    assert _pngs(sec) == 1 and "queue occupancy over time" in sec


def test_queue_plot_only_with_queues_parquet(tmp_path):
    page = build_report(make_run(tmp_path / "r")).read_text()
    assert 'id="queues"' not in page and "queue occupancy" not in page
    assert _pngs(page) == 3  # FCT CDF, slowdown CDF, links


def test_queue_lines_per_band_and_ports_by_total_occupancy():
    # port 0 holds 30 KB in each of two bands at once (60 KB in all), port 1 50 KB in one band
    q = pd.DataFrame({
        "time_ps": [0, 5 * US, 0, 5 * US, 0, 7 * US],
        "link_id": [0, 0, 0, 0, 1, 1], "src_node": ["s0"] * 4 + ["s1"] * 2, "dst_node": ["h0"] * 4 + ["h1"] * 2,
        "band": [0, 0, 1, 1, 0, 0], "queue_bytes": [0, 30_000, 0, 30_000, 0, 50_000],
    })
    series, ports = queue_series(q)
    assert [s[0] for s in series] == ["s0→h0 band 0", "s0→h0 band 1", "s1→h1 band 0"]
    rows = _rows(ports)
    assert [r[0] for r in rows[1:]] == ["s0→h0", "s1→h1"]
    assert rows[1][2] == "60.0 KB" and rows[2][2] == "50.0 KB"
    one_band, _ = queue_series(q[q["band"] == 0])
    assert [s[0] for s in one_band] == ["s1→h1", "s0→h0"]


def test_jobs_table(full_page):
    sec = _section(full_page, "jobs")
    rows = _rows(sec)
    assert rows[0] == ["job", "workers", "iterations", "first iteration", "mean iteration", "p99 iteration",
                       "max iteration"]
    # iterations after the first: 30 and 33 ms; p99 = 30 + 0.99 * 3 = 32.97 ms
    assert rows[1] == ["j", "2", "3", "32.0 ms", "31.5 ms", "33.0 ms", "33.0 ms"]
    assert _pngs(sec) == 1


def test_scenario_is_escaped(full_page):
    sec = _section(full_page, "scenario")
    assert '<pre>name = &quot;a&lt;b &amp; c&gt;&quot;\nseed = 7' in sec
    assert "a<b" not in full_page


def test_summary_is_a_readable_nested_table(full_page):
    sec = _section(full_page, "summary")
    cells = {k: html.unescape(v) for k, v in re.findall(r"<td class=k>([^<]*)</td><td[^>]*>([^<]*)</td>", sec)}
    assert cells["sim_time_ps"] == "2.50 s"
    assert cells["max_queue_bytes"] == "1.5 KB (1,500 B)"
    assert cells["mean_utilization"] == "25.0%"
    assert cells["ring_bytes"] == "144 MB (144,000,000 B)"
    assert cells["wall_time_s"] == "500 ms"
    # 20 iteration times, 1..20 ms: summarised, median 10.5 ms
    assert cells["iteration_times_ps"] == "20 values: min 1.00 ms, median 10.5 ms, max 20.0 ms"
    assert "<table class=nest>" in sec.split("<td class=k>links</td>", 1)[1][:40]  # nested, not flattened
    assert "2500000000000" not in full_page


def test_no_scientific_notation_and_self_contained(full_page):
    cells = _cells(full_page)
    assert len(cells) > 2000  # every table is in there
    assert not SCIENTIFIC.search(cells) and "e+" not in cells
    text = _text(full_page)
    assert "http://" not in text and "https://" not in text


def test_sweep_points_table(tmp_path):
    pts = pd.DataFrame({
        "point": [0, 1], "point_id": ["aa", "bb"],
        "param.traffic.0.load": [0.5, 0.25], "param.topology.link_rate_bps": [10_000_000_000, 25_000_000_000],
        "param.seed": [1, 2], "flows_total": [12_345, 678],
        "fct.all.fct_mean_ps": [1_234_000_000.0, 2.5e12], "fct.small.fct_p99_ps": [np.nan, 45_600_000.0],
        "links.max_utilization": [0.9, 0.125], "events": [1, 2],
    })
    (tmp_path / "s").mkdir()
    pts.to_parquet(tmp_path / "s" / "points.parquet")
    pq.write_table(_flows(), tmp_path / "s" / "flows.parquet")  # a sweep's combined flows: not a run's
    page = build_report(tmp_path / "s").read_text()
    rows = _rows(_section(page, "sweep"))
    assert rows[0] == ["point", "traffic.0.load", "topology.link_rate_bps", "seed", "flows total", "all FCT mean",
                       "small FCT p99", "links max utilization"]
    assert rows[1] == ["0", "50.0%", "10 Gbit/s", "1", "12,345", "1.23 ms", "—", "90.0%"]
    assert rows[2] == ["1", "25.0%", "25 Gbit/s", "2", "678", "2.50 s", "45.6 us", "12.5%"]
    assert 'id="flows"' not in page
    assert not SCIENTIFIC.search(_cells(page))


def test_reproduction_csv_cells_are_formatted(tmp_path):
    (tmp_path / "r").mkdir()
    pd.DataFrame({"variant": ["fifo", "prio"], "iteration_time_ms": [30.26, 1500.0], "big": [1.5e20, 2.0]}) \
        .to_csv(tmp_path / "r" / "table.csv", index=False)
    (tmp_path / "r" / "summary.json").write_text("{}")
    page = build_report(tmp_path / "r").read_text()
    rows = _rows(_section(page, "files"))
    assert rows[1] == ["fifo", "30.3 ms", "150,000,000,000,000,000,000"]
    assert rows[2] == ["prio", "1.50 s", "2"]


# ------------------------------------------------------------------ errors

def test_missing_column_names_the_file(tmp_path):
    folder = make_run(tmp_path / "r", flows=False)
    pq.write_table(_flows().drop(["fct_ps"]), folder / "flows.parquet")
    with pytest.raises(InputError, match=r"flows\.parquet lacks the column\(s\) fct_ps"):
        build_report(folder)


@pytest.mark.parametrize("name", ["messages.parquet", "queues.parquet", "jobs.parquet", "links.parquet"])
def test_unreadable_optional_file_names_it(tmp_path, name):
    folder = make_run(tmp_path / "r")
    (folder / name).write_bytes(b"not parquet at all")
    with pytest.raises(InputError, match=re.escape(name)):
        build_report(folder)


def test_queues_without_a_needed_column(tmp_path):
    folder = make_run(tmp_path / "r", queues=_queues().drop(["queue_bytes"]))
    with pytest.raises(InputError, match=r"queues\.parquet lacks the column\(s\) queue_bytes"):
        build_report(folder)


def test_text_where_numbers_belong_names_the_file(tmp_path):
    folder = make_run(tmp_path / "r")
    m = _messages()
    m = m.set_column(m.schema.get_field_index("fct_ps"), "fct_ps", pa.array(["x"] * m.num_rows))
    pq.write_table(m, folder / "messages.parquet")
    with pytest.raises(InputError, match=r"messages\.parquet.*fct_ps"):
        build_report(folder)


def test_missing_optional_files_are_skipped(tmp_path):
    page = build_report(make_run(tmp_path / "r", links=False, summary=False, scenario=False)).read_text()
    assert 'id="flows"' in page
    for anchor in ("links", "messages", "queues", "jobs", "scenario", "summary"):
        assert f'id="{anchor}"' not in page


def test_report_of_nothing_is_an_error(cli, tmp_path):
    r = cli("report", str(tmp_path))
    assert r.returncode == 2 and "no fabriclab results" in r.stderr


# ------------------------------------------------------------------ end to end

def test_report_of_a_run(cli, tmp_path):
    scen = tmp_path / "s.toml"
    scen.write_text('backend = "flow"\n[topology]\nkind = "star"\nhosts = 4\n'
                    '[[traffic]]\nload = 0.3\nduration_ps = "50ms"\n'
                    '[[jobs]]\nname = "j"\ncompute_ps = "20ms"\nlayers = 10\nmodel_bytes = "8MB"\niterations = 3\n')
    out = tmp_path / "o"
    assert cli("run", str(scen), "--out", str(out), "-q").returncode == 0
    assert (out / "jobs.parquet").is_file() and (out / "timeline.parquet").is_file()
    r = cli("report", str(out))
    assert r.returncode == 0, r.stderr
    page = (out / "report.html").read_text()
    assert page.startswith("<!doctype html>")
    assert len(re.findall(r"data:image/png;base64,", page)) >= 3  # FCT CDF, links, jobs
    assert "src=\"http" not in page  # self-contained

    # The figures, worked out here from the run's own tables with numpy.
    from fabriclab.observe import fmt

    flows = pd.read_parquet(out / "flows.parquet")
    small = flows[(flows["size_bytes"] < 100_000) & (flows["class"] == 0)]
    fct = small["fct_ps"].dropna().to_numpy(dtype=float)
    assert len(fct) > 0
    by = {(r[0], r[1]): r[2:] for r in _rows(_section(page, "flows"))[1:]}
    assert by[("small", "0")][0] == f"{len(small):,}"
    assert by[("small", "0")][2:5] == [fmt.time_ps(fct.mean()), fmt.time_ps(np.percentile(fct, 50)),
                                       fmt.time_ps(np.percentile(fct, 99))]
    summary = json.loads((out / "summary.json").read_text())
    head = dict(r for r in _rows(_section(page, "run")) if len(r) == 2)
    assert head["flows finished / total"].startswith(f"{flows['fct_ps'].notna().sum():,} / {len(flows):,}")
    assert head["simulated time"] == fmt.time_ps(summary["sim_time_ps"])
    jobs = pd.read_parquet(out / "jobs.parquet")
    ends = jobs.groupby("iteration")["end_ps"].max().to_numpy(dtype=float)
    steady = np.diff(ends)  # iterations after the first
    job_row = _rows(_section(page, "jobs"))[1]
    assert job_row[0] == "j" and job_row[4] == fmt.fixed(steady.mean(), 1e9, "ms")
    assert "<pre>" in _section(page, "scenario")
    assert not SCIENTIFIC.search(_cells(page))


def test_odd_summary_values_are_shown_not_fatal(tmp_path):
    folder = make_run(tmp_path / "r", summary=False)
    (folder / "summary.json").write_text(json.dumps({
        "sim_time_ps": "soon", "events": None, "flows_total": "6", "flows_finished": 5, "links": [1, 2],
        "performance": {"wall_time_s": "x"}}))
    page = build_report(folder).read_text()
    head = dict(r for r in _rows(_section(page, "run")) if len(r) == 2)
    assert head["simulated time"] == "soon"
    assert head["events"].startswith("—")
