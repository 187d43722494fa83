"""fabriclab report: a self-contained HTML page for a run or a sweep."""

import re


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


def test_report_of_nothing_is_an_error(cli, tmp_path):
    r = cli("report", str(tmp_path))
    assert r.returncode == 2 and "no fabriclab results" in r.stderr
