"""``T.tfloat32``: float32 storage under TileLang's name (gemms round to TF32 under InterpOptions(tf32=True)),
and ``T.Tensor((n), dtype)`` with a ``T.dynamic`` size (a parenthesised symbol, not a tuple)."""

import numpy as np
import pytest

import tilesim as tilelang
import tilesim.language as T
from tilesim import dtypes as dt
from tilesim.backends.interp.options import InterpOptions


def test_tfloat32_is_float32_storage_under_its_own_name():
    assert T.tfloat32 == "tfloat32" and dt.canon(T.tfloat32) == "float32"
    assert T.tfloat32.bits == 32 and T.tfloat32.bytes == 4
    assert T.Tensor((4, 4), T.tfloat32).dtype == "float32"


def gemm_tf32(M, N, K):
    @T.prim_func
    def main(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((N, K), T.tfloat32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            As = T.alloc_shared((M, K), T.bfloat16)
            Af = T.alloc_fragment((M, K), T.tfloat32)
            Bs = T.alloc_shared((N, K), T.tfloat32)
            Cf = T.alloc_fragment((M, N), T.float32)
            T.copy(A, As)
            T.copy(As, Af)
            T.copy(B, Bs)
            T.gemm(Af, Bs, Cf, transpose_B=True, clear_accum=True)
            T.copy(Cf, C)
    return main


@pytest.mark.parametrize("tf32", [False, True])
def test_tfloat32_gemm_operands(tf32):
    import ml_dtypes
    M, N, K = 16, 24, 40
    rng = np.random.default_rng(3)
    a = rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((N, K)).astype(np.float32)
    c = np.zeros((M, N), np.float32)
    tilelang.compile(gemm_tf32(M, N, K), options=InterpOptions(tf32=tf32))(a, b, c)
    bb = dt.to_tf32(b) if tf32 else b
    want = a.astype(np.float64) @ bb.astype(np.float64).T
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)
    if tf32:  # the rounding is visible: exact float32 operands give another answer
        assert not np.allclose(c, a.astype(np.float64) @ b.astype(np.float64).T, rtol=1e-7, atol=1e-7)


def test_tensor_annotation_with_a_parenthesised_dynamic_size():
    @tilelang.jit
    def double(X):
        n = T.dynamic("n")
        X: T.Tensor((n), T.float32)
        Y = T.empty((n,), T.float32)
        with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:
            for i in T.Parallel(32):
                if bx * 32 + i < n:
                    Y[bx * 32 + i] = X[bx * 32 + i] * 2
        return Y

    x = np.arange(45, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(double(x)), 2 * x)
