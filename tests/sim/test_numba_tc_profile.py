"""The ``numba_tc`` lowering profile (docs/simulator.md §6c): mma.sync instruction streams, cp.async pipelines,
registers by the warp grid; and the split of its validation (TRAIN rows vs the HELD-OUT harness)."""

import dataclasses
import os
import subprocess
import sys

import pytest

import tilesim.sim as S
from kernels import gemm as G
from kernels.fp8_gemm import fp8_matmul
from tilesim.analysis.profiles import get_profile

HW = "h200_sxm_141gb"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _mm(M=4096, N=4096, K=4096, bm=128, bn=128, bk=32, st=3, th=128, dtype="bfloat16"):
    return G.matmul(M, N, K, dtype=dtype, out_dtype="float32", block_M=bm, block_N=bn, block_K=bk,
                    num_stages=st, threads=th)


def _sim(k, prof="numba_tc"):
    return S.simulate(k.prim_func, HW, prof)


@pytest.mark.parametrize("M, N, K", [(1000, 776, 512), (512, 512, 256)])
def test_bf16_gemm_runs_on_the_matrix_unit(M, N, K):
    k = _mm(M, N, K, st=2)
    tc, fma = _sim(k), _sim(k, "numba")
    assert any(key.startswith("tensor:") for key in tc.flops) and not any(key.startswith("tensor:") for key in fma.flops)
    assert tc.total_flops == pytest.approx(fma.total_flops)
    assert tc.time_s < fma.time_s


def test_fp32_gemm_keeps_the_fma_path():
    k = _mm(300, 200, 64, bm=64, bn=64, bk=16, st=2, dtype="float32")
    tc, fma = _sim(k), _sim(k, "numba")
    assert tc.flops == fma.flops and not any(key.startswith("tensor:") for key in tc.flops)


def test_fp8_gemm_runs_on_the_matrix_unit():
    rep = _sim(fp8_matmul(1024, 1024, 1024, block_M=128, block_N=128, block_K=64, num_stages=3, threads=256))
    assert any(key.startswith("tensor:") for key in rep.flops)


@pytest.mark.parametrize("cfg", [dict(bm=128, bn=128, bk=32, th=128), dict(bm=64, bn=64, bk=32, th=128),
                                 dict(bm=128, bn=256, bk=32, th=256)])
def test_time_is_monotone_in_K(cfg):
    times = [_sim(_mm(2048, 2048, K, **cfg)).time_s for K in (512, 1024, 2048, 4096)]
    assert all(a < b for a, b in zip(times, times[1:]))


@pytest.mark.parametrize("cfg", [dict(bm=128, bn=128, bk=32, th=128), dict(bm=64, bn=128, bk=64, th=128)])
def test_more_stages_never_slower(cfg):
    # same shared memory per stage for every count here; occupancy held fixed by a profile with a large
    # shared-memory budget is not needed: the model keeps the best schedule over 1..S stages
    times = [_sim(_mm(4096, 4096, 4096, st=s, **cfg)).time_s for s in (2, 3, 4)]
    blocks = [_sim(_mm(4096, 4096, 4096, st=s, **cfg)).blocks_per_core for s in (2, 3, 4)]
    for (t0, b0), (t1, b1) in zip(zip(times, blocks), zip(times[1:], blocks[1:])):
        if b1 == b0:
            assert t1 <= t0 * (1 + 1e-12)


def test_pipelined_copies_beat_synchronous_ones():
    k = _mm(st=3)
    sync = _sim(k, dataclasses.replace(get_profile("numba_tc"), async_copy=False))
    assert _sim(k).time_s < sync.time_s


def test_one_stage_is_synchronous():
    """num_stages=1: the backend keeps plain loads (no cp.async): no async copies in the model either."""
    from hwmodels import load
    from tilesim.analysis import analyze
    prog, = analyze(_mm(2048, 2048, 2048, st=1).prim_func, load(HW), "numba_tc")
    assert not prog.has_async_copies
    prog3, = analyze(_mm(2048, 2048, 2048, st=3).prim_func, load(HW), "numba_tc")
    assert prog3.has_async_copies


