"""Per-token casts with every input and scale layout of TileKernels' ``per_token_cast`` (reference ``cast`` in
``tile_kernels/torch/cast.py``): requantisation of an already quantised tensor (``x_block_size``: e4m3 or packed
e2m1 values with their block scales, re-cast with another group size and format) and the TMA-aligned column-major
and packed-UE8M0 scale layouts DeepGEMM's FP8/FP4 GEMMs read.

Kernel ``per_token_recast(M, N, in_fmt, fmt, group_size, x_block, round_sf, in_layout, sf_layout, ...)``:

* input ``in_fmt`` ∈ {``bfloat16``, ``float32``} — ``X (M, N)``, no input scales; or ``e4m3`` — ``Q (M, N)`` e4m3 —
  or ``e2m1`` — ``Q (M, N/2)`` int8, two codes per byte, element ``2j`` in the low nibble — with scales
  ``Sin`` of blocks ``x_block = (bh, bw)`` in layout ``in_layout``. The value is ``x = float(q) · Sin[r // bh, c // bw]``
  (one fp32 rounding; e2m1 codes decode to {0, ±0.5, …, ±6}, code 8 to −0).
* output ``fmt`` ∈ {``e4m3``, ``e2m1``, ``e5m6``}, groups of 1 × ``group_size``: ``amax = max(max|x|, floor)``
  (e4m3 1e-4, e2m1 6·2^-126, e5m6 1e-4), ``S = amax / qmax`` (qmax 448, 6, 65024); with ``round_sf`` ``S`` rounded
  up to a power of two from its bits (``(bits + 0x7FFFFF) & 0x7F800000``) and the multiplier ``1 / S``, otherwise
  the multiplier ``qmax / amax`` (two fp32 divisions); ``q = fmt(x · multiplier)``: e4m3/e2m1 nearest even,
  saturating (±448, ±6, sign of zero kept); e5m6 TileKernels' 12-bit code (``kernels.quant_cast.e5m6_code``:
  fp16 truncation, then its rounding rule; no clipping). Values ``Q (M, N)`` e4m3, ``(M, N/2)`` int8, or
  ``(M, 3N/8)`` uint32 for e5m6 (eight codes big-end first in three words; ``Q.view(uint8)`` is TileKernels'
  byte layout). E5M6 with an unquantised input is TileKernels' ``per_token_cast(x, 'e5m6', ...)`` with all its
  scale options (its kernel takes one group per row, its reference any group); E5M6 from a quantised input
  (requantisation) has no TileKernels kernel (its ``per_token_cast`` refuses ``x_block_size`` for e5m6): ours
  is its ``cast_back(..., 'fp32')`` followed by ``cast_to_e5m6``, bit for bit.
* scale layouts (``in_layout`` and ``sf_layout``), for a logical scale matrix ``S (R, G)`` with ``A = align(R, 4)``:
  ``rows`` — fp32 ``(R, G)`` row-major; ``tma`` — fp32 storage ``(G, A)``, ``[g, r] = S[r, g]`` (TileKernels'
  ``use_tma_aligned_col_major_sf``: the column-major tensor's memory, 16-byte aligned columns), rows ``R…A−1`` 0;
  ``tma_ue8m0`` — uint8 storage ``(ceil(G/4), 4·A)``, byte ``[g // 4, 4r + g % 4]`` the biased exponent of
  ``S[r, g]`` (``use_packed_ue8m0``: ``.view(int32)`` gives TileKernels' int32 words, four groups per word, the
  lowest group in the lowest byte), unused bytes 0. ``tma_ue8m0`` holds powers of two only: it needs ``round_sf``
  on output (and power-of-two input scales).

One block per ``block_M`` rows × one output group: the group is gathered into shared memory (dequantised per
element, clamped indices under a validity mask: nothing past ``M``/``N`` is read, partial groups read 0 and never
raise ``amax``), its absolute maximum reduced in a fragment, then scaled and stored. Blocks of the last row tile
write the zero padding rows of the TMA layouts, blocks of the last group the unused exponent bytes. Deterministic
and bitwise equal to the NumPy reference below (and to TileKernels' reference: ``--families requant,e5m6``).

Errors (``ValueError`` at build time): unknown formats or layouts; for e2m1 (in or out) an odd ``N`` or group;
for e5m6 ``N`` or the group not a multiple of 8;
``tma_ue8m0`` output without ``round_sf``; a TMA layout with ``block_M`` not a multiple of 4. Inputs finite.
"""

