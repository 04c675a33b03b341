"""``T.access_ptr`` + ``T.ptx_cp_async`` (+ commit/wait groups) and ``T.atomic_addx2/x4``: their meaning on the
interpreter (against NumPy), across rows, with a predicate, located errors, and the CUDA lowering under
numba's simulator."""

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim as tilelang
import tilesim.language as T
from tilesim.errors import KernelError, KernelTypeError


def gather_rows(M, N, V, threads=32):
    """Per-thread cp.async gather of rows ``Idx[r]`` of A (zero rows where Idx < 0), V elements a copy."""
    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), Idx: T.Tensor((M,), "int32"), B: T.Tensor((M, N), "float16")):
        with T.Kernel(1, threads=threads) as bx:
            S = T.alloc_shared((M, N), "float16")
            tx = T.get_thread_binding()
            T.fill(S, 1)
            T.sync_threads()
            for r in T.serial(M):
                for u in T.serial(T.ceildiv(N, threads * V)):
                    c = (u * threads + tx) * V
                    if c < N:
                        T.ptx_cp_async(T.access_ptr(S[r, c], "w", V), T.access_ptr(A[Idx[r], c], "r", V), V,
                                       predicate=Idx[r] >= 0)
                T.ptx_commit_group()
            T.ptx_wait_group(0)
            T.sync_threads()
            T.copy(S, B)
    return main


def gather_ref(a, idx):
    return np.where(idx[:, None] >= 0, a[np.maximum(idx, 0)], 0).astype(a.dtype)


@settings(max_examples=12, deadline=None)
@given(M=st.integers(1, 6), cols=st.integers(1, 9), V=st.sampled_from([1, 2, 4, 8]), seed=st.integers(0, 99))
def test_cp_async_gathers_rows_with_zero_fill(M, cols, V, seed):
    N = cols * V
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, N)).astype(np.float16)
    idx = rng.integers(-1, M, M).astype(np.int32)
    b = np.zeros((M, N), np.float16)
    tilelang.compile(gather_rows(M, N, V))(a, idx, b)
    np.testing.assert_array_equal(b, gather_ref(a, idx))


