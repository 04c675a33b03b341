"""Cast-backs (dequantisation) of e4m3, packed FP4 (e2m1) and packed E5M6 tensors with block scales in any of
TileKernels' scale layouts to bf16 / fp32 (its ``cast_back`` / ``per_token_cast_back`` and ``cast_back_e5m6``;
references ``cast_back`` in ``tile_kernels/torch/cast.py`` and ``cast_back_from_e5m6`` in
``tile_kernels/torch/cast_e5m6.py``).

Kernel ``cast_back(M, N, in_fmt, x_block, in_layout, out_dtype, block_M, block_N, threads)``:

* input values ``Q``: ``e4m3`` — ``(M, N)`` float8_e4m3fn; ``e2m1`` — ``(M, N/2)`` int8, two codes per byte,
  element ``2j`` in the low nibble (codes {0, ±0.5, …, ±6}, code 8 is −0); ``e5m6`` — ``(M, 3N/8)`` uint32, eight
  12-bit codes big-end first in three words (``Q.view(uint8)`` is TileKernels' byte layout), each code the top 12
  bits of an IEEE fp16 (sign, 5-bit exponent, 6-bit mantissa: subnormals, ±inf and NaN included).
* input scales ``S`` of blocks ``x_block = (bh, bw)`` (``(1, g)`` per token) in layout ``in_layout``
  (``kernels.quant_requant.sf_storage``: ``rows`` fp32, ``tma`` fp32 column-major TMA-aligned, ``tma_ue8m0``
  packed biased exponents).
* output ``Y (M, N)`` ``out_dtype`` ∈ {bfloat16, float32}: ``Y = out_dtype(float(q) · S[r // bh, c // bw])`` — the
  decoded value times the scale rounded once to fp32, then (bf16) rounded to nearest even. NaN and inf codes pass
  through (e4m3 0x7F/0xFF, E5M6 exponent 31), as on the GPU; a NaN's bf16 bits are this simulator's (payload kept),
  so comparisons treat any NaN as equal to any NaN (``compare_values``).

One block per ``block_M`` rows × ``block_N`` columns; each thread decodes one packing unit (one e4m3 byte, one e2m1
byte = two values, three E5M6 words = eight values) with clamped indices, and the tile is stored clipped at the
edges. Deterministic and bitwise equal to the NumPy reference below (and to TileKernels' references:
``benchmarks/tilekernels_fidelity.py --families cast_back``). The e4m3 row-major case is ``fp8_dequant_per_token`` /
``fp8_dequant_per_block`` (``kernels/fp8_cast.py``) with any block shape and the TMA layouts added.

Errors (``ValueError`` at build time): unknown format, layout or output dtype; a block dimension < 1; e2m1 with an
odd ``N`` or ``block_N``; e5m6 with ``N`` or ``block_N`` not a multiple of 8.
"""

import ml_dtypes
import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.quant_cast import pack_e5m6
from kernels.quant_requant import LAYOUTS, dequant, e2m1_value, layout_sf, logical_sf, sf_storage
from kernels.registry import KernelSpec, register
from tilesim import dtypes as _dt

FP8 = "float8_e4m3fn"
FORMATS = ("e4m3", "e2m1", "e5m6")
UNIT = {"e4m3": 1, "e2m1": 2, "e5m6": 8}  # values per packing unit
OUT = ("bfloat16", "float32")


