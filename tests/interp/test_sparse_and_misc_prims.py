"""``T.gemm_sp`` (2:4 / 1:2 structured-sparse A with TileLang's natural row-major metadata), the metadata facts of
``tilesim.cuda.intrinsics.sparse_layout``, ``T.device_assert``, the named bitwise primitives and per-thread
``T.copy`` of ``T.alloc_local`` arrays."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim as tilelang
import tilesim.language as T
from tilesim.cuda.intrinsics.sparse_layout import GROUP_CONFIG, get_e_factor, get_e_replicate_factor


def _compress(dense, meta_bits, rng):
    """A NumPy 2:4 (1:2 for float32) compressor writing the documented metadata layout."""
    m, k = dense.shape
    keep, group = GROUP_CONFIG[str(dense.dtype)]
    qb = meta_bits // 4
    sparse = np.zeros((m, k * keep // group), dense.dtype)
    meta = np.zeros((m, k // (qb * group)), np.int64)
    for i in range(m):
        for g in range(k // group):
            nz = sorted(rng.choice(group, keep, replace=False))
            if keep == 2:
                chunk = nz[0] | (nz[1] << 2)
                sparse[i, 2 * g:2 * g + 2] = dense[i, group * g + np.array(nz)]
            else:
                chunk = 0b0100 if nz[0] == 0 else 0b1110
                sparse[i, g] = dense[i, group * g + nz[0]]
            meta[i, g // qb] |= chunk << (4 * (g % qb))
    full = np.zeros_like(dense)
    for i in range(m):  # the dense matrix the sparse one stands for
        for g in range(k // group):
            chunk = (meta[i, g // qb] >> (4 * (g % qb))) & 15
            if keep == 2:
                full[i, group * g + (chunk & 3)] = sparse[i, 2 * g]
                full[i, group * g + ((chunk >> 2) & 3)] = sparse[i, 2 * g + 1]
            else:
                full[i, group * g + (chunk & 3) // 2] = sparse[i, g]
    mdt = {16: np.int16, 32: np.int32, 8: np.int8}[meta_bits]
    return sparse, meta.astype(np.uint64).astype(mdt), full


def _gemm_sp(M, N, K, dtype, meta, bM, bN, bK, trans_b):
    e = get_e_factor(dtype, meta)
    keep, group = GROUP_CONFIG[dtype]
    b_shape, bs_shape = ((N, K), (bN, bK)) if trans_b else ((K, N), (bK, bN))

    @T.prim_func
    def k(A: T.Tensor((M, K * keep // group), dtype), E: T.Tensor((M, K // e), meta),
          B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            As = T.alloc_shared((bM, bK * keep // group), dtype)
            Es = T.alloc_shared((bM, bK // e), meta)
            Bs = T.alloc_shared(bs_shape, dtype)
            acc = T.alloc_fragment((bM, bN), "float32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, bK), num_stages=2):
                T.copy(A[by * bM, ko * bK * keep // group], As)
                T.copy(E[by * bM, ko * bK // e], Es)
                if trans_b:
                    T.copy(B[bx * bN, ko * bK], Bs)
                else:
                    T.copy(B[ko * bK, bx * bN], Bs)
                T.gemm_sp(As, Es, Bs, acc, transpose_B=trans_b)
            T.copy(acc, C[by * bM, bx * bN])

    return tilelang.compile(k, out_idx=[-1])


@settings(max_examples=6, deadline=None)
@given(M=st.integers(1, 40), N=st.integers(1, 40), kb=st.integers(1, 3),
       case=st.sampled_from([("float16", "int16", 16), ("float16", "int32", 32), ("float32", "int16", 16),
                             ("int8", "int32", 32)]), trans_b=st.booleans())
def test_gemm_sp_is_the_dense_product(M, N, kb, case, trans_b):
    dtype, meta, meta_bits = case
    e = get_e_factor(dtype, meta)
    bK = max(e, 32)
    K = bK * kb
    rng = np.random.default_rng(M * 1000 + N * 10 + kb)
    if dtype == "int8":
        dense = rng.integers(-8, 8, (M, K)).astype(np.int8)
        b = rng.integers(-8, 8, (K, N)).astype(np.int8)
    else:
        dense = rng.standard_normal((M, K)).astype(dtype)
        b = rng.standard_normal((K, N)).astype(dtype)
    sparse, meta_arr, full = _compress(dense, meta_bits, rng)
    out = _gemm_sp(M, N, K, dtype, meta, 32, 32, bK, trans_b)(sparse, meta_arr, np.ascontiguousarray(b.T) if trans_b
                                                                else b)
    ref = full.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-3)


def test_sparse_layout_facts():
    assert GROUP_CONFIG[T.float16] == (2, 4) and GROUP_CONFIG["float32"] == (1, 2)
    assert get_e_factor(T.float16, T.int16) == 16 and get_e_factor(T.int8, T.int32) == 32
    assert get_e_factor(T.float32, T.int16) == 8
    assert get_e_replicate_factor(T.int8) == 1 and get_e_replicate_factor(T.float16) == 2
    with pytest.raises(KeyError, match="float64"):
        GROUP_CONFIG["float64"]


def test_gemm_sp_refuses_transposed_sparse_operands():
    @T.prim_func
    def k(A: T.Tensor((16, 16), "float16"), E: T.Tensor((16, 2), "int16"), B: T.Tensor((32, 16), "float16")):
        with T.Kernel(1, threads=128):
            As = T.alloc_shared((16, 16), "float16")
            Es = T.alloc_shared((16, 2), "int16")
            Bs = T.alloc_shared((32, 16), "float16")
            acc = T.alloc_fragment((16, 16), "float32")
            T.gemm_sp(As, Es, Bs, acc, transpose_A=True)

    with pytest.raises(tilelang.KernelTypeError, match="transpose_A"):
        tilelang.compile(k)


def test_device_assert_checks_active_elements():
    @T.prim_func
    def k(A: T.Tensor((8,), "int32"), B: T.Tensor((8,), "int32")):
        with T.Kernel(2, threads=32) as bx:
            for i in T.Parallel(4):
                if A[bx * 4 + i] >= 0:
                    T.device_assert(A[bx * 4 + i] < 100, "value too large")
                B[bx * 4 + i] = A[bx * 4 + i]

    kern = tilelang.compile(k, out_idx=[-1])
    a = np.array([1, 2, -500, 3, 4, 5, 6, 7], np.int32)
    np.testing.assert_array_equal(kern(a), a)  # -500 is under the false branch: not checked
    a[6] = 100
    with pytest.raises(tilelang.KernelRuntimeError, match="block 1: value too large"):
        kern(a)
    assert "T.device_assert" in kern.get_kernel_source()
    assert tilelang.compile(k, target="cuda").get_kernel_source()  # lowered (not checked there)


def test_bitwise_primitives_mean_the_operators():
    @T.prim_func
    def k(A: T.Tensor((16,), "int32"), B: T.Tensor((6, 16), "int32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(16):
                B[0, i] = T.shift_left(A[i], 3)
                B[1, i] = T.shift_right(A[i], 2)
                B[2, i] = T.bitwise_and(A[i], 6)
                B[3, i] = T.bitwise_or(A[i], 9)
                B[4, i] = T.bitwise_xor(A[i], 5)
                B[5, i] = T.bitwise_not(A[i])

    a = np.arange(-8, 8, dtype=np.int32)
    out = tilelang.compile(k, out_idx=[-1])(a)
    np.testing.assert_array_equal(out, np.stack([a << 3, a >> 2, a & 6, a | 9, a ^ 5, ~a]))


def test_per_thread_copy_of_local_arrays():
    """TileLang's per-thread T.copy: each thread copies its own slice into / out of its T.alloc_local array."""

    @T.prim_func
    def k(A: T.Tensor((4, 64), "float32"), B: T.Tensor((4, 64), "float16")):
        with T.Kernel(4, threads=(2, 4)) as bx:
            tm = T.get_thread_binding(0)
            tn = T.get_thread_binding(1)
            loc = T.alloc_local((8,), "float32")
            T.copy(A[bx, (tn * 2 + tm) * 8:(tn * 2 + tm + 1) * 8], loc)
            for j in T.serial(8):
                loc[j] = loc[j] * 2 + tm
            T.copy(loc, B[bx, (tn * 2 + tm) * 8:(tn * 2 + tm + 1) * 8])

    a = np.random.default_rng(1).standard_normal((4, 64)).astype(np.float32)
    tm = (np.arange(64) // 8) % 2
    np.testing.assert_allclose(tilelang.compile(k, out_idx=[-1])(a), (a * 2 + tm).astype(np.float16), rtol=1e-3)
