"""Test 9: every kind of bad input gives its own clear message and exit code 2,
with no traceback and nothing written to the output folder."""

import textwrap

import pytest

GOOD = """
name = "t"
[topology]
kind = "star"
hosts = 4
link_rate_bps = "10Gbps"
link_delay_ps = "1us"
[[traffic]]
load = 0.3
duration_ps = "5ms"
"""

CASES = {
    "malformed_toml": ("name = \"t\"\n[topology\nkind = 1", ["malformed TOML"]),
    "unknown_top_field": ("colour = 3\n" + GOOD, ["colour: unknown field", "allowed", "topology"]),
    "unknown_nested_field": (GOOD.replace("hosts = 4", "hosts = 4\nspeed = 1"), ["topology.speed", "unknown field"]),
    "wrong_unit": (GOOD.replace('"10Gbps"', '"10us"'), ["topology.link_rate_bps", "not a rate unit"]),
    "unit_missing": (GOOD.replace('"1us"', '"12"'), ["topology.link_delay_ps", "no unit"]),
    "wrong_type": (GOOD.replace("hosts = 4", 'hosts = "four"'), ["topology.hosts", "integer"]),
    "zero_rate": (GOOD.replace('"10Gbps"', "0"), ["topology.link_rate_bps", "greater than 0"]),
    "negative_rate": (GOOD.replace('"10Gbps"', "-5"), ["topology.link_rate_bps", "greater than 0"]),
    "zero_load": (GOOD.replace("load = 0.3", "load = 0"), ["traffic[0].load", "greater than 0"]),
    "load_above_one": (GOOD.replace("load = 0.3", "load = 1.5"), ["traffic[0].load", "less than or equal to 1"]),
    "host_out_of_range": (GOOD + "\n[[flows]]\nsrc = 0\ndst = 9\nsize_bytes = 100\n", ["flows[0].dst", "out of range"]),
    "traffic_host_out_of_range": (GOOD.replace("load = 0.3", "load = 0.3\nhosts = [0, 17]"), ["traffic[0].hosts", "out of range"]),
    "unknown_backend": ('backend = "quantum"\n' + GOOD, ["backend", "packet", "flow"]),
    "odd_fat_tree": ('[topology]\nkind = "fat_tree"\nk = 5\n', ["topology.k", "even"]),
    "unknown_topology_kind": ('[topology]\nkind = "torus"\n', ["topology", "star"]),
    "missing_cdf_file": (GOOD.replace("load = 0.3", 'load = 0.3\ncdf = "nope.csv"'), ["traffic[0].cdf", "nope.csv"]),
    "bad_priomap": (GOOD + "\n[queue]\ndiscipline = \"prio\"\nbands = 2\npriomap = [0,1,2,2,2,2,2,2]\n", ["queue", "priomap", "0..1"]),
}


def _check(cli, tmp_path, text, needles, extra_files=None):
    scen = tmp_path / "s.toml"
    scen.write_text(text)
    for name, body in (extra_files or {}).items():
        (tmp_path / name).write_text(body)
    out = tmp_path / "out"
    r = cli("run", str(scen), "--out", str(out), "-q")
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr + r.stdout
    for n in needles:
        assert n in r.stderr, (n, r.stderr)
    # Schema errors and those found later (paths, files, the core's checks) alike name the file first.
    assert r.stderr.startswith(f"error: {scen}: "), r.stderr
    assert not out.exists()
    assert not list(tmp_path.glob(".out*"))  # no temporary leftovers
    v = cli("validate", str(scen))
    assert v.returncode == 2 and "Traceback" not in v.stderr


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_scenario(cli, tmp_path, case):
    text, needles = CASES[case]
    _check(cli, tmp_path, text, needles)


@pytest.mark.parametrize("cdf_text, needle", [
    ("size_bytes,cdf\n100,0.0\n50,0.5\n200,1.0\n", "non-decreasing"),
    ("size_bytes,cdf\n100,0.0\n150,0.6\n200,0.5\n300,1.0\n", "monotone"),
    ("size_bytes,cdf\n100,0.0\n200,0.9\n", "must end at 1"),
])
def test_bad_cdf_file(cli, tmp_path, cdf_text, needle):
    text = GOOD.replace("load = 0.3", 'load = 0.3\ncdf = "mine.csv"')
    _check(cli, tmp_path, text, ["traffic[0].cdf", needle], {"mine.csv": cdf_text})


def test_unreachable_host_in_topology_file(cli, tmp_path):
    topo = textwrap.dedent("""
        nodes = [{name = "a", kind = "host"}, {name = "b", kind = "host"}, {name = "c", kind = "host"},
                 {name = "s", kind = "switch"}]
        links = [{a = "a", b = "s", rate_bps = "10Gbps", delay_ps = "1us"},
                 {a = "b", b = "s", rate_bps = "10Gbps", delay_ps = "1us"}]
    """)
    text = '[topology]\nkind = "file"\npath = "t.toml"\n[[traffic]]\nload = 0.2\nduration_ps = "1ms"\n'
    _check(cli, tmp_path, text, ["cannot reach", "'c'"], {"t.toml": topo})


def test_missing_scenario_file(cli, tmp_path):
    r = cli("run", str(tmp_path / "none.toml"), "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "no such scenario file" in r.stderr


def test_non_empty_output_refused_without_force(cli, tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    scen = tmp_path / "s.toml"
    scen.write_text(GOOD)
    r = cli("run", str(scen), "--out", str(out), "-q")
    assert r.returncode == 2 and "--force" in r.stderr
    assert r.stderr.startswith("error: --out: "), r.stderr  # about the option, not the scenario file
    assert (out / "keep.txt").read_text() == "mine"
    r = cli("run", str(scen), "--out", str(out), "-q", "--force")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["flows.parquet", "links.parquet", "messages.parquet", "scenario.resolved.toml",
                                                     "summary.json"]


def test_bad_cli_option_value(cli, tmp_path):
    r = cli("run", "--backend", "warp", "--out", str(tmp_path / "o"), "-q")
    assert r.returncode == 2 and "backend" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("command", ["run", "validate"])
def test_option_errors_name_the_option_not_the_file(cli, tmp_path, command):
    scen = tmp_path / "s.toml"
    scen.write_text(GOOD)
    extra = ("--out", str(tmp_path / "o"), "-q") if command == "run" else ()
    r = cli(command, str(scen), *extra, "--memory-limit", "abc")
    assert r.returncode == 2
    assert r.stderr.startswith("error: --memory-limit: "), r.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("file_name", ["topology", "t"])
def test_a_file_named_like_the_field_still_comes_first(cli, tmp_path, monkeypatch, file_name):
    # The memory check names topology.hosts; the prefix must not be skipped because
    # the message happens to begin with the file's name.
    monkeypatch.chdir(tmp_path)
    (tmp_path / file_name).write_text(GOOD)
    r = cli("validate", file_name, "--memory-limit", "1KB")
    assert r.returncode == 2
    assert r.stderr.startswith(f"error: {file_name}: topology.hosts: "), r.stderr


def test_topo_show_refusal_names_the_file(cli, tmp_path):
    scen = tmp_path / "s.toml"
    scen.write_text('[topology]\nkind = "leaf_spine"\nleaves = 1000000\nspines = 1000000\n')
    r = cli("topo", "show", str(scen), "--out", str(tmp_path / "t.png"))
    assert r.returncode == 2
    assert r.stderr.startswith(f"error: {scen}: topology.leaves: "), r.stderr
    assert not (tmp_path / "t.png").exists()
