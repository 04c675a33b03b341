"""Calibration and validation against the recorded real-TileLang H200 measurements."""

import json
import sys
from pathlib import Path

import pytest

import hwmodels
from tilesim.sim.validation import _loss, _sim_times, apply_overrides, calibrate, validate

ROOT = Path(__file__).resolve().parents[2]
MEAS = ROOT / "reports" / "measurements" / "tilelang_h200_2026-11-29.json"
CAL = ROOT / "reports" / "measurements" / "tilelang_h200_2026-11-29_calibration.json"


@pytest.fixture(scope="module")
def measurements():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import tilelang_h200 as B
    return B.load_measurements(MEAS)


def test_apply_overrides_replaces_numbers_without_touching_the_original():
    hw = hwmodels.load("h200_sxm_141gb")
    new = apply_overrides(hw, {"efficiency.l2_fraction": 0.5, "efficiency.matrix_fraction.float16": 0.6,
                               "core_kinds.sm.data_paths.tma.latency_cycles": 900.0,
                               "core_kinds.aic.data_paths.mte2.latency_cycles": 1.0})  # not this device
    assert new.efficiency("l2") == 0.5 and new.efficiency("matrix", "float16") == 0.6
    assert new.primary_core.data_paths[0].latency_cycles == 900.0
    assert hw.efficiency("l2", default=None) == 1.0  # the file's fitted value, untouched
    fitted = json.loads((MEAS.parent / "sim_calibration_h200_2026-12-02_z.json").read_text())["calibration"]
    assert hw.efficiency("matrix", "float16") == pytest.approx(fitted["efficiency.matrix_fraction.float16"])


def test_measurements_are_complete_and_split(measurements):
    doc = json.loads(MEAS.read_text())
    assert doc["device"] == "NVIDIA H200" and doc["versions"]["tilelang"] == "0.1.15"
    assert all(r.get("correct") for r in doc["results"])
    assert len(measurements) >= 30
    fams = {(m.family, m.split) for m in measurements}
    for fam in ("gemm", "flash_attention", "softmax", "rms_norm", "elementwise"):
        assert (fam, "train") in fams and (fam, "test") in fams


def test_calibrated_model_meets_the_target_on_the_held_out_split(measurements):
    cal = json.loads(CAL.read_text())["calibration"]
    res = validate(measurements, "h200_sxm_141gb", cal, split="test")
    assert res["points"] >= 15
    assert res["median_error"] <= 0.15
    assert res["within_2x"]


def test_calibration_lowers_the_training_loss(measurements):
    hw = hwmodels.load("h200_sxm_141gb")
    subset = [m for m in measurements if m.id.startswith(("vec_add", "gemm_4k_128x128x32", "softmax"))]
    train = [m for m in subset if m.split == "train"]
    import numpy as np
    meas = np.array([m.measured_s for m in train])
    before = _loss(_sim_times(train, hw, "tensorcore"), meas)
    cal = calibrate(subset, hw, sweeps=1, points=5)
    after = _loss(_sim_times(train, apply_overrides(hw, cal), "tensorcore"), meas)
    assert after <= before
    assert 0 < cal["efficiency.dram_fraction"] <= 1


def test_frozen_model_on_the_set_measured_after_it_was_frozen():
    # predictions were written (…_holdout_predictions.json) before these kernels were measured
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import tilelang_h200 as B
    ms = B.load_measurements(ROOT / "reports" / "measurements" / "tilelang_h200_2026-11-29_holdout.json")
    cal = json.loads(CAL.read_text())["calibration"]
    res = validate(ms, "h200_sxm_141gb", cal, split="all")
    assert res["points"] == 16
    assert res["median_error"] <= 0.15
    assert res["within_2x"]
