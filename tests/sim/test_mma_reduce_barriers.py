"""Issue 15 (2026-12-02): reductions of MMA accumulators over their rows, and barriers costed per warp.

* A ``T.reduce_*`` of a gemm accumulator (``tensorcore``: ``row_stat_layout="mma"``) is shared by the
  threads the MMA layout spreads the reduced elements over: 4 lanes for a reduction over the columns,
  up to 8 lane groups x the warps holding the rows for one over rows (a ``T.reshape`` view that splits
  the rows, as in the DSA indexer's per-head sum); butterfly steps across warps pay two barriers each.
* A barrier costs ``overheads.sync_cycles`` (a 1024-thread measurement) times warps / 32.
"""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hwmodels
import tilesim
import tilesim.language as T
from tilesim.analysis import analyze, get_profile
from tilesim.analysis.program import Loop
from tilesim.sim import simulate_kernel
from tilesim.sim.engine import BlockModel
from tilesim.sim.machine import Machine

H200 = "h200_sxm_141gb"
TC = get_profile("tensorcore")


@tilesim.jit(out_idx=[3])
def head_sum(S, heads, block_M, block_N, threads, over_rows=True):
    """``Out[i, n] = sum_h relu(Q[i, h, :] . K[n, :])`` (rows = block_M x heads), or, with
    ``over_rows=False``, the sum over the keys of each (query, head) row."""
    rows = block_M * heads

    @T.prim_func
    def main(Q: T.Tensor((S * heads, 64), "float16"), Kt: T.Tensor((S, 64), "float16"),
             W: T.Tensor((S,), "float32"), Out: T.Tensor((S, S), "float32")):
        with T.Kernel(T.ceildiv(S, block_M), threads=threads) as bx:
            q = T.alloc_shared((rows, 64), "float16")
            k = T.alloc_shared((block_N, 64), "float16")
            s = T.alloc_fragment((rows, block_N), "float32")
            out = T.alloc_fragment((block_M, block_N), "float32")
            rs = T.alloc_fragment((rows,), "float32")
            T.copy(Q[bx * rows, 0], q)
            for kt in T.Pipelined(T.ceildiv(S, block_N), num_stages=2):
                T.copy(Kt[kt * block_N, 0], k)
                T.gemm(q, k, s, transpose_B=True, clear_accum=True)
                if over_rows:
                    s3 = T.reshape(s, (block_M, heads, block_N))
                    T.reduce_sum(s3, out, dim=1)
                    T.copy(out, Out[bx * block_M, kt * block_N])
                else:
                    T.reduce_sum(s, rs, dim=1)
                    for i in T.Parallel(block_M):
                        W[bx * block_M + i] = rs[i * heads]
    return main


def _reduce_op(kern, profile=TC):
    (prog,) = analyze(kern.prim_func, hwmodels.load(H200), profile)

    def walk(body):
        for n in body:
            if isinstance(n, Loop):
                yield from walk(n.body)
            elif n.label.startswith("reduce_"):
                yield n
    (op,) = list(walk(prog.body))
    return op


def test_per_head_sum_of_a_wgmma_accumulator_crosses_all_four_warps():
    # 256 rows (4 queries x 64 heads) x 64 keys at 128 threads: a 64-row head group is one wgmma slab,
    # held by 8 lane groups x 4 warps = 32 threads; 256 outputs x 32 / 128 = 64 outputs per thread, each a
    # butterfly of log2(32) = 5 steps, 2 of them (offsets 32, 64) through shared memory behind 2 barriers
    op = _reduce_op(head_sum(512, 64, 4, 64, 128))
    assert op.syncs == 64 * 2 * 2
    assert op.latency_cycles == pytest.approx(64 * 5 * TC.reduce_step_cycles)


