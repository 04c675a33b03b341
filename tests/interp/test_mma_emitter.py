"""``tilesim.cuda.intrinsics``: the warp-level MMA emitter (``TensorCoreIntrinEmitter``) run as per-thread code
with the PTX fragment layouts, its layout maps, and nested ``def`` helpers in kernels (which TileLang's
layout helpers use)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim as tilelang
import tilesim.language as T
from tilesim.cuda.intrinsics import TensorCoreIntrinEmitter, get_swizzle_layout, make_mma_swizzle_layout
from tilesim.cuda.intrinsics.layout.mma_layout import mma_a_layout, mma_b_layout, mma_c_layout


@pytest.mark.parametrize("e", [1, 2, 4])
def test_fragment_maps_cover_each_tile_once(e):
    k = 8 * e
    a = {mma_a_layout(lane, j, e) for lane in range(32) for j in range(4 * e)}
    b = {mma_b_layout(lane, j, e) for lane in range(32) for j in range(4 * e)}
    assert a == {(r, c) for r in range(16) for c in range(k)}
    assert b == {(n, c) for n in range(16) for c in range(k)}
    assert {mma_c_layout(lane, j) for lane in range(32) for j in range(8)} == {(r, c) for r in range(16)
                                                                               for c in range(16)}


def test_fragment_maps_match_the_ptx_tables():
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i in range(8):  # m16n8k16 f16 A: a0..a7
            assert mma_a_layout(lane, i, 2) == (g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2))
        for i in range(16):  # m16n8k32 s8 A: a0..a15
            assert mma_a_layout(lane, i, 4) == (g + 8 * ((i >> 2) & 1), 4 * t + (i & 3) + 16 * (i >> 3))
        for i in range(4):  # f16 B of the first n8 tile: b0..b3 (k, n) -> stored (n, k)
            assert mma_b_layout(lane, i, 2) == (g, 2 * t + (i & 1) + 8 * (i >> 1))
        for i in range(4):  # C: c0..c3
            assert mma_c_layout(lane, i) == (g + 8 * (i >> 1), 2 * t + (i & 1))


def test_swizzle_is_a_permutation_of_each_row():
    for row_size, dtype in ((64, "float16"), (32, "float16"), (16, "float16"), (64, "int8")):
        for i in range(16):
            cols = [get_swizzle_layout(i, j, row_size, dtype) for j in range(row_size)]
            assert all(r == i for r, _ in cols) and sorted(c for _, c in cols) == list(range(row_size))


def _gemm(M, N, K, in_dtype, accum_dtype, brw, bcw, wrt, wct, chunk, a_trans=False, b_trans=True):
    mma = TensorCoreIntrinEmitter(a_dtype=in_dtype, b_dtype=in_dtype, accum_dtype=accum_dtype, a_transposed=a_trans,
                                  b_transposed=b_trans, block_row_warps=brw, block_col_warps=bcw,
                                  warp_row_tiles=wrt, warp_col_tiles=wct, chunk=chunk)
    bM, bN, bK = brw * wrt, bcw * wct, chunk
    a_shape, b_shape = ((K, M) if a_trans else (M, K)), ((N, K) if b_trans else (K, N))
    as_shape, bs_shape = ((bK, bM) if a_trans else (bM, bK)), ((bN, bK) if b_trans else (bK, bN))

    @T.prim_func
    def main(A: T.Tensor(a_shape, in_dtype), B: T.Tensor(b_shape, in_dtype), C: T.Tensor((M, N), accum_dtype)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=mma.threads) as (bx, by):
            As = T.alloc_shared(as_shape, in_dtype)
            Bs = T.alloc_shared(bs_shape, in_dtype)
            Cs = T.alloc_shared((bM, bN), accum_dtype)
            Al = T.alloc_local((mma.warp_rows * mma.local_size_a,), in_dtype)
            Bl = T.alloc_local((mma.warp_cols * mma.local_size_b,), in_dtype)
            Cl = T.alloc_local((mma.warp_rows * mma.warp_cols * mma.local_size_out,), accum_dtype)
            T.annotate_layout({As: make_mma_swizzle_layout(As)})
            T.clear(Cl)
            for ko in T.serial(T.ceildiv(K, bK)):
                for i, k in T.Parallel(bM, bK):
                    m, kk = by * bM + i, ko * bK + k
                    if a_trans:
                        As[k, i] = T.if_then_else(m < M and kk < K, A[kk, m], 0)
                    else:
                        As[i, k] = T.if_then_else(m < M and kk < K, A[m, kk], 0)
                for j, k in T.Parallel(bN, bK):
                    n, kk = bx * bN + j, ko * bK + k
                    if b_trans:
                        Bs[j, k] = T.if_then_else(n < N and kk < K, B[n, kk], 0)
                    else:
                        Bs[k, j] = T.if_then_else(n < N and kk < K, B[kk, n], 0)
                for ki in T.serial(bK // mma.micro_size_k):
                    mma.ldmatrix_a(Al, As, ki)
                    mma.ldmatrix_b(Bl, Bs, ki)
                    mma.mma(Al, Bl, Cl)
            mma.stmatrix(Cl, Cs)
            for i, j in T.Parallel(bM, bN):
                if by * bM + i < M and bx * bN + j < N:
                    C[by * bM + i, bx * bN + j] = Cs[i, j]

    return tilelang.compile(main, out_idx=[-1])


@settings(max_examples=6, deadline=None)
@given(M=st.integers(1, 70), N=st.integers(1, 70), K=st.integers(1, 70), brw=st.sampled_from([1, 2]),
       bcw=st.sampled_from([1, 2]), wrt=st.sampled_from([16, 32]), wct=st.sampled_from([8, 16, 32]),
       a_trans=st.booleans(), b_trans=st.booleans())
def test_emitter_gemm_float16(M, N, K, brw, bcw, wrt, wct, a_trans, b_trans):
    k = _gemm(M, N, K, "float16", "float32", brw, bcw, wrt, wct, 32, a_trans, b_trans)
    rng = np.random.default_rng(M * 4900 + N * 70 + K)
    a = rng.standard_normal((K, M) if a_trans else (M, K)).astype(np.float16)
    b = rng.standard_normal((N, K) if b_trans else (K, N)).astype(np.float16)
    ref = (a.T if a_trans else a).astype(np.float32) @ (b.T if b_trans else b).astype(np.float32)
    np.testing.assert_allclose(k(a, b), ref, rtol=1e-4, atol=1e-4)


def test_emitter_gemm_int8_is_exact():
    k = _gemm(40, 24, 96, "int8", "int32", 2, 1, 16, 16, 32)
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (40, 96)).astype(np.int8)
    b = rng.integers(-128, 128, (24, 96)).astype(np.int8)
    np.testing.assert_array_equal(k(a, b), a.astype(np.int32) @ b.T.astype(np.int32))


def test_accumulator_fragment_holds_the_gpu_elements():
    """A program that reads C_local[q] directly sees element mma_c_layout(lane, q) of its warp's tile."""
    mma = TensorCoreIntrinEmitter(a_dtype="float16", b_dtype="float16", accum_dtype="float32", b_transposed=True,
                                  block_row_warps=1, block_col_warps=1, warp_row_tiles=16, warp_col_tiles=16,
                                  chunk=16)

    @T.prim_func
    def main(A: T.Tensor((16, 16), "float16"), B: T.Tensor((16, 16), "float16"), O: T.Tensor((32, 8), "float32")):
        with T.Kernel(1, threads=32):
            As = T.alloc_shared((16, 16), "float16")
            Bs = T.alloc_shared((16, 16), "float16")
            Al = T.alloc_local((mma.local_size_a,), "float16")
            Bl = T.alloc_local((mma.local_size_b,), "float16")
            Cl = T.alloc_local((mma.local_size_out,), "float32")
            T.copy(A, As)
            T.copy(B, Bs)
            T.clear(Cl)
            mma.ldmatrix_a(Al, As, 0)
            mma.ldmatrix_b(Bl, Bs, 0)
            mma.mma(Al, Bl, Cl)
            tx = T.get_thread_binding()
            for q in T.serial(8):
                O[tx, q] = Cl[q]

    a = np.arange(256).reshape(16, 16).astype(np.float16) / 64
    b = np.eye(16, dtype=np.float16)
    out = tilelang.compile(main, out_idx=[-1])(a, b)
    c = a.astype(np.float32)
    for lane in range(32):
        for q in range(8):
            assert out[lane, q] == c[mma_c_layout(lane, q)]


