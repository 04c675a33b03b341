"""Per-channel (b × 1) e4m3 casts fused with a row gather / e4m3 dequantisation, and with a transpose.

Kernels (registry names; TileKernels' counterpart in brackets):

* ``quant_cast_per_channel_fused`` [``per_channel_cast_fused``] — ``per_channel_cast_fused(M_in, N, M_out=None,
  gather=False, in_group=None, ...)``. Input ``X`` (M_in, N): bf16/fp16/fp32, or with ``in_group = g`` an e4m3
  tensor with its per-token input scales ``Xs`` (M_in, ceil(N/g)) fp32 (row-major; the dequantisation
  multipliers, as TileKernels' ``(data, sf_invs)`` pair; TileKernels takes ``g = 128`` only). With ``gather`` an
  int32 index vector ``P`` (M_out,) picks the source row of each output row (``pos_to_token``); a negative index is
  a padding row: zeros in, zeros out, no effect on its block's scale. Outputs ``Q`` (M_out, N) e4m3 and
  ``S`` (ceil(M_out/b), N) fp32 with ``b = block_rows`` (TileKernels' ``num_per_tokens``, 128). Signature order:
  ``X, [Xs], [P], Q, S``.
* ``quant_cast_per_channel_transpose`` [``per_channel_cast_and_transpose``] — ``X`` (M, N) → ``Q`` (N, M) e4m3
  (the transposed cast values) and ``S`` (ceil(M/b), N) fp32, ``b`` 32 or 128 (any positive value works here).
* SwiGLU → per-channel cast → transpose lives in ``kernels/swiglu_channel.py`` (same scale recipe, the
  reference ``ref_channel_cast`` below).

Scales (TileKernels' ``cast(..., block_size=(b, 1), round_sf)``), per column and block of ``b`` rows, fp32:
``amax = max(max|v|, 1e-4)``; ``S = amax / 448`` and the multiplier ``448 / amax``, or with ``use_ue8m0``
(``round_sf``) ``S = 2^ceil(log2(amax / 448))`` from the fp32 bits and ``1 / S``. ``Q = e4m3(v · multiplier)``,
round to nearest even, saturating at ±448. With input scales ``v = x · xs`` (one fp32 product) and ``Q =
e4m3((x · xs) · multiplier)``, the order of TileKernels' kernel and reference.

Edges: any M, N — TileKernels asks for multiples of 128 (16 for gathered rows) and 64; here rows and columns
past the edges are masked to 0 (never raising an absolute maximum) and not written. Gather indices ``≥ M_in`` are
outside TileKernels' contract (its kernel assumes them away); here they read as padding rows, never out of bounds.
NaN/Inf policy: inputs must be finite (TileKernels' kernels take maxima with ``fmax``, its references with
NaN-propagating ``max``: a NaN's group scale is unspecified). ``M_out = 0`` is refused by the builder
(``ValueError``; TileKernels returns empty tensors without a launch).

Each kernel stages one ``b × block_N`` tile: loaded (gathered, dequantised) into an fp32 tile, reduced over its
rows for the column maxima, scaled, and written straight or transposed (through shared memory). The NumPy
references below compute the same recipe independently; tests compare bit for bit.
"""

import ml_dtypes
import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.registry import KernelSpec, register
from tilesim import dtypes as _dt

FP8 = "float8_e4m3fn"
QMAX, FLOOR = 448.0, 1e-4


@T.macro
def channel_scale(amax, use_ue8m0):
    """(dequant scale, quant multiplier) of one column block from its fp32 absolute maximum."""
    a = T.max(amax, FLOOR)
    if use_ue8m0:
        bits = T.reinterpret("int32", a / QMAX)  # 2^ceil(log2(a / 448)): exponent, +1 if mantissa != 0
        e = ((bits >> 23) & 0xFF) + T.if_then_else((bits & 0x7FFFFF) != 0, 1, 0)
        s = T.reinterpret("float32", e << 23)
        inv = 1.0 / s
    else:
        s = a / QMAX
        inv = QMAX / a
    return s, inv


