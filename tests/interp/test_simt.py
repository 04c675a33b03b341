"""Per-thread (SIMT) code: thread indices, per-thread variables and arrays, barriers, atomics that return
the previous value — interpreter semantics (batched equals serial), the errors, the cost analysis and the
CUDA lowering's refusals. The kernels that compute something are also registry kernels
(``tests/simt_kernels.py``: scan, histogram, radix select) run on every executor."""

import numpy as np
import pytest

import tilesim as tilelang
import tilesim.language as T
from tests import simt_kernels as SK
from tilesim.backends.interp import InterpOptions
from tilesim.errors import KernelError, KernelRuntimeError, KernelSyntaxError, KernelTypeError
from tilesim.ir import nodes as N
from tilesim.ir.printer import format_ir
from tilesim.ir.traverse import walk_stmts


@tilelang.jit(out_idx=[-1])
def thread_coords(threads=(8, 4, 2)):
    X, Y, Z = threads

    @T.prim_func
    def main(O: T.Tensor((3, Z, Y, X, 6), "int32")):
        with T.Kernel(3, threads=threads) as bx:
            tx, ty, tz = T.get_thread_bindings()
            ty2 = T.thread_binding(0, Y, thread="threadIdx.y")
            O[bx, tz, ty, tx, 0] = tx
            O[bx, tz, ty, tx, 1] = ty2
            O[bx, tz, ty, tx, 2] = tz
            O[bx, tz, ty, tx, 3] = T.get_warp_idx()
            O[bx, tz, ty, tx, 4] = T.get_lane_idx(16)
            O[bx, tz, ty, tx, 5] = T.get_thread_extent(1) * 100 + bx

    return main


