"""Warp-specialised code: ``T.ws`` bodies run in program order and mbarrier phases tracked exactly.

Interpreter semantics (a double-buffered producer/consumer GEMM against NumPy, batched equals serial;
phase and parity arithmetic; per-block phases; per-thread code), the located errors (a wait whose phase
has not completed in program order, frontend misuse), the IR printer, the cost analysis and the CUDA
lowering's refusal."""

import numpy as np
import pytest

import tilesim as tilelang
import tilesim.language as T
from tilesim.backends.interp import InterpOptions
from tilesim.backends.interp.ws import Barriers
from tilesim.errors import KernelError, KernelRuntimeError, KernelSyntaxError, KernelTypeError
from tilesim.ir import nodes as N
from tilesim.ir.printer import format_ir
from tilesim.ir.traverse import walk_stmts


# ------------------------------------------------------------------------------- phases and parity
def test_phase_completes_at_the_count_and_extra_arrivals_carry_over():
    b = Barriers(2, [128, 3])
    rows, idx = np.array([0]), np.array([0])
    b.arrive(rows, idx, 100)
    assert b.phase.tolist() == [[0, 0], [0, 0]] and b.arrived[0, 0] == 100
    b.arrive(rows, idx, 28)  # the 128th arrival completes phase 0
    assert b.phase[0, 0] == 1 and b.arrived[0, 0] == 0
    b.arrive(np.array([1, 1]), np.array([1, 1]), 4)  # 8 arrivals on a count of 3: two phases, 2 over
    assert b.phase[1, 1] == 2 and b.arrived[1, 1] == 2
    assert b.phase[0, 1] == 0 and b.phase[1, 0] == 0  # per block, per barrier


def _parity_kernel(arrive_groups, wait_parity, count=128, threads=256, waits_first=False):
    @tilelang.jit(out_idx=[-1])
    def f():
        @T.prim_func
        def main(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=threads):
                s = T.alloc_shared((4,), "float32")
                bar = T.alloc_barrier(count)
                if waits_first:
                    with T.ws(0):
                        T.barrier_wait(bar, wait_parity)
                        T.copy(s, B)
                with T.ws(*arrive_groups):
                    T.copy(A, s)
                    T.barrier_arrive(bar)
                if not waits_first:
                    with T.ws(0):
                        T.barrier_wait(bar, wait_parity)
                        T.copy(s, B)

        return main

    return f()


@pytest.mark.parametrize("groups, parity, ok", [
    ((1,), 0, True),      # 128 of 128 arrived: phase 0 completed, parity 0 returns
    ((1,), 1, False),     # phase 1 in progress: waiting on parity 1 would hang
    ((0, 1), 1, True),    # 256 arrivals on a count of 128 complete phases 0 and 1
    ((0, 1), 0, False),   # ... so phase 2 (parity 0) is in progress
])
def test_wait_parity_after_arrivals(groups, parity, ok):
    A = np.arange(4, dtype=np.float32)
    k = _parity_kernel(groups, parity)
    if ok:
        np.testing.assert_array_equal(k(A), A)
    else:
        with pytest.raises(KernelRuntimeError, match="deadlock: every warp group of the block waits"):
            k(A)


def test_wait_on_parity_one_before_any_phase_returns_at_once():
    A = np.arange(4, dtype=np.float32)
    # the consumer waits first, on parity 1: phase 0 is in progress, so the wait returns (and reads s unset)
    _parity_kernel((1,), 1, waits_first=True)(A)


def test_partial_last_warp_group_arrives_with_its_threads():
    A = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(_parity_kernel((1,), 0, count=32, threads=160)(A), A)
    with pytest.raises(KernelRuntimeError, match=r"32 of 128 arrivals"):
        _parity_kernel((1,), 0, count=128, threads=160)(A)


