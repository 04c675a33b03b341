"""The fresh H200 validation set (issue 15): the pre-registered comparison, the 2026-12-02 split, model terms."""

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MEAS = ROOT / "reports" / "measurements"
VALID = MEAS / "tilelang_h200_validation_20261201T232133Z.json"
REGS = MEAS / "tilelang_h200_validation_registers_20261201T233900Z.json"
PRED = MEAS / "tilelang_h200_validation_predictions_2026-12-01.json"


def _bench(name):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _doc(path, results):
    path.write_text(json.dumps({"kind": "tilelang_h200_validation", "results": results}))
    return path


def test_compare_joins_by_id_and_leaves_out_untimed_and_wrong(tmp_path):
    V = _bench("tilelang_h200_validation")
    meas = _doc(tmp_path / "m.json", [
        {"id": "a", "kind": "k1", "median_ms": 0.010, "mismatch": None},
        {"id": "b", "kind": "k1", "median_ms": 0.020, "mismatch": None, "registers": 40},
        {"id": "c", "kind": "k2", "median_ms": 0.100, "mismatch": None},
        {"id": "d", "kind": "k2", "error": "refused"},
        {"id": "e", "kind": "k2", "median_ms": 0.100, "mismatch": "max abs err 3"}])
    pred = _doc(tmp_path / "p.json", [
        {"id": "a", "predicted_s": 12e-6, "predicted_registers": 32},
        {"id": "b", "predicted_s": 20e-6, "predicted_registers": 48},
        {"id": "c", "predicted_s": 50e-6}, {"id": "d", "predicted_s": 1e-6}, {"id": "e", "predicted_s": 1e-4}])
    res = V.compare([meas], [pred])
    assert sorted(r["id"] for r in res["rows"]) == ["a", "b", "c"]
    assert res["not_timed"] == ["d"] and res["wrong"] == ["e"]
    assert abs(res["per_kind"]["k1"]["median_error"] - 0.1) < 1e-9   # errors 0.2 and 0.0
    assert abs(res["overall"]["median_error"] - 0.2) < 1e-9          # errors 0.2, 0.0, 0.5
    assert res["registers_median_abs_diff"] == 8                      # only b has a real count


def test_pre_registered_held_out_result_is_reproduced_from_the_committed_files():
    V = _bench("tilelang_h200_validation")
    res = V.compare([VALID, REGS], [PRED])
    assert res["overall"]["points"] == 38 and len(res["not_timed"]) == 3
    assert round(res["overall"]["median_error"] * 100, 1) == 10.7
    assert round(res["overall"]["p90_error"] * 100, 1) == 33.3
    assert sum(r["registers"] is not None for r in res["rows"]) == 12