def test_thread_indices_warp_and_lane():
    out = thread_coords()()
    z, y, x = np.meshgrid(np.arange(2), np.arange(4), np.arange(8), indexing="ij")
    t = x + 8 * (y + 4 * z)
    for b in range(3):
        np.testing.assert_array_equal(out[b, ..., 0], x)
        np.testing.assert_array_equal(out[b, ..., 1], y)
        np.testing.assert_array_equal(out[b, ..., 2], z)
        np.testing.assert_array_equal(out[b, ..., 3], t // 32)
        np.testing.assert_array_equal(out[b, ..., 4], t % 16)
        np.testing.assert_array_equal(out[b, ..., 5], 400 + b)


@tilelang.jit(out_idx=[-1])
def local_reverse(M, threads=32, per=4):
    @T.prim_func
    def main(A: T.Tensor((M, threads * per), "float32"), B: T.Tensor((M, threads * per), "float32")):
        with T.Kernel(M, threads=threads) as bx:
            for tx in T.thread_binding(threads, "threadIdx.x"):
                buf = T.alloc_local((per,), "float32")
                total = T.alloc_var("float32", init=0.0)
                s = T.alloc_shared((threads * per,), "float32")
                for j in T.serial(per):
                    buf[j] = A[bx, tx * per + j]
                    total = total + buf[j]
                for j in T.serial(per):  # reverse the thread's own chunk, scaled by its sum
                    s[tx * per + j] = buf[per - 1 - j] * total
                T.sync_threads()
                for j in T.serial(per):
                    B[bx, j * threads + tx] = s[j * threads + tx]

    return main


@pytest.mark.parametrize("mode", ["batched", "serial"])
def test_per_thread_local_arrays_and_vars(mode):
    M, t, per = 5, 32, 4
    A = np.random.default_rng(1).standard_normal((M, t * per)).astype(np.float32)
    k = local_reverse(M)
    B = k(A) if mode == "batched" else k.run(A, options=InterpOptions(mode="serial"))
    chunks = A.reshape(M, t, per)
    want = (chunks[:, :, ::-1] * chunks.sum(axis=2, keepdims=True, dtype=np.float32)).reshape(M, t * per)
    np.testing.assert_allclose(B, want, rtol=1e-6)


@tilelang.jit
def fetch_order(n=64, threads=64, kind="add"):
    @T.prim_func
    def main(V: T.Tensor((2, n), "int32"), C: T.Tensor((2, 4), "int32"), P: T.Tensor((2, n), "int32")):
        with T.Kernel(2, threads=threads) as bx:
            tx = T.get_thread_binding()
            c = T.alloc_shared((4,), "int32")
            T.fill(c, 0)
            T.sync_threads()
            if tx < n:
                if kind == "add":
                    P[bx, tx] = T.atomic_add(c[V[bx, tx] % 4], V[bx, tx], return_prev=True)
                else:
                    P[bx, tx] = T.atomic_max(c[V[bx, tx] % 4], V[bx, tx], return_prev=True)
            T.sync_threads()
            if tx < 4:
                C[bx, tx] = c[tx]

    return main


@pytest.mark.parametrize("kind", ["add", "max"])
def test_atomic_return_prev_is_some_serial_order(kind):
    rng = np.random.default_rng(2)
    V = rng.integers(0, 100, (2, 50)).astype(np.int32)
    C, P = np.zeros((2, 4), np.int32), np.zeros((2, 50), np.int32)
    fetch_order(50, 64, kind)(V, C, P)
    op = (lambda a, b: a + b) if kind == "add" else max
    for b in range(2):
        acc = [0, 0, 0, 0]
        seen = []
        for t in range(50):  # the lock-step order: thread by thread
            key = V[b, t] % 4
            seen.append(acc[key])
            acc[key] = op(acc[key], int(V[b, t]))
        np.testing.assert_array_equal(P[b], seen)
        np.testing.assert_array_equal(C[b], acc)


@tilelang.jit(out_idx=[-1])
def tile_ops_in_per_thread_code(M, threads=32):
    @T.prim_func
    def main(A: T.Tensor((M, 64), "float32"), B: T.Tensor((M, 64), "float32")):
        with T.Kernel(M, threads=threads) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((64,), "float32")
            row = T.alloc_var("int32")
            row = bx  # a per-thread variable, the same in every thread: fine as a tile-op operand
            T.copy(A[row, 0:64], s)
            for i in T.Parallel(64):
                s[i] = s[i] * 2.0
            T.sync_threads()
            for j in T.serial(64 // threads):
                s[j * threads + tx] = s[j * threads + tx] + 1.0
            T.sync_threads()
            T.copy(s, B[row, 0:64])

    return main


def test_tile_operations_inside_per_thread_code():
    A = np.random.default_rng(3).standard_normal((3, 64)).astype(np.float32)
    np.testing.assert_allclose(tile_ops_in_per_thread_code(3)(A), A * 2 + 1, rtol=1e-6)


def _kernel(body_kind):
    @tilelang.jit(out_idx=[-1])
    def f(threads=32):
        @T.prim_func
        def main(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=threads) as bx:
                tx = T.get_thread_binding()
                s = T.alloc_shared((32,), "float32")
                if body_kind == "divergent-barrier":
                    if tx < 16:
                        T.sync_threads()
                elif body_kind == "tile-op-under-thread-if":
                    if tx == 0:
                        T.fill(s, 0.0)
                elif body_kind == "tile-op-on-thread-index":
                    T.copy(A[tx:tx + 1], s[0:1])
                elif body_kind == "tile-op-thread-varying-value":
                    off = T.alloc_var("int32")
                    off = tx
                    T.copy(A[off], s[0:1])
                elif body_kind == "named-barrier-count":
                    if tx < 8:
                        T.sync_threads(1, 16)
                B[tx] = A[tx]

        return main

    return f


@pytest.mark.parametrize("case, cls, text", [
    ("divergent-barrier", KernelRuntimeError, "T.sync_threads() is reached by 16 threads of block 0"),
    ("named-barrier-count", KernelRuntimeError, "T.sync_threads(1, 16) is reached by 8 threads"),
    ("tile-op-under-thread-if", KernelRuntimeError, "T.fill is executed by 1 of the 32 threads"),
    ("tile-op-on-thread-index", KernelTypeError, "T.copy depends on the thread index tx"),
    ("tile-op-thread-varying-value", KernelRuntimeError, "an operand of T.copy differs between the threads"),
])
def test_per_thread_errors_name_the_construct(case, cls, text):
    A = np.zeros(32, np.float32)
    with pytest.raises(KernelError) as info:
        _kernel(case)()(A)
    assert type(info.value) is cls, info.value
    assert text in str(info.value), str(info.value)
    assert info.value.loc is not None and info.value.loc.file == __file__
    assert "Traceback" not in str(info.value)


def test_frontend_errors():
    @tilelang.jit
    def bad_extent():
        @T.prim_func
        def main(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                tx = T.thread_binding(0, 64, thread="threadIdx.x")
                A[tx] = 0.0

        return main

    with pytest.raises(KernelTypeError, match="must span the launch's threadIdx.x extent"):
        bad_extent()

    @tilelang.jit
    def sync_in_parallel():
        @T.prim_func
        def main(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                for i in T.Parallel(32):
                    T.sync_threads()
                    A[i] = 0.0

        return main

    with pytest.raises(KernelSyntaxError, match="T.sync_threads inside T.Parallel"):
        sync_in_parallel()

    @tilelang.jit
    def shuffle_in_parallel():  # warp shuffles are per-thread code (tests/interp/test_warp_shuffle.py)
        @T.prim_func
        def main(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                for i in T.Parallel(32):
                    A[i] = T.shfl_xor(A[i], 1)

        return main

    with pytest.raises(KernelSyntaxError, match="T.shfl_xor outside per-thread code"):
        shuffle_in_parallel()


def test_ir_of_per_thread_code():
    pf = fetch_order(8, 8).prim_func
    (launch,) = pf.launches
    assert [v.kind for v in launch.thread_vars] == ["thread"]
    kinds = {type(s) for s in walk_stmts(pf.body)}
    assert {N.SyncThreads, N.AtomicFetch} <= kinds
    text = format_ir(pf)
    assert "tx = T.get_thread_binding(0)" in text and "T.sync_threads()" in text and "return_prev=True" in text


def test_sync_threads_at_tile_level_is_a_barrier_node_with_no_effect():
    @tilelang.jit(out_idx=[-1])
    def f():
        @T.prim_func
        def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                s = T.alloc_shared((64,), "float32")
                T.copy(A, s)
                T.sync_threads()
                T.copy(s, B)

        return main

    A = np.arange(64, dtype=np.float32)
    np.testing.assert_array_equal(f()(A), A)


def test_cost_analysis_scales_per_thread_statements():
    hw = pytest.importorskip("hwmodels").load("h200_sxm_141gb")
    from tilesim.analysis import analyze, walk_ops

    def ops(pf, **kw):
        (prog,) = analyze(pf, hw, **kw)
        return list(walk_ops(prog.body))

    pf = SK.block_scan(4, 64, threads=64).prim_func
    all_ops = ops(pf)
    syncs = [o for o in all_ops if o.label == "T.sync_threads"]
    assert syncs and all(o.syncs == 1.0 for o in syncs)
    stores = [o for o in all_ops if o.label.startswith("store B")]
    assert stores and stores[0].work.get("global", 0) > 0
    # every one of the 64 threads stores 4 bytes of B (B's store is under `if tx < N`: all of them)
    assert float(np.max(stores[0].work["global"])) == pytest.approx(64 * 4)
    pf = SK.radix_select(2, 100, 5, threads=32).prim_func
    fetch = [o for o in ops(pf) if o.label.startswith("atomic_add s_taken")]
    assert fetch and fetch[0].work.get("smem", 0) == pytest.approx(32 * 2 * 4)


def test_cuda_lowering_refuses_named_barriers_and_per_thread_arrays():
    pytest.importorskip("numba")
    from tilesim.backends.cuda.lower import lower_program

    @tilelang.jit
    def named():
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                tx = T.get_thread_binding()
                if tx < 32:
                    T.sync_threads(1, 32)
                A[tx] = 1.0

        return main

    with pytest.raises(KernelTypeError, match=r"T.sync_threads\(1, 32\) \(a named barrier"):
        lower_program(named().prim_func, sim=True)
    with pytest.raises(KernelTypeError, match=r"T.alloc_local\(buf\) in per-thread code"):
        lower_program(local_reverse(2).prim_func, sim=True)


def test_clear_of_a_per_thread_buffer_clears_every_copy():
    @tilelang.jit(out_idx=[-1])
    def rowsum(N, K, BN=32):
        @T.prim_func
        def main(B: T.Tensor((N, K), "float32"), C: T.Tensor((N,), "float32")):
            with T.Kernel(T.ceildiv(N, BN), threads=BN) as bn:
                tn = T.get_thread_binding(0)
                acc = T.alloc_local((1,), "float32")
                T.clear(acc)
                for k in T.serial(K):
                    acc[0] += B[bn * BN + tn, k]
                C[bn * BN + tn] = acc[0]
        return main

    b = np.random.default_rng(0).random((70, 9)).astype(np.float32)
    for opts in (tilelang.InterpOptions(), tilelang.InterpOptions(mode="serial")):
        np.testing.assert_allclose(rowsum(70, 9)(b, options=opts), b.sum(1), rtol=1e-6)


@tilelang.jit(out_idx=[-1])
def fragment_registers(N, threads=64):
    """A T.alloc_fragment touched only element by element in per-thread code is each thread's registers (TileLang
    replicates it per thread): every thread keeps its own gathered values across a barrier."""

    @T.prim_func
    def main(A: T.Tensor((N,), "int32"), B: T.Tensor((N,), "int32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            tx = T.get_thread_binding()
            regs = T.alloc_fragment((2,), "int32")
            regs[0] = T.if_then_else(bx * threads + tx < N, A[bx * threads + tx], 0)
            regs[1] = tx
            T.sync_threads()
            if bx * threads + tx < N:
                B[bx * threads + tx] = regs[0] * 10 + regs[1]
    return main


@pytest.mark.parametrize("mode", ["batched", "serial"])
def test_fragment_in_per_thread_code_is_per_thread(mode):
    n = 100
    a = np.arange(n, dtype=np.int32) * 3
    out = fragment_registers(n).run(a, options=InterpOptions(mode=mode))
    np.testing.assert_array_equal(out, a * 10 + np.arange(n) % 64)
