"""Files that scenarios name (CDFs, flow lists, profiles, topologies, plans),
valid and broken, written beside the fuzzed scenario files."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any


_CDF_OK = "size_bytes,cdf\n1000,0.0\n10000,0.5\n100000,1.0\n"
_FLOWS_OK = "src,dst,size_bytes,start_ps,class\n0,1,1000,0,0\n1,0,20000,1000,1\n"
_PROFILE_OK = "param_bytes,fwd_ps,bwd_ps\n1000,1000000,2000000\n50000,2000000,4000000\n"
_TOPO_OK = """nodes = [{name = "a", kind = "host"}, {name = "b", kind = "host"}, {name = "c", kind = "host"},
         {name = "d", kind = "host"}, {name = "s1", kind = "switch"}, {name = "s2", kind = "switch"}]
links = [{a = "a", b = "s1", rate_bps = "10Gbps", delay_ps = "1us"},
         {a = "b", b = "s1", rate_bps = "10Gbps", delay_ps = "1us"},
         {a = "c", b = "s2", rate_bps = "25Gbps", delay_ps = "2us"},
         {a = "d", b = "s2", rate_bps = "25Gbps", delay_ps = "2us"},
         {a = "s1", b = "s2", rate_bps = "40Gbps", delay_ps = "1us"}]
"""
_TOPO_JSON_OK = ('{"nodes": [{"name": "x", "kind": "host"}, {"name": "y", "kind": "host"}, '
                 '{"name": "sw", "kind": "switch"}], "links": [{"a": "x", "b": "sw", "rate_bps": 10000000000, '
                 '"delay_ps": 1000000}, {"a": "y", "b": "sw", "rate_bps": "10Gbps", "delay_ps": "1us"}]}\n')


def _plan_json(n: int) -> str:
    try:
        from fabriclab.collectives.rings import ring_allreduce

        return ring_allreduce(n, 1 << 20).to_json()
    except Exception as e:  # the collectives package is being changed: keep fuzzing the rest
        return f'{{"broken_fixture": "{type(e).__name__}"}}'


# name -> text (str) or bytes. Valid ones are what STRING_HINTS offers to
# valid scenarios; the others are for mutations.
FIXTURES: dict[str, Any] = {
    "cdf.csv": _CDF_OK,
    "flows.csv": _FLOWS_OK,
    "profile.csv": _PROFILE_OK,
    "topo.toml": _TOPO_OK,
    "topo.json": _TOPO_JSON_OK,
    "plan2.json": lambda: _plan_json(2),
    # bad files
    "plan3.json": lambda: _plan_json(3),
    "cdf_bad.csv": "size_bytes,cdf\n100,0.0\n150,0.6\n200,0.5\n300,1.0\n",
    "cdf_nan.csv": "size_bytes,cdf\nnan,0.0\n100,inf\n200,1.0\n",
    "cdf_huge.csv": "size_bytes,cdf\n1,0.0\n1e30,1.0\n",
    "flows_bad.csv": "src,dst,size_bytes,start_ps,class\n0,99,-5,x,9\n0,0,1e400,1,1\n",
    "profile_bad.csv": "param_bytes,fwd_ps,bwd_ps\n0,-1,x\n",
    "topo_bad.toml": ('nodes = [{name = "a", kind = "host"}, {name = "b", kind = "host"}, '
                      '{name = "s", kind = "switch"}]\nlinks = [{a = "a", b = "s", rate_bps = "10Gbps", '
                      'delay_ps = "1us"}]\n'),
    "topo_weird.toml": 'nodes = 3\nlinks = [{a = "a"}]\n',
    "empty.csv": "",
    "garbage.bin": b"\xff\xfe\x00\x81binary\x00\n",
}
_FIXTURE_DIR: Path | None = None


def write_fixtures(directory: str | Path) -> None:
    """Writes :data:`FIXTURES` into ``directory`` (beside a scenario file)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    for name, body in FIXTURES.items():
        body = body() if callable(body) else body
        p = d / name
        if isinstance(body, bytes):
            p.write_bytes(body)
        else:
            p.write_text(body)


def fixture_dir() -> Path:
    global _FIXTURE_DIR
    if _FIXTURE_DIR is None:
        import atexit
        import shutil

        _FIXTURE_DIR = Path(tempfile.mkdtemp(prefix="fabriclab-fuzz-fixtures-"))
        atexit.register(shutil.rmtree, _FIXTURE_DIR, True)
        write_fixtures(_FIXTURE_DIR)
    return _FIXTURE_DIR
