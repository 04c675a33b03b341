"""The final model's predictions for the eighth sealed set (docs/simulator.md §3o), committed before its timings were
opened: the file is a dry run of ``tensorcore``'s defaults over every configuration, and ``tensorcore`` reproduces it
(a change of the model after the freeze makes this fail)."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FILE = ROOT / "reports" / "measurements" / "tilelang_h200_eighth_predictions_final_2026-12-02.json"


def _validation():
    spec = importlib.util.spec_from_file_location("bench_tilelang_h200_validation_e8",
                                                  ROOT / "benchmarks" / "tilelang_h200_validation.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_eighth_final_predictions_are_committed_and_tensorcore_reproduces_them():
    V = _validation()
    doc = json.loads(FILE.read_text())
    assert doc["dry_run"] is True and not doc.get("profile_overrides")
    pred = {r["id"]: r for r in doc["results"]}
    cfgs = V.config_set("eighth")
    assert set(pred) == {c["id"] for c in cfgs} and len(cfgs) == 51
    assert all(r.get("error") is None for r in pred.values())
    assert max(r["sim_wall_s"] for r in pred.values()) < 0.5
    th, _ = V._helpers()
    picked = cfgs[::6] + [c for c in cfgs if c["kind"] in ("moe_routing", "decode_attention")]
    for cfg in picked:
        assert V.predict(cfg, th)["predicted_s"] == pytest.approx(pred[cfg["id"]]["predicted_s"], rel=1e-9), cfg["id"]