import ml_dtypes
import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.quant_cast import e5m6_code, e5m6_codes, pack_e5m6
from kernels.registry import KernelSpec, register
from tilesim import dtypes as _dt

FP8 = "float8_e4m3fn"
QMAX = {"e4m3": 448.0, "e2m1": 6.0}
FLOOR = {"e4m3": 1e-4, "e2m1": 6.0 * 2.0 ** -126}
OUT_QMAX = {**QMAX, "e5m6": 65024.0}  # output formats: the input ones plus E5M6 (TileKernels' cast_to_e5m6)
OUT_FLOOR = {**FLOOR, "e5m6": 1e-4}
LAYOUTS = ("rows", "tma", "tma_ue8m0")
PLAIN = ("bfloat16", "float32")


def _align4(n):
    return (n + 3) // 4 * 4


def sf_storage(R, G, layout):
    """(shape, dtype) of a logical (R, G) scale matrix stored in ``layout``."""
    return {"rows": ((R, G), "float32"), "tma": ((G, _align4(R)), "float32"),
            "tma_ue8m0": (((G + 3) // 4, 4 * _align4(R)), "uint8")}[layout]


@T.macro
def e2m1_code(v):
    """The 4-bit e2m1 code (int32 0..15) of fp32 ``v``: nearest even, saturating at 6, sign kept."""
    bits = T.reinterpret("int32", v)
    sign = (bits >> 28) & 0x8
    e = (bits >> 23) & 0xFF
    mant = bits & 0x7FFFFF
    top = (mant >> 22) & 1
    rnd = ((mant >> 21) & 1) & T.if_then_else(((mant & 0x1FFFFF) != 0) | (top == 1), 1, 0)
    normal = T.min(((e - 126) << 1) + top + rnd, 7)
    sub = T.if_then_else(e == 126, 1 + T.if_then_else(mant >= 0x400000, 1, 0),
                         T.if_then_else((e == 125) & (mant != 0), 1, 0))
    return sign | T.if_then_else(e >= 127, normal, sub)


@T.macro
def e2m1_value(code):
    """fp32 value of a 4-bit e2m1 code (int32): {0, 0.5, 1, 1.5, 2, 3, 4, 6}, bit 3 the sign (code 8 is −0)."""
    e = (code >> 1) & 3
    half = T.cast(code & 1, "float32") * 0.5
    mag = T.if_then_else(e == 0, half, (1.0 + half) * T.cast(1 << T.max(e - 1, 0), "float32"))
    return T.if_then_else((code & 8) != 0, -mag, mag)


def _check(M, N, in_fmt, fmt, group_size, x_block, round_sf, in_layout, sf_layout, block_M):
    if in_fmt not in PLAIN + tuple(QMAX):
        raise ValueError(f"in_fmt must be one of {', '.join(PLAIN + tuple(QMAX))}, got {in_fmt!r}")
    if fmt not in OUT_QMAX:
        raise ValueError(f"fmt must be one of {', '.join(OUT_QMAX)}, got {fmt!r}")
    for name, lay in (("in_layout", in_layout), ("sf_layout", sf_layout)):
        if lay not in LAYOUTS:
            raise ValueError(f"{name} must be one of {', '.join(LAYOUTS)}, got {lay!r}")
    if (fmt == "e2m1" or in_fmt == "e2m1") and (N % 2 or group_size % 2):
        raise ValueError(f"FP4 packing needs an even N and group_size (got N={N}, group_size={group_size})")
    if fmt == "e5m6" and (N % 8 or group_size % 8):
        raise ValueError(f"E5M6 packing needs N and group_size multiples of 8 (got N={N}, group_size={group_size})")
    if in_fmt in QMAX and (x_block is None or len(x_block) != 2 or min(x_block) < 1):
        raise ValueError(f"a quantised input needs x_block=(rows, cols) of its scale blocks, got {x_block!r}")
    if sf_layout == "tma_ue8m0" and not round_sf:
        raise ValueError("the packed UE8M0 layout stores exponents only: it needs round_sf=True")
    if "tma" in sf_layout and block_M % 4:
        raise ValueError(f"TMA scale layouts need block_M to be a multiple of 4, got {block_M}")


@tilelang.jit(out_idx=[-2, -1])
def per_token_recast(M, N, in_fmt="e4m3", fmt="e4m3", group_size=128, x_block=(128, 128), round_sf=True,
                     in_layout="rows", sf_layout="rows", block_M=32, threads=128):
    _check(M, N, in_fmt, fmt, group_size, x_block, round_sf, in_layout, sf_layout, block_M)
    G = T.ceildiv(N, group_size)
    qmax, floor = OUT_QMAX[fmt], OUT_FLOOR[fmt]
    quantised = in_fmt in QMAX
    in_shape, in_dtype = ((M, N // 2), "int8") if in_fmt == "e2m1" else ((M, N), FP8 if in_fmt == "e4m3" else in_fmt)
    bh, bw = x_block if quantised else (1, 1)
    sin_shape, sin_dtype = sf_storage(T.ceildiv(M, bh), T.ceildiv(N, bw), in_layout)
    out_shape, out_dtype = {"e2m1": ((M, N // 2), "int8"), "e4m3": ((M, N), FP8), "e5m6": ((M, N // 8 * 3), "uint32")}[fmt]
    s_shape, s_dtype = sf_storage(M, G, sf_layout)
    A = _align4(M)

    @T.macro
    def in_scale(Sin, r, c):
        if in_layout == "rows":
            s = Sin[r // bh, c // bw]
        elif in_layout == "tma":
            s = Sin[c // bw, r // bh]
        else:
            s = T.reinterpret("float32", T.cast(Sin[(c // bw) // 4, 4 * (r // bh) + (c // bw) % 4], "int32") << 23)
        return s

    @T.macro
    def in_value(Xin, Sin, r, c):
        if in_fmt == "e4m3":
            v = T.cast(Xin[r, c], "float32") * in_scale(Sin, r, c)
        else:
            b = T.cast(Xin[r, c // 2], "int32") & 0xFF
            v = e2m1_value((b >> (4 * (c % 2))) & 0xF) * in_scale(Sin, r, c)
        return v

    @T.macro
    def body(Xin, Sin, Q, S):
        with T.Kernel(G, T.ceildiv(M, block_M), threads=threads) as (bx, by):
            xs = T.alloc_shared((block_M, group_size), "float32")
            x = T.alloc_fragment((block_M, group_size), "float32")
            amax = T.alloc_fragment((block_M,), "float32")
            sf = T.alloc_fragment((block_M,), "float32")
            inv = T.alloc_fragment((block_M,), "float32")
            if quantised:
                for i, j in T.Parallel(block_M, group_size):
                    r = T.min(by * block_M + i, M - 1)
                    c = T.min(bx * group_size + j, N - 1)
                    xs[i, j] = T.if_then_else((by * block_M + i < M) & (bx * group_size + j < N), in_value(Xin, Sin, r, c), 0.0)
            else:
                T.copy(Xin[by * block_M, bx * group_size], xs)  # zero-filled past the edges
            T.copy(xs, x)
            T.reduce_absmax(x, amax, dim=1)
            for i in T.Parallel(block_M):
                a = T.max(amax[i], floor)
                if round_sf:
                    bits = T.reinterpret("int32", a / qmax)
                    sf[i] = T.reinterpret("float32", (bits + 0x7FFFFF) & 0x7F800000)
                    inv[i] = 1.0 / sf[i]
                else:
                    sf[i] = a / qmax
                    inv[i] = qmax / a
            for i in T.Parallel(block_M):
                r = by * block_M + i
                if sf_layout == "rows":
                    if r < M:
                        S[r, bx] = sf[i]
                elif sf_layout == "tma":
                    if r < A:
                        S[bx, r] = T.if_then_else(r < M, sf[i], 0.0)
                else:
                    if r < A:
                        e = T.reinterpret("int32", sf[i]) >> 23
                        S[bx // 4, 4 * r + bx % 4] = T.cast(T.if_then_else(r < M, e, 0), "uint8")
            if sf_layout == "tma_ue8m0":
                if bx == G - 1:
                    for i, k in T.Parallel(block_M, 4):
                        if (by * block_M + i < A) & (k > bx % 4):
                            S[bx // 4, 4 * (by * block_M + i) + k] = T.cast(0, "uint8")
            if fmt == "e2m1":
                half = group_size // 2
                q4 = T.alloc_fragment((block_M, half), "int8")
                for i, j in T.Parallel(block_M, half):
                    b = e2m1_code(xs[i, 2 * j] * inv[i]) | (e2m1_code(xs[i, 2 * j + 1] * inv[i]) << 4)
                    q4[i, j] = T.cast(b - T.if_then_else(b >= 128, 256, 0), "int8")
                T.copy(q4, Q[by * block_M, bx * half])
            elif fmt == "e5m6":
                W = group_size // 8 * 3
                ws = T.alloc_shared((block_M, W), "uint32")
                for i, k in T.Parallel(block_M, group_size // 8):
                    c, m = 8 * k, inv[i]
                    c2, c5 = e5m6_code(xs[i, c + 2] * m), e5m6_code(xs[i, c + 5] * m)
                    ws[i, 3 * k] = (e5m6_code(xs[i, c] * m) << 20) | (e5m6_code(xs[i, c + 1] * m) << 8) | (c2 >> 4)
                    ws[i, 3 * k + 1] = ((c2 << 28) | (e5m6_code(xs[i, c + 3] * m) << 16)
                                        | (e5m6_code(xs[i, c + 4] * m) << 4) | (c5 >> 8))
                    ws[i, 3 * k + 2] = (c5 << 24) | (e5m6_code(xs[i, c + 6] * m) << 12) | e5m6_code(xs[i, c + 7] * m)
                T.copy(ws, Q[by * block_M, bx * W])  # clipped at N·3/8 (a partial last group)
            else:
                q8 = T.alloc_fragment((block_M, group_size), FP8)
                for i, j in T.Parallel(block_M, group_size):
                    q8[i, j] = T.cast(xs[i, j] * inv[i], FP8)
                T.copy(q8, Q[by * block_M, bx * group_size])

    if quantised:
        @T.prim_func
        def main(Xin: T.Tensor(in_shape, in_dtype), Sin: T.Tensor(sin_shape, sin_dtype),
                 Q: T.Tensor(out_shape, out_dtype), S: T.Tensor(s_shape, s_dtype)):
            body(Xin, Sin, Q, S)
    else:
        @T.prim_func
        def main(Xin: T.Tensor(in_shape, in_dtype), Q: T.Tensor(out_shape, out_dtype), S: T.Tensor(s_shape, s_dtype)):
            body(Xin, None, Q, S)

    return main


# ------------------------------------------------------------------------------------------ references
def layout_sf(S, layout):
    """A logical fp32 (R, G) scale matrix in ``layout``'s storage (NumPy; zero padding)."""
    S = np.asarray(S, np.float32)
    R, G = S.shape
    if layout == "rows":
        return S.copy()
    padded = np.zeros((_align4(R), -(-G // 4) * 4), np.float32)
    padded[:R, :G] = S
    if layout == "tma":
        return np.ascontiguousarray(padded[:, :G].T)
    e = ((padded.view(np.int32) >> 23) & 0xFF).astype(np.uint8)  # (A, 4·ceil(G/4))
    return np.ascontiguousarray(e.reshape(e.shape[0], -1, 4).transpose(1, 0, 2).reshape(-1, 4 * e.shape[0]))


def logical_sf(stored, R, G, layout):
    """The logical fp32 (R, G) scales of a stored layout (inverse of :func:`layout_sf`)."""
    stored = np.asarray(stored)
    if layout == "rows":
        return stored.astype(np.float32)
    if layout == "tma":
        return np.ascontiguousarray(stored[:, :R].T).astype(np.float32)
    e = stored.reshape(stored.shape[0], -1, 4).transpose(1, 0, 2).reshape(stored.shape[1] // 4, -1)[:R, :G]
    return (e.astype(np.int32) << 23).view(np.float32)


def dequant(Q, Sin, x_block, in_fmt, in_layout="rows"):
    """fp32 values of a quantised tensor: ``float(q) · scale`` (one rounding); e2m1 codes via ml_dtypes."""
    if in_fmt == "e2m1":
        b = np.asarray(Q).view(np.uint8)
        codes = np.stack([b & 0xF, b >> 4], axis=-1).reshape(b.shape[0], -1)
        q = codes.astype(np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float32)
    else:
        q = np.asarray(Q).astype(np.float32)
    M, N = q.shape
    bh, bw = x_block
    s = logical_sf(Sin, -(-M // bh), -(-N // bw), in_layout)
    return (q * np.repeat(np.repeat(s, bh, axis=0), bw, axis=1)[:M, :N]).astype(np.float32)


def ref_recast(*inputs, in_fmt="e4m3", fmt="e4m3", group_size=128, x_block=(128, 128), round_sf=True,
               in_layout="rows", sf_layout="rows", **_):
    """NumPy meaning: dequantise (if quantised), groups of ``group_size``, scales, ml_dtypes conversions, layout."""
    x = dequant(inputs[0], inputs[1], x_block, in_fmt, in_layout) if in_fmt in QMAX else np.asarray(inputs[0], np.float32)
    M, N = x.shape
    G = -(-N // group_size)
    xg = np.pad(x, ((0, 0), (0, G * group_size - N))).reshape(M, G, group_size)
    qmax, floor = np.float32(OUT_QMAX[fmt]), np.float32(OUT_FLOOR[fmt])
    a = np.maximum(np.abs(xg).max(axis=2), floor).astype(np.float32)
    s = (a / qmax).astype(np.float32)
    if round_sf:
        s = ((s.view(np.int32) + 0x7FFFFF) & 0x7F800000).astype(np.int32).view(np.float32)
        mult = (np.float32(1.0) / s).astype(np.float32)
    else:
        mult = (qmax / a).astype(np.float32)
    v = (xg * mult[:, :, None]).astype(np.float32).reshape(M, -1)[:, :N]
    if fmt == "e5m6":  # no clip (TileKernels clips neither; |v| <= 65024 up to one rounding)
        return pack_e5m6(e5m6_codes(v)), layout_sf(s, sf_layout)
    v = np.clip(v, -qmax, qmax)
    if fmt == "e4m3":
        q = v.astype(ml_dtypes.float8_e4m3fn)
    else:
        codes = v.astype(ml_dtypes.float4_e2m1fn).view(np.uint8).astype(np.int32) & 0xF
        q = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8).view(np.int8)
    return q, layout_sf(s, sf_layout)


def recast_inputs(rng, M, N, in_fmt="e4m3", x_block=(128, 128), in_layout="rows", **_):
    """A bf16-valued tensor (``N(0, 2)``, one partly zero group), quantised by the reference when ``in_fmt`` is
    e4m3/e2m1 (power-of-two block scales, as TileKernels' tests make them)."""
    x = (rng.standard_normal((M, N)) * 2.0).astype(np.float32)
    x[0, : min(N, 7)] = 0.0
    x = x.astype(_dt.np_dtype("bfloat16")).astype(np.float32)
    if in_fmt in PLAIN:
        return (x.astype(_dt.np_dtype(in_fmt)),)
    return ref_recast(x, in_fmt="float32", fmt=in_fmt, group_size=x_block[1], round_sf=True, sf_layout=in_layout,
                      ) if x_block[0] == 1 else _block_quant(x, in_fmt, x_block, in_layout)


def _block_quant(x, fmt, x_block, layout):
    """(bh, bw)-block quantisation with power-of-two scales (TileKernels' ``cast(..., round_sf=True)``)."""
    M, N = x.shape
    bh, bw = x_block
    Rb, Gb = -(-M // bh), -(-N // bw)
    xp = np.pad(x, ((0, Rb * bh - M), (0, Gb * bw - N))).reshape(Rb, bh, Gb, bw)
    a = np.maximum(np.abs(xp).max(axis=(1, 3)), np.float32(FLOOR[fmt])).astype(np.float32)
    s = (((a / np.float32(QMAX[fmt])).astype(np.float32).view(np.int32) + 0x7FFFFF) & 0x7F800000).view(np.float32)
    v = np.clip((xp * (np.float32(1.0) / s)[:, None, :, None]).astype(np.float32).reshape(Rb * bh, -1)[:M, :N],
                -QMAX[fmt], QMAX[fmt]).astype(np.float32)
    if fmt == "e4m3":
        q = v.astype(ml_dtypes.float8_e4m3fn)
    else:
        codes = v.astype(ml_dtypes.float4_e2m1fn).view(np.uint8).astype(np.int32) & 0xF
        q = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8).view(np.int8)
    return q, layout_sf(s, layout)


def compare_bitwise(out, ref, *_args, **_kw):
    for o, r in zip(out, ref, strict=True):
        o, r = np.asarray(o), np.asarray(r)
        if o.shape != r.shape or o.tobytes() != r.tobytes():
            raise AssertionError(f"not bitwise equal ({o.shape} {o.dtype} vs {r.shape} {r.dtype})")


# ------------------------------------------------------------------------------------------ registry
def _build(M, N, in_fmt, fmt, group_size, xbh=1, xbw=1, round_sf=True, in_layout="rows", sf_layout="rows",
           block_M=32, threads=128, **_):
    return per_token_recast(M, N, in_fmt, fmt, group_size, (xbh, xbw) if in_fmt in QMAX else None, round_sf,
                            in_layout, sf_layout, block_M, threads)


def _ref(*inputs, xbh=1, xbw=1, **p):
    return ref_recast(*inputs, x_block=(xbh, xbw), **p)


def _bytes(M, N, in_fmt, fmt, group_size, xbh=1, xbw=1, **_):
    bits_in = {"bfloat16": 16, "float32": 32, "e4m3": 8, "e2m1": 4}[in_fmt]
    s_in = 4 * -(-M // xbh) * -(-N // xbw) if in_fmt in QMAX else 0
    bits_out = {"e4m3": 8, "e2m1": 4, "e5m6": 12}[fmt]
    return M * N * bits_in // 8 + s_in + M * N * bits_out // 8 + 4 * M * -(-N // group_size)


_TUNE = {"block_M": [8, 16, 32, 64], "threads": [64, 128, 256]}

register(KernelSpec(
    name="quant_requant_per_token", family="fp8_cast",
    description="requantising per-token cast: e4m3 / packed e2m1 values with (bh, bw) block scales -> e4m3 / e2m1 "
                "per 1 x group, row-major, TMA-aligned or packed-UE8M0 scales (TileKernels' cast with x_block_size)",
    build=_build,
    make_inputs=lambda rng, M, N, in_fmt, xbh=1, xbw=1, in_layout="rows", **_: recast_inputs(
        rng, M, N, in_fmt, (xbh, xbw), in_layout),
    reference=_ref, compare=lambda outs, refs, p: compare_bitwise(outs, refs),
    flops=lambda M, N, **_: 4 * M * N, bytes=_bytes,
    shapes=({"label": "DeepSeek-V3 hidden 7168, 4096 tok: e4m3 128x128 -> e4m3 1x128", "M": 4096, "N": 7168},
            {"label": "MoE intermediate 2048, 16384 tok: e4m3 128x128 -> e2m1 1x32, packed UE8M0", "M": 16384,
             "N": 2048, "fmt": "e2m1", "group_size": 32, "sf_layout": "tma_ue8m0"}),
    test_shapes=({"label": "ragged 37x200: e4m3 32x32 -> e2m1 1x32", "M": 37, "N": 200, "fmt": "e2m1", "group_size": 32,
                  "xbh": 32, "xbw": 32, "block_M": 16},
                 {"label": "ragged 13x200: e2m1 128x128 packed -> e4m3 1x64 packed", "M": 13, "N": 200,
                  "in_fmt": "e2m1", "group_size": 64, "in_layout": "tma_ue8m0", "sf_layout": "tma_ue8m0",
                  "block_M": 8}),
    tunables=_TUNE,
    defaults={"in_fmt": "e4m3", "fmt": "e4m3", "group_size": 128, "xbh": 128, "xbw": 128, "round_sf": True,
              "in_layout": "rows", "sf_layout": "rows", "block_M": 32, "threads": 128},
    tolerance={"exact": True}))

register(KernelSpec(
    name="quant_cast_per_token_sf_layout", family="fp8_cast",
    description="per-token e4m3 / e2m1 cast of bf16/fp32 with TileKernels' TMA-aligned column-major or packed-UE8M0 "
                "scale storage (what DeepGEMM's FP8/FP4 GEMMs read)",
    build=_build,
    make_inputs=lambda rng, M, N, in_fmt, **_: recast_inputs(rng, M, N, in_fmt),
    reference=_ref, compare=lambda outs, refs, p: compare_bitwise(outs, refs),
    flops=lambda M, N, **_: 3 * M * N, bytes=_bytes,
    shapes=({"label": "DeepSeek-V3 hidden 7168, 4096 tok, packed UE8M0", "M": 4096, "N": 7168},
            {"label": "DeepSeek-V3 hidden 7168, 4096 tok, e2m1 1x32, packed UE8M0", "M": 4096, "N": 7168,
             "fmt": "e2m1", "group_size": 32}),
    test_shapes=({"label": "ragged 37x200 bf16, packed UE8M0, 1x64", "M": 37, "N": 200, "group_size": 64, "block_M": 8},
                 {"label": "ragged 5x70 fp32 -> e2m1 1x32, TMA fp32", "M": 5, "N": 70, "in_fmt": "float32",
                  "fmt": "e2m1", "group_size": 32, "sf_layout": "tma", "round_sf": False, "block_M": 4}),
    tunables=_TUNE,
    defaults={"in_fmt": "bfloat16", "fmt": "e4m3", "group_size": 128, "round_sf": True, "in_layout": "rows",
              "sf_layout": "tma_ue8m0", "block_M": 32, "threads": 128},
    tolerance={"exact": True}))

register(KernelSpec(
    name="quant_requant_e5m6", family="fp8_cast",
    description="per-token E5M6 cast (12-bit codes, eight per three uint32) of bf16/fp32 or requantised from e4m3 / "
                "packed e2m1 blocks, with row-major, TMA-aligned or packed-UE8M0 scales (TileKernels' cast_to_e5m6)",
    build=_build,
    make_inputs=lambda rng, M, N, in_fmt, xbh=1, xbw=1, in_layout="rows", **_: recast_inputs(
        rng, M, N, in_fmt, (xbh, xbw), in_layout),
    reference=_ref, compare=lambda outs, refs, p: compare_bitwise(outs, refs),
    flops=lambda M, N, **_: 6 * M * N, bytes=_bytes,
    shapes=({"label": "DeepSeek-V3 hidden 7168, 4096 tok: bf16 -> e5m6 1x7168 (per token, TileKernels' case), packed "
                      "UE8M0", "M": 4096, "N": 7168, "group_size": 7168, "block_M": 4, "sf_layout": "tma_ue8m0",
             "threads": 256},
            {"label": "DeepSeek-V3 hidden 7168, 4096 tok: e4m3 128x128 -> e5m6 1x128", "M": 4096, "N": 7168,
             "in_fmt": "e4m3", "xbh": 128, "xbw": 128}),
    test_shapes=({"label": "ragged 37x200: e2m1 32x32 -> e5m6 1x40, TMA fp32", "M": 37, "N": 200, "in_fmt": "e2m1",
                  "xbh": 32, "xbw": 32, "group_size": 40, "sf_layout": "tma", "round_sf": False, "block_M": 8},
                 {"label": "ragged 13x136 fp32 -> e5m6 1x136, packed UE8M0", "M": 13, "N": 136,
                  "in_fmt": "float32", "group_size": 136, "sf_layout": "tma_ue8m0", "block_M": 4}),
    tunables={"block_M": [4, 8, 16, 32], "threads": [64, 128, 256]},  # TMA scale layouts: block_M % 4 == 0
    defaults={"in_fmt": "bfloat16", "fmt": "e5m6", "group_size": 128, "round_sf": True, "in_layout": "rows",
              "sf_layout": "rows", "block_M": 16, "threads": 128},
    tolerance={"exact": True}))