def test_emitter_refuses_fragment_operands_and_bad_shapes():
    mma = TensorCoreIntrinEmitter(block_row_warps=1, block_col_warps=1, warp_row_tiles=16, warp_col_tiles=16,
                                  chunk=16, b_transposed=True)

    @T.prim_func
    def main(A: T.Tensor((16, 16), "float16")):
        with T.Kernel(1, threads=32):
            As = T.alloc_shared((16, 16), "float16")
            Af = T.alloc_fragment((16, 16), "float16")
            T.copy(A, As)
            mma.ldmatrix_a(Af, As, 0)

    with pytest.raises(tilelang.KernelTypeError, match="T.alloc_local"):
        tilelang.compile(main)
    with pytest.raises(ValueError, match="warp_row_tiles"):
        TensorCoreIntrinEmitter(warp_row_tiles=8, warp_col_tiles=16, chunk=16)
    with pytest.raises(tilelang.KernelTypeError, match="4-bit|int4"):
        TensorCoreIntrinEmitter(a_dtype="int4", b_dtype="int4", warp_row_tiles=16, warp_col_tiles=16, chunk=64)


def _doubling_layout(buf):
    def forward(i, j):
        return [i, j]
    return T.Layout(buf.shape, forward)


def test_nested_def_in_kernel_and_helper():
    @T.prim_func
    def k(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 8), "float32")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4, 8), "float32")
            T.annotate_layout({S: _doubling_layout(S)})

            def scale(x, f=3):
                if f == 3:
                    return x * f
                return x

            T.copy(A, S)
            for i, j in T.Parallel(4, 8):
                B[i, j] = scale(S[i, j])

    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    np.testing.assert_array_equal(tilelang.compile(k, out_idx=[-1])(a), a * 3)

    @T.prim_func
    def bad(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32):
            @T.macro
            def inner(x):
                return x

            for i in T.Parallel(4):
                A[i] = inner(A[i])

    with pytest.raises(tilelang.KernelSyntaxError, match="decorated function inner"):
        tilelang.compile(bad)