# ------------------------------------------------------------------- a producer/consumer GEMM
@tilelang.jit(out_idx=[-1])
def ws_gemm(M, N, K, bm=64, bn=64, bk=32, stages=2):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            a_s = T.alloc_shared((stages, bm, bk), "float16")
            b_s = T.alloc_shared((stages, bn, bk), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            full = T.alloc_barrier([128] * stages)   # stage s holds data (the producer group arrived)
            empty = T.alloc_barrier([128] * stages)  # stage s may be overwritten (the consumer group arrived)
            with T.ws(1):
                T.clear(acc)
            for k in T.serial(T.ceildiv(K, bk)):
                st = k % stages
                lap = k // stages
                with T.ws(0):  # producer: wait for the consumer to free the stage, fill it, arrive
                    T.barrier_wait(empty[st], (lap + 1) % 2)
                    T.tma_copy(A[by * bm:(by + 1) * bm, k * bk:(k + 1) * bk], a_s[st, :, :], barrier=full[st])
                    T.tma_copy(B[bx * bn:(bx + 1) * bn, k * bk:(k + 1) * bk], b_s[st, :, :], barrier=full[st])
                    T.barrier_arrive(full[st])
                with T.ws(1):  # consumer
                    T.mbarrier_wait_parity(full[st], lap % 2)
                    T.wgmma_gemm(a_s[st, :, :], b_s[st, :, :], acc, transpose_B=True)
                    T.wait_wgmma(0)
                    T.fence_proxy_async()
                    T.mbarrier_arrive(empty[st])
            with T.ws(1):
                T.copy(acc, C[by * bm, bx * bn])

    return main


@pytest.mark.parametrize("mode", ["batched", "serial"])
def test_producer_consumer_gemm_matches_numpy(mode):
    M, N, K = 100, 72, 200  # tiles do not divide: edge tiles read zeros and skip out-of-range writes
    rng = np.random.default_rng(0)
    A = rng.standard_normal((M, K)).astype(np.float16)
    B = rng.standard_normal((N, K)).astype(np.float16)
    k = ws_gemm(M, N, K)
    C = k(A, B) if mode == "batched" else k.run(A, B, options=InterpOptions(mode="serial"))
    np.testing.assert_allclose(C, A.astype(np.float32) @ B.astype(np.float32).T, rtol=1e-3, atol=1e-3)


def test_ir_and_printer_of_warp_specialised_code():
    pf = ws_gemm(64, 64, 64).prim_func
    stmts = list(walk_stmts(pf.body))
    ws = [s for s in stmts if type(s) is N.WarpSpec]
    assert [s.groups for s in ws] == [(1,), (0,), (1,), (1,)] and all(s.threads == 128 for s in ws)
    ops = [s.op for s in stmts if type(s) is N.MBarrier]
    assert ops.count("init") == 2 and ops.count("wait") == 2 and ops.count("arrive") == 2
    assert all(s.threads == 128 for s in stmts if type(s) is N.MBarrier and s.op != "init")
    text = format_ir(pf)
    assert "full = T.alloc_barrier([128, 128])" in text
    assert "with T.ws(0):  # 128 threads" in text and "T.barrier_wait(full[" in text


# ------------------------------------------------------------------------------ errors
@pytest.mark.parametrize("mode", ["batched", "serial"])
def test_consumer_before_producer_in_program_order_runs_concurrently(mode):
    @tilelang.jit(out_idx=[-1])
    def consumer_first(M=64, K=64):
        @T.prim_func
        def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((M, K), "float32")):
            with T.Kernel(3, threads=256) as bx:
                s = T.alloc_shared((M, K), "float32")
                ready = T.alloc_barrier(128)
                with T.ws(1):
                    T.barrier_wait(ready, 0)  # blocks: group 0 runs until its arrival completes the phase
                    for i, j in T.Parallel(M, K):
                        B[i, j] = s[i, j] + bx
                with T.ws(0):
                    T.tma_copy(A, s, barrier=ready)
                    T.barrier_arrive(ready)

        return main

    A = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    k = consumer_first()
    B = k(A) if mode == "batched" else k.run(A, options=InterpOptions(mode="serial"))
    np.testing.assert_array_equal(B, A + 2)  # the last block's write wins


