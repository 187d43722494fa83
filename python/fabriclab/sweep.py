"""Sweeps: a grid over scenario fields, run in parallel on local cores,
resumable, with every point's results combined into one Parquet dataset.

An experiment file (TOML)::

    base = "scenario.toml"          # or an inline [base] table
    [grid]
    "topology.link_rate_bps" = ["1Gbps", "10Gbps"]
    "traffic.0.load" = [0.2, 0.4]
    "seed" = [1, 2, 3]

Each point is the base with the grid's values set (dotted paths; list items
by index), validated like any scenario. Points run on local processes, or
with ``--ray ADDRESS`` on a Ray cluster (``local`` starts one here); either
way a point's files are written by the driver, so the dataset is the same. Point i's results go to
``DIR/points/<id>/`` (id: a hash of its values) and a point whose folder is
complete is skipped when the sweep runs again. At the end the points are
combined in grid order into ``DIR/points.parquet`` (one row per point: its
values and summary figures), ``DIR/flows.parquet`` and, with jobs,
``DIR/jobs.parquet`` (all rows with a ``point`` column), so an interrupted
and resumed sweep gives the same dataset as one uninterrupted run.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import os
import shutil
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .errors import InputError
from .scenario.model import Scenario, ScenarioError
from .sim.pipeline import build_simulator
from .util.toml import tomllib


class SweepError(InputError):
    pass


# Points of one sweep: each is validated (and later run) before any runs.
MAX_POINTS = 100_000


def _set_path(d: dict, path: str, value, where: str) -> None:
    parts = path.split(".")
    cur = d
    for i, p in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(cur, list):
            if not p.isdigit() or int(p) >= len(cur):
                raise SweepError(f"{where}: {path!r}: {'.'.join(parts[:i]) or 'top level'} is a list of "
                                 f"{len(cur)}; {p!r} is not an index within it")
            if last:
                cur[int(p)] = value
            else:
                cur = cur[int(p)]
        else:
            if last:
                cur[p] = value
            else:
                if p not in cur or not isinstance(cur[p], (dict, list)):
                    raise SweepError(f"{where}: {path!r}: no table or list {'.'.join(parts[:i + 1])!r} in the base scenario")
                cur = cur[p]


def load_experiment(path: Path, memory_limit: int | None = None) -> tuple[dict, list[dict]]:
    """The base scenario (as a dict, every default filled in) and the list
    of points (each a dict path -> value), in grid order. Every point is
    validated (schema, files, the core's checks, and its memory estimate
    against ``memory_limit`` bytes, None: no check) before any runs."""
    from .util.inputs import read_text

    if not path.exists():
        raise SweepError(f"{path}: no such experiment file")
    text = read_text(path, "", "experiment file")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SweepError(f"{path}: malformed TOML: {e}") from None
    unknown = set(raw) - {"base", "grid"}
    if unknown:
        raise SweepError(f"{path}: unknown field(s) {sorted(unknown)} (allowed: base, grid)")
    base = raw.get("base")
    if isinstance(base, str):
        if not (path.parent / base).is_file():
            raise SweepError(f"{path}: base: no such scenario file {base!r} (a path relative to the experiment's folder, "
                             "or an inline [base] table)")
        s = Scenario.load(path.parent / base)
    elif isinstance(base, dict):
        s = Scenario.from_dict(base, source=f"{path}: [base]")
        s._base_dir = path.parent.resolve()
    else:
        raise SweepError(f"{path}: base: give a scenario file name or a [base] table")
    grid = raw.get("grid")
    if not isinstance(grid, dict) or not grid:
        raise SweepError(f"{path}: grid: needs at least one field with a list of values")
    for k, v in grid.items():
        if not isinstance(v, list) or not v:
            raise SweepError(f"{path}: grid.{k}: must be a non-empty list of values")
    keys = list(grid)
    count = math.prod(len(grid[k]) for k in keys)
    if count > MAX_POINTS:
        raise SweepError(f"{path}: grid: {count:,} points (the product of the lists' lengths); at most "
                         f"{MAX_POINTS:,} in one sweep")
    points = [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]
    base_dict = s.model_dump(by_alias=True, exclude_none=True)
    base_dict["__base_dir"] = str(s._base_dir)
    for i, p in enumerate(points):  # validate every point before running any
        s = point_scenario(base_dict, p, f"{path}: point {i}")
        try:
            build_simulator(s, memory_limit if memory_limit is not None else "off")
        except InputError as e:
            raise SweepError(f"{path}: point {i} ({_describe(p)}): {e}") from None
    return base_dict, points


def _describe(point: dict) -> str:
    return ", ".join(f"{k} = {v!r}" for k, v in point.items())


def point_id(point: dict) -> str:
    return hashlib.sha256(json.dumps(point, sort_keys=True, default=str).encode()).hexdigest()[:16]


def point_scenario(base: dict, point: dict, where: str) -> Scenario:
    d = copy.deepcopy(base)
    base_dir = d.pop("__base_dir")
    for k, v in point.items():
        _set_path(d, k, v, where)
    try:
        s = Scenario.from_dict(d, source=where)
    except ScenarioError as e:
        raise SweepError(str(e)) from None
    s._base_dir = Path(base_dir)
    return s


def _run_point(base: dict, point: dict, out: str) -> str:
    from .api import simulate

    s = point_scenario(base, point, f"point {point_id(point)}")
    res = simulate(s)
    res.summary.pop("performance", None)  # keep the dataset deterministic
    res.write(out, force=True)
    Path(out, "point.json").write_text(json.dumps(point, sort_keys=True, default=str) + "\n")
    return out


def _run_point_files(base: dict, point: dict) -> dict[str, bytes]:
    """Runs a point in a scratch folder and returns its files (for Ray
    workers, which may not share the driver's filesystem). Whatever fails
    comes back as an exception that pickles: SweepError for bad input,
    RuntimeError carrying the worker's traceback for a bug."""
    import tempfile
    import traceback

    try:
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "p"
            _run_point(base, point, str(out))
            # Every file, by its path in the folder (a recovery run writes segments/<k>/).
            return {f.relative_to(out).as_posix(): f.read_bytes()
                    for f in sorted(out.rglob("*")) if f.is_file()}
    except InputError as e:
        raise SweepError(f"point {_describe(point)}: {e}") from None
    except Exception as e:
        raise RuntimeError(f"point {_describe(point)}: {type(e).__name__}: {e}\n"
                           f"worker traceback:\n{traceback.format_exc()}") from None


def _write_point(pdir: Path, pid: str, files: dict[str, bytes]) -> None:
    tmp = pdir / f".{pid}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    for name, data in files.items():
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_bytes(data)
    shutil.rmtree(pdir / pid, ignore_errors=True)
    os.replace(tmp, pdir / pid)


def _run_on_ray(address: str, base: dict, todo: list, pdir: Path, advance) -> None:
    try:
        import ray
    except ImportError:
        raise SweepError("--ray: Ray is not installed; install the optional extra: pip install 'fabriclab[ray]'") from None
    started = not ray.is_initialized()
    if started:
        ray.init(address=None if address == "local" else address, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    try:
        remote = ray.remote(_run_point_files)
        refs = {remote.remote(base, p): point_id(p) for _, p in todo}
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                _write_point(pdir, refs[ref], ray.get(ref))
                advance()
    finally:
        if started:
            ray.shutdown()


def run_sweep(experiment: Path, out_dir: Path, workers: int | None = None, max_points: int | None = None,
              progress: bool = True, ray_address: str | None = None, memory_limit: int | str | None = None) -> Path:
    """Runs the points not yet done. ``memory_limit`` (as for
    :func:`fabriclab.simulate`) is shared by the points running at once."""
    from .sim.limits import resolve_limit

    if max_points is not None and max_points < 1:
        raise SweepError(f"--max-points: must be at least 1, got {max_points}")
    if workers is not None and workers < 1:
        raise SweepError(f"--workers: must be at least 1, got {workers}")
    workers = workers or os.cpu_count() or 1
    cap = resolve_limit(memory_limit)
    base, points = load_experiment(experiment, None if cap is None or ray_address else cap // workers)
    if out_dir.exists() and not out_dir.is_dir():
        raise SweepError(f"--out: {out_dir} exists and is not a folder")
    pdir = out_dir / "points"
    try:
        pdir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SweepError(f"--out: cannot create {out_dir}: {e.strerror or e}") from None
    todo = [(i, p) for i, p in enumerate(points) if not (pdir / point_id(p) / "point.json").is_file()]
    if max_points is not None:
        todo = todo[:max_points]
    bar = task = None
    if progress and todo:
        from rich.progress import Progress

        bar = Progress(transient=True)
        bar.start()
        task = bar.add_task(f"sweep ({len(points) - len(todo)} of {len(points)} already done)", total=len(todo))
    def advance():
        if bar:
            bar.advance(task)

    try:
        if ray_address:
            _run_on_ray(ray_address, base, todo, pdir, advance)
        else:
            with ProcessPoolExecutor(max_workers=workers) as ex:
                futs = [ex.submit(_run_point_files, base, p) for _, p in todo]
                ids = {f: point_id(p) for f, (_, p) in zip(futs, todo)}
                try:
                    for f in as_completed(futs):
                        _write_point(pdir, ids[f], f.result())
                        advance()
                except BrokenProcessPool:
                    raise RuntimeError("a sweep worker process died (killed by a signal, e.g. the system ran out of "
                                       "memory); finished points are kept, run the sweep again to resume") from None
    finally:
        if bar:
            bar.stop()
    if all((pdir / point_id(p) / "point.json").is_file() for p in points):
        combine(points, out_dir)
    return out_dir


def _flat(prefix: str, d, out: dict) -> None:
    if isinstance(d, dict):
        for k, v in d.items():
            _flat(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif isinstance(d, (int, float, str, bool)) or d is None:
        out[prefix] = d


def combine(points: list[dict], out_dir: Path) -> None:
    rows, flows, jobs = [], [], []
    for i, p in enumerate(points):
        pid = point_id(p)
        d = out_dir / "points" / pid
        summary = json.loads((d / "summary.json").read_text())
        row = {"point": i, "point_id": pid}
        row.update({f"param.{k}": (json.dumps(v) if isinstance(v, (list, dict)) else v) for k, v in p.items()})
        flat: dict = {}
        _flat("", {k: v for k, v in summary.items() if k not in ("jobs",)}, flat)
        for name, j in summary.get("jobs", {}).items():
            for k in ("mean_iteration_time_ps", "ring_bytes", "urgent_bytes", "raised_bytes"):
                flat[f"jobs.{name}.{k}"] = j.get(k)
        row.update(flat)
        rows.append(row)
        for name, bucket in (("flows.parquet", flows), ("jobs.parquet", jobs)):
            if (d / name).is_file():
                t = pq.read_table(d / name)
                bucket.append(t.append_column("point", pa.array([i] * t.num_rows, pa.uint32())))
    tmp = out_dir / ".combine.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    pq.write_table(pa.Table.from_pylist(rows), tmp / "points.parquet")
    if flows:
        pq.write_table(pa.concat_tables(flows), tmp / "flows.parquet")
    if jobs:
        pq.write_table(pa.concat_tables(jobs), tmp / "jobs.parquet")
    for f in tmp.iterdir():
        os.replace(f, out_dir / f.name)
    tmp.rmdir()
