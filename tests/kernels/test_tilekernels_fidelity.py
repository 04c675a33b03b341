"""The TileKernels fidelity script (benchmarks/tilekernels_fidelity.py): its comparisons catch one-bit and
NaN-payload differences, its tolerances count mismatches, and a directory that is not a TileKernels
checkout is refused with a message (the script itself needs a local TileKernels copy: not run here)."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fid():
    spec = importlib.util.spec_from_file_location("tilekernels_fidelity", ROOT / "benchmarks" / "tilekernels_fidelity.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bitwise_sees_one_bit_and_nan_payloads(fid):
    a = np.array([0x3F80, 0x7FC1, 0x7FC0], np.uint16).view(fid.BF16)
    b = np.array([0x3F80, 0x7FC0, 0x7FC0], np.uint16).view(fid.BF16)
    assert fid.bitwise("y", a, a)["mismatches"] == 0
    assert fid.bitwise("y", a, b)["mismatches"] == 1
    assert fid.bitwise("i", np.array([1, 2], np.int32), np.array([1, 3], np.int64))["mismatches"] == 1
    assert fid.bitwise("s", np.zeros(3), np.zeros(4))["mismatches"] == -1


def test_close_counts_out_of_tolerance_and_nan(fid):
    r = fid.close("w", np.array([1.0, 2.0, np.nan, 5.0]), np.array([1.0, 2.0 + 1e-7, 0.0, np.nan]), 1e-5, 1e-8)
    assert r["mismatches"] == 2 and r["max_abs_err"] == pytest.approx(1e-7)


def test_torch_round_trip_keeps_bits(fid):
    bits = np.arange(0, 1 << 16, 97, dtype=np.uint16)
    x = bits.view(fid.BF16)
    assert np.array_equal(fid._to_np(fid._to_torch(x)).view(np.uint16), bits)
    e = np.arange(256, dtype=np.uint8).view(fid.E4M3)
    assert np.array_equal(fid._to_np(fid._to_torch(e)).view(np.uint8), np.arange(256, dtype=np.uint8))


def test_not_a_checkout_is_refused(fid, tmp_path):
    with pytest.raises(SystemExit, match="not a TileKernels checkout"):
        fid.load_reference(tmp_path)


def test_companion_families_are_bound(fid):
    """The families of tilekernels_fidelity_more.py, _rest.py, _fused.py and _extra.py are loaded and take the script's (R, rng, n) arguments."""
    assert set(fid.FAMILIES) >= {"quant", "swiglu_bwd", "moe_groups", "moe_dispatch_sf", "moe_mapping", "mhc", "engram",
                                 "fp8_cast", "moe", "topk", "normw", "requant", "engram_bwd", "mhc_fused", "mhc_recompute",
                                 "e5m6", "engram_fw", "block_sf", "mhc_fused_opts"}
    assert fid.FAMILIES["quant"].args[0].bitwise is fid.bitwise