def test_groups_waiting_on_each_other_is_a_located_deadlock():
    @tilelang.jit(out_idx=[-1])
    def crossed(M=64, K=64):
        @T.prim_func
        def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((M, K), "float32")):
            with T.Kernel(1, threads=256):
                s = T.alloc_shared((M, K), "float32")
                ping = T.alloc_barrier(128)
                pong = T.alloc_barrier(128)
                with T.ws(1):
                    T.barrier_wait(ping, 0)  # group 0 arrives on ping only after pong, which waits for us
                    T.barrier_arrive(pong)
                    T.copy(s, B)
                with T.ws(0):
                    T.barrier_wait(pong, 0)
                    T.copy(A, s)
                    T.barrier_arrive(ping)

        return main

    with pytest.raises(KernelRuntimeError) as info:
        crossed()(np.zeros((64, 64), np.float32))
    msg = str(info.value)
    assert "deadlock: every warp group of the block waits" in msg
    assert "ping[0] waited for parity 0 in block 0 (0 of 128 arrivals in phase 0)" in msg
    assert "pong[0] waited for parity 0 in block 0 (0 of 128 arrivals in phase 0)" in msg
    assert info.value.loc.file == __file__ and "T.barrier_wait(ping, 0)" in msg
    assert "Traceback" not in msg


def test_phases_are_per_block():
    @tilelang.jit(out_idx=[-1])
    def even_blocks_arrive():
        @T.prim_func
        def main(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 8), "float32")):
            with T.Kernel(4, threads=128) as bx:
                bar = T.alloc_barrier(128)
                s = T.alloc_shared((8,), "float32")
                T.copy(A[bx, :], s)
                if bx % 2 == 0:
                    T.barrier_arrive(bar)
                T.barrier_wait(bar, 0)
                T.copy(s, B[bx, :])

        return main

    with pytest.raises(KernelRuntimeError, match=r"deadlock: bar\[0\] waited for parity 0 in block 1 "):
        even_blocks_arrive()(np.zeros((4, 8), np.float32))


def _misuse(case):
    @tilelang.jit
    def f():
        @T.prim_func
        def main(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=256):
                bar = T.alloc_barrier([128, 128])
                if case == "group-past-block":
                    with T.ws(2):
                        T.barrier_arrive(bar[0])
                elif case == "nested":
                    with T.ws(0):
                        with T.ws(1):
                            T.barrier_arrive(bar[1])
                elif case == "as-data":
                    A[0] = T.cast(bar[0], "float32")
                elif case == "bad-count":
                    T.alloc_barrier([128, 0])
                elif case == "not-a-barrier":
                    s = T.alloc_shared((2,), "float32")
                    T.barrier_arrive(s[0])
                elif case == "cluster":
                    T.mbarrier_arrive(bar[0], cta_id=1)
                elif case == "in-parallel":
                    for i in T.Parallel(8):
                        T.barrier_arrive(bar[0])
                        A[i] = 0.0
                elif case == "index-range":
                    T.barrier_arrive(bar[A.shape[0] - 6])

        return main

    return f


@pytest.mark.parametrize("case, cls, text", [
    ("group-past-block", KernelTypeError, "T.ws(2): the block has 256 threads, warp groups 0..1"),
    ("nested", KernelSyntaxError, "T.ws inside another T.ws"),
    ("as-data", KernelSyntaxError, "the barrier array bar is used as data"),
    ("bad-count", KernelTypeError, "arrive_count must be a positive Python int"),
    ("not-a-barrier", KernelTypeError, "takes a barrier made by T.alloc_barrier, got an element of the shared"),
    ("cluster", KernelTypeError, "arrives on another block of a cluster, but this launch has no clusters"),
    ("in-parallel", KernelSyntaxError, "T.barrier_arrive inside T.Parallel"),
    ("index-range", KernelRuntimeError, "barrier index 2 is out of range for the 2 barrier(s) of bar"),
])
def test_misuse_is_a_located_error(case, cls, text):
    with pytest.raises(KernelError) as info:
        _misuse(case)()(np.zeros(8, np.float32))
    assert type(info.value) is cls, info.value
    assert text in str(info.value), str(info.value)
    assert info.value.loc is not None and info.value.loc.file == __file__


