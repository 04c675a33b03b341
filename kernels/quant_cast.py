"""Per-channel FP8, packed FP4 (e2m1) and packed E5M6 casts with TileKernels' exact rounding and layouts.

Kernels (registry names):

* ``fp8_cast_per_channel`` — ``X`` (M, N) bf16/fp16/fp32 → ``Q`` (M, N) e4m3 and ``S`` (ceil(M/b), N) fp32:
  one scale per column and block of ``b = block_rows`` (128) rows (TileKernels' ``per_channel_cast``,
  the weight-gradient/transpose-side cast; its reference is ``cast(x, 'e4m3', block_size=(128, 1))``).
* ``fp4_cast_per_token`` — ``X`` (M, N) → ``Q`` (M, N/2) int8, two e2m1 codes per byte (element ``2j`` in
  the low nibble, ``2j + 1`` in the high one), and ``S`` (M, ceil(N/g)) fp32, ``g = group_size`` (32 as
  in MXFP4, or 64/128). ``N`` must be even (``ValueError``), as in TileKernels.
* ``e5m6_cast_per_token`` — ``X`` (M, N) → ``Q`` (M, 3N/8) uint32 (eight 12-bit E5M6 codes in three
  little-endian words; ``Q.view(uint8)`` is TileKernels' byte layout) and ``S`` (M, ceil(N/g)) fp32.
  ``N`` must be a multiple of 8 and ``g`` of 8 (``ValueError``).

Scales (all three; ``S`` is the dequantisation multiplier, ``X ≈ Q · S``), per group in fp32:
``amax = max(max|x|, floor)``; ``S = amax / qmax`` and the quantisation multiplier ``qmax / amax`` (two
divisions), or with ``use_ue8m0`` ``S = 2^ceil(log2(amax / qmax))`` from the fp32 bits and ``1 / S``.
``qmax``/``floor``: e4m3 448 / 1e-4; e2m1 6 / ``6·2^-126`` (so ``S ≥ 2^-126``); E5M6 65024 (the largest
E5M6 value) / 1e-4. Partial groups at the edges (rows past M, columns past N) read 0, which cannot raise
an absolute maximum, so a scale is that of the valid elements (TileKernels masks its padding the same way).

Element codes from the scaled fp32 value ``v = x · (qmax / amax)``:

* e4m3: round to nearest even, saturating at ±448 (tilesim's conversion, the GPU's ``satfinite``).
* e2m1: round to nearest even on the grid {0, 0.5, 1, 1.5, 2, 3, 4, 6}, saturating at 6 (code 7), the
  sign kept (``-0`` and negative values rounding to 0 give code 8). Computed with integer operations on
  the fp32 bits: ``|v| < 0.25`` (or exactly 0.25) → 0; ``[0.25, 0.5)`` → 1 if above 0.25; ``[0.5, 1)`` →
  1 or 2 (``≥ 0.75`` rounds up); ``|v| ≥ 1``: exponent ``E = e - 126`` and the top mantissa bit give
  ``2E + m``, rounded by the next bit with the rest as sticky bit, then capped at 7.
* E5M6 (TileKernels' definition, bit for bit): ``v`` truncated (round toward zero) to fp16 bits — fp16
  subnormals by shifting, ``|v| ≥ 65536`` and ±inf to ±inf, NaN to ``0x7fff`` with the sign, values below
  the smallest fp16 subnormal to ±0 — then shifted right by 4 to 12 bits and rounded up by one when the
  dropped fp16 bit plus the 17 low fp32 mantissa bits exceed half (``(code & 1) + (bits & 0x1ffff) >
  0x10000``: nearest-even on the fp32 value for fp16-normal values), wrapped to 12 bits.

NaN/Inf policy: inputs must be finite (a NaN makes its group's scale unspecified, as in the FP8 casts).
Every output is bitwise-defined for finite inputs; the NumPy references below compute the codes
independently (ml_dtypes' e2m1 conversion for FP4, NumPy bit operations for E5M6) and the tests compare
bit for bit.

Layout differences from TileKernels (values identical): scales are fp32 row-major; TileKernels' optional
TMA-aligned column-major and packed-UE8M0 (int32 of four exponent bytes) scale layouts are not produced.
"""

import ml_dtypes
import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.registry import KernelSpec, register
from tilesim import dtypes as _dt

FP8 = "float8_e4m3fn"
QMAX = {"e4m3": 448.0, "e2m1": 6.0, "e5m6": 65024.0}
FLOOR = {"e4m3": 1e-4, "e2m1": 6.0 * 2.0 ** -126, "e5m6": 1e-4}


