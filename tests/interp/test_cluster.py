"""Thread-block clusters on the interpreter: ``T.ClusterKernel`` (blocks of a cluster run together, in every
mode), ``T.block_rank_in_cluster``, arrivals on another block's barrier, the 2-CTA tcgen05 gemm and its
``arrive_2cta`` commits; deadlocks and shape errors as located ``KernelError``; the CUDA lowering, the CPU
target and the simulator on cluster launches. Also ``T.assume`` and ``T.PersistentTileScheduler``."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim as tilelang
import tilesim.language as T
from tilesim.analysis import analyze
from tilesim.backends.interp import InterpOptions, runtime
from tilesim.errors import KernelError, KernelRuntimeError, KernelSyntaxError, KernelTypeError
from tilesim.ir import nodes as N
from tilesim.ir.printer import format_ir
from tilesim.kernel import JITKernel

SERIAL = InterpOptions(mode="serial")


def _run(k, *args, mode="batched"):
    return k(*args) if mode == "batched" else k.run(*args, options=SERIAL)


# --------------------------------------------------------------------------------------- block ranks
@tilelang.jit(out_idx=[-1])
def ranks(gx, gy, cluster, use_cluster_kernel=True):
    @T.prim_func
    def main(R: T.Tensor((gy, gx), "int32")):
        if use_cluster_kernel:
            with T.ClusterKernel(gx, gy, threads=32, cluster_dims=cluster) as (bx, by):
                R[by, bx] = T.block_rank_in_cluster()
        else:
            with T.Kernel(gx, gy, threads=32) as (bx, by):
                R[by, bx] = T.block_rank_in_cluster()

    return main


@pytest.mark.parametrize("mode", ["batched", "serial"])
@pytest.mark.parametrize("cluster", [2, (2, 1), (1, 3), (2, 3, 1), (4, 3)])
def test_block_rank_is_the_position_in_the_cluster(cluster, mode):
    c = (cluster,) if isinstance(cluster, int) else cluster
    cx, cy = (tuple(c) + (1, 1))[:2]
    gx, gy = 4 * cx, 2 * cy
    R = _run(ranks(gx, gy, cluster), mode=mode)
    by, bx = np.indices((gy, gx))
    np.testing.assert_array_equal(R, bx % cx + cx * (by % cy))


def test_block_rank_outside_a_cluster_launch_is_zero_and_cluster_one_is_no_cluster():
    np.testing.assert_array_equal(ranks(3, 2, None, use_cluster_kernel=False)(), np.zeros((2, 3)))
    np.testing.assert_array_equal(ranks(3, 2, 1)(), np.zeros((2, 3)))
    launch = next(s for s in ranks(4, 2, 2).prim_func.body if isinstance(s, N.Launch))
    assert launch.annotation("cluster") == (2, 1, 1)
    assert "cluster=(2, 1, 1)" in format_ir(ranks(4, 2, 2).prim_func)


# --------------------------------------------------------------------------------- remote arrivals
@tilelang.jit(out_idx=[-1])
def gather_arrivals(n_clusters, size, count_per_block=64, target=0, waiter=0):
    """Every block's warp 0..1 arrives on block ``target`` of its cluster; block ``waiter`` waits there (so the
    wait completes only with the other blocks' arrivals) and then writes its cluster's phase."""

    @T.prim_func
    def main(Out: T.Tensor((n_clusters * size,), "int32")):
        with T.ClusterKernel(n_clusters * size, threads=128, cluster_dims=size) as bx:
            bar = T.alloc_cluster_barrier([count_per_block * size])
            tx = T.get_thread_binding()
            rank = T.block_rank_in_cluster()
            Out[bx] = -1
            if tx < 64:
                T.mbarrier_arrive(bar[0], target)
            elif rank == waiter:
                T.mbarrier_wait_parity(bar[0], 0)
                Out[bx] = rank + 100

    return main


@pytest.mark.parametrize("mode", ["batched", "serial"])
@pytest.mark.parametrize("size", [2, 4])
def test_arrivals_from_every_block_of_the_cluster_complete_a_peer_barrier(size, mode):
    out = _run(gather_arrivals(3, size), mode=mode)
    want = np.full(3 * size, -1)
    want[::size] = 100
    np.testing.assert_array_equal(out, want)


def test_a_wait_that_the_cluster_cannot_complete_is_a_located_deadlock():
    with pytest.raises(KernelRuntimeError, match=r"deadlock: .*bar\[0\] waited for parity 0 .*128 of 192 arrivals") as e:
        gather_arrivals(2, 2, count_per_block=96)()
    assert e.value.loc is not None and e.value.loc.file == __file__


def test_arrivals_on_a_block_that_does_not_wait_leave_the_waiter_deadlocked():
    with pytest.raises(KernelRuntimeError, match="deadlock"):
        gather_arrivals(1, 2, target=1, waiter=0)()


def test_a_cta_id_outside_the_cluster_is_an_error():
    @tilelang.jit
    def f(cta):
        @T.prim_func
        def main(A: T.Tensor((4,), "int32")):
            with T.ClusterKernel(4, threads=32, cluster_dims=2) as bx:
                bar = T.alloc_cluster_barrier([32])
                T.mbarrier_arrive(bar[0], cta + A[bx] * 0)
        return main

    with pytest.raises(KernelRuntimeError, match=r"cta_id 2 is not a block of the cluster \(ranks 0..1\)") as e:
        f(2)(np.zeros(4, np.int32))
    assert e.value.loc.file == __file__


# --------------------------------------------------------------------------------------- 2-CTA gemm
@tilelang.jit
def gemm_2cta(A, B, block_M, block_N, block_K, stages, trans_b=False, clear_const=False, cluster=2, var_stage=False):
    M, N, K = T.const("M, N, K")
    k_iters = T.ceildiv(K, block_K)
    A: T.Tensor[[M, K], T.float16]
    B: T.Tensor[[N, K] if trans_b else [K, N], T.float16]
    C = T.empty((M, N), "float32")
    with T.ClusterKernel(T.ceildiv(M, block_M), T.ceildiv(N, block_N), threads=128, cluster_dims=cluster) as (bx, by):
        a_s = T.alloc_shared((stages, block_M, block_K), "float16")
        b_s = T.alloc_shared((stages, block_N // 2, block_K) if trans_b else (stages, block_K, block_N // 2), "float16")
        c_t = T.alloc_tmem([block_M, block_N], "float32")
        c_l = T.alloc_fragment((block_M, block_N), "float32")
        loaded = T.alloc_cluster_barrier([32 * 2] * stages)
        consumed = T.alloc_cluster_barrier([1] * stages)
        full = T.alloc_barrier([1])
        tx = T.get_thread_binding()
        cta = T.block_rank_in_cluster()
        T.assume(cta < 2)
        n0 = (by * 2 + cta) * block_N // 2
        if tx < 32:
            for k in T.serial(k_iters):
                T.mbarrier_wait_parity(consumed[k % stages], ((k // stages) & 1) ^ 1)
                T.tma_copy(A[bx * block_M:(bx + 1) * block_M, k * block_K:(k + 1) * block_K], a_s[k % stages, :, :],
                           barrier=loaded[k % stages])
                if trans_b:
                    T.tma_copy(B[n0:n0 + block_N // 2, k * block_K:(k + 1) * block_K], b_s[k % stages, :, :],
                               barrier=loaded[k % stages])
                else:
                    T.tma_copy(B[k * block_K:(k + 1) * block_K, n0:n0 + block_N // 2], b_s[k % stages, :, :],
                               barrier=loaded[k % stages])
                T.mbarrier_arrive(loaded[k % stages], 0)
        elif cta == 0 and tx < 64:
            ph = T.alloc_var(T.int32, init=0)  # a per-thread stage counter: only the issuing block sets it
            for k in T.serial(k_iters):
                T.mbarrier_wait_parity(loaded[k % stages], (k // stages) & 1)
                if var_stage:
                    T.tcgen05_gemm(a_s[ph % stages, :, :], b_s[ph % stages, :, :], c_t, transpose_B=trans_b,
                                   mbar=consumed[ph % stages], clear_accum=k == 0, use_2cta=True)
                    ph = ph + 1
                elif clear_const:
                    if k == 0:
                        T.tcgen05_gemm(a_s[k % stages, :, :], b_s[k % stages, :, :], c_t, transpose_B=trans_b,
                                       mbar=consumed[k % stages], clear_accum=True, use_2cta=True)
                    else:
                        T.tcgen05_gemm(a_s[k % stages, :, :], b_s[k % stages, :, :], c_t, transpose_B=trans_b,
                                       mbar=consumed[k % stages], use_2cta=True)
                else:
                    T.tcgen05_gemm(a_s[k % stages, :, :], b_s[k % stages, :, :], c_t, transpose_B=trans_b,
                                   mbar=consumed[k % stages], clear_accum=k == 0, use_2cta=True)
            T.tcgen05_mma_arrive(full, arrive_2cta=True)
        T.mbarrier_wait_parity(full, 0)
        T.copy(c_t, c_l)
        T.copy(c_l, C[bx * block_M, by * block_N])
    return C


def _pair_case(m, n, k, trans_b, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.integers(-3, 4, (m, k)).astype(np.float16)
    B = rng.integers(-3, 4, (n, k) if trans_b else (k, n)).astype(np.float16)
    want = A.astype(np.float32) @ (B.T if trans_b else B).astype(np.float32)
    return A, B, want


@pytest.mark.parametrize("mode", ["batched", "serial"])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("clear_const", [False, True])
def test_2cta_gemm_computes_each_blocks_rows_against_the_pairs_whole_b(trans_b, clear_const, mode):
    A, B, want = _pair_case(100, 90, 70, trans_b)  # 4 x 2 blocks of 32 x 64; tiles do not divide; 3 K steps
    k, ins = gemm_2cta.specialize(A, B, 32, 64, 32, 2, trans_b, clear_const)
    C = k(*ins) if mode == "batched" else k.run(*ins, options=SERIAL)
    np.testing.assert_array_equal(np.asarray(C), want)  # small integers: exact


@pytest.mark.parametrize("mode", ["batched", "serial"])
def test_2cta_gemm_addresses_are_the_issuing_blocks(mode):
    """The stage index lives in a variable only the issuing block's thread sets: the peer's operands and C are
    read and written at the issuer's addresses (the other block's copy of the variable is never set)."""
    A, B, want = _pair_case(128, 128, 96, False)
    k, ins = gemm_2cta.specialize(A, B, 32, 64, 32, 2, False, False, 2, True)
    C = k(*ins) if mode == "batched" else k.run(*ins, options=SERIAL)
    np.testing.assert_array_equal(np.asarray(C), want)


@settings(max_examples=12, deadline=None)
@given(mc=st.integers(1, 3), nb=st.integers(1, 3), k=st.integers(1, 80), stages=st.integers(1, 3),
       trans_b=st.booleans())
def test_2cta_gemm_shapes(mc, nb, k, stages, trans_b):
    m, n = 2 * 16 * mc - 5, 32 * nb - 3  # two 16-row blocks per cluster, 32-column tiles; partial edges
    A, B, want = _pair_case(m, n, k, trans_b, seed=mc * 131 + nb * 17 + k)
    C = gemm_2cta(A, B, 16, 32, 16, stages, trans_b)
    np.testing.assert_array_equal(np.asarray(C), want)


def test_2cta_gemm_needs_clusters_of_two():
    A, B, _ = _pair_case(64, 64, 32, False)
    with pytest.raises(KernelTypeError, match="spreads the work over the two blocks of a cluster, but this launch "
                                              "has clusters of 4 blocks") as e:
        gemm_2cta(A, B, 16, 64, 32, 1, False, False, 4)
    assert e.value.loc.file == __file__ and e.value.hint


def test_2cta_gemm_prints_its_pair_flags():
    k, _ = gemm_2cta.specialize(*_pair_case(64, 64, 32, False)[:2], 32, 64, 32, 1)
    text = format_ir(k.prim_func)
    assert "use_2cta=True" in text and "arrive_2cta=True" in text
    assert "T.barrier_arrive(loaded[" in text and ", 0)" in text


# ------------------------------------------------------------------------------------- shape errors
def _bad(case):
    @tilelang.jit
    def f():
        @T.prim_func
        def main(A: T.Tensor((8,), "int32"), n: T.int32):
            if case == "grid-not-multiple":
                with T.ClusterKernel(5, threads=32, cluster_dims=2) as bx:
                    A[bx] = 0
            elif case == "symbolic-grid-not-multiple":
                with T.ClusterKernel(n, threads=32, cluster_dims=2) as bx:
                    A[bx] = 0
            elif case == "cluster-past-grid":
                with T.ClusterKernel(4, threads=32, cluster_dims=(1, 2)) as bx:
                    A[bx] = 0
            elif case == "cluster-dims-type":
                with T.ClusterKernel(4, threads=32, cluster_dims=(2, 0)) as bx:
                    A[bx] = 0
            elif case == "rank-outside":
                A[0] = T.block_rank_in_cluster()
            elif case == "cta-static":
                with T.ClusterKernel(4, threads=32, cluster_dims=2):
                    bar = T.alloc_cluster_barrier([1])
                    T.mbarrier_arrive(bar[0], 3)
            elif case == "arrive-2cta-no-cluster":
                with T.Kernel(4, threads=32):
                    bar = T.alloc_barrier([1])
                    T.tcgen05_mma_arrive(bar[0], arrive_2cta=True)
            elif case == "assume-false":
                with T.Kernel(4, threads=32) as bx:
                    T.assume(bx < 3)
                    A[bx] = 1

        return main

    return f


@pytest.mark.parametrize("case, cls, text", [
    ("grid-not-multiple", KernelTypeError, "grid extent 5 of dimension 0 is not a multiple of the cluster extent 2"),
    ("symbolic-grid-not-multiple", KernelRuntimeError, "grid extent 7 of dimension 0 is not a multiple of the "
                                                       "cluster extent 2"),
    ("cluster-past-grid", KernelTypeError, "groups blocks along grid dimension 1, but the grid has 1 dimension"),
    ("cluster-dims-type", KernelTypeError, "cluster_dims must be a positive Python int or 1 to 3 of them"),
    ("rank-outside", KernelSyntaxError, "T.block_rank_in_cluster() outside `with T.ClusterKernel(...)`"),
    ("cta-static", KernelTypeError, "cta_id 3 is not a block of the cluster (ranks 0..1)"),
    ("arrive-2cta-no-cluster", KernelTypeError, "arrive_2cta=True) spreads the work over the two blocks of a "
                                                "cluster, but this launch has no clusters"),
    ("assume-false", KernelRuntimeError, "T.assume: the assumed condition does not hold"),
])
def test_cluster_misuse_is_a_located_error(case, cls, text):
    with pytest.raises(KernelError) as e:
        _bad(case)()(np.zeros(8, np.int32), 7)
    assert type(e.value) is cls, e.value
    assert text in str(e.value), str(e.value)
    assert e.value.loc is not None and e.value.loc.file == __file__


def test_assume_that_holds_changes_nothing():
    A = np.zeros(8, np.int32)
    _bad("none")()(A, 7)
    np.testing.assert_array_equal(A, 0)


# ------------------------------------------------------------------------- other targets refuse
def test_cuda_lowering_refuses_a_cluster_launch():
    pytest.importorskip("numba")
    lower_program = pytest.importorskip("tilesim.backends.cuda.lower").lower_program
    with pytest.raises(KernelTypeError, match=r"thread-block cluster launch \(cluster_dims \(2, 1, 1\)\) is not "
                                              "supported by the CUDA backend") as e:
        lower_program(ranks(4, 2, 2).prim_func, sim=True)
    assert e.value.loc is not None


def test_cpu_target_runs_a_cluster_launch_on_the_interpreter():
    pytest.importorskip("numba")
    k = JITKernel(ranks(4, 2, 2).prim_func, out_idx=[-1], target="cpu")
    by, bx = np.indices((2, 4))
    np.testing.assert_array_equal(k(), bx % 2)


def test_simulator_refuses_a_cluster_launch():
    hw = pytest.importorskip("hwmodels").load("h200_sxm_141gb")
    with pytest.raises(KernelTypeError, match="cluster launch .* is not modelled by the simulator") as e:
        analyze(ranks(4, 2, 2).prim_func, hw)
    assert e.value.loc is not None and e.value.hint


# --------------------------------------------------------------------------- cluster launch control
@tilelang.jit
def clc_tiles(n_tiles, size, threads=64, issuers=1):
    """Each cluster starts at its own tile, then asks for the tile of a cluster that has not started until
    none are left; every block of the cluster counts the tile and records who did it."""

    @T.prim_func
    def main(Count: T.Tensor((n_tiles, size), "int32"), Who: T.Tensor((n_tiles, size), "int32")):
        with T.ClusterKernel(n_tiles * size, threads=threads, cluster_dims=size) as bid:
            res = T.alloc_shared((2, 4), "uint32")
            got = T.alloc_cluster_barrier([1, 1])
            tx = T.get_thread_binding()
            rank = T.block_rank_in_cluster()
            tile = T.alloc_var(T.int32, init=bid // size)
            it = T.alloc_var(T.int32, init=0)
            while tile >= 0:
                if tx == 0:
                    Count[tile, rank] = Count[tile, rank] + 1
                    Who[tile, rank] = bid
                if tx < issuers:
                    T.mbarrier_arrive_expect_tx(got[it % 2], 16)
                    if rank == 0:
                        T.clc_try_cancel_multicast(res[it % 2, :], got[it % 2])
                T.mbarrier_wait_parity(got[it % 2], (it // 2) & 1)
                if T.clc_is_canceled(res[it % 2, :]) == 1:
                    tile = T.cast(T.clc_get_first_ctaid_x(res[it % 2, :]), "int32") // size
                else:
                    tile = -1
                it = it + 1

    return main


@pytest.mark.parametrize("size", [1, 2])
@pytest.mark.parametrize("mode", ["batched", "serial"])
def test_cluster_launch_control_gives_every_tile_to_exactly_one_cluster(size, mode):
    count, who = _clc_run(clc_tiles(5, size), mode, 5, size)
    np.testing.assert_array_equal(count, 1)
    rank = np.arange(size)
    if mode == "serial":  # clusters start one at a time: cluster 0 takes every later cluster's tile
        np.testing.assert_array_equal(who, np.broadcast_to(rank, (5, size)))
    else:  # one chunk starts every cluster at once: none is left to take
        np.testing.assert_array_equal(who, np.arange(5)[:, None] * size + rank)


def _clc_run(k, mode, n, size):
    count, who = np.zeros((n, size), np.int32), np.full((n, size), -1, np.int32)
    if mode == "batched":
        k.run(count, who)
    else:
        k.run(count, who, options=SERIAL)
    return count, who


def test_cluster_launch_control_in_chunks_takes_only_clusters_that_have_not_started():
    count, who = np.zeros((6, 2), np.int32), np.full((6, 2), -1, np.int32)
    per_cluster = 2 * 3 * 64 * 256  # chunk_bytes for about two clusters of this kernel
    clc_tiles(6, 2).run(count, who, options=InterpOptions(chunk_bytes=per_cluster, threads=1))
    np.testing.assert_array_equal(count, 1)
    starters = sorted(set(who[:, 0] // 2))
    assert starters[0] == 0 and len(starters) < 6  # later clusters' tiles were taken by the running ones


def test_cluster_launch_control_from_several_threads_is_an_error():
    with pytest.raises(KernelRuntimeError, match="executed by 2 threads of block 0") as e:
        _clc_run(clc_tiles(2, 2, issuers=2), "batched", 2, 2)
    assert e.value.loc.file == __file__ and e.value.hint


def test_cluster_launch_control_is_refused_by_the_simulator_and_the_cuda_lowering():
    hw = pytest.importorskip("hwmodels").load("h200_sxm_141gb")
    pf = clc_tiles(2, 1).prim_func
    with pytest.raises(KernelTypeError, match="cluster launch control"):
        analyze(pf, hw, hints={"while": 2})
    pytest.importorskip("numba")
    lower_program = pytest.importorskip("tilesim.backends.cuda.lower").lower_program
    with pytest.raises(KernelTypeError, match=r"T.clc_try_cancel_multicast \(cluster launch control\) is not "
                                              "supported by the CUDA backend"):
        lower_program(clc_tiles(2, 1).prim_func, sim=True)
    assert "T.clc_try_cancel_multicast(res[" in format_ir(pf)


@pytest.mark.parametrize("result, text", [
    ("fragment", "takes 4 words of a shared uint32 buffer"),
    ("short", "the result is 4 words along the last axis"),
])
def test_cluster_launch_control_result_must_be_four_shared_words(result, text):
    @tilelang.jit
    def k():
        @T.prim_func
        def main(A: T.Tensor((4,), "int32")):
            with T.Kernel(4, threads=32):
                bar = T.alloc_barrier([1])
                if result == "fragment":
                    r = T.alloc_fragment((4,), "uint32")
                    T.clc_try_cancel_multicast(r, bar[0])
                else:
                    r = T.alloc_shared((8,), "uint32")
                    T.clc_try_cancel_multicast(r[0:3], bar[0])

        return main

    with pytest.raises(KernelTypeError, match=text) as e:
        k()(np.zeros(4, np.int32))
    assert e.value.loc.file == __file__


# ------------------------------------------------------------------ blocks waiting for other blocks
@tilelang.jit
def chain(n, cluster, producer_first=True):
    """Block b waits until block b-1 (or b+1) has published its running total, then publishes its own: a
    chain through global memory with acquire/release atomics (as Stream-K fixups are)."""

    @T.prim_func
    def main(Flag: T.Tensor((n + 1,), "int32"), Total: T.Tensor((n + 1,), "int32")):
        with T.ClusterKernel(n, threads=32, cluster_dims=cluster) as b:
            tx = T.get_thread_binding()
            if tx == 0:
                src = b if producer_first else b + 1
                dst = b + 1 if producer_first else b
                seen = T.alloc_var(T.int32, init=T.atomic_load(Flag[src], memory_order="acquire"))
                while seen == 0:
                    seen = T.atomic_load(Flag[src], memory_order="acquire")
                Total[dst] = Total[src] + b
                T.atomic_store(Flag[dst], 1, memory_order="release")

    return main


def test_a_block_waiting_for_an_earlier_block_sees_its_write():
    flag, total = np.zeros(9, np.int32), np.zeros(9, np.int32)
    flag[0] = 1
    chain(8, 1).run(flag, total)
    np.testing.assert_array_equal(flag, 1)
    np.testing.assert_array_equal(total, np.concatenate([[0], np.cumsum(np.arange(8))]))
    launch = next(s for s in chain(8, 1).prim_func.body if isinstance(s, N.Launch))
    assert launch.annotation("ordered_blocks") is True


def test_a_spin_on_a_block_of_the_same_cluster_is_a_located_deadlock():
    """A limitation: the blocks of a cluster run in lock-step, so block 1 spinning on block 0 of its cluster
    never lets block 0 publish (on a GPU they run concurrently); the interpreter says so instead of hanging."""
    flag, total = np.zeros(9, np.int32), np.zeros(9, np.int32)
    flag[0] = 1
    with pytest.raises(KernelRuntimeError, match="not for a block of its own cluster"):
        chain(8, 2).run(flag, total)


def test_a_block_waiting_for_a_later_block_is_a_located_deadlock_not_a_hang():
    flag, total = np.zeros(9, np.int32), np.zeros(9, np.int32)
    flag[8] = 1  # block 7 could start the chain, but block 0 runs first and waits for block 1
    with pytest.raises(KernelRuntimeError, match="deadlock: this while loop makes no progress") as e:
        chain(8, 1, producer_first=False).run(flag, total)
    assert e.value.loc.file == __file__ and e.value.hint


def test_a_while_loop_that_changes_nothing_is_a_deadlock():
    @tilelang.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(A: T.Tensor((4,), "int32"), B: T.Tensor((4,), "int32")):
            with T.Kernel(4, threads=32) as b:
                x = T.alloc_var(T.int32, init=A[b])
                y = T.alloc_var(T.int32, init=0)
                while x < 10:
                    y = 5
                B[b] = x + y

        return main

    np.testing.assert_array_equal(k()(np.full(4, 10, np.int32)), 10)  # the loop never runs
    with pytest.raises(KernelRuntimeError, match="makes no progress"):
        k()(np.arange(4, dtype=np.int32))


@pytest.mark.parametrize("case, text", [
    ("order", "memory_order must be one of relaxed, consume, acquire, seq_cst, got 'release'"),
    ("shared", "takes one element of a global tensor"),
])
def test_atomic_load_misuse_is_located(case, text):
    @tilelang.jit
    def k():
        @T.prim_func
        def main(A: T.Tensor((4,), "int32")):
            with T.Kernel(4, threads=32) as b:
                s = T.alloc_shared((4,), "int32")
                if case == "order":
                    A[b] = T.atomic_load(A[b], memory_order="release")
                else:
                    A[b] = T.atomic_load(s[b])

        return main

    with pytest.raises(KernelTypeError, match=text) as e:
        k()(np.zeros(4, np.int32))
    assert e.value.loc.file == __file__


def test_t_kernel_takes_cluster_dims_too():
    @tilelang.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(R: T.Tensor((2, 6), "int32")):
            with T.Kernel(6, 2, threads=32, cluster_dims=(3, 2)) as (bx, by):
                R[by, bx] = T.block_rank_in_cluster()

        return main

    by, bx = np.indices((2, 6))
    np.testing.assert_array_equal(k()(), bx % 3 + 3 * by)


@pytest.mark.parametrize("chunk_clusters", [1, 2, 3])
def test_2cta_gemm_in_small_chunks_on_threads_keeps_clusters_together(chunk_clusters):
    A, B, want = _pair_case(190, 64, 48, False)  # 6 x 1 blocks of 32 x 64: 3 clusters
    k, ins = gemm_2cta.specialize(A, B, 32, 64, 16, 2)
    launch = next(s for s in k.prim_func.body if isinstance(s, N.Launch))
    per_block = max(1, runtime._onchip_bytes(launch.body)) * 3 + 128 * 256
    opts = InterpOptions(chunk_bytes=per_block * 2 * chunk_clusters, threads=2)
    done = []
    C = k.run(*ins, options=opts, progress=lambda i, blocks, total: done.append(blocks))
    np.testing.assert_array_equal(np.asarray(C), want)
    assert done[-1] == 6 and all(b % 2 == 0 for b in done)  # chunks end at cluster boundaries
    assert len(done) > 1 or chunk_clusters == 3