@T.macro
def column_scales(x, amax, sc, inv, S_dst, use_ue8m0):
    """The scales of one tile's columns: ``amax`` their absolute maxima, ``sc`` the dequant scales (stored at
    ``S_dst``), ``inv`` the quant multipliers."""
    T.reduce_absmax(x, amax, dim=0)
    for j in T.Parallel(amax.shape[0]):
        s, m = channel_scale(amax[j], use_ue8m0)
        sc[j] = s
        inv[j] = m
    T.copy(sc, S_dst)


def _check(rows, cols, block_rows):
    if rows < 1 or cols < 1:
        raise ValueError(f"per-channel cast needs at least one row and column (got {rows} x {cols}); TileKernels "
                         "returns empty tensors for zero rows without launching")
    if block_rows < 1:
        raise ValueError(f"block_rows must be positive (got {block_rows})")


# ------------------------------------------------------------------------------------------ kernels
@tilelang.jit(out_idx=[-2, -1])
def per_channel_cast_fused(M_in, N, M_out=None, gather=False, in_group=None, in_dtype="bfloat16", use_ue8m0=False,
                           block_rows=128, block_N=64, threads=128):
    """Gathered / dequantised rows → per-channel e4m3: one block per ``block_rows`` output rows × ``block_N``."""
    M_out = M_in if M_out is None else M_out
    if not gather and M_out != M_in:
        raise ValueError(f"M_out ({M_out}) differs from M_in ({M_in}) without a gather")
    _check(M_out, N, block_rows)
    if in_group is not None and in_dtype != FP8:
        raise ValueError(f"input scales (in_group={in_group}) come with e4m3 data, not {in_dtype}")
    GM = T.ceildiv(M_out, block_rows)
    G_in = T.ceildiv(N, in_group) if in_group is not None else 1
    n_sf = (block_N - 2) // in_group + 2 if in_group is not None else 1  # input groups a block_N span can touch

    @T.macro
    def body(X, Xs, P, Q, S):
        with T.Kernel(T.ceildiv(N, block_N), GM, threads=threads) as (bx, by):
            x = T.alloc_fragment((block_rows, block_N), "float32")
            q = T.alloc_fragment((block_rows, block_N), FP8)
            amax = T.alloc_fragment((block_N,), "float32")
            inv = T.alloc_fragment((block_N,), "float32")
            sc = T.alloc_fragment((block_N,), "float32")
            if gather:
                tok = T.alloc_shared((block_rows,), "int32")
                T.copy(P[by * block_rows], tok)
            if in_group is not None:  # the input scales of the tile's rows, once per row and input group
                g0 = bx * block_N // in_group
                sfi = T.alloc_shared((block_rows, n_sf), "float32")
                for i, g in T.Parallel(block_rows, n_sf):
                    row = by * block_rows + i
                    src = tok[i] if gather else row
                    ok = (row < M_out) & (g0 + g < G_in) & (src >= 0) & (src < M_in)
                    sfi[i, g] = T.if_then_else(ok, Xs[src, g0 + g], T.float32(0))
            for i, j in T.Parallel(block_rows, block_N):
                row = by * block_rows + i
                col = bx * block_N + j
                if gather:
                    src = tok[i]
                    ok = (row < M_out) & (col < N) & (src >= 0) & (src < M_in)
                else:
                    src = row
                    ok = (row < M_out) & (col < N)
                v = T.cast(T.if_then_else(ok, X[src, col], T.cast(0, in_dtype)), "float32")
                if in_group is not None:
                    v = v * sfi[i, col // in_group - g0]
                x[i, j] = v
            column_scales(x, amax, sc, inv, S[by, bx * block_N], use_ue8m0)
            for i, j in T.Parallel(block_rows, block_N):
                q[i, j] = T.cast(x[i, j] * inv[j], FP8)
            T.copy(q, Q[by * block_rows, bx * block_N])

    Xt, St = T.Tensor((M_in, N), in_dtype), T.Tensor((GM, N), "float32")
    Qt, Pt, Xst = T.Tensor((M_out, N), FP8), T.Tensor((M_out,), "int32"), T.Tensor((M_in, G_in), "float32")
    if gather and in_group is not None:
        @T.prim_func
        def main(X: Xt, Xs: Xst, P: Pt, Q: Qt, S: St):
            body(X, Xs, P, Q, S)
    elif gather:
        @T.prim_func
        def main(X: Xt, P: Pt, Q: Qt, S: St):
            body(X, None, P, Q, S)
    elif in_group is not None:
        @T.prim_func
        def main(X: Xt, Xs: Xst, Q: Qt, S: St):
            body(X, Xs, None, Q, S)
    else:
        @T.prim_func
        def main(X: Xt, Q: Qt, S: St):
            body(X, None, None, Q, S)
    return main


@tilelang.jit(out_idx=[1, 2])
def per_channel_cast_transpose(M, N, block_rows=128, block_N=64, in_dtype="bfloat16", use_ue8m0=False, threads=128):
    """Per-channel e4m3 cast written transposed: one block per ``block_rows`` rows × ``block_N`` columns."""
    _check(M, N, block_rows)
    GM = T.ceildiv(M, block_rows)

    @T.prim_func
    def main(X: T.Tensor((M, N), in_dtype), Q: T.Tensor((N, M), FP8), S: T.Tensor((GM, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), GM, threads=threads) as (bx, by):
            xs = T.alloc_shared((block_rows, block_N + 1), "float32")  # +1 column: conflict-free column reads
            x = T.alloc_fragment((block_rows, block_N), "float32")
            amax = T.alloc_fragment((block_N,), "float32")
            sc = T.alloc_fragment((block_N,), "float32")
            inv = T.alloc_shared((block_N,), "float32")
            qt = T.alloc_fragment((block_N, block_rows), FP8)
            for i, j in T.Parallel(block_rows, block_N):
                ok = (by * block_rows + i < M) & (bx * block_N + j < N)
                v = T.cast(T.if_then_else(ok, X[by * block_rows + i, bx * block_N + j], T.cast(0, in_dtype)), "float32")
                xs[i, j] = v
                x[i, j] = v
            column_scales(x, amax, sc, inv, S[by, bx * block_N], use_ue8m0)
            for j, i in T.Parallel(block_N, block_rows):
                qt[j, i] = T.cast(xs[i, j] * inv[j], FP8)
            T.copy(qt, Q[bx * block_N, by * block_rows])

    return main


# ------------------------------------------------------------------------------------------ references
def ref_channel_cast(v, block_rows=128, use_ue8m0=False):
    """NumPy per-channel cast of fp32 ``v`` (R, C): (Q e4m3 (R, C), S fp32 (ceil(R/b), C))."""
    v = np.asarray(v, np.float32)
    R, C = v.shape
    GM = -(-R // block_rows)
    vp = np.zeros((GM * block_rows, C), np.float32)
    vp[:R] = v
    vp = vp.reshape(GM, block_rows, C)
    a = np.maximum(np.abs(vp).max(axis=1), np.float32(FLOOR))
    r = (a / np.float32(QMAX)).astype(np.float32)
    if use_ue8m0:
        m, e = np.frexp(r)  # r = m * 2^e with m in [0.5, 1): an exact power of two has m == 0.5
        s = np.ldexp(np.float32(1.0), np.where(m == 0.5, e - 1, e)).astype(np.float32)
        inv = (np.float32(1.0) / s).astype(np.float32)
    else:
        s, inv = r, (np.float32(QMAX) / a).astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        q = np.clip(vp * inv[:, None, :], -QMAX, QMAX).astype(ml_dtypes.float8_e4m3fn)
    return q.reshape(GM * block_rows, C)[:R], s


def ref_gather_rows(X, P=None, Xs=None, in_group=None):
    """The fp32 rows the fused cast quantises: ``X[P]`` (negative or ``≥ M_in`` indices → zero rows) times the
    per-token input scales when given (one fp32 product per element)."""
    x = np.asarray(X).astype(np.float32)
    if Xs is not None:
        x = x * np.repeat(np.asarray(Xs, np.float32), in_group, axis=1)[:, :x.shape[1]]
    if P is None:
        return x
    p = np.asarray(P, np.int64)
    ok = (p >= 0) & (p < x.shape[0])
    return np.where(ok[:, None], x[np.where(ok, p, 0)], np.float32(0)).astype(np.float32)


def ref_per_channel_cast_fused(X, *rest, gather=False, in_group=None, block_rows=128, use_ue8m0=False, **_):
    """NumPy reference of ``per_channel_cast_fused``; ``rest`` is ``[Xs], [P]`` in the kernel's order."""
    rest = list(rest)
    Xs = rest.pop(0) if in_group is not None else None
    P = rest.pop(0) if gather else None
    return ref_channel_cast(ref_gather_rows(X, P, Xs, in_group), block_rows, use_ue8m0)


def ref_per_channel_cast_transpose(X, block_rows=128, use_ue8m0=False, **_):
    """NumPy reference: the per-channel cast of ``X`` with ``Q`` transposed."""
    q, s = ref_channel_cast(np.asarray(X).astype(np.float32), block_rows, use_ue8m0)
    return np.ascontiguousarray(q.T), s


# ------------------------------------------------------------------------------------------ registry
def _act(rng, M, N, in_dtype="bfloat16"):
    """Activations with outlier columns, an all-zero row and an all-zero column."""
    x = rng.standard_normal((M, N)).astype(np.float32)
    x[:, rng.choice(N, size=max(1, N // 64), replace=False)] *= 100.0
    if M > 2:
        x[1] = 0.0
    if N > 2:
        x[:, 2] = 0.0
    return x.astype(_dt.np_dtype(in_dtype))


def fused_inputs(rng, M_in, N, M_out=None, gather=False, in_group=None, in_dtype="bfloat16", **_):
    """``X, [Xs], [P]``: e4m3 data with 1 × g scales (power-of-two and not) when ``in_group``; gather indices with
    repeats and ~1/8 padding (−1) rows."""
    M_out = M_in if M_out is None else M_out
    if in_group is not None:
        x = _act(rng, M_in, N, "float32")
        G = -(-N // in_group)
        xs = (rng.uniform(0.5, 4.0, (M_in, G)) * 2.0 ** rng.integers(-8, 8, (M_in, G))).astype(np.float32)
        xs[::3] = np.exp2(np.round(np.log2(xs[::3])))
        out = [np.clip(x, -448, 448).astype(ml_dtypes.float8_e4m3fn), xs]
    else:
        out = [_act(rng, M_in, N, in_dtype)]
    if gather:
        p = rng.integers(0, M_in, M_out).astype(np.int32)
        p[rng.random(M_out) < 0.125] = -1
        out.append(p)
    return tuple(out)


def _fused_build(M_in, N, block_rows, block_N, threads, M_out=None, gather=False, in_group=None, in_dtype="bfloat16",
                 use_ue8m0=False, **_):
    return per_channel_cast_fused(M_in, N, M_out=M_out, gather=gather, in_group=in_group,
                                  in_dtype=FP8 if in_group is not None else in_dtype, use_ue8m0=use_ue8m0,
                                  block_rows=block_rows, block_N=block_N, threads=threads)


def _fused_bytes(M_in, N, M_out=None, gather=False, in_group=None, in_dtype="bfloat16", block_rows=128, **_):
    M_out = M_in if M_out is None else M_out
    item = 1 if in_group is not None else _dt.itemsize(_dt.canon(in_dtype))
    sf_in = 4 * M_out * (-(-N // in_group)) if in_group is not None else 0
    return int(M_out * N * item + sf_in + 4 * M_out * gather + M_out * N + 4 * N * (-(-M_out // block_rows)))


register(KernelSpec(
    name="quant_cast_per_channel_fused", family="fp8_cast",
    description="per-channel (128x1) e4m3 cast fused with a row gather (pos_to_token, -1 = padding) and/or e4m3 "
                "1x128 dequantisation (TileKernels' per_channel_cast_fused)",
    build=_fused_build, make_inputs=fused_inputs, reference=ref_per_channel_cast_fused,
    flops=lambda M_in, N, M_out=None, **_: 4 * (M_out or M_in) * N, bytes=_fused_bytes,
    shapes=(
        {"label": "DeepSeek-V3 MoE: 4096 tok x top-8 gathered to 32768 rows, hidden 7168", "M_in": 4096,
         "N": 7168, "M_out": 32768, "gather": True},
        {"label": "DeepSeek-V3 MoE: e4m3 1x128 tokens re-cast per channel, gathered, UE8M0, hidden 7168",
         "M_in": 4096, "N": 7168, "M_out": 32768, "gather": True, "in_group": 128, "use_ue8m0": True},
        {"label": "DeepSeek-V3 expert inter 2048, 16384 tok, no gather", "M_in": 16384, "N": 2048},
    ),
    test_shapes=(
        {"label": "edges gather bf16", "M_in": 70, "N": 100, "M_out": 150, "gather": True, "block_N": 32},
        {"label": "edges gather e4m3 + scales ue8m0", "M_in": 40, "N": 200, "M_out": 45, "gather": True,
         "in_group": 128, "use_ue8m0": True},
        {"label": "edges fp32 no gather", "M_in": 130, "N": 70, "in_dtype": "float32"},
    ),
    tunables={"block_N": [16, 32, 64, 128], "threads": [64, 128, 256]},
    defaults={"block_rows": 128, "block_N": 64, "threads": 128, "in_dtype": "bfloat16", "use_ue8m0": False,
              "M_out": None, "gather": False, "in_group": None},
    tolerance={"exact": True},
))

register(KernelSpec(
    name="quant_cast_per_channel_transpose", family="fp8_cast",
    description="per-channel (128x1 or 32x1) e4m3 cast written transposed (N, M) (TileKernels' "
                "per_channel_cast_and_transpose)",
    build=lambda M, N, block_rows, block_N, threads, in_dtype="bfloat16", use_ue8m0=False, **_:
        per_channel_cast_transpose(M, N, block_rows=block_rows, block_N=block_N, in_dtype=in_dtype,
                                   use_ue8m0=use_ue8m0, threads=threads),
    make_inputs=lambda rng, M, N, in_dtype="bfloat16", **_: (_act(rng, M, N, in_dtype),),
    reference=ref_per_channel_cast_transpose, flops=lambda M, N, **_: 3 * M * N,
    bytes=lambda M, N, block_rows=128, in_dtype="bfloat16", **_: int(
        M * N * _dt.itemsize(_dt.canon(in_dtype)) + M * N + 4 * N * (-(-M // block_rows))),
    shapes=(
        {"label": "DeepSeek-V3 wgrad input: 16384 tok x hidden 7168 -> (7168, 16384)", "M": 16384, "N": 7168},
        {"label": "DeepSeek-V3 expert inter 2048, 8192 tok, 32x1, UE8M0", "M": 8192, "N": 2048, "block_rows": 32,
         "use_ue8m0": True},
    ),
    test_shapes=(
        {"label": "edges bf16", "M": 150, "N": 70, "block_N": 32},
        {"label": "edges fp32 32x1 ue8m0", "M": 45, "N": 100, "in_dtype": "float32", "block_rows": 32,
         "use_ue8m0": True},
    ),
    tunables={"block_N": [16, 32, 64, 128], "threads": [64, 128, 256]},
    defaults={"block_rows": 128, "block_N": 64, "threads": 128, "in_dtype": "bfloat16", "use_ue8m0": False},
    tolerance={"exact": True},
))
