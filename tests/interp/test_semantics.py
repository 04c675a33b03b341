"""The interpreter's meaning of individual primitives (LANGUAGE.md), one property per test."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
import tilesim as tilelang
import tilesim.language as T
from tilesim.errors import KernelRuntimeError

SERIAL = tilesim.InterpOptions(mode="serial")


# --------------------------------------------------------------------------------------------- copies
@tilelang.jit(out_idx=[-1])
def tile_copy(M, N, BM, BN, src_dtype="float32", dst_dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, N), src_dtype), B: T.Tensor((M, N), dst_dtype)):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM)) as (bx, by):
            S = T.alloc_shared((BM, BN), src_dtype)
            F = T.alloc_fragment((BM, BN), dst_dtype)
            T.copy(A[by * BM, bx * BN], S)
            T.copy(S, F)
            T.copy(F, B[by * BM, bx * BN])

    return main


@settings(max_examples=10)
@given(st.integers(1, 50), st.integers(1, 50), st.sampled_from([8, 16]), st.sampled_from([8, 32]))
def test_copy_edges_zero_fill_and_skip(M, N, BM, BN):
    a = np.random.default_rng(M * 100 + N).standard_normal((M, N)).astype(np.float32)
    b = tile_copy(M, N, BM, BN)(a)
    assert np.array_equal(a, b)  # every element written once; overhanging writes skipped


@tilelang.jit(out_idx=[-1])
def read_past_edge(M, BM):
    @T.prim_func
    def main(A: T.Tensor((M,), "float32"), B: T.Tensor((T.ceildiv(M, BM) * BM,), "float32")):
        with T.Kernel(T.ceildiv(M, BM)) as bx:
            F = T.alloc_fragment((BM,), "float32")
            T.copy(A[bx * BM], F)
            T.copy(F, B[bx * BM])

    return main


def test_out_of_range_reads_give_zero():
    a = np.arange(1, 11, dtype=np.float32)
    b = read_past_edge(10, 8)(a)
    assert np.array_equal(b[:10], a) and np.array_equal(b[10:], np.zeros(6, np.float32))


def test_oob_error_mode_reports_the_copy_line():
    k = tilesim.compile(read_past_edge(10, 8).prim_func, out_idx=[-1], options=tilesim.InterpOptions(oob="error"))
    with pytest.raises(KernelRuntimeError, match="out-of-bounds read of global buffer A") as info:
        k(np.ones(10, np.float32))
    assert "test_semantics.py" in str(info.value)


def test_fp8_copy_saturates_like_the_gpu():
    a = np.array([[1000.0, -1000.0, 448.0, 460.0, -500.0, 1.0, np.nan, 0.0]], np.float32)
    b = tile_copy(1, 8, 1, 8, dst_dtype="float8_e4m3fn")(a)
    expect = np.array([448, -448, 448, 448, -448, 1, np.nan, 0], np.float32)
    got = b.astype(np.float32)[0]
    assert np.array_equal(got[~np.isnan(expect)], expect[~np.isnan(expect)]) and np.isnan(got[6])
    # plain ml_dtypes casts would give NaN above 464: tilesim must not
    assert np.isnan(np.float32(1000).astype(ml_dtypes.float8_e4m3fn).astype(np.float32))


def test_bf16_and_fp16_copies_round_to_nearest_even():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 16)).astype(np.float32)
    for d in ("bfloat16", "float16"):
        b = tile_copy(4, 16, 4, 16, dst_dtype=d)(a)
        assert np.array_equal(b, a.astype(tilesim.dtypes.np_dtype(d)))


@tilelang.jit(out_idx=[-1])
def broadcast_row(M, N):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            F = T.alloc_fragment((M, N), "float32")
            T.copy(A[0:N], F)
            T.copy(F, B[0, 0])

    return main


def test_copy_broadcasts_right_aligned():
    a = np.arange(5, dtype=np.float32)
    assert np.array_equal(broadcast_row(3, 5)(a), np.tile(a, (3, 1)))


# --------------------------------------------------------------------------------------------- reductions
@tilelang.jit(out_idx=[-1])
def running_max(M, N, clear):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M,), "float32")):
        with T.Kernel(1) as bx:
            F = T.alloc_fragment((M, N), "float32")
            r = T.alloc_fragment((M,), "float32")
            T.copy(A, F)
            T.fill(r, 5.0)
            T.reduce_max(F, r, dim=1, clear=clear)
            T.copy(r, B)

    return main


def test_reduce_clear_false_folds_into_out():
    a = np.array([[1.0, 2.0], [7.0, 3.0]], np.float32)
    assert np.array_equal(running_max(2, 2, True)(a), [2.0, 7.0])
    assert np.array_equal(running_max(2, 2, False)(a), [5.0, 7.0])


@tilelang.jit(out_idx=[-1])
def reductions(M, N, kind):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1) as bx:
            F = T.alloc_fragment((M, N), "float32")
            r = T.alloc_fragment((N,), "float32")
            T.copy(A, F)
            T.reduce(F, r, kind, dim=0)
            T.copy(r, B)

    return main


@pytest.mark.parametrize("kind, fn", [("sum", lambda a: a.sum(0)), ("min", lambda a: a.min(0)),
                                      ("absmax", lambda a: np.abs(a).max(0)), ("abssum", lambda a: np.abs(a).sum(0))])
def test_reduce_kinds_over_dim0(kind, fn):
    a = np.random.default_rng(3).standard_normal((6, 5)).astype(np.float32)
    np.testing.assert_allclose(reductions(6, 5, kind)(a), fn(a), rtol=1e-6)


# --------------------------------------------------------------------------------------------- atomics
@tilelang.jit
def scatter_add(N, B):
    @T.prim_func
    def main(Idx: T.Tensor((N,), "int32"), V: T.Tensor((N,), "float32"), Out: T.Tensor((B,), "float32")):
        with T.Kernel(T.ceildiv(N, 8)) as bx:
            for i in T.Parallel(8):
                if bx * 8 + i < N:
                    T.atomic_add(Out[Idx[bx * 8 + i]], V[bx * 8 + i])

    return main


@settings(max_examples=8)
@given(st.integers(1, 60), st.integers(1, 5))
def test_atomic_add_sums_across_blocks_and_elements(n, bins):
    rng = np.random.default_rng(n)
    idx = rng.integers(0, bins, n).astype(np.int32)
    v = rng.standard_normal(n).astype(np.float32)
    out = np.zeros(bins, np.float32)
    scatter_add(n, bins)(idx, v, out)
    np.testing.assert_allclose(out, np.bincount(idx, v, minlength=bins), rtol=1e-5, atol=1e-5)
    out2 = np.zeros(bins, np.float32)
    scatter_add(n, bins).run(idx, v, out2, options=SERIAL)
    np.testing.assert_allclose(out2, out, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------------------------- control
@tilelang.jit(out_idx=[-1])
def guarded_gather(N, M):
    @T.prim_func
    def main(Idx: T.Tensor((N,), "int32"), A: T.Tensor((M,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1) as bx:
            F = T.alloc_fragment((M,), "float32")
            T.copy(A, F)
            for i in T.Parallel(N):
                # the on-chip read F[Idx[i]] would be out of range for Idx < 0: only the taken branch runs
                B[i] = T.if_then_else(Idx[i] >= 0, F[Idx[i]], -1.0)

    return main


def test_if_then_else_evaluates_only_the_taken_branch():
    idx = np.array([0, -1, 3, -5], np.int32)
    a = np.arange(4, dtype=np.float32) + 10
    assert np.array_equal(guarded_gather(4, 4)(idx, a), [10, -1, 13, -1])


@tilelang.jit(out_idx=[-1])
def onchip_oob(N):
    @T.prim_func
    def main(Idx: T.Tensor((N,), "int32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1) as bx:
            F = T.alloc_fragment((N,), "float32")
            T.fill(F, 1.0)
            for i in T.Parallel(N):
                B[i] = F[Idx[i]]

    return main


def test_onchip_out_of_range_is_an_error_with_location():
    with pytest.raises(KernelRuntimeError, match="out-of-bounds read of fragment buffer F") as info:
        onchip_oob(4)(np.array([0, 1, 2, 9], np.int32))
    assert "test_semantics.py" in str(info.value)


@tilelang.jit(out_idx=[-1])
def block_varying_loop(N):
    @T.prim_func
    def main(L: T.Tensor((N,), "int32"), B: T.Tensor((N,), "int32")):
        with T.Kernel(N) as bx:
            acc = T.alloc_var("int32", 0)
            for k in T.serial(L[bx]):
                if k == 5:
                    break
                if k % 2 == 1:
                    continue
                acc = acc + k
            n = T.alloc_var("int32", 0)
            while n * n < L[bx]:
                n = n + 1
            B[bx] = acc * 100 + n

    return main


def test_block_varying_loops_break_continue_while():
    lens = np.array([0, 1, 4, 9, 17, 3], np.int32)

    def ref(L):
        out = []
        for x in L:
            acc = sum(k for k in range(min(x, 5)) if k % 2 == 0)
            n = 0
            while n * n < x:
                n += 1
            out.append(acc * 100 + n)
        return out

    assert list(block_varying_loop(6)(lens)) == ref(lens)
    assert list(block_varying_loop(6).run(lens, options=SERIAL)) == ref(lens)


# --------------------------------------------------------------------------------------------- checking options
@tilelang.jit(out_idx=[-1])
def half_written(N):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                if i < N // 2:
                    B[i] = A[i]

    return main


def test_uninitialised_outputs_are_nan_by_default_and_zero_on_request():
    a = np.ones(6, np.float32)
    b = half_written(6)(a)
    assert np.array_equal(b[:3], a[:3]) and np.isnan(b[3:]).all()
    k = tilesim.compile(half_written(6).prim_func, out_idx=[-1], options=tilesim.InterpOptions(uninit="zero"))
    assert np.array_equal(k(a)[3:], np.zeros(3, np.float32))


@tilelang.jit(out_idx=[-1])
def racy(N):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((1,), "float32")):
        with T.Kernel(N) as bx:
            B[0] = A[bx]

    return main


def test_race_detection_names_the_blocks():
    k = tilesim.compile(racy(4).prim_func, out_idx=[-1], options=tilesim.InterpOptions(races=True))
    with pytest.raises(KernelRuntimeError, match=r"blocks \d+ and \d+ both write B\(0,\)"):
        k(np.ones(4, np.float32))
    racy(4)(np.ones(4, np.float32))  # without the option: last writer wins, no error


def test_tf32_option_rounds_fp32_gemm_operands():
    from tilesim.examples import matmul
    rng = np.random.default_rng(0)
    a = rng.standard_normal((32, 64)).astype(np.float32)
    b = rng.standard_normal((64, 32)).astype(np.float32)
    k = matmul(32, 32, 64, 32, 32, 32, dtype="float32")
    exact = k(a, b)
    tf = tilesim.compile(k.prim_func, out_idx=[-1], options=tilesim.InterpOptions(tf32=True))(a, b)
    ref = tilesim.dtypes.to_tf32(a).astype(np.float64) @ tilesim.dtypes.to_tf32(b).astype(np.float64)
    assert np.abs(tf - ref).max() < 1e-4 < np.abs(exact - ref).max()


def test_int8_gemm_accumulates_in_int32():
    from tilesim.examples import matmul
    a = np.full((16, 64), 127, np.int8)
    b = np.full((64, 16), 127, np.int8)
    k = matmul(16, 16, 64, 16, 16, 32, dtype="int8", accum_dtype="int32")
    assert (k(a, b) == 127 * 127 * 64).all()


def test_half_arithmetic_rounds_each_operation():
    @tilelang.jit(out_idx=[-1])
    def k(N):
        @T.prim_func
        def main(A: T.Tensor((N,), "float16"), B: T.Tensor((N,), "float16")):
            with T.Kernel(1) as bx:
                for i in T.Parallel(N):
                    B[i] = A[i] * A[i] + A[i]  # two roundings, as half arithmetic on a GPU

        return main

    a = np.array([1.001, 3.1416, 0.1, 600.5], np.float16)
    expect = ((a * a).astype(np.float16) + a).astype(np.float16)
    assert np.array_equal(k(4)(a), expect)


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
                                  "float4_e2m1fn"])
def test_widen_of_one_byte_floats_is_bitwise_the_cast(name):
    from tilesim import dtypes as dt

    if not hasattr(ml_dtypes, name) or np.dtype(getattr(ml_dtypes, name)) not in dt._NARROW_NP:
        pytest.skip(f"{name} is not a tilesim dtype")
    raw = np.arange(256, dtype=np.uint8).view(getattr(ml_dtypes, name))
    arr = np.stack([raw, raw[::-1]])[:, ::3]  # non-contiguous, 2-D
    fast = dt.widen(arr, np.dtype(np.float32))
    assert fast.dtype == np.float32 and fast.shape == arr.shape
    np.testing.assert_array_equal(fast.view(np.uint32), arr.astype(np.float32).view(np.uint32))
    half = np.arange(8, dtype=np.float16)
    assert dt.widen(half, np.dtype(np.float32)).dtype == np.float32  # other dtypes: plain astype


@settings(max_examples=8, deadline=None)
@given(rows=st.integers(1, 40), d=st.integers(1, 33), bi=st.integers(1, 9), blocks=st.integers(1, 4),
       dtype=st.sampled_from(["float32", "bfloat16", "float8_e4m3fn", "int32"]))
def test_indexed_gather_from_a_global_tensor_matches_numpy(rows, d, bi, blocks, dtype):
    """KV[Idx[b, i], g, k] inside T.Parallel (the sparse-attention gather): one linear take, zero out of range."""

    @tilelang.jit(out_idx=[-1])
    def gather():
        @T.prim_func
        def main(KV: T.Tensor((rows, 2, d), dtype), Idx: T.Tensor((blocks, bi), "int32"),
                 O: T.Tensor((blocks, bi, d), dtype)):
            with T.Kernel(blocks, threads=128) as bx:
                for i, k in T.Parallel(bi, d):
                    O[bx, i, k] = KV[Idx[bx, i], 1, k]

        return main

    rng = np.random.default_rng(rows * 7 + d)
    npd = tilesim.dtypes.np_dtype(dtype)
    kv = rng.integers(-50, 50, (rows, 2, d)).astype(npd)
    idx = rng.integers(-2, rows + 2, (blocks, bi)).astype(np.int32)  # a few out of range: read as 0
    want = np.where(((idx >= 0) & (idx < rows))[..., None], kv[np.clip(idx, 0, rows - 1), 1, :], 0).astype(npd)
    got = gather()(kv, idx)
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))
