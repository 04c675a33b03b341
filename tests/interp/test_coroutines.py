"""Warp groups as concurrent threads of control (``tilesim/backends/interp/coroutines.py``).

Programs whose warp groups wait on each other in an order program order cannot give — a consumer
written before its producer, groups that ping-pong every iteration, three groups in a chain — run to
the NumPy answer, batched equal to serial; a group keeps its own program order across the bodies of a
run; a deadlock and an error inside a task are located ``KernelRuntimeError``s and leave no thread
behind; ``T.gemm(clear_accum=<expression>)`` clears only when the expression holds.
"""

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim as tilelang
import tilesim.language as T
from tilesim.backends.interp import InterpOptions
from tilesim.backends.interp.coroutines import plan
from tilesim.errors import KernelRuntimeError
from tilesim.ir import nodes as N
from tilesim.ir.printer import format_ir

SERIAL = InterpOptions(mode="serial")


def _run(k, mode, *args):
    return k(*args) if mode == "batched" else k.run(*args, options=SERIAL)


# ------------------------------------------------------------------ ping-pong on the thread index
@tilelang.jit(out_idx=[-1])
def ping_pong(steps, n, blocks):
    """Group 1 produces ``2 * A[b, k]`` into one shared slot per step; group 0 (written first) waits for it,
    writes ``slot + 1`` and frees the slot: a wait on every iteration in both groups."""

    @T.prim_func
    def main(A: T.Tensor((blocks, steps, n), "float32"), B: T.Tensor((blocks, steps, n), "float32")):
        with T.Kernel(blocks, threads=256) as bx:
            slot = T.alloc_shared((n,), "float32")
            ready = T.alloc_barrier(128)
            free = T.alloc_barrier(128)
            tx = T.get_thread_binding()
            if tx < 128:
                for k in T.serial(steps):
                    T.barrier_wait(ready, k % 2)
                    for i in T.Parallel(n):
                        B[bx, k, i] = slot[i] + 1.0
                    T.barrier_arrive(free)
            else:
                for k in T.serial(steps):
                    T.barrier_wait(free, (k + 1) % 2)  # the first wait (parity 1) returns at once
                    for i in T.Parallel(n):
                        slot[i] = A[bx, k, i] * 2.0
                    T.barrier_arrive(ready)

    return main


@settings(max_examples=6, deadline=None)
@given(steps=st.integers(1, 5), n=st.integers(1, 37), blocks=st.integers(1, 3))
def test_ping_pong_on_the_thread_index_matches_numpy_batched_and_serial(steps, n, blocks):
    A = np.random.default_rng(steps * 100 + n).standard_normal((blocks, steps, n)).astype(np.float32)
    k = ping_pong(steps, n, blocks)
    want = A * 2 + 1
    for mode in ("batched", "serial"):
        np.testing.assert_array_equal(_run(k, mode, A), want)


def test_the_if_else_is_planned_as_one_run_and_other_ifs_are_not():
    pf = ping_pong(2, 8, 1).prim_func
    (launch,) = [s for s in pf.body if type(s) is N.Launch]
    runs = plan(launch.body)
    ifs = [s for s in launch.body if type(s) is N.If]
    assert len(ifs) == 1 and runs == {id(ifs[0]): (ifs[0],)}


