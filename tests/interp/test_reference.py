"""The interpreter's fast paths against the plain one-block meaning in ``tilesim/backends/interp/reference.py``.

Each tile op runs in a tiny kernel on shapes the tiles do not divide (edge tiles: zero-filled reads,
dropped writes), through the interpreter batched, serial, in small chunks on threads, and with the fused
GEMM K loop off; every result is compared with a per-block loop over ``reference`` (blocks in launch
order: ``bx`` fastest). Bitwise where the order of operations is fixed (copy, fill, max/min/absmax
reductions, cumsum, element ops, integer gemm and atomics, float32 atomics); float sums and float gemm
within a tolerance scaled by the dtype's epsilon and the magnitude of the summed terms (BLAS / NumPy
pairwise order is not part of the meaning). Narrow-float atomics: see ``test_atomic_matches_reference``.
Kernel outputs are passed in (no ``out_idx``) holding a sentinel, so dropped writes are observable.
"""

import dataclasses

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tilesim
import tilesim as tilelang
import tilesim.language as T
from tilesim import dtypes as dt
from tilesim.backends.interp import exprs, gemm_loop, pool, tile_copy, tile_reduce
from tilesim.backends.interp import reference as R
from tilesim.testing.strategies import dim, random_array

DTYPES = ("float32", "float16", "bfloat16", "float8_e4m3fn", "int32")
MODES = {
    "batched": tilesim.InterpOptions(),
    "serial": tilesim.InterpOptions(mode="serial"),
    "chunked": tilesim.InterpOptions(threads=3, chunk_bytes=2**12),
    "plain": tilesim.InterpOptions(fuse_gemm_loops=False),
}


def cdiv(a, b):
    return -(-a // b)


def rand(rng, shape, dtype, scale=1.0):
    """Random values; floats scaled so fp8 e4m3 saturates (|x| > 448) when ``scale`` is large."""
    return random_array(rng, shape, dtype, scale)


def sentinel(shape, dtype):
    return np.full(shape, dt.convert(np.asarray(-3.0), dtype), dtype=dt.np_dtype(dtype))


def run_modes(kernel, inputs, modes=MODES):
    """{mode: the inputs after an in-place run}."""
    out = {}
    for name, opts in modes.items():
        args = [x.copy() for x in inputs]
        kernel.run(*args, options=opts)
        out[name] = args
    return out


def same_bits(got, want, what):
    g, w = np.ascontiguousarray(got), np.ascontiguousarray(want)
    assert g.dtype == w.dtype and g.shape == w.shape, (what, g.dtype, w.dtype, g.shape, w.shape)
    bad = g.view(np.uint8).reshape(g.shape + (-1,)) != w.view(np.uint8).reshape(w.shape + (-1,))
    assert not bad.any(), f"{what}: {int(bad.any(-1).sum())} element(s) differ, first at " \
                          f"{tuple(int(x) for x in np.argwhere(bad.any(-1))[0])}: {g[bad.any(-1)][:4]} vs {w[bad.any(-1)][:4]}"


def eps(dtype):
    return float(ml_dtypes.finfo(dt.np_dtype(dtype)).eps) if dt.is_float(dtype) else 0.0


def close(got, want, bound, what):
    """|got - want| <= bound elementwise (bound: an array or scalar), NaN in the same places."""
    g, w = got.astype(np.float64), want.astype(np.float64)
    assert np.array_equal(np.isnan(g), np.isnan(w)), what
    ok = np.isnan(g) | (np.abs(g - w) <= bound)
    assert ok.all(), f"{what}: worst |diff| {np.nanmax(np.abs(g - w) - bound):.3g} over the bound"


def blocks(gx, gy, gz=1):
    """Block indices in launch order (bx fastest)."""
    for bz in range(gz):
        for by in range(gy):
            for bx in range(gx):
                yield bx, by, bz


# ------------------------------------------------------------------------------------------- copy
@tilelang.jit(out_idx=None)
def copy_kernel(M, N, bm, bn, src, mid, dst, shift):
    gx, gy = cdiv(N, bn), cdiv(M, bm)

    @T.prim_func
    def main(A: T.Tensor((M, N), src), P: T.Tensor((gy * bm, gx * bn), dst), O: T.Tensor((M, N), dst)):
        with T.Kernel(gx, gy) as (bx, by):
            S = T.alloc_shared((bm, bn), mid)
            F = T.alloc_fragment((bm, bn), dst)
            T.copy(A[by * bm - shift, bx * bn], S)  # a window that may cross the top and the right edge
            T.copy(S, F)  # a whole on-chip destination (may adopt the converted array)
            T.copy(F, P[by * bm, bx * bn])
            T.copy(S, O[by * bm + shift, bx * bn])  # writes past the bottom edge are dropped

    return main


@pytest.mark.parametrize("src", DTYPES)
@given(data=st.data(), mid=st.sampled_from(DTYPES), dst=st.sampled_from(DTYPES))
def test_copy_matches_reference(src, data, mid, dst):
    bm, bn = 8, 16
    M, N = data.draw(dim(bm)), data.draw(dim(bn))
    shift = data.draw(st.integers(0, 5))
    rng = np.random.default_rng(M * 131 + N)
    gx, gy = cdiv(N, bn), cdiv(M, bm)
    a = data_for_copy(rng, (M, N), src)
    inputs = [a, sentinel((gy * bm, gx * bn), dst), sentinel((M, N), dst)]
    want = [x.copy() for x in inputs]
    for bx, by, _ in blocks(gx, gy):
        s = R.copy(R.read_region(a, (by * bm - shift, bx * bn), (bm, bn)), mid, (bm, bn), (bm, bn))
        R.write_region(want[1], (by * bm, bx * bn), (bm, bn), R.copy(s, dst, (bm, bn), (bm, bn)))
        R.write_region(want[2], (by * bm + shift, bx * bn), (bm, bn), R.copy(s, dst, (bm, bn), (bm, bn)))
    for mode, got in run_modes(copy_kernel(M, N, bm, bn, src, mid, dst, shift), inputs).items():
        for i in (1, 2):
            same_bits(got[i], want[i], f"{mode} output {i}")


def data_for_copy(rng, shape, dtype):
    """Values spanning fp8 saturation and float→int truncation."""
    if dt.is_int(dtype):
        return rng.integers(-1000, 1000, size=shape).astype(dt.np_dtype(dtype))
    return rand(rng, shape, dtype, scale=300.0)


@tilelang.jit(out_idx=None)
def pairing_kernel(Bt, M, N, bn, dtype):
    @T.prim_func
    def main(A: T.Tensor((Bt, M, N), dtype), O: T.Tensor((Bt, 4 * M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), M, Bt) as (bx, by, bz):
            row = T.alloc_shared((bn,), dtype)
            F = T.alloc_fragment((4, bn), dtype)
            T.copy(A[bz, by, bx * bn], row)  # (1, 1, bn) pairs with (bn,): unit dims skipped
            T.copy(row, F)  # (bn,) broadcasts to (4, bn)
            T.copy(F, O[bz, by * 4, bx * bn])  # (4, bn) pairs with (1, 4, bn)

    return main


@given(data=st.data(), dtype=st.sampled_from(DTYPES))
def test_copy_pairing_matches_reference(data, dtype):
    bn = 16
    Bt, M, N = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 4)), data.draw(dim(bn))
    rng = np.random.default_rng(Bt * 1000 + M * 100 + N)
    inputs = [data_for_copy(rng, (Bt, M, N), dtype), sentinel((Bt, 4 * M, N), dtype)]
    want = inputs[1].copy()
    for bx, by, bz in blocks(cdiv(N, bn), M, Bt):
        row = R.copy(R.read_region(inputs[0], (bz, by, bx * bn), (1, 1, bn)), dtype, (1, 1, bn), (bn,))
        f = R.copy(row, dtype, (bn,), (4, bn))
        R.write_region(want, (bz, by * 4, bx * bn), (1, 4, bn), R.copy(f, dtype, (4, bn), (1, 4, bn)))
    for mode, got in run_modes(pairing_kernel(Bt, M, N, bn, dtype), inputs).items():
        same_bits(got[1], want, mode)


