"""``numba_tc`` after the eleventh session's lowering (docs/simulator.md §6d): HMMA turns, the ``wgmma`` mode and its
switch, the mirror of the backend's ``wgmma`` eligibility. Each test fails when the mechanism it names is broken."""

from __future__ import annotations

import dataclasses
import itertools
import os
import sys
import warnings

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from tilesim.analysis import profiles as P  # noqa: E402
from tilesim.analysis.profiles import PROFILES, get_profile  # noqa: E402

warnings.simplefilter("ignore")


def _gemm(M=4096, N=4096, K=4096, bm=128, bn=128, bk=64, st=3, th=128, dtype="bfloat16"):
    from kernels import gemm as G
    return G.matmul(M, N, K, dtype=dtype, out_dtype="float32", block_M=bm, block_N=bn, block_K=bk, num_stages=st,
                    threads=th).prim_func


def _sim(pf, prof):
    from tilesim.sim import simulate
    return simulate(pf, "h200_sxm_141gb", prof)


def test_switch_selects_the_wgmma_mode(monkeypatch):
    monkeypatch.delenv("TILESIM_CUDA_WGMMA", raising=False)
    assert get_profile("numba_tc").name == "numba_tc_wgmma"  # the backend's default for the H200 (twelfth session)
    monkeypatch.setenv("TILESIM_CUDA_WGMMA", "0")
    assert get_profile("numba_tc").name == "numba_tc"
    monkeypatch.setenv("TILESIM_CUDA_WGMMA", "1")
    assert get_profile("numba_tc").name == "numba_tc_wgmma"
    assert get_profile("numba").name == "numba" and get_profile("tensorcore").name == "tensorcore"
    # the backend reads the same switch the same way
    from tilesim.backends.cuda import caps
    for v in ("", "0", "1"):
        monkeypatch.setenv("TILESIM_CUDA_WGMMA", v)
        assert caps.wgmma_default() == P.wgmma_switch_on()


def test_new_fields_only_in_numba_tc_profiles():
    for name, p in PROFILES.items():
        if name.startswith("numba_tc"):
            continue
        assert not (p.mma_matrix_fraction or p.wgmma_stream or p.wgmma_peak_fraction or p.wgmma_iter_instr), name
    assert PROFILES["numba_tc"].mma_matrix_fraction > 0 and not PROFILES["numba_tc"].wgmma_stream
    assert PROFILES["numba_tc_wgmma"].wgmma_stream and PROFILES["numba_tc_wgmma"].wgmma_iter_instr > 0


def test_wgmma_eligibility_mirrors_the_backend():
    """``mma_stream.wgmma_lowered`` decides as ``tile_wgmma.plan_shapes`` over a grid of shapes and thread counts."""
    from kernels import gemm as G
    from kernels.fp8_gemm import fp8_matmul
    from tilesim.analysis.mma_stream import wgmma_lowered
    from tilesim.backends.cuda.tile_wgmma import WgmmaPlan, plan_shapes
    from tilesim.ir import nodes as N
    from tilesim.ir.traverse import walk_stmts
    checked = 0
    for (bm, bn, bk, th), fp8 in itertools.product(
            [(128, 128, 64, 128), (128, 128, 32, 128), (64, 128, 64, 128), (128, 256, 64, 256), (128, 128, 64, 64),
             (64, 64, 32, 128), (128, 64, 32, 256), (256, 128, 64, 256), (128, 128, 16, 128)], (False, True)):
        if fp8:
            k = fp8_matmul(1024, 1024, 1024, block_M=bm, block_N=bn, block_K=max(bk, 32) * 2, num_stages=3, threads=th)
        else:
            k = G.matmul(1024, 1024, 1024, dtype="bfloat16", out_dtype="float32", block_M=bm, block_N=bn,
                         block_K=bk, num_stages=3, threads=th)
        launch = next(s for s in walk_stmts(list(k.prim_func.body)) if isinstance(s, N.Launch))
        g = next(s for s in walk_stmts(list(launch.body)) if isinstance(s, N.Gemm))
        M, Nn = (int(x) for x in g.c.tile_shape())
        K = int(g.a.tile_shape()[0] if g.trans_a else g.a.tile_shape()[1])
        want = isinstance(plan_shapes(g.a.dtype, g.b.dtype, tuple(g.a.buffer.static_shape()),
                                      tuple(g.b.buffer.static_shape()), bool(g.trans_a), bool(g.trans_b), M, Nn, K,
                                      th), WgmmaPlan)
        assert wgmma_lowered(g, M, Nn, K, th) == want, (bm, bn, bk, th, fp8)
        checked += 1
    assert checked == 18


def test_wgmma_mode_costs_the_k_loop_and_the_probe_rate():
    pf = _gemm()
    mma, wg = PROFILES["numba_tc"], PROFILES["numba_tc_wgmma"]
    t_mma, t_wg = _sim(pf, mma).time_s, _sim(pf, wg).time_s
    assert t_wg < 0.8 * t_mma  # the K loop is not the mma.sync stream
    # a slower HGMMA rate slows it; more instructions per k-block slow it
    slow = dataclasses.replace(wg, wgmma_peak_fraction=tuple((k, v / 2) for k, v in wg.wgmma_peak_fraction))
    assert _sim(pf, slow).time_s > 1.3 * t_wg
    more = dataclasses.replace(wg, wgmma_iter_instr=wg.wgmma_iter_instr * 3)
    assert _sim(pf, more).time_s > 1.2 * t_wg
    # the turn is issue work as well as matrix work: the two co-resident blocks' turns and streams add up, so the
    # time is above the tensor time alone (2 M N K at the probe rate) by at least a third
    frac = dict(wg.wgmma_peak_fraction)["bfloat16"]
    assert t_wg > 1.33 * 2 * 4096 ** 3 / (989.43e12 * frac)


def test_wgmma_mode_leaves_ineligible_gemms_on_mma_sync():
    pf = _gemm(bk=32, th=64, bm=64, bn=64)  # 64 threads: not a warpgroup, mma.sync in the backend
    a = _sim(pf, PROFILES["numba_tc"])
    b = _sim(pf, dataclasses.replace(PROFILES["numba_tc_wgmma"], cp_async_inside_chunk_instr=5.0,
                                     cp_async_tile_check_instr=5.0))
    assert a.time_s == pytest.approx(b.time_s, rel=1e-12)


def test_mma_turns_follow_the_fraction():
    pf = _gemm(bk=32, st=4)
    p = PROFILES["numba_tc"]
    t = _sim(pf, p).time_s
    assert _sim(pf, dataclasses.replace(p, mma_matrix_fraction=p.mma_matrix_fraction / 2)).time_s > 1.3 * t
    # without turns the K step is the instruction stream alone (the model of §6c): faster with today's counts
    assert _sim(pf, dataclasses.replace(p, mma_matrix_fraction=0.0)).time_s < 0.8 * t


def test_todays_sass_counts_shorten_the_stream():
    """The recount (AQ's integer forms): the same kernel with §6c's counts is slower — the profile follows the code."""
    pf = _gemm(bk=32, st=4)
    p = PROFILES["numba_tc"]
    old = dataclasses.replace(p, **{k: v for k, v in P.TC_SASS_BEFORE_INT_FORMS.items() if k != "mma_matrix_fraction"})
    assert _sim(pf, old).time_s > 1.1 * _sim(pf, p).time_s