# ------------------------------------------------------------------------------------------ kernels
@T.macro
def scale_of(amax, qmax, floor, use_ue8m0):
    """(dequant scale, quant multiplier) of one group from its fp32 absolute maximum."""
    a = T.max(amax, floor)
    if use_ue8m0:
        bits = T.reinterpret("int32", a / qmax)  # 2^ceil(log2(a / qmax)): exponent, +1 if mantissa != 0
        e = ((bits >> 23) & 0xFF) + T.if_then_else((bits & 0x7FFFFF) != 0, 1, 0)
        s = T.reinterpret("float32", e << 23)
        inv = 1.0 / s
    else:
        s = a / qmax
        inv = qmax / a
    return s, inv


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
def e5m6_code(v):
    """The 12-bit E5M6 code (uint32) of fp32 ``v`` (TileKernels' truncate-to-fp16-then-round rule)."""
    b = T.reinterpret("uint32", v)
    sign = (b >> 16) & 0x8000
    e = (b >> 23) & 0xFF
    mant = b & 0x7FFFFF
    sub_shift = T.min(126 - T.cast(e, "int32"), 31)  # only used where 103 <= e <= 112 (shift 14..23)
    h = T.if_then_else(
        (e >= 113) & (e <= 142), sign | ((e - 112) << 10) | (mant >> 13),
        T.if_then_else(
            (e >= 103) & (e <= 112), sign | ((mant | 0x800000) >> T.cast(T.max(sub_shift, 0), "uint32")),
            T.if_then_else(e == 255, T.if_then_else(mant == 0, sign | 0x7C00, sign | 0x7FFF),
                           T.if_then_else(e > 142, sign | 0x7C00, sign))))
    c = h >> 4
    up = T.if_then_else((c & 1) + (b & 0x1FFFF) > 0x10000, 1, 0)
    return (c + up) & 0xFFF


