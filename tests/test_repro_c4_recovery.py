"""``reproduce c4-recovery --quick``: four seeded 8-rank jobs, one fault
each (crash, hang, slowed GPU, dead host link), under C4D and under the
watchdog. The expected values come from the runs' inputs (the practices'
isolation, diagnosis and restart times; the watchdog's 1 s timeout) and
from the Table 3 model's closed form, not from an earlier run."""

import json

import pandas as pd
import pytest

from conftest import assert_quick_bands
from fabriclab.systems.c4 import downtime as dt
from fabriclab.systems.c4 import repro_recovery as rc

@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("c4-recovery")
    summary = rc.run(out, quick=True)
    df = pd.read_csv(out / "runs.csv")
    json.dumps(summary)  # the summary the CLI writes must be JSON
    df.attrs["summary"] = summary
    return df


def test_quick_headlines_stay_in_their_registry_bands(runs):
    assert_quick_bands("c4-recovery", runs.attrs["summary"])


def _parts_s(row, prefix):
    return sum(row[f"{prefix}_{p}_s"] for p in dt.PARTS)


def test_c4d_detects_and_names_every_fault_and_isolates_it_automatically(runs):
    c4d = runs[runs.detector == "c4d"]
    assert sorted(c4d.kind) == sorted(rc.KINDS)
    assert (c4d.cycles == 1).all() and c4d.correct.astype(bool).all()
    assert (c4d.diagnosis == "automatic").all()


def test_the_watchdog_never_sees_a_slowed_gpu_and_the_job_runs_slow_to_its_end(runs):
    w = runs[runs.detector == "watchdog"].set_index("kind")
    c = runs[runs.detector == "c4d"].set_index("kind")
    # No hang, so its timeout never fires: no downtime at all ...
    assert w.loc["compute_slow", "cycles"] == 0 and w.loc["compute_slow", "sim_total_s"] == 0
    # ... but the GPU at half speed keeps the whole job slower than under C4D,
    # which replaced the host: more useful time for the same iterations.
    assert w.loc["compute_slow", "useful_s"] > c.loc["compute_slow", "useful_s"]
    # Every hang is caught by the 1 s timeout after the last progress, at a
    # check at most one iteration late.
    for kind in ("crash", "hang", "link_down_host"):
        assert w.loc[kind, "cycles"] == 1
        assert abs(w.loc[kind, "sim_detection_s"] - 1.0) <= w.loc[kind, "iteration_s"]


def test_the_fixed_parts_are_the_configured_times(runs):
    kinds = {k.name: k for k in dt.TABLE1}
    for row in runs[runs.cycles > 0].itertuples():
        practice = rc.PRACTICES[row.detector]
        if row.detector == "c4d":
            assert row.sim_diagnosis_isolation_s == pytest.approx(practice.auto_isolation_s)
        else:
            manual = kinds[rc.TABLE1_KIND[row.kind]].manual_diagnosis_s
            assert row.sim_diagnosis_isolation_s == pytest.approx(manual)
        assert row.sim_reinitialization_s == pytest.approx(practice.reinit_s)


def test_measured_downtime_follows_the_table3_model_within_an_iteration(runs):
    for _, row in runs[runs.cycles > 0].iterrows():
        it = row.iteration_s
        # The work lost since the last checkpoint: the model counts from the
        # checkpoint to the fault in continuous time, the run to the fault as
        # the job reached it.
        assert abs(row.sim_post_checkpoint_s - row.model_post_checkpoint_s) <= it
        assert abs(row.sim_detection_s - row.model_detection_s) <= it
        # The total is the sum of the four parts, in both.
        assert row.sim_total_s == pytest.approx(_parts_s(row, "sim"), abs=1e-9)
        assert row.model_total_s == pytest.approx(_parts_s(row, "model"), abs=1e-9)