# ------------------------------------------------------------------------------------------- fill
@tilelang.jit(out_idx=None)
def fill_kernel(M, N, bm, bn, dtype, value):
    @T.prim_func
    def main(O: T.Tensor((M, N), dtype), G: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            F = T.alloc_fragment((bm, bn), dtype)
            T.fill(F, value)
            T.clear(F[bm - 2:bm, :])  # a part of the tile
            T.copy(F, O[by * bm, bx * bn])
            T.fill(G[by * bm:by * bm + bm, bx * bn:bx * bn + bn], value)  # global: edge writes dropped

    return main


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # 1e6 → fp16 is inf
@pytest.mark.parametrize("dtype", DTYPES)
@given(data=st.data(), value=st.sampled_from([1.5, -2.75, 1e6, -1e6, 7, 0.1]))
def test_fill_matches_reference(dtype, data, value):
    bm, bn = 8, 16
    M, N = data.draw(dim(bm)), data.draw(dim(bn))
    inputs = [sentinel((M, N), dtype), sentinel((M, N), dtype)]
    want = [x.copy() for x in inputs]
    for bx, by, _ in blocks(cdiv(N, bn), cdiv(M, bm)):
        f = R.fill((bm, bn), value, dtype)
        f[bm - 2:bm, :] = R.fill((2, bn), 0, dtype)
        R.write_region(want[0], (by * bm, bx * bn), (bm, bn), f)
        R.write_region(want[1], (by * bm, bx * bn), (bm, bn), R.fill((bm, bn), value, dtype))
    for mode, got in run_modes(fill_kernel(M, N, bm, bn, dtype, value), inputs).items():
        for i in (0, 1):
            same_bits(got[i], want[i], f"{mode} output {i}")


# ------------------------------------------------------------------------------------------- reductions
@tilelang.jit(out_idx=None)
def reduce_kernel(M, N, bm, bn, src, dst, kind, dim_, clear):
    gx, gy = cdiv(N, bn), cdiv(M, bm)
    out_shape = (gx, M) if dim_ == 1 else (gy, N)

    @T.prim_func
    def main(A: T.Tensor((M, N), src), Out: T.Tensor(out_shape, dst)):
        with T.Kernel(gx, gy) as (bx, by):
            F = T.alloc_fragment((bm, bn), src)
            D = T.alloc_fragment((bm,) if dim_ == 1 else (bn,), dst)
            T.copy(A[by * bm, bx * bn], F)
            if dim_ == 1:
                if not clear:
                    T.copy(Out[bx, by * bm], D)
                T.reduce(F, D, kind, dim=1, clear=clear)
                T.copy(D, Out[bx, by * bm])
            else:
                if not clear:
                    T.copy(Out[by, bx * bn], D)
                T.reduce(F, D, kind, dim=0, clear=clear)
                T.copy(D, Out[by, bx * bn])

    return main


@pytest.mark.parametrize("kind", sorted(R.REDUCERS))
@given(data=st.data(), src=st.sampled_from(DTYPES), dim_=st.sampled_from([0, 1]), clear=st.booleans(),
       same=st.booleans())
def test_reduce_matches_reference(kind, data, src, dim_, clear, same):
    bm, bn = 8, 16
    dst = src if same else "float32"
    M, N = data.draw(dim(bm)), data.draw(dim(bn))
    gx, gy = cdiv(N, bn), cdiv(M, bm)
    rng = np.random.default_rng(M * 77 + N)
    # large integers: their float32 sums round, their float64 sums (the int → float rule) are exact
    a = rng.integers(-2**26, 2**26, (M, N)).astype(np.int32) if src == "int32" else rand(rng, (M, N), src, 4.0)
    out0 = rand(rng, (gx, M) if dim_ == 1 else (gy, N), dst, scale=4.0)
    want = out0.copy()
    bound = np.zeros(want.shape)
    for bx, by, _ in blocks(gx, gy):
        tile = R.read_region(a, (by * bm, bx * bn), (bm, bn))
        start, ext = ((bx, by * bm), (1, bm)) if dim_ == 1 else ((by, bx * bn), (1, bn))
        d = R.copy(R.read_region(want, start, ext), dst, ext, ext[1:])
        d = R.reduce(kind, tile, dim_, d, clear)
        R.write_region(want, start, ext, R.copy(d, dst, ext[1:], ext))
        mag = np.abs(tile.astype(np.float64)).sum(axis=dim_) + np.abs(R.read_region(out0, start, ext)[0])
        R.write_region(bound, start, ext, (4 * max(eps(dst), eps("float32")) * mag)[None])
    for mode, got in run_modes(reduce_kernel(M, N, bm, bn, src, dst, kind, dim_, clear), [a, out0]).items():
        if kind in ("sum", "abssum") and dt.is_float(dst) and dt.is_float(src):
            close(got[1], want, bound, mode)
        else:
            same_bits(got[1], want, mode)


def test_integer_sums_into_float_accumulate_in_float64():
    """An int32 tile summed into a float32 destination: in float32, 2**24 + 1 + 1 would stay 2**24."""
    a = np.array([[2**24, 1, 1]], np.int32)
    want = R.reduce("sum", a, 1, np.zeros((1,), np.float32))
    assert want[0] == 2**24 + 2
    for mode, got in run_modes(reduce_kernel(1, 3, 8, 16, "int32", "float32", "sum", 1, True),
                               [a, np.zeros((1, 1), np.float32)]).items():
        same_bits(got[1].reshape(-1), want, mode)


@given(shape=st.tuples(st.integers(1, 3), st.integers(1, 9), st.integers(1, 7)), kind=st.sampled_from(sorted(R.REDUCERS)),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**31 - 1))
def test_reduce_helpers_match_reference(shape, kind, dtype, seed):
    """``tile_reduce._reduce_fn``/``_combine`` (the reference's helpers) on a batched array equal the reference
    block by block (the block axis changes no bits)."""
    rng = np.random.default_rng(seed)
    x = R.to_compute(rand(rng, shape, dtype, 8.0), dtype)
    old = R.to_compute(rand(rng, (shape[0], shape[2]), dtype, 8.0), dtype)
    batched = tile_reduce._combine(kind, old, tile_reduce._reduce_fn(kind)(x, axis=1))
    for b in range(shape[0]):
        one = R.combine(kind, old[b], R.REDUCERS[kind](x[b], axis=0))
        same_bits(batched[b], one, f"block {b}")
    # the keep-dim destination shape (out has 1 at the reduced dim) gives the same values
    src = rand(rng, shape[1:], dtype, 8.0)
    kept = R.reduce(kind, src, 1, np.zeros((shape[1], 1), dt.np_dtype(dtype)))
    dropped = R.reduce(kind, src, 1, np.zeros((shape[1],), dt.np_dtype(dtype)))
    same_bits(kept.reshape(-1), dropped, "keep-dim")


