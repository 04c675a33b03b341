"""``T.int4``: tensors packed two per byte (int8, last axis halved, low nibble first), unpacked for the run,
written back and returned packed; 4-bit conversions (integers wrap, floats truncate and saturate); int4
gemms accumulate exactly in int32; the CUDA backend refuses int4 tensors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim as tilelang
import tilesim.language as T
from tilesim import dtypes as dt
from tilesim.errors import KernelError


def pack_ref(v):
    """TileLang example's packing: (v[..., ::2] & 0xF) | ((v[..., 1::2] & 0xF) << 4) as int8."""
    v = v.astype(np.int16)
    return ((v[..., ::2] & 0x0F) | ((v[..., 1::2] & 0x0F) << 4)).astype(np.uint8).view(np.int8)


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 5), half=st.integers(1, 9), seed=st.integers(0, 999))
def test_pack_unpack_round_trip(rows, half, seed):
    v = np.random.default_rng(seed).integers(-8, 8, (rows, 2 * half)).astype(np.int8)
    np.testing.assert_array_equal(dt.pack_int4(v), pack_ref(v))
    np.testing.assert_array_equal(dt.unpack_int4(pack_ref(v)), v)


def test_int4_conversions():
    np.testing.assert_array_equal(dt.convert(np.array([7, 8, -9, 23, -8], np.int32), "int4"), [7, -8, 7, 7, -8])
    np.testing.assert_array_equal(dt.convert(np.array([7.9, -9.5, 3.5, np.nan], np.float32), "int4"), [7, -8, 3, 0])
    assert (dt.bits("int4"), dt.max_value("int4"), dt.min_value("int4")) == (4, 7, -8)
    assert T.int4 == "int4" and T.int4.bits == 4


def matmul_nt_int4(M, N, K, bm, bn, bk):
    @T.prim_func
    def main(A: T.Tensor((M, K), T.int4), B: T.Tensor((N, K), T.int4), C: T.Tensor((M, N), T.int32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            As = T.alloc_shared((bm, bk), T.int4)
            Bs = T.alloc_shared((bn, bk), T.int4)
            Cl = T.alloc_fragment((bm, bn), T.int32)
            T.clear(Cl)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, ko * bk], As)
                T.copy(B[bx * bn, ko * bk], Bs)
                T.gemm(As, Bs, Cl, transpose_B=True)
            T.copy(Cl, C[by * bm, bx * bn])
    return main


@pytest.mark.filterwarnings("ignore::UserWarning")
@settings(max_examples=8, deadline=None)
@given(M=st.integers(1, 40), N=st.integers(1, 40), halfK=st.integers(1, 40))
def test_int4_gemm_is_exact(M, N, halfK):
    K = 2 * halfK
    rng = np.random.default_rng(M * N + K)
    a, b = rng.integers(-8, 8, (M, K)).astype(np.int8), rng.integers(-8, 8, (N, K)).astype(np.int8)
    k = tilelang.compile(matmul_nt_int4(M, N, K, 16, 16, 32), out_idx=-1)
    c = np.asarray(k(pack_ref(a), pack_ref(b)))
    np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32).T)


def negate(M, K, out):
    @T.prim_func
    def main(A: T.Tensor((M, K), T.int4), B: T.Tensor((M, K), T.int4)):
        with T.Kernel(1, threads=32) as bx:
            for i, j in T.Parallel(M, K):
                B[i, j] = -A[i, j] + (out if out else 0)
    return main


@pytest.mark.parametrize("bias", [0, 3])
def test_int4_outputs_are_written_back_and_returned_packed(bias):
    rng = np.random.default_rng(bias)
    a = rng.integers(-8, 8, (3, 6)).astype(np.int8)
    want = dt.convert(-a.astype(np.int32) + bias, "int4")  # -(-8) wraps to -8
    b = np.zeros((3, 3), np.int8)
    tilelang.compile(negate(3, 6, bias))(pack_ref(a), b)  # in place: the caller's packed array
    np.testing.assert_array_equal(dt.unpack_int4(b), want)
    out = np.asarray(tilelang.compile(negate(3, 6, bias), out_idx=-1)(pack_ref(a)))  # returned packed
    assert out.shape == (3, 3) and out.dtype == np.int8
    np.testing.assert_array_equal(dt.unpack_int4(out), want)


def test_int4_argument_shape_is_the_packed_one():
    k = tilelang.compile(negate(3, 6, 0))
    with pytest.raises(KernelError, match="A"):
        k(np.zeros((3, 6), np.int8), np.zeros((3, 3), np.int8))  # unpacked A: last axis twice too long


def test_cuda_backend_refuses_int4_tensors():
    pytest.importorskip("numba_cuda")
    from tilesim.backends.cuda.check import cuda_twin
    with pytest.raises(KernelError, match="int4") as ei:
        cuda_twin(tilelang.compile(negate(3, 6, 0))).get_kernel_source()
    assert ei.value.loc is not None
