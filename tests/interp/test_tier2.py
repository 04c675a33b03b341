"""Tier-2 primitives not covered by the kernel tests, each against NumPy."""

import ml_dtypes
import numpy as np

import tilesim as tilelang
import tilesim.language as T


def test_cumsum_forward_and_reverse():
    @tilelang.jit(out_idx=[1, 2])
    def k(M, N):
        @T.prim_func
        def main(A: T.Tensor((M, N), "float32"), F: T.Tensor((M, N), "float32"), R: T.Tensor((M, N), "float32")):
            with T.Kernel(1) as bx:
                x = T.alloc_fragment((M, N), "float32")
                y = T.alloc_fragment((M, N), "float32")
                T.copy(A, x)
                T.cumsum(x, y, dim=1)
                T.copy(y, F)
                T.cumsum(x, dim=0, reverse=True)
                T.copy(x, R)
        return main

    a = np.random.default_rng(0).standard_normal((5, 7)).astype(np.float32)
    f, r = k(5, 7)(a)
    np.testing.assert_allclose(f, np.cumsum(a, 1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(r, np.flip(np.cumsum(np.flip(a, 0), 0), 0), rtol=1e-5, atol=1e-6)


def test_view_reshape_and_reinterpret():
    @tilelang.jit(out_idx=[1, 2])
    def k():
        @T.prim_func
        def main(A: T.Tensor((4, 8), "float32"), B: T.Tensor((32,), "float32"), C: T.Tensor((4, 8), "int32")):
            with T.Kernel(1) as bx:
                s = T.alloc_shared((4, 8), "float32")
                T.copy(A, s)
                flat = T.reshape(s, (32,))
                T.copy(flat, B)
                for i, j in T.Parallel(4, 8):
                    C[i, j] = T.reinterpret("int32", s[i, j])
        return main

    a = np.arange(32, dtype=np.float32).reshape(4, 8) - 3.5
    b, c = k()(a)
    assert np.array_equal(b, a.reshape(-1)) and np.array_equal(c, a.view(np.int32))


def test_grid_unroll_alloc_global_and_math():
    @tilelang.jit(out_idx=[-1])
    def k(N):
        @T.prim_func
        def main(A: T.Tensor((N, N), "float32"), B: T.Tensor((N, N), "float32")):
            W = T.alloc_global((N, N), "float32")
            with T.Kernel(1) as bx:
                for i, j in T.grid(N, N):
                    W[i, j] = T.sigmoid(A[i, j]) + T.tanh(A[i, j])
            with T.Kernel(1) as bx:
                for i in T.unroll(N):
                    for j in T.vectorized(N):
                        B[i, j] = T.clamp(W[j, i], -1.0, 1.5) + T.log2(T.abs(A[i, j]) + 1) - T.rsqrt(T.exp(A[i, j]))
        return main

    a = np.random.default_rng(1).standard_normal((6, 6)).astype(np.float32)
    w = 1 / (1 + np.exp(-a)) + np.tanh(a)
    ref = np.clip(w.T, -1, 1.5) + np.log2(np.abs(a) + 1) - 1 / np.sqrt(np.exp(a))
    np.testing.assert_allclose(k(6)(a), ref, rtol=1e-5, atol=1e-6)


def test_fp8_and_bf16_casts_in_expressions():
    @tilelang.jit(out_idx=[1, 2])
    def k(N):
        @T.prim_func
        def main(A: T.Tensor((N,), "float32"), Q: T.Tensor((N,), "float8_e4m3fn"), H: T.Tensor((N,), "bfloat16")):
            with T.Kernel(1) as bx:
                for i in T.Parallel(N):
                    Q[i] = T.cast(A[i] * 100, "float8_e4m3fn")
                    H[i] = A[i].astype("bfloat16")
        return main

    a = np.array([0.1, -3.3, 7.0, 100.0, -0.004], np.float32)
    q, h = k(5)(a)
    assert np.array_equal(q.astype(np.float32), np.clip(a * 100, -448, 448).astype(ml_dtypes.float8_e4m3fn).astype(np.float32))
    assert np.array_equal(h, a.astype(ml_dtypes.bfloat16))


def test_atomic_max_min_region():
    @tilelang.jit
    def k(N, G):
        @T.prim_func
        def main(A: T.Tensor((G, N), "float32"), Mx: T.Tensor((N,), "float32"), Mn: T.Tensor((N,), "float32")):
            with T.Kernel(G) as bx:
                f = T.alloc_fragment((N,), "float32")
                T.copy(A[bx, 0:N], f)
                T.atomic_max(Mx[0:N], f)
                T.atomic_min(Mn[0:N], f)
        return main

    a = np.random.default_rng(2).standard_normal((5, 9)).astype(np.float32)
    mx = np.full(9, -np.inf, np.float32)
    mn = np.full(9, np.inf, np.float32)
    k(9, 5)(a, mx, mn)
    assert np.array_equal(mx, a.max(0)) and np.array_equal(mn, a.min(0))


def test_symbolic_grid_and_scalar_parameter():
    @tilelang.jit(out_idx=[-1])
    def k(block=4):
        n = T.dynamic("n")

        @T.prim_func
        def main(A: T.Tensor((n,), "float32"), s: T.float32, B: T.Tensor((n,), "float32")):
            with T.Kernel(T.ceildiv(n, block)) as bx:
                for i in T.Parallel(block):
                    B[bx * block + i] = A[bx * block + i] * s
        return main

    a = np.arange(11, dtype=np.float32)
    assert np.array_equal(k()(a, 2.5), a * 2.5)
