"""Register spills that stay in L1 (``spill_l1``, ``sim/registers.with_spills``, 2026-12-02).

An fp8 GEMM's promoted accumulator (``acc += partial * scale`` on CUDA cores, beside a 128-register
wgmma fragment) spills ~34 registers per thread at 128 threads; those bytes live in the L1 that the
block's shared memory leaves of the combined array, not in L2. A spilled wgmma accumulator (256×128
bf16 tile at 128 threads) keeps the L2 cost and the serialisation factor.
"""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hwmodels
from kernels.fp8_gemm import fp8_gemm
from tests import core_kernels as K
from tilesim.analysis import get_profile
from tilesim.sim import simulate_kernel
from tilesim.sim.machine import Machine
from tilesim.sim.registers import l1_free_bytes

H200 = "h200_sxm_141gb"
TC = get_profile("tensorcore")
NO_L1 = dataclasses.replace(TC, spill_l1=False)


def _hw_l1(nbytes):
    hw = hwmodels.load(H200)
    caches = tuple(dataclasses.replace(c, bytes=nbytes) if c.name == "l1" else c for c in hw.caches)
    return dataclasses.replace(hw, caches=caches)


def test_h200_has_a_per_core_l1_level_that_shared_memory_carves():
    m = Machine(hwmodels.load(H200), TC)
    assert l1_free_bytes(m, 1, 160 * 1024) == 96 * 1024
    assert l1_free_bytes(m, 2, 160 * 1024) == 0.0


def test_promoted_fp8_accumulator_spills_to_l1_not_l2():
    k = fp8_gemm(4096, 7168, 2048, block_M=128, block_N=128, num_stages=4, threads=128)
    r = simulate_kernel(k, hw=H200)
    spilled = r.launches[0]["spill_registers_per_thread"]
    assert spilled > 0
    local = r.bytes["registers<->local"]
    # one store + one reload per spilled register, hot-loop iteration and thread: no serialisation factor
    blocks, iters = r.blocks, 2048 // 128
    assert local == pytest.approx(2 * spilled * 4 * 128 * blocks * iters, rel=1e-6)
    old = simulate_kernel(k, hw=H200, profile=NO_L1)
    # before: the spill bytes, times the serialisation factor, were L2 requests; now none are
    assert old.bytes["registers<->local"] == pytest.approx(TC.spill_traffic_factor * local)
    assert r.bytes["l2"] == pytest.approx(old.bytes["l2"] - old.bytes["registers<->local"])
    assert r.time_s < 0.5 * old.time_s


def test_spills_go_to_l2_when_the_free_l1_is_too_small():
    k = fp8_gemm(4096, 7168, 2048, block_M=128, block_N=128, num_stages=4, threads=128)
    # 4 stages of 128x128 fp8 A and B tiles + the bf16 C tile: 160 KiB of shared memory; 170 KiB of array
    # leaves 10 KiB, under the 17 KiB that 34 registers x 128 threads need
    small = simulate_kernel(k, hw=_hw_l1(170 * 1024))
    assert small.time_s == pytest.approx(simulate_kernel(k, hw=H200, profile=NO_L1).time_s)


def test_a_spilled_wgmma_accumulator_keeps_the_l2_cost():
    gemm = K.matmul_relu(4096, 4096, 4096, block_M=256, block_N=128, block_K=32, num_stages=3, threads=128)
    r = simulate_kernel(gemm, hw=H200)
    assert r.launches[0]["spill_registers_per_thread"] > 0
    assert r.time_s == pytest.approx(simulate_kernel(gemm, hw=H200, profile=NO_L1).time_s)


@settings(max_examples=6, deadline=None)
@given(st.integers(300, 3000), st.integers(200, 2000), st.integers(1, 4), st.sampled_from([140, 200, 256]))
def test_more_free_l1_never_slows_a_spilling_kernel(m, n, kb, l1_kib):
    # shapes the 128x128 tiles do not divide; K a few 128-wide scale blocks (the last one partial)
    k = fp8_gemm(m, n, 128 * kb - 37, block_M=128, block_N=128, num_stages=4, threads=128)
    t_small = simulate_kernel(k, hw=_hw_l1(l1_kib * 1024)).time_s
    t_big = simulate_kernel(k, hw=_hw_l1(l1_kib * 1024 + 64 * 1024)).time_s
    assert t_big <= t_small * (1 + 1e-9)
    assert t_big <= simulate_kernel(k, hw=H200, profile=NO_L1).time_s * (1 + 1e-9)