def q_storage(M, N, in_fmt):
    """(shape, dtype) of the value storage of an (M, N) tensor in ``in_fmt``."""
    return {"e4m3": ((M, N), FP8), "e2m1": ((M, N // 2), "int8"), "e5m6": ((M, N // 8 * 3), "uint32")}[in_fmt]


def _check(N, in_fmt, x_block, in_layout, out_dtype, block_N):
    if in_fmt not in FORMATS:
        raise ValueError(f"in_fmt must be one of {', '.join(FORMATS)}, got {in_fmt!r}")
    if in_layout not in LAYOUTS:
        raise ValueError(f"in_layout must be one of {', '.join(LAYOUTS)}, got {in_layout!r}")
    if out_dtype not in OUT:
        raise ValueError(f"out_dtype must be one of {', '.join(OUT)}, got {out_dtype!r}")
    if len(x_block) != 2 or min(x_block) < 1:
        raise ValueError(f"x_block must be (rows, cols) >= 1, got {x_block!r}")
    u = UNIT[in_fmt]
    if N % u or block_N % u:
        raise ValueError(f"{in_fmt} packs {u} values per unit: N and block_N must be multiples of {u} "
                         f"(got N={N}, block_N={block_N})")


@T.macro
def e5m6_value(code):
    """fp32 value of a 12-bit E5M6 code (int32): the fp16 whose top 12 bits it is (exact in fp32)."""
    e = (code >> 6) & 31
    m = code & 63
    normal = T.reinterpret("float32", (T.if_then_else(e == 31, 255, e + 112) << 23) | (m << 17))
    mag = T.if_then_else(e == 0, T.cast(m, "float32") * (2.0 ** -20), normal)
    return T.if_then_else((code & 0x800) != 0, -mag, mag)


@tilelang.jit(out_idx=[-1])
def cast_back(M, N, in_fmt="e2m1", x_block=(1, 32), in_layout="rows", out_dtype="bfloat16", block_M=32,
              block_N=128, threads=128):
    _check(N, in_fmt, x_block, in_layout, out_dtype, block_N)
    bh, bw = x_block
    u = UNIT[in_fmt]
    q_shape, q_dtype = q_storage(M, N, in_fmt)
    s_shape, s_dtype = sf_storage(T.ceildiv(M, bh), T.ceildiv(N, bw), in_layout)

    @T.macro
    def scale(S, r, c):
        if in_layout == "rows":
            s = S[r // bh, c // bw]
        elif in_layout == "tma":
            s = S[c // bw, r // bh]
        else:
            s = T.reinterpret("float32", T.cast(S[(c // bw) // 4, 4 * (r // bh) + (c // bw) % 4], "int32") << 23)
        return s

    @T.prim_func
    def main(Q: T.Tensor(q_shape, q_dtype), S: T.Tensor(s_shape, s_dtype), Y: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            y = T.alloc_shared((block_M, block_N), out_dtype)  # several columns per thread: shared
            for i, j in T.Parallel(block_M, block_N // u):
                r = T.min(by * block_M + i, M - 1)
                c = T.min(bx * block_N + u * j, N - u)  # first column of the unit (clamped: never past N)
                if in_fmt == "e4m3":
                    y[i, j] = T.cast(T.cast(Q[r, c], "float32") * scale(S, r, c), out_dtype)
                elif in_fmt == "e2m1":
                    b = T.cast(Q[r, c // 2], "int32") & 0xFF
                    y[i, 2 * j] = T.cast(e2m1_value(b & 0xF) * scale(S, r, c), out_dtype)
                    y[i, 2 * j + 1] = T.cast(e2m1_value(b >> 4) * scale(S, r, c + 1), out_dtype)
                else:
                    w = 3 * (c // 8)
                    w0, w1, w2 = T.cast(Q[r, w], "int32"), T.cast(Q[r, w + 1], "int32"), T.cast(Q[r, w + 2], "int32")
                    c2 = ((w0 << 4) | ((w1 >> 28) & 0xF)) & 0xFFF
                    c5 = ((w1 << 8) | ((w2 >> 24) & 0xFF)) & 0xFFF
                    y[i, 8 * j] = T.cast(e5m6_value((w0 >> 20) & 0xFFF) * scale(S, r, c), out_dtype)
                    y[i, 8 * j + 1] = T.cast(e5m6_value((w0 >> 8) & 0xFFF) * scale(S, r, c + 1), out_dtype)
                    y[i, 8 * j + 2] = T.cast(e5m6_value(c2) * scale(S, r, c + 2), out_dtype)
                    y[i, 8 * j + 3] = T.cast(e5m6_value((w1 >> 16) & 0xFFF) * scale(S, r, c + 3), out_dtype)
                    y[i, 8 * j + 4] = T.cast(e5m6_value((w1 >> 4) & 0xFFF) * scale(S, r, c + 4), out_dtype)
                    y[i, 8 * j + 5] = T.cast(e5m6_value(c5) * scale(S, r, c + 5), out_dtype)
                    y[i, 8 * j + 6] = T.cast(e5m6_value((w2 >> 12) & 0xFFF) * scale(S, r, c + 6), out_dtype)
                    y[i, 8 * j + 7] = T.cast(e5m6_value(w2 & 0xFFF) * scale(S, r, c + 7), out_dtype)
            T.copy(y, Y[by * block_M, bx * block_N])  # clipped at M, N

    return main


# ------------------------------------------------------------------------------------------ reference
def e5m6_decode(Q):
    """fp32 values (M, N) of packed E5M6 words (M, 3N/8): each code's fp16 (``code << 4``) widened."""
    w = np.asarray(Q, np.uint32).astype(np.uint64).reshape(Q.shape[0], -1, 3)
    w0, w1, w2 = w[..., 0], w[..., 1], w[..., 2]
    codes = np.stack([w0 >> 20, w0 >> 8, (w0 << 4) | (w1 >> 28), w1 >> 16, w1 >> 4, (w1 << 8) | (w2 >> 24),
                      w2 >> 12, w2], axis=-1) & np.uint64(0xFFF)
    return (codes.astype(np.uint16) << 4).view(np.float16).astype(np.float32).reshape(Q.shape[0], -1)


def ref_cast_back(Q, S, in_fmt="e2m1", x_block=(1, 32), in_layout="rows", out_dtype="bfloat16", **_):
    """NumPy meaning: decode (ml_dtypes / fp16 bits), times the expanded scale in fp32, rounded to ``out_dtype``."""
    if in_fmt == "e5m6":
        q = e5m6_decode(Q)
        M, N = q.shape
        bh, bw = x_block
        s = logical_sf(S, -(-M // bh), -(-N // bw), in_layout)
        with np.errstate(invalid="ignore", over="ignore"):  # NaN codes, overflow to inf: as the GPU
            y = (q * np.repeat(np.repeat(s, bh, axis=0), bw, axis=1)[:M, :N]).astype(np.float32)
    else:
        y = dequant(Q, S, x_block, in_fmt, in_layout)
    return y.astype(_dt.np_dtype(out_dtype))


def cast_back_inputs(rng, M, N, in_fmt="e2m1", x_block=(1, 32), in_layout="rows", specials=False):
    """Random codes of every bit pattern but NaN/inf (all of them with ``specials``) and scales: powers of two
    ``2^[-20, 20]`` (any layout), or (``rows``/``tma``) random fp32 values for half of the blocks."""
    if in_fmt == "e4m3":
        b = rng.integers(0, 256, (M, N), dtype=np.uint8)
        if not specials:
            b = np.where((b & 0x7F) == 0x7F, b & 0xFE, b).astype(np.uint8)
        q = b.view(ml_dtypes.float8_e4m3fn)
    elif in_fmt == "e2m1":
        q = rng.integers(0, 256, (M, N // 2), dtype=np.uint8).view(np.int8)
    else:
        c = rng.integers(0, 4096, (M, N), dtype=np.uint32)
        if not specials:
            c = np.where((c >> 6) & 31 == 31, c & ~np.uint32(1 << 6), c).astype(np.uint32)
        q = pack_e5m6(c)
    bh, bw = x_block
    R, G = -(-M // bh), -(-N // bw)
    s = np.ldexp(np.float32(1.0), rng.integers(-20, 21, (R, G))).astype(np.float32)
    if in_layout != "tma_ue8m0":
        s = np.where(rng.random((R, G)) < 0.5, s, rng.uniform(1e-3, 10.0, (R, G))).astype(np.float32)
    return q, layout_sf(s, in_layout)


def compare_values(out, ref):
    """Bitwise, except that a NaN matches any NaN: fp32 → bf16 keeps the NaN's payload here (and on the GPU,
    which returns its canonical NaN) while ml_dtypes / torch return 0x7FC0 with the sign — the value is the same."""
    o, r = np.asarray(out), np.asarray(ref)
    if o.shape != r.shape or o.dtype != r.dtype:
        raise AssertionError(f"shape/dtype differ: {o.shape} {o.dtype} vs {r.shape} {r.dtype}")
    on, rn = np.isnan(o.astype(np.float32)), np.isnan(r.astype(np.float32))
    bad = (on != rn) | (~on & (o.view(f"u{o.itemsize}") != r.view(f"u{r.itemsize}")))
    if bad.any():
        i = tuple(np.argwhere(bad)[0])
        raise AssertionError(f"{int(bad.sum())} of {bad.size} values differ; first at {i}: {o[i]!r} vs {r[i]!r}")


# ------------------------------------------------------------------------------------------ registry
def _single(x):
    """The one array of a kernel's or reference's result (the runners pass lists)."""
    return x[0] if isinstance(x, (list, tuple)) else x


def _build(M, N, in_fmt, xbh, xbw, in_layout, out_dtype, block_M, block_N, threads, **_):
    return cast_back(M, N, in_fmt, (xbh, xbw), in_layout, out_dtype, block_M, block_N, threads)


def _bytes(M, N, in_fmt, xbh, xbw, out_dtype="bfloat16", **_):
    return int(M * N * {"e4m3": 8, "e2m1": 4, "e5m6": 12}[in_fmt] // 8 + 4 * -(-M // xbh) * -(-N // xbw)
               + M * N * _dt.itemsize(_dt.canon(out_dtype)))


register(KernelSpec(
    name="quant_cast_back", family="fp8_cast",
    description="cast-back of e4m3 / packed e2m1 / packed E5M6 values with (bh, bw) block scales in row-major, "
                "TMA-aligned or packed-UE8M0 layout to bf16 / fp32 (TileKernels' cast_back, cast_back_e5m6)",
    build=_build,
    make_inputs=lambda rng, M, N, in_fmt, xbh, xbw, in_layout, **_: cast_back_inputs(
        rng, M, N, in_fmt, (xbh, xbw), in_layout),
    reference=lambda *ins, xbh, xbw, **p: ref_cast_back(*ins, x_block=(xbh, xbw), **p),
    compare=lambda outs, refs, p: compare_values(_single(outs), _single(refs)),
    flops=lambda M, N, **_: 2 * M * N, bytes=_bytes,
    shapes=({"label": "DeepSeek-V3 hidden 7168, 4096 tok: e2m1 1x32 packed UE8M0 -> bf16", "M": 4096, "N": 7168},
            {"label": "DeepSeek-V3 hidden 7168, 4096 tok: e5m6 1x128 -> bf16", "M": 4096, "N": 7168,
             "in_fmt": "e5m6", "xbw": 128, "in_layout": "rows"},
            {"label": "DeepSeek-V3 expert weight 7168x2048: e4m3 128x128 packed UE8M0 -> fp32", "M": 7168,
             "N": 2048, "in_fmt": "e4m3", "xbh": 128, "xbw": 128, "out_dtype": "float32"}),
    test_shapes=({"label": "ragged 37x200: e2m1 32x32 TMA fp32 -> bf16", "M": 37, "N": 200, "xbh": 32, "xbw": 32,
                  "in_layout": "tma", "block_N": 64},
                 {"label": "ragged 13x136: e5m6 1x40 rows -> fp32", "M": 13, "N": 136, "in_fmt": "e5m6", "xbw": 40,
                  "in_layout": "rows", "out_dtype": "float32", "block_M": 8, "block_N": 64}),
    tunables={"block_M": [8, 16, 32, 64], "block_N": [64, 128, 256], "threads": [64, 128, 256]},
    defaults={"in_fmt": "e2m1", "xbh": 1, "xbw": 32, "in_layout": "tma_ue8m0", "out_dtype": "bfloat16",
              "block_M": 32, "block_N": 128, "threads": 128},
    tolerance={"exact": True}))
