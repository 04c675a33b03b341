"""``tma_full_box`` (docs/simulator.md §3l): a TMA copy spends the data path's rate on its whole box.

TileLang 0.1.15's generated skinny GEMM (M = 4 on a 64-row tile) arms ``expect_transaction`` for the whole A box;
the TMA engine writes the zero fill too. Only copies whose box leaves the tensor can change; DRAM bytes never do.
"""

import dataclasses
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _validation():
    spec = importlib.util.spec_from_file_location("bench_tma_box_validation",
                                                  ROOT / "benchmarks" / "tilelang_h200_validation.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _gemm(M, N=7168, K=2048):
    return {"id": f"t_{M}", "kind": "skinny_gemm", "source": "extra", "factory": "gemm",
            "params": dict(M=M, N=N, K=K, block_M=64, block_N=64, block_K=64, num_stages=3, threads=128)}


@pytest.fixture(scope="module")
def sim():
    from tilesim.analysis import get_profile
    from tilesim.sim import simulate
    v = _validation()
    th, _ = v._helpers()
    base = get_profile("tensorcore")

    def run(M, on):
        kern, hints, _ = v.build(_gemm(M), "tilesim", th)
        prof = dataclasses.replace(base, tma_full_box=on)
        return simulate(kern.prim_func, "h200_sxm_141gb", prof, name=f"g{M}", **hints)
    return run


def test_a_box_past_the_tensor_edge_costs_the_tma_engine_its_zero_fill(sim):
    off, on = sim(4, False), sim(4, True)
    assert on.time_s > off.time_s * 1.02  # the 64-row A box of a 4-row A: 16x the bytes through the TMA path


def test_boxes_inside_the_tensor_are_unchanged(sim):
    off, on = sim(256, False), sim(256, True)
    assert on.time_s == pytest.approx(off.time_s, rel=1e-9)


def test_it_is_on_in_tensorcore_and_off_in_the_numba_profiles():
    from tilesim.analysis import get_profile
    assert get_profile("tensorcore").tma_full_box
    assert not get_profile("numba").tma_full_box and not get_profile("numba_tc").tma_full_box


def test_tma_l2_scale_speeds_an_l2_bound_gemm_and_nothing_else():
    """``tma_l2_scale`` (tried, 1.0 in tensorcore: docs/simulator.md §3l) divides the L2 time of TMA copies only."""
    from tilesim.analysis import get_profile
    from tilesim.sim import simulate
    v = _validation()
    th, _ = v._helpers()
    base = get_profile("tensorcore")
    assert base.tma_l2_scale == 1.0
    gemm = {"id": "g", "kind": "gemm", "source": "extra", "factory": "gemm",
            "params": dict(M=2048, N=2048, K=16384, block_M=128, block_N=128, block_K=64, num_stages=3, threads=128,
                           dtype="bfloat16", out_dtype="bfloat16")}
    kern, hints, _ = v.build(gemm, "tilesim", th)
    t1 = simulate(kern.prim_func, "h200_sxm_141gb", base, name="g", **hints).time_s
    t2 = simulate(kern.prim_func, "h200_sxm_141gb", dataclasses.replace(base, tma_l2_scale=1.5), name="g",
                  **hints).time_s
    assert t2 < t1 * 0.95  # L2-bound in the model (2.15 GB through L2)
    add = {"id": "a", "kind": "elementwise", "source": "extra", "factory": "vec_add",
           "params": dict(N=1 << 22, block=1024, threads=128, dtype="float32")}
    kern, hints, _ = v.build(add, "tilesim", th)
    a1 = simulate(kern.prim_func, "h200_sxm_141gb", base, name="a", **hints).time_s
    a2 = simulate(kern.prim_func, "h200_sxm_141gb", dataclasses.replace(base, tma_l2_scale=1.5), name="a",
                  **hints).time_s
    assert a2 == pytest.approx(a1, rel=1e-9)  # synchronous loads: no TMA