# ------------------------------------------------------------------ T.ws consumer before producer
@tilelang.jit(out_idx=[-1])
def consumer_first_gemm(M, N, K, bm=32, bn=32, bk=16, stages=2):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            a_s = T.alloc_shared((stages, bm, bk), "float16")
            b_s = T.alloc_shared((stages, bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            full = T.alloc_barrier([128] * stages)
            empty = T.alloc_barrier([128] * stages)
            with T.ws(1):
                T.clear(acc)
            for k in T.serial(T.ceildiv(K, bk)):
                st_ = k % stages
                lap = k // stages
                with T.ws(1):  # the consumer is written first: it waits for the producer below
                    T.barrier_wait(full[st_], lap % 2)
                    T.gemm(a_s[st_, :, :], b_s[st_, :, :], acc)
                    T.barrier_arrive(empty[st_])
                with T.ws(0):
                    T.barrier_wait(empty[st_], (lap + 1) % 2)
                    T.copy(A[by * bm, k * bk], a_s[st_, :, :])
                    T.copy(B[k * bk, bx * bn], b_s[st_, :, :])
                    T.barrier_arrive(full[st_])
            with T.ws(1):
                T.copy(acc, C[by * bm, bx * bn])

    return main


@pytest.mark.parametrize("mode", ["batched", "serial"])
@pytest.mark.parametrize("M, N, K", [(70, 45, 50), (32, 32, 16)])
def test_consumer_written_before_producer_matches_numpy(mode, M, N, K):
    rng = np.random.default_rng(M + N + K)
    A = rng.standard_normal((M, K)).astype(np.float16)
    B = rng.standard_normal((K, N)).astype(np.float16)
    C = _run(consumer_first_gemm(M, N, K), mode, A, B)
    np.testing.assert_allclose(C, A.astype(np.float32) @ B.astype(np.float32), rtol=1e-3, atol=1e-3)


# ------------------------------------------------------------------ three groups, program order kept
@tilelang.jit(out_idx=[-1])
def chain():
    @T.prim_func
    def main(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(2, threads=384) as bx:
            s0 = T.alloc_shared((16,), "float32")
            s1 = T.alloc_shared((16,), "float32")
            s2 = T.alloc_shared((16,), "float32")
            b0 = T.alloc_barrier(128)
            b1 = T.alloc_barrier(128)
            with T.ws(2):  # last in the chain, written first
                T.barrier_wait(b1, 0)
                for i in T.Parallel(16):
                    s2[i] = s1[i] * 10.0
            with T.ws(2):  # group 2 again: waits for its first body (program order), though that one is blocked
                for i in T.Parallel(16):
                    B[i] = s2[i] - 1.0
            with T.ws(1):
                T.barrier_wait(b0, 0)
                for i in T.Parallel(16):
                    s1[i] = s0[i] + 1.0
                T.barrier_arrive(b1)
            with T.ws(0):
                for i in T.Parallel(16):
                    s0[i] = A[i] + bx
                T.barrier_arrive(b0)

    return main


@pytest.mark.parametrize("mode", ["batched", "serial"])
def test_three_groups_in_a_chain_keep_each_groups_program_order(mode):
    A = np.arange(16, dtype=np.float32)
    np.testing.assert_array_equal(_run(chain(), mode, A), (A + 1 + 1) * 10 - 1)  # block 1 writes last
    assert "with T.ws(2):" in format_ir(chain().prim_func)


# ------------------------------------------------------------------ errors leave no thread behind
def test_an_error_inside_a_task_is_located_and_leaves_no_thread():
    @tilelang.jit(out_idx=[-1])
    def bad_index():
        @T.prim_func
        def main(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=256):
                s = T.alloc_shared((8,), "float32")
                bar = T.alloc_barrier([128, 128])
                with T.ws(1):
                    T.barrier_wait(bar[0], 0)
                    T.copy(s, B)
                with T.ws(0):
                    T.copy(A, s)
                    T.barrier_arrive(bar[5])  # out of range, while group 1 waits

        return main

    before = threading.active_count()
    with pytest.raises(KernelRuntimeError) as info:
        bad_index()(np.zeros(8, np.float32))
    assert "barrier index 5 is out of range for the 2 barrier(s) of bar" in str(info.value)
    assert info.value.loc.file == __file__ and "Traceback" not in str(info.value)
    assert threading.active_count() == before
    # the next call starts from a clean state
    with pytest.raises(KernelRuntimeError, match="barrier index 5"):
        bad_index()(np.zeros(8, np.float32))
    assert threading.active_count() == before


def test_a_deadlock_in_per_thread_code_names_both_barriers():
    @tilelang.jit(out_idx=[-1])
    def crossed():
        @T.prim_func
        def main(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=256):
                x = T.alloc_barrier(128)
                y = T.alloc_barrier(128)
                tx = T.get_thread_binding()
                if tx < 128:
                    T.barrier_wait(x, 0)
                    T.barrier_arrive(y)
                else:
                    T.barrier_wait(y, 0)
                    T.barrier_arrive(x)
                T.copy(A, B)

        return main

    before = threading.active_count()
    with pytest.raises(KernelRuntimeError) as info:
        crossed()(np.zeros(8, np.float32))
    msg = str(info.value)
    assert "deadlock" in msg and "x[0] waited for parity 0" in msg and "y[0] waited for parity 0" in msg
    assert threading.active_count() == before


# ------------------------------------------------------------------ clear_accum on a loop variable
@tilelang.jit(out_idx=[-1])
def split_k_unrolled(M, N, K, parts):
    kt = K // parts

    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((N, K), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            a_s = T.alloc_shared((M, K), "float32")
            b_s = T.alloc_shared((N, K), "float32")
            acc = T.alloc_fragment((M, N), "float32")
            T.fill(acc, 123.0)  # cleared by the first step only
            T.copy(A, a_s)
            T.copy(B, b_s)
            for j in T.unroll(parts):
                T.gemm(a_s[:, j * kt:(j + 1) * kt], b_s[:, j * kt:(j + 1) * kt], acc, transpose_B=True,
                       clear_accum=(j == 0))
            T.copy(acc, C)

    return main


@pytest.mark.parametrize("parts", [1, 2, 3])
def test_clear_accum_expression_clears_only_when_it_holds(parts):
    M, N, K = 16, 24, 12 * parts
    rng = np.random.default_rng(parts)
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((N, K)).astype(np.float32)
    k = split_k_unrolled(M, N, K, parts)
    np.testing.assert_allclose(k(A, B), A @ B.T, rtol=1e-5, atol=1e-5)
    text = format_ir(k.prim_func)
    assert "if (j == 0):" in text and "clear_accum=True" not in text


# ------------------------------------------------------------------ if / elif / elif: three groups, nested runs
@tilelang.jit(out_idx=[-1])
def one_producer_two_consumers(steps, n, stages=2):
    """Group 2 (``tx >= 256``, written last) fills a ring of ``stages`` slots; groups 0 and 1 each take half
    of every slot and both free it (a free barrier of 256 arrivals), as TileLang's MLA decode does."""

    @T.prim_func
    def main(A: T.Tensor((steps, 2 * n), "float32"), B: T.Tensor((steps, 2 * n), "float32")):
        with T.Kernel(1, threads=384):
            ring = T.alloc_shared((stages, 2 * n), "float32")
            ready = T.alloc_barrier([128] * stages)
            free = T.alloc_barrier([256] * stages)
            tx = T.get_thread_binding()
            if tx < 128:
                for k in T.serial(steps):
                    T.barrier_wait(ready[k % stages], (k // stages) % 2)
                    for i in T.Parallel(n):
                        B[k, i] = ring[k % stages, i] + 1.0
                    T.barrier_arrive(free[k % stages])
            elif tx >= 128 and tx < 256:
                for k in T.serial(steps):
                    T.barrier_wait(ready[k % stages], (k // stages) % 2)
                    for i in T.Parallel(n):
                        B[k, n + i] = ring[k % stages, n + i] - 1.0
                    T.barrier_arrive(free[k % stages])
            elif tx >= 256:
                for k in T.serial(steps):
                    T.barrier_wait(free[k % stages], ((k // stages) % 2) ^ 1)
                    for i in T.Parallel(2 * n):
                        ring[k % stages, i] = A[k, i] * 3.0
                    T.barrier_arrive(ready[k % stages])

    return main


@pytest.mark.parametrize("mode", ["batched", "serial"])
@pytest.mark.parametrize("steps, stages", [(5, 2), (4, 3), (1, 2)])
def test_if_elif_on_the_thread_index_runs_three_groups_concurrently(mode, steps, stages):
    n = 7
    A = np.random.default_rng(steps).standard_normal((steps, 2 * n)).astype(np.float32)
    want = np.concatenate([A[:, :n] * 3 + 1, A[:, n:] * 3 - 1], axis=1)
    np.testing.assert_array_equal(_run(one_producer_two_consumers(steps, n, stages), mode, A), want)
