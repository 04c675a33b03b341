"""``tilesim.rocm.intrinsics``: the AMD MFMA emitters' per-thread fragments (lane ``t`` holds row ``t % 16`` and K
columns ``(t // 16) * L ..``), pre-shuffled B read from global memory or from shared memory, the accumulator's
store layout, and GEMMs built from them against NumPy; ``GemmWarpPolicy.compute_warp_partition``."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim as tilelang
import tilesim.language as T
from tilesim.rocm.intrinsics.mfma_macro_generator import (
    MatrixCoreIntrinEmitter,
    MatrixCorePreshuffleIntrinEmitter,
)
from tilesim.tileop.base import GemmWarpPolicy

NP = {"float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float16": np.float16}


def mfma_gemm(M, N, K, block_M, block_N, block_K, dtype, k_pack, b_transposed, preshuffle, threads=256):
    m_warp, n_warp = GemmWarpPolicy.Square.compute_warp_partition(block_M, block_N, threads // 64)
    cls = MatrixCorePreshuffleIntrinEmitter if preshuffle else MatrixCoreIntrinEmitter
    kw = {"b_preshuffle": True} if preshuffle else {}
    e = cls(a_dtype=dtype, b_dtype=dtype, accum_dtype="float32", a_transposed=False, b_transposed=b_transposed,
            block_row_warps=m_warp, block_col_warps=n_warp, warp_row_tiles=block_M // m_warp,
            warp_col_tiles=block_N // n_warp, chunk=block_K, k_pack=k_pack, **kw)
    pk = e.micro_size_k * k_pack
    if preshuffle:
        B_shape = (N // 16, K // pk, 16, pk) if b_transposed else (K // pk, N // 16, pk, 16)
    else:
        B_shape = (N, K) if b_transposed else (K, N)
    B_sh = (block_N, block_K) if b_transposed else (block_K, block_N)

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor(B_shape, dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared(B_sh, dtype)
            A_local = T.alloc_local((e.warp_rows * e.local_size_a * k_pack), dtype)
            B_local = T.alloc_local((e.warp_cols * e.local_size_b * k_pack), dtype)
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.annotate_layout({C_local: e.make_mfma_store_layout(C_local)})
            T.clear(C_local)
            for ko in T.serial(K // block_K):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                if not preshuffle:
                    if b_transposed:
                        T.copy(B[bx * block_N, ko * block_K], B_shared)
                    else:
                        T.copy(B[ko * block_K, bx * block_N], B_shared)
                for ki in T.serial(block_K // pk):
                    e.ldmatrix_a(A_local, A_shared, ki)
                    if preshuffle:
                        e.ldmatrix_b(B_local, B, ki + ko * (block_K // pk), pid_m=by, pid_n=bx)
                    else:
                        e.ldmatrix_b(B_local, B_shared, ki)
                    e.mfma(A_local, B_local, C_local, ki)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return tilelang.compile(main, out_idx=[-1]), pk


def shuffle(b, pk, transposed):
    """The program-side pre-shuffle: 16 x pk tiles of B (N x K when transposed, else K x N), tile-major."""
    if transposed:
        n, k = b.shape
        return np.ascontiguousarray(b.reshape(n // 16, 16, k // pk, pk).transpose(0, 2, 1, 3))
    k, n = b.shape
    return np.ascontiguousarray(b.reshape(k // pk, pk, n // 16, 16).transpose(0, 2, 1, 3))


@settings(max_examples=6, deadline=None)
@given(st.sampled_from([("float8_e4m3fn", 2), ("float8_e4m3fn", 1), ("float16", 1), ("float16", 2)]),
       st.booleans(), st.booleans(), st.integers(1, 2), st.integers(1, 2), st.integers(0, 999))
def test_mfma_gemm_matches_numpy(dtype_pack, b_transposed, preshuffle, mt, nt, seed):
    dtype, k_pack = dtype_pack
    rng = np.random.default_rng(seed)
    M, N, block = 32 * mt, 32 * nt, 32
    k, pk = mfma_gemm(M, N, 128, block, block, 64, dtype, k_pack, b_transposed, preshuffle, threads=256)
    a = (rng.random((M, 128)) - 0.5).astype(NP[dtype])
    b_nk = (rng.random((N, 128)) - 0.5).astype(NP[dtype])
    b = b_nk if b_transposed else np.ascontiguousarray(b_nk.T)
    if preshuffle:
        b = shuffle(b, pk, b_transposed)
    c = k(a, b)
    ref = a.astype(np.float64) @ b_nk.astype(np.float64).T
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-5)


def test_fragment_of_each_lane_is_the_mfma_layout():
    e = MatrixCoreIntrinEmitter(a_dtype="float8_e4m3fn", b_dtype="float8_e4m3fn", accum_dtype="float32",
                                block_row_warps=1, block_col_warps=1, warp_row_tiles=16, warp_col_tiles=16,
                                chunk=64, k_pack=2)
    assert (e.k_dim, e.pack_k, e.local_size_a, e.local_size_out, e.threads) == (32, 64, 8, 4, 64)
    n = e.local_size_a * 2

    @T.prim_func
    def k(A: T.Tensor((16, 64), "float32"), Out: T.Tensor((64, n), "float32")):
        with T.Kernel(1, threads=64):
            A_shared = T.alloc_shared((16, 64), "float32")
            A_local = T.alloc_local((n,), "float32")
            T.copy(A, A_shared)
            e.ldmatrix_a(A_local, A_shared, 0)
            tx = T.get_thread_binding()
            for q in T.serial(n):
                Out[tx, q] = A_local[q]

    a = np.arange(16 * 64, dtype=np.float32).reshape(16, 64)
    out = tilelang.compile(k, out_idx=[-1])(a)
    lane, q = np.meshgrid(np.arange(64), np.arange(n), indexing="ij")
    np.testing.assert_array_equal(out, a[lane % 16, (lane // 16) * 16 + q])  # TileLang's 64x16 <- 16x64 map


def test_store_layout_and_warp_partition():
    e = MatrixCoreIntrinEmitter(block_row_warps=2, block_col_warps=2, warp_row_tiles=32, warp_col_tiles=32,
                                chunk=32)
    frag = e.make_mfma_store_layout(type("B", (), {"shape": (64, 64)})())
    # element (i, j) of warp (warp_m, warp_n) = (i // 32, j // 32): lane r + 16 * (c // 4), register c % 4
    assert frag.forward_fn(0, 0) == (0, 0)
    assert frag.forward_fn(3, 6) == (3 + 16, 2)
    assert frag.forward_fn(17, 21) == (1 + 16, (1 * 2 + 1) * 4 + 1)
    assert frag.forward_fn(40, 0) == (64 * 1 + 8, 0)          # warp_m 1 -> warp 1 (not m-first)
    assert frag.forward_fn(0, 40) == (64 * 2 + 32, 0)         # warp_n 1 -> warp 2
    P = GemmWarpPolicy
    assert P.Square.compute_warp_partition(128, 128, 4) == (2, 2)
    assert P.Square.compute_warp_partition(128, 32, 4) == (2, 2)   # 4 x 2 per-warp tiles: aspect 2, closest to 4
    assert P.Square.compute_warp_partition(16, 128, 4) == (1, 4)
    assert P.FullRow.compute_warp_partition(128, 128, 4) == (4, 1)
    assert P.FullRow.compute_warp_partition(32, 128, 4) == (2, 2)   # M too short: the rest go to N
    assert P.FullCol.compute_warp_partition(64, 64, 4) == (1, 4)


def test_refusals():
    with pytest.raises(tilelang.KernelTypeError, match="16 x 16 x K only"):
        MatrixCoreIntrinEmitter(a_dtype="int8", accum_dtype="int32", mfma_shape=(32, 32, 32))
    e = MatrixCoreIntrinEmitter(block_row_warps=1, block_col_warps=1, warp_row_tiles=16, warp_col_tiles=16, chunk=16)

    @T.prim_func
    def k(A: T.Tensor((16, 16), "float16"), C: T.Tensor((16, 16), "float16")):
        with T.Kernel(1, threads=64):
            A_shared = T.alloc_shared((16, 16), "float16")
            A_local = T.alloc_local((4,), "float16")
            C_local = T.alloc_local((4,), "float16")
            T.copy(A, A_shared)
            e.ldmatrix_a(A_local, A_shared, 0)
            e.mfma(A_local, A_local, C_local)

    with pytest.raises(tilelang.KernelTypeError, match="C must be the block's"):
        tilelang.compile(k)