@settings(max_examples=12, deadline=None)
@given(st.sampled_from([16, 32, 64]), st.sampled_from([1, 2, 4]), st.sampled_from([32, 64, 128]))
def test_row_reduction_barriers_follow_the_warps_holding_a_head_group(heads, block_M, block_N):
    # (block_M * heads) rows at 128 threads (4 warps, 16-row tiles): a group of `heads` rows spans
    # heads / 16 warps; only those steps go through shared memory
    if block_M * heads < 64:  # one wgmma slab at least
        block_M = 64 // heads
    op = _reduce_op(head_sum(640, heads, block_M, block_N, 128))
    warps = min(4, heads // 16)
    P = 8 * warps
    seq = block_M * block_N * P / 128
    smem_steps = {1: 0, 2: 1, 4: 2}[warps]
    assert op.syncs == pytest.approx(seq * 2 * smem_steps)


def test_row_statistic_over_the_columns_stays_within_a_warp():
    op = _reduce_op(head_sum(512, 64, 4, 64, 128, over_rows=False))
    assert op.syncs == 0
    assert op.latency_cycles == pytest.approx(256 * 4 / 128 * 2 * TC.reduce_step_cycles)  # 4 lanes: 2 steps


@pytest.mark.parametrize("threads", [32, 64, 128, 256, 512, 1024])
def test_barrier_cost_is_proportional_to_the_arriving_warps(threads):
    hw = hwmodels.load(H200)
    m = Machine(hw, TC)
    bm = BlockModel(m, 1e12, 1e12, threads)
    assert bm.sync_s == pytest.approx(m.sync_s * threads / 1024)
    off = Machine(hw, dataclasses.replace(TC, barrier_per_warp=False))
    assert BlockModel(off, 1e12, 1e12, threads).sync_s == pytest.approx(off.sync_s)


def test_cheaper_barriers_never_make_a_kernel_slower():
    k = head_sum(1024, 64, 4, 64, 128)
    on = simulate_kernel(k, hw=H200).time_s
    off = simulate_kernel(k, hw=H200, profile=dataclasses.replace(TC, barrier_per_warp=False)).time_s
    assert on < off


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 40), st.sampled_from([128, 256, 1000]))
def test_one_more_short_block_never_speeds_up_a_little_bound_launch(m, n):
    # under the Little's-law bound of synchronous loads, each core's bytes in flight set its own DRAM
    # rate: a block of one row on one more core must not lower the others' DRAM time (softmax 16 -> 17)
    from tests import core_kernels as K
    t0 = simulate_kernel(K.softmax(m, n), hw=H200).time_s
    t1 = simulate_kernel(K.softmax(m + 1, n), hw=H200).time_s
    assert t1 >= t0 * (1 - 1e-9)


@tilesim.jit(out_idx=[1])
def row_broadcast(M, N, block_M, threads):
    """``Y[i, :] = s[i]``: a few bytes loaded per block, a whole row block stored."""
    @T.prim_func
    def main(S: T.Tensor((M,), "float16"), Y: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            s = T.alloc_fragment((block_M,), "float16")
            y = T.alloc_fragment((block_M, N), "float16")
            T.copy(S[bx * block_M], s)
            for i, j in T.Parallel(block_M, N):
                y[i, j] = s[i]
            T.copy(y, Y[bx * block_M, 0])
    return main


@tilesim.jit(out_idx=[1])
def row_copy(M, N, block_M, threads):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float16"), Y: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), "float16")
            T.copy(X[bx * block_M, 0], x)
            T.copy(x, Y[bx * block_M, 0])
    return main


@settings(max_examples=6, deadline=None)
@given(st.sampled_from([8192, 30000]), st.sampled_from([128, 256]))
def test_littles_law_bounds_loads_not_stores(m, threads):
    # a DRAM latency under load 20x the unloaded one: loads (bytes in flight / latency) slow down a
    # copy; a launch that loads 8 bytes per block and stores rows is not held to its loads' bytes in flight
    # (stores wait for no data)
    from tilesim.sim import simulate
    from tilesim.sim.validation import apply_overrides
    hw = hwmodels.load(H200)
    slow = apply_overrides(hw, {"memory.loaded_latency_cycles": 20 * hw.memory_latency_cycles})
    f = row_broadcast(m, 1024, 4, threads).prim_func
    c = row_copy(m, 1024, 4, threads).prim_func
    # its 8-byte loads: one loaded round trip per wave of resident blocks, not the stored rows' bytes
    one_latency = 20 * hw.memory_latency_cycles / hw.clock_hz()
    fast = simulate(f, hw, "tensorcore")
    waves = -(-fast.launches[0]["blocks"] // (132 * fast.launches[0]["blocks_per_core"]))
    assert simulate(f, slow, "tensorcore").time_s <= fast.time_s + 1.01 * waves * one_latency
    assert simulate(c, slow, "tensorcore").time_s > simulate(c, hw, "tensorcore").time_s


def test_spill_factor_only_for_an_accumulator_carried_across_the_loop():
    # a 512 x 64 fp32 accumulator at 128 threads (256 registers per thread) spills in both kernels; the
    # GEMM's K loop carries it (spilling it serialises the MMAs: spill_traffic_factor), the per-head sum
    # clears it every key tile (one store and one reload per spilled register)
    from tests import core_kernels as K
    more = dataclasses.replace(TC, spill_traffic_factor=4 * TC.spill_traffic_factor)
    heads = head_sum(2048, 64, 8, 64, 128)
    r = simulate_kernel(heads, hw=H200)
    assert r.launches[0]["spill_registers_per_thread"] > 0
    assert simulate_kernel(heads, hw=H200, profile=more).time_s == pytest.approx(r.time_s)
    gemm = K.matmul_relu(4096, 4096, 4096, block_M=256, block_N=128, block_K=32, num_stages=3, threads=128)
    g = simulate_kernel(gemm, hw=H200)
    assert g.launches[0]["spill_registers_per_thread"] > 0
    assert simulate_kernel(gemm, hw=H200, profile=more).time_s > 1.5 * g.time_s
