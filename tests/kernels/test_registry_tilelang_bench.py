"""benchmarks/registry_tilelang_h200.py in its CPU dry run (tilesim standing in for TileLang): the full-size
timing comes first and a failing correctness check afterwards is recorded as ``check_error`` without
losing it (on the H200, 2026-12-02, TileLang refused small test shapes of kernels it compiles at full size)."""

import dataclasses
import importlib.util
import json
import sys
from pathlib import Path

import pytest

import tilesim
from kernels import registry

torch = pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[2]


def _bench(monkeypatch, tmp_path, specs):
    monkeypatch.setenv("TILESIM_DRYRUN", "1")
    monkeypatch.setenv("OUT", str(tmp_path))
    monkeypatch.setenv("KERNELS", ",".join(specs))
    # main() aliases tilelang to tilesim and stubs torch.cuda for the dry run: restore all of it afterwards
    for name in ("tilelang", "tilelang.language"):
        monkeypatch.setitem(sys.modules, name, sys.modules.get(name))
    monkeypatch.setattr(tilesim, "__version__", tilesim.__version__)
    for fn in ("get_device_name", "synchronize", "empty_cache"):
        monkeypatch.setattr(torch.cuda, fn, getattr(torch.cuda, fn))
    spec = importlib.util.spec_from_file_location("bench_registry_tl", ROOT / "benchmarks" / "registry_tilelang_h200.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "shimmed_specs", lambda modules: specs)
    mod.main()
    return json.loads((tmp_path / "registry_tilelang_h200.json").read_text())["results"]


def test_a_refused_check_keeps_the_timing(monkeypatch, tmp_path):
    real = registry.get("dsa_topk")
    calls = []

    def build(**p):  # the first build is the timed one; the check's build is refused
        calls.append(p)
        if len(calls) > 1:
            raise RuntimeError("No valid warp partition for T.gemm: M=16, N=16 (stand-in)")
        return real.build(**p)

    good = registry.get("dsa_indexer")
    recs = _bench(monkeypatch, tmp_path, {"dsa_topk": dataclasses.replace(real, build=build), "dsa_indexer": good})
    bad, ok = recs
    assert len(calls) == 2 and bad["median_ms"] > 0 and "error" not in bad and "correct" not in bad
    assert "No valid warp partition" in bad["check_error"]
    assert ok["median_ms"] > 0 and ok["correct"] is True and "check_error" not in ok