def flat_copy(M, N, n, off_src, off_dst):
    """One cp.async of ``n`` elements that may cross rows, at flat offsets (block-level code)."""
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=32) as bx:
            S = T.alloc_shared((M, N), "float32")
            T.fill(S, -1)
            T.ptx_cp_async(T.access_ptr(S[off_dst // N, off_dst % N], "w", n),
                           T.access_ptr(A, "r", offset=off_src, extent=n), n)
            T.copy(S, B)
    return main


@settings(max_examples=20, deadline=None)
@given(M=st.integers(1, 5), N=st.integers(1, 7), data=st.data())
def test_cp_async_crosses_rows_in_row_major_order(M, N, data):
    total = M * N
    n = data.draw(st.integers(1, total))
    off_src = data.draw(st.integers(0, total - n))
    off_dst = data.draw(st.integers(0, total - n))
    a = np.arange(total, dtype=np.float32).reshape(M, N)
    b = np.zeros((M, N), np.float32)
    tilelang.compile(flat_copy(M, N, n, off_src, off_dst))(a, b)
    want = np.full(total, -1, np.float32)
    want[off_dst:off_dst + n] = a.reshape(-1)[off_src:off_src + n]
    np.testing.assert_array_equal(b.reshape(-1), want)


def vector_atomic(M, N, width):
    add = T.atomic_addx4 if width == 4 else T.atomic_addx2

    @T.prim_func
    def main(V: T.Tensor((M, N), "float32"), D: T.Tensor((M, N), "float32")):
        with T.Kernel(3, threads=64) as bx:
            Vs = T.alloc_shared((M, N), "float32")
            T.copy(V, Vs)
            for i, j in T.Parallel(M, N // width):
                add(D[i, j * width], Vs[i, j * width])
    return main


@pytest.mark.parametrize("width", [2, 4])
@pytest.mark.parametrize("M, N", [(3, 8), (5, 12), (1, 4)])
def test_vector_atomic_adds_every_element_once_per_block(width, M, N):
    rng = np.random.default_rng(M * N)
    v = rng.standard_normal((M, N)).astype(np.float32)
    d = rng.standard_normal((M, N)).astype(np.float32)
    want = d + 3 * v  # three blocks
    tilelang.compile(vector_atomic(M, N, width))(v, d)
    np.testing.assert_allclose(d, want, rtol=1e-6, atol=1e-6)


def _bad(mode):
    @T.prim_func
    def main(A: T.Tensor((8, 8), "float32"), H: T.Tensor((8, 8), "float16")):
        with T.Kernel(1, threads=32) as bx:
            S = T.alloc_shared((8, 8), "float32")
            if mode == "readonly":
                T.ptx_cp_async(T.access_ptr(S[0, 0], "r", 4), T.access_ptr(A[0, 0], "r", 4), 4)
            elif mode == "dtype":
                T.ptx_cp_async(T.access_ptr(S[0, 0], "w", 4), T.access_ptr(H[0, 0], "r", 4), 4)
            elif mode == "extent":
                T.ptx_cp_async(T.access_ptr(S[0, 0], "w", 2), T.access_ptr(A[0, 0], "r", 4), 4)
            elif mode == "not-ptr":
                T.ptx_cp_async(S[0, 0], T.access_ptr(A[0, 0], "r", 4), 4)
            elif mode == "prev":
                T.atomic_addx4(A[0, 0], S[0, 0], return_prev=True)
            else:
                A[0, 0] = T.access_ptr(S[0, 0], "r") + 1
    return main


@pytest.mark.parametrize("mode, msg", [("readonly", "read-only"), ("dtype", "same-typed"), ("extent", "spans 2"),
                                       ("not-ptr", "must be a T.access_ptr"), ("prev", "return_prev"),
                                       ("arith", "Pointer")])
def test_errors_are_located(mode, msg):
    with pytest.raises(KernelError, match=msg) as ei:
        tilelang.compile(_bad(mode))
    assert ei.value.loc is not None and ei.value.loc.line > 0


CUDASIM = """
import numpy as np, sys
sys.path.insert(0, {root!r})
from tests.interp.test_ptx_prims import gather_rows, gather_ref, vector_atomic
import tilesim as tilelang
from tilesim.backends.cuda.check import cuda_twin
rng = np.random.default_rng(1)
a = rng.standard_normal((4, 24)).astype(np.float16)
idx = np.array([2, -1, 0, 3], np.int32)
b = np.zeros((4, 24), np.float16)
cuda_twin(tilelang.compile(gather_rows(4, 24, 4, threads=32)))(a, idx, b)
assert np.array_equal(b, gather_ref(a, idx)), b
v = rng.standard_normal((3, 8)).astype(np.float32)
d = np.zeros((3, 8), np.float32)
cuda_twin(tilelang.compile(vector_atomic(3, 8, 4)))(v, d)
assert np.allclose(d, 3 * v), d
print("ok")
"""


def test_cp_async_and_vector_atomics_lower_for_cuda_under_the_simulator():
    pytest.importorskip("numba_cuda")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=root)
    r = subprocess.run([sys.executable, "-c", CUDASIM.format(root=root)], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-2000:]


@tilelang.jit(out_idx=[-1])
def dp4a_dot(N, threads=32, acc_dtype="int32"):
    """Per thread: 7 + the int8 dot product of its four elements of A and B, through T.dp4a."""

    @T.prim_func
    def main(A: T.Tensor((N,), "int8"), B: T.Tensor((N,), "int8"), C: T.Tensor((N // 4,), acc_dtype)):
        with T.Kernel(T.ceildiv(N // 4, threads), threads=threads) as bx:
            tx = T.get_thread_binding()
            a = T.alloc_local((4,), "int8")
            b = T.alloc_local((4,), "int8")
            acc = T.alloc_local((1,), acc_dtype)
            i = bx * threads + tx
            if i < N // 4:
                for k in T.serial(4):
                    a[k] = A[i * 4 + k]
                    b[k] = B[i * 4 + k]
                acc[0] = 7
                T.dp4a(a[0], b[0], acc[0])
                C[i] = acc[0]
    return main


@settings(max_examples=10, deadline=None)
@given(n4=st.integers(1, 70), seed=st.integers(0, 2**16))
def test_dp4a_is_an_int8_dot_product_into_int32(n4, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, 4 * n4).astype(np.int8)
    b = rng.integers(-128, 128, 4 * n4).astype(np.int8)
    want = 7 + (a.astype(np.int32) * b.astype(np.int32)).reshape(n4, 4).sum(axis=1)
    np.testing.assert_array_equal(dp4a_dot(4 * n4)(a, b), want)


def test_dp4a_checks_dtypes():
    with pytest.raises(KernelTypeError, match="T.dp4a: C .* is float32, it must be int32"):
        dp4a_dot(16, acc_dtype="float32")
