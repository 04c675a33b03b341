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
from tilesim.analysis import analyze, get_profile
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


# ---------------------------------------------------------------------------------------------------------------
# The per-block critical path with physical step latencies (profile ``chain_latency``, on in ``tensorcore`` since
# the sixth set, docs/simulator.md §3h, §3k) and single-stage pipelined loops as synchronous loads (``single_stage_sync``).


@tilesim.jit(out_idx=[1])
def row_max_rounds(M, E, block_T, threads, rounds):
    """``rounds`` serial passes of a row max over ``block_T × E`` (a top-k selection's shape): every pass's
    all-reduce depends on the previous one through ``b``."""

    @T.prim_func
    def main(X: T.Tensor((M, E), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_T), threads=threads) as bx:
            b = T.alloc_fragment((block_T, E), "float32")
            mx = T.alloc_fragment((block_T,), "float32")
            T.copy(X[bx * block_T, 0], b)
            for _ in T.serial(rounds):
                T.reduce_max(b, mx, dim=1)
                for i, e in T.Parallel(block_T, E):
                    b[i, e] = T.if_then_else(b[i, e] == mx[i], -T.infinity("float32"), b[i, e])
            T.copy(mx, Y[bx * block_T])
    return main


def _chain_floor(rounds, block_T, E, threads):
    """``rounds`` × rows in sequence × steps × (shared-memory latency + a dependent ALU op), in seconds."""
    hw = hwmodels.load(H200)
    smem = next(b for b in hw.core_kinds[0].buffers if "shared" in b.scopes)
    P = min(threads, E // 4)  # the flat layout: 16 bytes of a row per thread
    seq = block_T * P / threads
    steps = P.bit_length() - 1
    return rounds * seq * steps * (smem.latency_cycles + 4.0) / hw.clocks["core_hz"]


@settings(max_examples=10, deadline=None)
@given(rounds=st.integers(1, 40), block_T=st.sampled_from([4, 8, 16]), threads=st.sampled_from([128, 256]))
def test_chain_bound_holds_the_serial_reductions_at_physical_latency(rounds, block_T, threads):
    kern = row_max_rounds(block_T * 100 + 3, 256, block_T, threads, rounds)  # 101 blocks: one wave
    on = simulate_kernel(kern, H200, dataclasses.replace(TC, chain_latency=True)).time_s
    off = simulate_kernel(kern, H200, dataclasses.replace(TC, chain_latency=False)).time_s
    assert on >= off * (1 - 1e-9)
    assert on >= _chain_floor(rounds, block_T, 256, threads)


def test_chain_bound_exceeds_the_fitted_step_on_a_latency_bound_launch():
    kern = row_max_rounds(16 * 100, 256, 16, 256, 64)
    on = simulate_kernel(kern, H200, dataclasses.replace(TC, chain_latency=True)).time_s
    off = simulate_kernel(kern, H200, dataclasses.replace(TC, chain_latency=False)).time_s
    assert on > 1.5 * off  # the fitted 10-cycle step hides what one block alone waits for


@tilesim.jit(out_idx=[2])
def tiled_sum(M, K, block_K, stages):
    """``C[m] = sum_k A[m, k]`` through a shared tile, ``T.Pipelined`` with ``stages``."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), Dummy: T.Tensor((1,), "float32"), C: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, 64), threads=128) as bx:
            a_s = T.alloc_shared((64, block_K), "float16")
            acc = T.alloc_fragment((64, block_K), "float32")
            s = T.alloc_fragment((64,), "float32")
            T.fill(acc, 0)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
                T.copy(A[bx * 64, k * block_K], a_s)
                for i, j in T.Parallel(64, block_K):
                    acc[i, j] += a_s[i, j]
            T.reduce_sum(acc, s, dim=1)
            T.copy(s, C[bx * 64])
    return main


def _kinds(kern, profile):
    (prog,) = analyze(kern.prim_func, hwmodels.load(H200), profile)
    out = []

    def walk(nodes):
        for n in nodes:
            if hasattr(n, "body"):
                walk(n.body)
            elif n.label.startswith("copy A"):
                out.append(n.kind)
    walk(prog.body)
    return out


def test_single_stage_pipelined_copies_are_synchronous_loads():
    sync = dataclasses.replace(TC, single_stage_sync=True)
    assert _kinds(tiled_sum(256, 1000, 64, 1), sync) == ["load"]  # K = 1000: the tile does not divide it
    assert _kinds(tiled_sum(256, 1000, 64, 2), sync) == ["async"]
    assert _kinds(tiled_sum(256, 1000, 64, 1), TC) == ["async"]  # off in tensorcore (§3h)
