"""Issue 15 (2026-12-02, helper AJ; docs/simulator.md §3h): serial block launches per core.

A core starts its blocks one at a time (``overheads.block_launch_cycles`` is a measured rate: empty blocks'
kernel time × SM clock × SMs / blocks), so with the ``tensorcore`` profile's ``serial_block_launch`` a launch
of many tiny blocks takes at least ``blocks / cores × block_launch`` however many blocks are resident.
"""

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

import hwmodels
import tilesim
import tilesim.language as T
from tilesim.analysis import get_profile
from tilesim.sim import simulate_kernel

H200 = "h200_sxm_141gb"
TC = get_profile("tensorcore")


@tilesim.jit(out_idx=[1])
def scale_rows(M, N, block_M, threads):
    """``Y = 2 X`` in ``block_M × N`` tiles: one tiny block per tile."""

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            T.copy(X[bx * block_M, 0], x)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * 2.0
            T.copy(x, Y[bx * block_M, 0])
    return main


def _launch_floor(blocks):
    hw = hwmodels.load(H200)
    cores = hw.core_kinds[0].count
    return blocks / cores * hw.overheads.block_launch_cycles / hw.clocks["core_hz"]


def test_tiny_blocks_pay_their_launches_one_after_another():
    M = 65536 * 2
    kern = scale_rows(M, 32, 2, 64)
    rep = simulate_kernel(kern, H200, TC)
    off = simulate_kernel(kern, H200, dataclasses.replace(TC, serial_block_launch=False))
    floor = _launch_floor(M // 2)
    assert rep.time_s >= floor  # 65536 blocks: about 40 us of launches on 132 SMs
    assert off.time_s < 0.5 * floor  # the old model: 32 resident blocks launched in parallel
    assert rep.bound.startswith("block launches")


@settings(max_examples=15, deadline=None)
@given(rows=st.integers(1, 3000), block_M=st.sampled_from([1, 2, 4, 8]), threads=st.sampled_from([64, 128]))
def test_launch_floor_and_monotone_in_blocks(rows, block_M, threads):
    M = rows * 7 + 3  # a block count the tile does not divide evenly
    kern = scale_rows(M, 64, block_M, threads)
    t = simulate_kernel(kern, H200, TC).time_s
    blocks = -(-M // block_M)
    assert t >= _launch_floor(blocks)
    more = simulate_kernel(scale_rows(M + 64 * block_M, 64, block_M, threads), H200, TC).time_s
    assert more >= t * (1 - 1e-9)