# ------------------------------------------------------------------------------------------- cumsum
@tilelang.jit(out_idx=None)
def cumsum_kernel(M, N, bm, bn, src, dst, dim_, reverse, in_place):
    @T.prim_func
    def main(A: T.Tensor((M, N), src), O: T.Tensor((M, N), dst)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            F = T.alloc_fragment((bm, bn), src)
            T.copy(A[by * bm, bx * bn], F)
            if in_place:
                T.cumsum(F, dim=dim_, reverse=reverse)
                T.copy(F, O[by * bm, bx * bn])
            else:
                G = T.alloc_fragment((bm, bn), dst)
                T.cumsum(F, G, dim=dim_, reverse=reverse)
                T.copy(G, O[by * bm, bx * bn])

    return main


@pytest.mark.parametrize("src", DTYPES)
@given(data=st.data(), dim_=st.sampled_from([0, 1, -1]), reverse=st.booleans(), in_place=st.booleans())
def test_cumsum_matches_reference(src, data, dim_, reverse, in_place):
    bm, bn = 8, 16
    dst = src if in_place else data.draw(st.sampled_from(DTYPES))
    M, N = data.draw(dim(bm)), data.draw(dim(bn))
    rng = np.random.default_rng(M * 7 + N)
    inputs = [rand(rng, (M, N), src, 4.0), sentinel((M, N), dst)]
    want = inputs[1].copy()
    for bx, by, _ in blocks(cdiv(N, bn), cdiv(M, bm)):
        tile = R.read_region(inputs[0], (by * bm, bx * bn), (bm, bn))
        c = R.cumsum(tile, dim_ % 2, reverse, dst)
        R.write_region(want, (by * bm, bx * bn), (bm, bn), R.copy(c, dst, (bm, bn), (bm, bn)))
    for mode, got in run_modes(cumsum_kernel(M, N, bm, bn, src, dst, dim_, reverse, in_place), inputs).items():
        same_bits(got[1], want, mode)


# ------------------------------------------------------------------------------------------- atomics
@tilelang.jit(out_idx=None)
def atomic_kernel(S, M, N, bm, bn, dtype, kind, element):
    op = {"add": T.atomic_add, "max": T.atomic_max, "min": T.atomic_min}[kind]

    @T.prim_func
    def main(A: T.Tensor((S, M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), S) as (bx, by, bz):
            F = T.alloc_fragment((bm, bn), dtype)
            T.copy(A[bz, by * bm, bx * bn], F)
            if element:
                for i, j in T.Parallel(bm, bn):
                    op(C[by * bm + i, bx * bn + j], F[i, j])
            else:
                op(C[by * bm, bx * bn], F)

    return main


@pytest.mark.parametrize("dtype", DTYPES)
@given(data=st.data(), kind=st.sampled_from(["add", "max", "min"]), element=st.booleans())
def test_atomic_matches_reference(dtype, data, kind, element):
    """Updates from S blocks land on every C element; out-of-range ones are dropped.

    Narrow floats in batched runs: the interpreter sums a chunk's updates of one element in float32
    and rounds once (``tile_copy._apply_at``), where the reference (and a serial run, one block per
    call) rounds after every block's update; the two agree within one rounding per update.
    """
    bm, bn = 8, 16
    S = data.draw(st.integers(1, 4))
    M, N = data.draw(dim(bm)), data.draw(dim(bn))
    rng = np.random.default_rng(S * 1000 + M * 10 + N)
    inputs = [rand(rng, (S, M, N), dtype, 4.0), rand(rng, (M, N), dtype, 4.0)]
    want = inputs[1].copy()
    for bx, by, bz in blocks(cdiv(N, bn), cdiv(M, bm), S):
        tile = R.read_region(inputs[0], (bz, by * bm, bx * bn), (1, bm, bn)).reshape(bm, bn)
        idx = [by * bm + np.arange(bm)[:, None] + 0 * np.arange(bn), bx * bn + np.arange(bn)[None, :] + 0 * np.arange(bm)[:, None]]
        R.atomic(kind, want, idx, R.to_compute(tile, dtype).reshape(-1))
    for mode, got in run_modes(atomic_kernel(S, M, N, bm, bn, dtype, kind, element), inputs).items():
        if dtype in dt.NARROW_FLOATS and kind == "add" and mode != "serial":
            mag = np.abs(inputs[0].astype(np.float64)).sum(0) + np.abs(inputs[1].astype(np.float64))
            close(got[1], want, 2 * (S + 1) * eps(dtype) * mag, mode)
        else:
            same_bits(got[1], want, mode)


@given(n=st.integers(1, 40), dtype=st.sampled_from(["float32", "int32", "float16"]),
       kind=st.sampled_from(["add", "max", "min"]), seed=st.integers(0, 2**31 - 1))
def test_apply_at_matches_reference_on_distinct_indices(n, dtype, kind, seed):
    """``tile_copy._apply_at`` with each element updated at most once equals the reference bitwise."""
    rng = np.random.default_rng(seed)
    st0 = rand(rng, (6, 7), dtype, 4.0)
    lin = rng.permutation(42)[:n]
    idx = np.unravel_index(lin, st0.shape)
    vals = R.to_compute(rand(rng, (n,), dtype, 4.0), dtype)
    got, want = st0.copy(), st0.copy()
    tile_copy._apply_at(got, idx, vals, kind, dtype)
    R.atomic(kind, want, idx, vals)
    same_bits(got, want, "apply_at")


# ------------------------------------------------------------------------------------------- gemm
@tilelang.jit(out_idx=None)
def gemm_kernel(M, N, K, bm, bn, bk, dtype, accum, trans_a, trans_b, first_clear):
    a_shape, b_shape = ((K, M) if trans_a else (M, K)), ((N, K) if trans_b else (K, N))
    a_tile, b_tile = ((bk, bm) if trans_a else (bm, bk)), ((bn, bk) if trans_b else (bk, bn))

    @T.prim_func
    def main(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), accum)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            A_s = T.alloc_shared(a_tile, dtype)
            B_s = T.alloc_shared(b_tile, dtype)
            C_l = T.alloc_fragment((bm, bn), accum)
            if first_clear:  # step 0 with clear_accum=True (own tiles, so the loop stays fusable)
                A0 = T.alloc_shared(a_tile, dtype)
                B0 = T.alloc_shared(b_tile, dtype)
                T.copy(A[0, by * bm] if trans_a else A[by * bm, 0], A0)
                T.copy(B[bx * bn, 0] if trans_b else B[0, bx * bn], B0)
                T.gemm(A0, B0, C_l, transpose_A=trans_a, transpose_B=trans_b, clear_accum=True)
            else:  # C += A @ B onto C's values
                T.copy(C[by * bm, bx * bn], C_l)
            for k in T.Pipelined(1 if first_clear else 0, T.ceildiv(K, bk), num_stages=2):
                T.copy(A[k * bk, by * bm] if trans_a else A[by * bm, k * bk], A_s)
                T.copy(B[bx * bn, k * bk] if trans_b else B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l, transpose_A=trans_a, transpose_B=trans_b)
            T.copy(C_l, C[by * bm, bx * bn])

    return main


GEMM_TYPES = [("float32", "float32"), ("float16", "float32"), ("bfloat16", "float32"),
              ("float8_e4m3fn", "float32"), ("float16", "float16"), ("int8", "int32"), ("int32", "int32")]


def gemm_reference(a, b, c0, tiles, dtype, accum, trans_a, trans_b, first_clear, tf32):
    """What ``gemm_kernel`` computes, block by block over ``reference``; and an error bound for float
    accumulators: (steps + 2) rounding errors of C's dtype (at least 2**-20) on |C0| + |A| @ |B|."""
    (M, N), K = c0.shape, (a.shape[0] if trans_a else a.shape[1])
    bm, bn, bk = tiles
    ta, tb = ((bk, bm) if trans_a else (bm, bk)), ((bn, bk) if trans_b else (bk, bn))
    want, bound = c0.copy(), np.zeros((M, N))
    nk = cdiv(K, bk)
    for bx, by, _ in blocks(cdiv(N, bn), cdiv(M, bm)):
        corner = (by * bm, bx * bn)
        c = R.copy(R.read_region(c0, corner, (bm, bn)), accum, (bm, bn), (bm, bn))
        mag = np.zeros((bm, bn)) if first_clear else np.abs(c.astype(np.float64))
        for k in range(nk):
            ak = R.read_region(a, (k * bk, by * bm) if trans_a else (by * bm, k * bk), ta)
            bk_ = R.read_region(b, (bx * bn, k * bk) if trans_b else (k * bk, bx * bn), tb)
            c = R.gemm(R.copy(ak, dtype, ta, ta), R.copy(bk_, dtype, tb, tb), c, trans_a, trans_b,
                       clear_accum=first_clear and k == 0, tf32=tf32)
            x, y = np.abs(ak.astype(np.float64)), np.abs(bk_.astype(np.float64))
            mag += (x.T if trans_a else x) @ (y.T if trans_b else y)
        R.write_region(want, corner, (bm, bn), R.copy(c, accum, (bm, bn), (bm, bn)))
        R.write_region(bound, corner, (bm, bn), (nk + 2) * max(eps(accum), 2.0 ** -20) * mag)
    return want, bound


def gemm_operands(M, N, K, dtype, accum, trans_a, trans_b):
    rng = np.random.default_rng(M * 10007 + N * 101 + K)
    return (rand(rng, (K, M) if trans_a else (M, K), dtype, 2.0), rand(rng, (N, K) if trans_b else (K, N), dtype, 2.0),
            rand(rng, (M, N), accum, 2.0))


def check_gemm(M, N, K, tiles, types, trans_a, trans_b, first_clear, tf32, modes):
    dtype, accum = types
    a, b, c0 = gemm_operands(M, N, K, dtype, accum, trans_a, trans_b)
    want, bound = gemm_reference(a, b, c0, tiles, dtype, accum, trans_a, trans_b, first_clear, tf32)
    kernel = gemm_kernel(M, N, K, *tiles, dtype, accum, trans_a, trans_b, first_clear)
    launch = next(s for s in kernel.prim_func.body if type(s).__name__ == "Launch")
    fused = bool(gemm_loop._plan(launch, (cdiv(N, tiles[1]), cdiv(M, tiles[0]), 1), set()))
    assert fused == (accum == "float32")  # the fused K loop is what the batched runs exercise
    modes = {k: dataclasses.replace(o, tf32=tf32) for k, o in modes.items()}
    for mode, got in run_modes(kernel, [a, b, c0], modes).items():
        if dt.is_int(accum):
            same_bits(got[2], want, mode)
        else:
            close(got[2], want, bound, mode)


@pytest.mark.parametrize("types", GEMM_TYPES, ids="-".join)
@given(data=st.data(), trans_a=st.booleans(), trans_b=st.booleans(), first_clear=st.booleans(), tf32=st.booleans(),
       divisible=st.booleans())
def test_gemm_matches_reference(types, data, trans_a, trans_b, first_clear, tf32, divisible):
    """Edge tiles (zero-filled A/B reads, dropped C writes) or, with ``divisible``, tiles that cover the
    tensors (the fused loop then multiplies slices of the tensors in place)."""
    tiles = (16, 16, 8)
    M, N, K = (data.draw(dim(t, 4 if i == 2 else 3, divisible=divisible or None)) for i, t in enumerate(tiles))
    check_gemm(M, N, K, tiles, types, trans_a, trans_b, first_clear, tf32 and types[0] == "float32", MODES)


@pytest.mark.parametrize("types", [("float32", "float32"), ("float16", "float32")], ids="-".join)
@given(data=st.data(), trans_a=st.booleans(), trans_b=st.booleans())
def test_gemm_large_accumulators_match_reference(types, data, trans_a, trans_b):
    """Enough blocks that the step-by-step path accumulates through pooled scratch (``pool.MIN_BYTES``)."""
    tiles = (32, 32, 16)
    M, N = (32 * data.draw(st.integers(4, 5)) + data.draw(st.integers(1, 31)) for _ in range(2))
    K = data.draw(dim(16, 3))
    assert cdiv(M, 32) * cdiv(N, 32) * 32 * 32 * 4 >= pool.MIN_BYTES
    check_gemm(M, N, K, tiles, types, trans_a, trans_b, data.draw(st.booleans()), False,
               {k: MODES[k] for k in ("batched", "plain")})


@tilelang.jit(out_idx=None)
def gemm_halves_kernel(M, N, K, bm, bn, dtype):
    """Two gemms into the two halves of one fragment (a C region that is not the whole buffer)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((2 * M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            A_s = T.alloc_shared((bm, K), dtype)
            B_s = T.alloc_shared((K, bn), dtype)
            C_l = T.alloc_fragment((2 * bm, bn), "float32")
            T.copy(A[by * bm, 0], A_s)
            T.copy(B[0, bx * bn], B_s)
            T.fill(C_l, 1)
            T.gemm(A_s, B_s, C_l[0:bm, :], clear_accum=True)
            T.gemm(A_s, B_s, C_l[bm:2 * bm, :])
            T.copy(C_l, C[by * 2 * bm, bx * bn])

    return main


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@given(data=st.data())
def test_gemm_into_part_of_a_fragment_matches_reference(dtype, data):
    bm, bn = 16, 16
    M, N, K = data.draw(dim(bm)), data.draw(dim(bn)), data.draw(st.integers(1, 20))
    a, b, _ = gemm_operands(M, N, K, dtype, "float32", False, False)
    want = sentinel((2 * M, N), "float32")
    bound = np.zeros(want.shape)
    for bx, by, _ in blocks(cdiv(N, bn), cdiv(M, bm)):
        x = R.read_region(a, (by * bm, 0), (bm, K))
        y = R.read_region(b, (0, bx * bn), (K, bn))
        c = R.fill((2 * bm, bn), 1, "float32")
        c[:bm] = R.gemm(x, y, c[:bm], clear_accum=True)
        c[bm:] = R.gemm(x, y, c[bm:])
        R.write_region(want, (by * 2 * bm, bx * bn), (2 * bm, bn), c)
        mag = np.abs(x.astype(np.float64)) @ np.abs(y.astype(np.float64)) + 1
        R.write_region(bound, (by * 2 * bm, bx * bn), (2 * bm, bn), 4 * eps("float32") * np.vstack([mag, mag]))
    for mode, got in run_modes(gemm_halves_kernel(M, N, K, bm, bn, dtype), [a, b, sentinel((2 * M, N), "float32")]).items():
        close(got[2], want, bound, mode)


def test_gemm_reference_accumulates_in_the_accumulator_dtype():
    """fp16 products summed in float32 and rounded once; int8 products in int64 then wrapped to int32."""
    a = np.full((1, 3), 2049, dtype=np.float32).astype(np.float16)  # 2048 in fp16 (2049 is not representable)
    b = np.ones((3, 1), dtype=np.float16)
    c = np.zeros((1, 1), np.float32)
    assert R.gemm(a, b, c)[0, 0] == 3 * 2048
    c16 = np.full((1, 1), 1, np.float16)
    assert R.gemm(np.full((1, 2), 1024, np.float16), np.ones((2, 1), np.float16), c16)[0, 0] == 2048
    i8 = np.full((1, 4), 127, np.int8)
    assert R.gemm(i8, i8.T.copy(), np.zeros((1, 1), np.int32), clear_accum=True)[0, 0] == 4 * 127 * 127
    x = np.float32(1 + 2 ** -12)
    assert R.gemm(np.full((1, 1), x), np.ones((1, 1), np.float32), np.zeros((1, 1), np.float32), tf32=True)[0, 0] == 1


# ------------------------------------------------------------------------------------------- element ops
# Each op: a @T.macro for the kernel (traced from its source) and the same expression over reference.py.
@T.macro
def _safe(b):
    return T.if_then_else(b == 0, 1, b)  # the edge tiles' zero fill must not divide


def _rsafe(b):
    return np.where(R.compare("eq", b, 0), 1, b)


@T.macro
def k_add(a, b):
    return a + b


@T.macro
def k_sub_mul(a, b):
    return (a - b) * b


@T.macro
def k_div(a, b):
    return a / _safe(b)


@T.macro
def k_floordiv(a, b):
    return a // _safe(b)


@T.macro
def k_floormod(a, b):
    return a % _safe(b)


@T.macro
def k_truncdiv(a, b):
    return T.truncdiv(a, _safe(b))


@T.macro
def k_truncmod(a, b):
    return T.truncmod(a, _safe(b))


@T.macro
def k_minmax(a, b):
    return T.max(T.min(a, b), -a)


@T.macro
def k_select(a, b):
    return T.if_then_else(a < b, a * 2, b)


@T.macro
def k_exp_tanh(a, b):
    return T.exp(a) + T.tanh(b)


@T.macro
def k_rsqrt_abs(a, b):
    return T.rsqrt(T.abs(a) + 1)


@T.macro
def k_sigmoid_exp2(a, b):
    return T.sigmoid(a) * T.exp2(b)


ELEMENT_OPS = {
    "add": (k_add, lambda a, b, d: R.binary("add", a, b, d)),
    "sub_mul": (k_sub_mul, lambda a, b, d: R.binary("mul", R.binary("sub", a, b, d), b, d)),
    "div": (k_div, lambda a, b, d: R.binary("div", a, _rsafe(b), d)),
    "floordiv": (k_floordiv, lambda a, b, d: R.binary("floordiv", a, _rsafe(b), d)),
    "floormod": (k_floormod, lambda a, b, d: R.binary("floormod", a, _rsafe(b), d)),
    "truncdiv": (k_truncdiv, lambda a, b, d: R.binary("div", a, _rsafe(b), d)),
    "truncmod": (k_truncmod, lambda a, b, d: R.binary("truncmod", a, _rsafe(b), d)),
    "minmax": (k_minmax, lambda a, b, d: R.binary("max", R.binary("min", a, b, d), R.unary("neg", a, d), d)),
    "select": (k_select, lambda a, b, d: np.where(R.compare("lt", a, b), R.binary("mul", a, 2, d), b)),
}
FLOAT_ONLY_OPS = {
    "exp_tanh": (k_exp_tanh, lambda a, b, d: R.binary("add", R.call("exp", (a,), d), R.call("tanh", (b,), d), d)),
    "rsqrt_abs": (k_rsqrt_abs, lambda a, b, d: R.call("rsqrt", (R.binary("add", R.unary("abs", a, d), 1, d),), d)),
    "sigmoid_exp2": (k_sigmoid_exp2, lambda a, b, d: R.binary("mul", R.call("sigmoid", (a,), d),
                                                              R.call("exp2", (b,), d), d)),
}


@tilelang.jit(out_idx=None)
def element_kernel(M, N, bm, bn, dtype, out_dtype, op_name):
    fn = {**ELEMENT_OPS, **FLOAT_ONLY_OPS}[op_name][0]

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            Af = T.alloc_fragment((bm, bn), dtype)
            Bf = T.alloc_fragment((bm, bn), dtype)
            Cf = T.alloc_fragment((bm, bn), out_dtype)
            T.copy(A[by * bm, bx * bn], Af)
            T.copy(B[by * bm, bx * bn], Bf)
            for i, j in T.Parallel(bm, bn):
                Cf[i, j] = T.cast(fn(Af[i, j], Bf[i, j]), out_dtype)
            T.copy(Cf, C[by * bm, bx * bn])

    return main


@pytest.mark.parametrize("name", sorted({**ELEMENT_OPS, **FLOAT_ONLY_OPS}))
@given(data=st.data(), out_dtype=st.sampled_from(DTYPES))
def test_element_ops_match_reference(name, data, out_dtype):
    dtype = data.draw(st.sampled_from(DTYPES if name in ELEMENT_OPS else DTYPES[:4]))
    ref = {**ELEMENT_OPS, **FLOAT_ONLY_OPS}[name][1]
    bm, bn = 8, 16
    M, N = data.draw(dim(bm)), data.draw(dim(bn))
    rng = np.random.default_rng(M * 3 + N)
    a = data_for_copy(rng, (M, N), dtype) if dt.is_int(dtype) else rand(rng, (M, N), dtype, 3.0)
    b = rng.integers(-9, 9, size=(M, N)).astype(np.int32) if dt.is_int(dtype) else rand(rng, (M, N), dtype, 3.0)
    inputs = [a, b, sentinel((M, N), out_dtype)]
    want = inputs[2].copy()
    for bx, by, _ in blocks(cdiv(N, bn), cdiv(M, bm)):
        x, y = (R.to_compute(R.read_region(v, (by * bm, bx * bn), (bm, bn)), dtype) for v in (a, b))
        r = R.cast(ref(x, y, dtype), out_dtype)
        R.write_region(want, (by * bm, bx * bn), (bm, bn), R.store(r, out_dtype))
    for mode, got in run_modes(element_kernel(M, N, bm, bn, dtype, out_dtype, name), inputs).items():
        same_bits(got[2], want, f"{mode} {name}")


@given(a=st.integers(-2**40, 2**40), b=st.integers(-2**40, 2**40).filter(bool),
       op=st.sampled_from(["div", "floordiv", "floormod", "truncmod", "add", "mul", "min", "max"]))
def test_int_ops_match_reference_uniform_and_varying(a, b, op):
    """``exprs._INT_OPS`` on Python ints (uniform values) and on int64 arrays equal ``reference.binary``."""
    want = R.binary(op, np.array([a, -a]), np.array([b, b]), "int64")
    assert np.array_equal(exprs._INT_OPS[op](np.array([a, -a]), np.array([b, b])), want)
    assert int(exprs._INT_OPS[op](a, b)) == int(R.binary(op, a, b, "int64"))


@given(src=st.sampled_from(DTYPES), dst=st.sampled_from(DTYPES), seed=st.integers(0, 2**31 - 1))
def test_cast_matches_convert_value(src, dst, seed):
    """``exprs.convert_value`` (the interpreter's cast) equals ``reference.cast``, on arrays and scalars."""
    rng = np.random.default_rng(seed)
    x = R.to_compute(data_for_copy(rng, (5, 3), src), src)
    same_bits(np.asarray(exprs.convert_value(x, dst)), R.cast(x, dst), "array")
    for v in x.reshape(-1)[:4]:
        got = exprs.convert_value(v.item() if dt.is_int(src) else v, dst)
        same_bits(np.asarray(got, dtype=R.cast(v, dst).dtype), R.cast(v, dst), "scalar")


# ------------------------------------------------------------------------------------------- pairing helper
@st.composite
def pairings(draw):
    """(src extents, dst extents) that pair: same non-unit extents in order, or right-aligned broadcast,
    with unit dims sprinkled in."""
    d = draw(st.lists(st.integers(2, 5), min_size=1, max_size=3))
    s = d[draw(st.integers(0, len(d) - 1)):] if draw(st.booleans()) else list(d)

    def sprinkle(xs):
        out = []
        for x in xs:
            out += [1] * draw(st.integers(0, 1)) + [x]
        return tuple(out + [1] * draw(st.integers(0, 1)))

    return sprinkle(s), sprinkle(d)


@given(p=pairings(), n=st.integers(1, 3), seed=st.integers(0, 2**31 - 1))
def test_squeeze_to_matches_reference_pairing(p, n, seed):
    src_ext, dst_ext = p
    vals = np.random.default_rng(seed).standard_normal((n,) + src_ext).astype(np.float32)
    got = tile_copy._squeeze_to(vals, src_ext, dst_ext)
    assert got.shape == (n,) + dst_ext
    for b in range(n):
        same_bits(got[b], R.pair(vals[b], src_ext, dst_ext), f"block {b}")


def test_reference_fp8_conversions_saturate():
    assert R.fill((1,), 1e6, "float8_e4m3fn").astype(np.float32)[0] == 448
    assert R.copy(np.array([-1e4], np.float32), "float8_e4m3fn", (1,), (1,)).astype(np.float32)[0] == -448
    assert R.cast(np.float32(500), "float8_e4m3fn") == 448
    assert R.binary("mul", np.float32(300), np.float32(2), "float8_e4m3fn") == 448


def test_region_helpers_zero_fill_and_drop():
    t = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert np.array_equal(R.read_region(t, (2, -1), (2, 3)), [[0, 8, 9], [0, 0, 0]])
    assert np.array_equal(R.read_region(t, (5, 5), (1, 2), fill=-1), [[-1, -1]])
    o = np.zeros((3, 4), np.float32)
    R.write_region(o, (2, 2), (2, 3), np.ones((2, 3), np.float32))
    assert o.sum() == 2 and o[2, 2] == o[2, 3] == 1