def test_registers_set_occupancy():
    """More registers per thread (a larger warp tile) -> fewer resident blocks; the 128x128 tile at 128 threads
    lands where the driver put it (246 registers, 2 blocks/SM on the H200, run 9), the 64x64 tile gets more."""
    big, small = _sim(_mm(bm=128, bn=128)), _sim(_mm(bm=64, bn=64))
    rb, rs = big.launches[0]["registers_per_thread"], small.launches[0]["registers_per_thread"]
    assert rb > rs and big.blocks_per_core < small.blocks_per_core
    assert big.blocks_per_core == 2
    prof = get_profile("numba_tc")
    more = dataclasses.replace(prof, mma_register_overhead_per_thread=prof.mma_register_overhead_per_thread + 64)
    r2 = _sim(_mm(bm=64, bn=64), more)
    assert r2.launches[0]["registers_per_thread"] > rs and r2.blocks_per_core < small.blocks_per_core


def test_warp_cpi_slows_the_mma_stream():
    prof = get_profile("numba_tc")
    k = _mm()
    slow = _sim(k, dataclasses.replace(prof, warp_cpi=prof.warp_cpi * 2))
    assert slow.time_s > _sim(k).time_s


def test_other_profiles_ignore_the_new_fields():
    """``tensorcore`` and ``numba`` leave every numba_tc field off (their results stay bit-identical)."""
    for name in ("tensorcore", "numba"):
        p = get_profile(name)
        assert not (p.cp_async or p.mma_sync_issue or p.mma_operand_registers)
        assert p.warp_cpi == 0 and p.cp_async_chunk_instr == 0 and p.mma_register_overhead_per_thread == 0


def test_split_is_disjoint_and_holdout_is_new():
    sys.path.insert(0, ROOT)
    from benchmarks import numba_tc_holdout as H
    train, held = H.split_rows()
    assert len(held) >= 20 and len(set(held)) == len(held)
    train_names = {t.split(":", 1)[1] for t in train}
    assert not train_names & set(held)
    # no held-out (shape, configuration) was timed in any earlier measurement file, whatever the row's name

    import glob
    import json

    def key(shape, cfg, trans_b=False):  # gpu_run.py times B stored (K, N) only: trans_B is a different kernel
        return tuple(shape), tuple(sorted((k, v) for k, v in (cfg or {}).items() if k != "async_copy")), trans_b
    earlier = set()
    for f in glob.glob(os.path.join(ROOT, "reports", "measurements", "numba_h200_*.json")):
        earlier |= {key(r["shape"], r.get("config")) for r in json.load(open(f)).get("bench", []) if "shape" in r}
    assert len(earlier) > 30
    assert not earlier & {key(c["shape"], c["config"], c.get("trans_B", False)) for c in H.CONFIGS}
    # the second set is new against everything before it, the first set included
    first = {key(c["shape"], c["config"], c.get("trans_B", False)) for c in H.CONFIGS}
    second = [key(c["shape"], c["config"], c.get("trans_B", False)) for c in H.CONFIGS_2]
    assert len(H.CONFIGS_2) >= 20 and len(set(second)) == len(second)
    assert not (earlier | first) & set(second)
    assert not {c["name"] for c in H.CONFIGS} & {c["name"] for c in H.CONFIGS_2}
    # the third set (docs/simulator.md §6d): new against every earlier file and both earlier sets, both lowerings
    third = [key(c["shape"], c["config"], c.get("trans_B", False)) for c in H.CONFIGS_3]
    assert len(H.CONFIGS_3) >= 15 and len(set(third)) == len(third)
    assert not (earlier | first | set(second)) & set(third)
    assert sum(bool(c.get("wgmma")) for c in H.CONFIGS_3) >= 6 and sum(not c.get("wgmma") for c in H.CONFIGS_3) >= 6


def test_harness_list_runs_on_cpu():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "numba_tc_holdout.py"), "--list"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "HELD-OUT set 1 (26)" in r.stdout and "TRAIN (20)" in r.stdout
    r2 = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "numba_tc_holdout.py"), "--list", "--set", "2"],
                        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r2.returncode == 0 and "HELD-OUT set 2 (24)" in r2.stdout  # 22 held out + 2 anchors