@tilelang.jit(out_idx=[1, 2])
def per_channel_cast(M, N, block_rows=128, block_N=64, in_dtype="bfloat16", use_ue8m0=False, threads=128):
    """Per-channel (block_rows × 1) e4m3 cast: one block per ``block_rows`` rows × ``block_N`` columns."""
    GM = T.ceildiv(M, block_rows)
    qmax, floor = QMAX["e4m3"], FLOOR["e4m3"]

    @T.prim_func
    def main(X: T.Tensor((M, N), in_dtype), Q: T.Tensor((M, N), FP8), S: T.Tensor((GM, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), GM, threads=threads) as (bx, by):
            x = T.alloc_fragment((block_rows, block_N), "float32")
            q = T.alloc_fragment((block_rows, block_N), FP8)
            amax = T.alloc_fragment((block_N,), "float32")
            inv = T.alloc_fragment((block_N,), "float32")
            sc = T.alloc_fragment((block_N,), "float32")
            T.copy(X[by * block_rows, bx * block_N], x)  # zero-filled past the edges
            T.reduce_absmax(x, amax, dim=0)
            for j in T.Parallel(block_N):
                s, m = scale_of(amax[j], qmax, floor, use_ue8m0)
                sc[j] = s
                inv[j] = m
            T.copy(sc, S[by, bx * block_N])
            for i, j in T.Parallel(block_rows, block_N):
                q[i, j] = T.cast(x[i, j] * inv[j], FP8)
            T.copy(q, Q[by * block_rows, bx * block_N])

    return main


@tilelang.jit(out_idx=[1, 2])
def per_token_cast_fp4(M, N, group_size=32, block_M=32, in_dtype="bfloat16", use_ue8m0=False, threads=128):
    """Per-token (1 × group_size) e2m1 cast, two codes per int8: one block per ``block_M`` rows × one group."""
    if N % 2 or group_size % 2:
        raise ValueError(f"FP4 packing needs an even N and group_size (got N={N}, group_size={group_size})")
    G, half = T.ceildiv(N, group_size), group_size // 2
    qmax, floor = QMAX["e2m1"], FLOOR["e2m1"]

    @T.prim_func
    def main(X: T.Tensor((M, N), in_dtype), Q: T.Tensor((M, N // 2), "int8"), S: T.Tensor((M, G), "float32")):
        with T.Kernel(G, T.ceildiv(M, block_M), threads=threads) as (bx, by):
            xs = T.alloc_shared((block_M, group_size), "float32")
            x = T.alloc_fragment((block_M, group_size), "float32")
            amax = T.alloc_fragment((block_M,), "float32")
            inv = T.alloc_fragment((block_M,), "float32")
            q = T.alloc_fragment((block_M, half), "int8")
            T.copy(X[by * block_M, bx * group_size], xs)  # zero-filled past the edges
            T.copy(xs, x)
            T.reduce_absmax(x, amax, dim=1)
            for i in T.Parallel(block_M):
                s, m = scale_of(amax[i], qmax, floor, use_ue8m0)
                inv[i] = m
                S[by * block_M + i, bx] = s
            for i, j in T.Parallel(block_M, half):
                b = e2m1_code(xs[i, 2 * j] * inv[i]) | (e2m1_code(xs[i, 2 * j + 1] * inv[i]) << 4)
                q[i, j] = T.cast(b - T.if_then_else(b >= 128, 256, 0), "int8")
            T.copy(q, Q[by * block_M, bx * half])

    return main


@tilelang.jit(out_idx=[1, 2])
def per_token_cast_e5m6(M, N, group_size=128, block_M=32, in_dtype="bfloat16", use_ue8m0=False, threads=128):
    """Per-token (1 × group_size) E5M6 cast, eight 12-bit codes per three uint32 words."""
    if N % 8 or group_size % 8:
        raise ValueError(f"E5M6 packing needs N and group_size multiples of 8 (got N={N}, group_size={group_size})")
    G, W = T.ceildiv(N, group_size), group_size // 8 * 3
    qmax, floor = QMAX["e5m6"], FLOOR["e5m6"]

    @T.prim_func
    def main(X: T.Tensor((M, N), in_dtype), Q: T.Tensor((M, N // 8 * 3), "uint32"), S: T.Tensor((M, G), "float32")):
        with T.Kernel(G, T.ceildiv(M, block_M), threads=threads) as (bx, by):
            x = T.alloc_fragment((block_M, group_size), "float32")
            amax = T.alloc_fragment((block_M,), "float32")
            inv = T.alloc_fragment((block_M,), "float32")
            cs = T.alloc_shared((block_M, group_size), "uint32")
            ws = T.alloc_shared((block_M, W), "uint32")
            T.copy(X[by * block_M, bx * group_size], x)  # zero-filled past the edges
            T.reduce_absmax(x, amax, dim=1)
            for i in T.Parallel(block_M):
                s, m = scale_of(amax[i], qmax, floor, use_ue8m0)
                inv[i] = m
                S[by * block_M + i, bx] = s
            for i, j in T.Parallel(block_M, group_size):
                cs[i, j] = e5m6_code(x[i, j] * inv[i])
            for i, k in T.Parallel(block_M, group_size // 8):
                c = 8 * k
                ws[i, 3 * k] = (cs[i, c] << 20) | (cs[i, c + 1] << 8) | (cs[i, c + 2] >> 4)
                ws[i, 3 * k + 1] = (cs[i, c + 2] << 28) | (cs[i, c + 3] << 16) | (cs[i, c + 4] << 4) | (cs[i, c + 5] >> 8)
                ws[i, 3 * k + 2] = (cs[i, c + 5] << 24) | (cs[i, c + 6] << 12) | cs[i, c + 7]
            T.copy(ws, Q[by * block_M, bx * W])

    return main


# ------------------------------------------------------------------------------------------ references
def ref_scales(amax, fmt, use_ue8m0=False):
    """(dequant scale, quant multiplier) in fp32 from group absolute maxima, for ``fmt`` in QMAX."""
    qmax = np.float32(QMAX[fmt])
    a = np.maximum(np.asarray(amax, dtype=np.float32), np.float32(FLOOR[fmt]))
    r = (a / qmax).astype(np.float32)
    if use_ue8m0:
        m, e = np.frexp(r)  # r = m * 2^e, m in [0.5, 1): an exact power of two has m == 0.5
        s = np.ldexp(np.float32(1.0), np.where(m == 0.5, e - 1, e)).astype(np.float32)
        return s, (np.float32(1.0) / s).astype(np.float32)
    return r, (qmax / a).astype(np.float32)


def _grouped_token(X, group_size):
    M, N = X.shape
    G = -(-N // group_size)
    xp = np.zeros((M, G * group_size), np.float32)
    xp[:, :N] = np.asarray(X).astype(np.float32)
    return xp.reshape(M, G, group_size)


def ref_per_channel_cast(X, block_rows=128, use_ue8m0=False, **_):
    """NumPy per-channel cast: (Q e4m3, S fp32 (ceil(M/b), N))."""
    M, N = X.shape
    GM = -(-M // block_rows)
    xp = np.zeros((GM * block_rows, N), np.float32)
    xp[:M] = np.asarray(X).astype(np.float32)
    xp = xp.reshape(GM, block_rows, N)
    s, inv = ref_scales(np.abs(xp).max(axis=1), "e4m3", use_ue8m0)
    q = np.clip(xp * inv[:, None, :], -448.0, 448.0).astype(ml_dtypes.float8_e4m3fn)
    return q.reshape(GM * block_rows, N)[:M], s


def e2m1_codes(v):
    """e2m1 codes (uint8 0..15) of fp32 values: ml_dtypes' nearest-even conversion after clipping to ±6."""
    v = np.asarray(v, np.float32)
    return np.clip(v, -6.0, 6.0).astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & np.uint8(0xF)


def ref_per_token_cast_fp4(X, group_size=32, use_ue8m0=False, **_):
    """NumPy FP4 cast: (Q int8 (M, N/2) packed low nibble first, S fp32 (M, ceil(N/g)))."""
    M, N = X.shape
    xp = _grouped_token(X, group_size)
    s, inv = ref_scales(np.abs(xp).max(axis=-1), "e2m1", use_ue8m0)
    codes = e2m1_codes(xp * inv[..., None]).reshape(M, -1)[:, :N]
    return (codes[:, 0::2] | (codes[:, 1::2] << np.uint8(4))).view(np.int8), s


def e5m6_codes(v):
    """12-bit E5M6 codes (uint32) of fp32 values: fp16 truncation, then the rounding of the module docstring."""
    b = np.ascontiguousarray(np.asarray(v, np.float32)).view(np.uint32).astype(np.int64)
    sign, e, mant = (b >> 16) & 0x8000, (b >> 23) & 0xFF, b & 0x7FFFFF
    h = np.where(e > 142, sign | 0x7C00, sign)  # overflow and inf; underflow keeps the sign only
    h = np.where(e == 255, np.where(mant == 0, sign | 0x7C00, sign | 0x7FFF), h)
    sub = (e >= 103) & (e <= 112)
    h = np.where(sub, sign | ((mant | 0x800000) >> np.clip(126 - e, 0, 63)), h)
    norm = (e >= 113) & (e <= 142)
    h = np.where(norm, sign | ((e - 112) << 10) | (mant >> 13), h)
    c = h >> 4
    return ((c + ((c & 1) + (b & 0x1FFFF) > 0x10000)) & 0xFFF).astype(np.uint32)


def pack_e5m6(codes):
    """(..., 8k) 12-bit codes -> (..., 3k) uint32 words: eight codes big-end first over three words."""
    c = np.asarray(codes, np.uint64).reshape(*codes.shape[:-1], -1, 8)
    w0 = (c[..., 0] << 20) | (c[..., 1] << 8) | (c[..., 2] >> 4)
    w1 = (c[..., 2] << 28) | (c[..., 3] << 16) | (c[..., 4] << 4) | (c[..., 5] >> 8)
    w2 = (c[..., 5] << 24) | (c[..., 6] << 12) | c[..., 7]
    words = np.stack([w0, w1, w2], axis=-1) & np.uint64(0xFFFFFFFF)
    return words.astype(np.uint32).reshape(*codes.shape[:-1], -1)


def ref_per_token_cast_e5m6(X, group_size=128, use_ue8m0=False, **_):
    """NumPy E5M6 cast: (Q uint32 (M, 3N/8), S fp32 (M, ceil(N/g)))."""
    M, N = X.shape
    xp = _grouped_token(X, group_size)
    s, inv = ref_scales(np.abs(xp).max(axis=-1), "e5m6", use_ue8m0)
    codes = e5m6_codes((xp * inv[..., None]).astype(np.float32)).reshape(M, -1)[:, :N]
    return pack_e5m6(codes), s


# ------------------------------------------------------------------------------------------ registry
def _inputs(rng, M, N, in_dtype="bfloat16", **_):
    """Activations with outlier columns, an all-zero row and an all-zero column (never all zeros)."""
    x = rng.standard_normal((M, N)).astype(np.float32)
    x[:, rng.choice(N, size=max(1, N // 64), replace=False)] *= 100.0
    if M > 2:
        x[1] = 0.0
    if N > 2:
        x[:, 2] = 0.0
    return (x.astype(_dt.np_dtype(in_dtype)),)


def _in_bytes(M, N, in_dtype="bfloat16", **_):
    return M * N * _dt.itemsize(_dt.canon(in_dtype))


register(KernelSpec(
    name="fp8_cast_per_channel", family="fp8_cast",
    description="per-channel (128x1) e4m3 cast: one scale per column and 128 rows (TileKernels' per_channel_cast)",
    build=lambda M, N, block_rows, block_N, threads, in_dtype="bfloat16", use_ue8m0=False, **_: per_channel_cast(
        M, N, block_rows=block_rows, block_N=block_N, in_dtype=in_dtype, use_ue8m0=use_ue8m0, threads=threads),
    make_inputs=_inputs, reference=ref_per_channel_cast, flops=lambda M, N, **_: 3 * M * N,
    bytes=lambda M, N, block_rows=128, **kw: int(_in_bytes(M, N, **kw) + M * N + 4 * N * (-(-M // block_rows))),
    shapes=(
        {"label": "DeepSeek-V3 MoE down_proj grad input 16384 tok x 7168", "M": 16384, "N": 7168},
        {"label": "DeepSeek-V3 expert inter 2048, 16384 tok, UE8M0", "M": 16384, "N": 2048, "use_ue8m0": True},
    ),
    test_shapes=(
        {"label": "edges bf16", "M": 150, "N": 70, "block_N": 32},
        {"label": "edges fp32 ue8m0, fewer rows than a block", "M": 45, "N": 100, "in_dtype": "float32",
         "use_ue8m0": True},
    ),
    tunables={"block_N": [16, 32, 64, 128], "threads": [64, 128, 256]},
    defaults={"block_rows": 128, "block_N": 64, "threads": 128, "in_dtype": "bfloat16", "use_ue8m0": False},
    tolerance={"exact": True},
))

register(KernelSpec(
    name="fp4_cast_per_token", family="fp8_cast",
    description="per-token (1x32) e2m1 cast, two codes per int8 (low nibble first): RNE, saturating at 6, opt. UE8M0",
    build=lambda M, N, group_size, block_M, threads, in_dtype="bfloat16", use_ue8m0=False, **_: per_token_cast_fp4(
        M, N, group_size=group_size, block_M=block_M, in_dtype=in_dtype, use_ue8m0=use_ue8m0, threads=threads),
    make_inputs=_inputs, reference=ref_per_token_cast_fp4, flops=lambda M, N, **_: 4 * M * N,
    bytes=lambda M, N, group_size=32, **kw: int(_in_bytes(M, N, **kw) + M * N // 2 + 4 * M * (-(-N // group_size))),
    shapes=(
        {"label": "MXFP4 activations, hidden 7168, 4096 tok, UE8M0", "M": 4096, "N": 7168, "use_ue8m0": True},
        {"label": "hidden 8192, 8192 tok, 1x128 groups", "M": 8192, "N": 8192, "group_size": 128},
    ),
    test_shapes=(
        {"label": "edges bf16", "M": 45, "N": 200},
        {"label": "edges fp32 ue8m0 1x128", "M": 20, "N": 130, "in_dtype": "float32", "group_size": 128,
         "use_ue8m0": True},
    ),
    tunables={"block_M": [4, 8, 16, 32, 64], "threads": [64, 128, 256]},
    defaults={"group_size": 32, "block_M": 32, "threads": 128, "in_dtype": "bfloat16", "use_ue8m0": False},
    tolerance={"exact": True},
))

register(KernelSpec(
    name="e5m6_cast_per_token", family="fp8_cast",
    description="per-token (1x128) E5M6 cast, eight 12-bit codes per three uint32 (TileKernels' cast_to_e5m6)",
    build=lambda M, N, group_size, block_M, threads, in_dtype="bfloat16", use_ue8m0=False, **_: per_token_cast_e5m6(
        M, N, group_size=group_size, block_M=block_M, in_dtype=in_dtype, use_ue8m0=use_ue8m0, threads=threads),
    make_inputs=_inputs, reference=ref_per_token_cast_e5m6, flops=lambda M, N, **_: 6 * M * N,
    bytes=lambda M, N, group_size=128, **kw: int(_in_bytes(M, N, **kw) + M * N * 3 // 2
                                                   + 4 * M * (-(-N // group_size))),
    shapes=(
        {"label": "hidden 7168, 4096 tok", "M": 4096, "N": 7168},
        {"label": "hidden 7168, 16384 tok, UE8M0", "M": 16384, "N": 7168, "use_ue8m0": True},
    ),
    test_shapes=(
        {"label": "edges bf16, partial group", "M": 45, "N": 200},
        {"label": "edges fp32 ue8m0 1x64", "M": 20, "N": 136, "in_dtype": "float32", "group_size": 64,
         "use_ue8m0": True},
    ),
    tunables={"block_M": [4, 8, 16, 32], "threads": [64, 128, 256]},
    defaults={"group_size": 128, "block_M": 16, "threads": 128, "in_dtype": "bfloat16", "use_ue8m0": False},
    tolerance={"exact": True},
))