# ------------------------------------------------------------------------------ per-thread code
@tilelang.jit(out_idx=[-1])
def per_thread_groups(arrivers=128):
    @T.prim_func
    def main(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(2, threads=256):
            tx = T.get_thread_binding()
            s = T.alloc_shared((256,), "float32")
            bar = T.alloc_barrier(128)
            if tx < 128:  # a whole warp group: tile operations are allowed, executed once for the block
                T.copy(A, s)
            if tx < arrivers:
                T.barrier_arrive(bar)
            T.barrier_wait(bar, 0)
            with T.ws(1):  # element statements of a T.ws body run in its threads only
                B[tx] = s[tx] * 2.0
            with T.ws(0):
                B[tx] = s[tx] + 1.0

    return main


def test_warp_groups_in_per_thread_code():
    A = np.arange(256, dtype=np.float32)
    want = np.where(np.arange(256) < 128, A + 1, A * 2)
    np.testing.assert_array_equal(per_thread_groups()(A), want)
    with pytest.raises(KernelRuntimeError, match=r"64 of 128 arrivals"):
        per_thread_groups(64)(A)


def test_tile_op_by_part_of_a_warp_is_refused():
    @tilelang.jit(out_idx=[-1])
    def half_group():
        @T.prim_func
        def main(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=256):
                tx = T.get_thread_binding()
                if tx < 48:
                    T.copy(A, B)

        return main

    with pytest.raises(KernelRuntimeError, match="T.copy is executed by 48 of the 256 threads"):
        half_group()(np.zeros(8, np.float32))


def test_tile_ops_by_single_warps():
    """A 96-thread block: warp 0 and warps 1-2 each run their own tile operations (as TileLang's mHC example)."""
    @tilelang.jit(out_idx=[-1])
    def split():
        @T.prim_func
        def main(A: T.Tensor((8,), "float32"), B: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=96):
                if T.get_thread_binding() < 32:
                    for i in T.Parallel(8):
                        B[i] = A[i] * 2
                else:
                    for i in T.Parallel(8):
                        B[8 + i] = A[i] + 1

        return main

    a = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(split()(a)), np.concatenate([2 * a, a + 1]))


# ------------------------------------------------------------------------------ other consumers
def test_cost_analysis_charges_a_barrier_per_wait():
    hw = pytest.importorskip("hwmodels").load("h200_sxm_141gb")
    from tilesim.analysis import analyze, walk_ops

    (prog,) = analyze(ws_gemm(256, 256, 256).prim_func, hw)
    ops = list(walk_ops(prog.body))
    waits = [o for o in ops if o.label.startswith("T.barrier_wait")]
    assert {o.label for o in waits} == {"T.barrier_wait empty", "T.barrier_wait full"}
    assert all(o.syncs == 1.0 for o in waits)
    assert any(o.label.startswith("gemm") or "gemm" in o.label.lower() for o in ops)


def test_cuda_lowering_refuses_warp_specialised_code():
    pytest.importorskip("numba")
    from tilesim.backends.cuda.lower import lower_program

    with pytest.raises(KernelTypeError, match=r"T.alloc_barrier \(an mbarrier\) is not supported by the CUDA"):
        lower_program(ws_gemm(64, 64, 64).prim_func, sim=True)

    @tilelang.jit
    def ws_only():
        @T.prim_func
        def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=256):
                with T.ws(1):
                    T.copy(A, B)

        return main

    with pytest.raises(KernelTypeError, match=r"with T.ws\(1,\) is not supported by the CUDA backend"):
        lower_program(ws_only().prim_func, sim=True)
