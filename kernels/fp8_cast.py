"""FP8 (e4m3) casts with fine-grained scales, and the inverse casts (DeepSeek-V3 / DeepGEMM recipe).

Kernels (registry names):

* ``fp8_cast_per_token`` — ``X`` (M, N) → ``Q`` (M, N) e4m3 and ``S`` (M, ceil(N/g)) fp32: one scale per
  row and group of ``g = group_size`` (128) columns of the hidden dim (activations).
* ``fp8_cast_per_block`` — ``X`` (M, N) → ``Q`` (M, N) e4m3 and ``S`` (ceil(M/b), ceil(N/b)) fp32: one
  scale per ``b × b`` (128 × 128) block (weights).
* ``fp8_dequant_per_token`` / ``fp8_dequant_per_block`` — ``Q``, ``S`` → ``Y = float(Q) · S`` rounded
  once to ``out_dtype`` (bf16 or fp32).

Scale convention: ``S`` is the *dequantisation* multiplier, ``X ≈ Q · S``. For each group:

1. ``amax = max(|x|)`` over the group's elements, computed in fp32, then floored: ``amax = max(amax, 1e-4)``
   (an all-zero group gets a tiny, finite scale and quantises to zeros).
2. ``S = amax / 448`` and the quantisation multiplier ``inv = 448 / amax`` — two separate fp32 divisions
   (not ``1 / S``), as the reference recipes compute them.
   With ``use_ue8m0`` the scale is a power of two rounded *up*: ``S = 2^ceil(log2(amax / 448))`` and
   ``inv = 1 / S`` (exact). The ceiling is taken exactly from the fp32 bits of ``amax / 448`` (exponent,
   plus one when the mantissa is not zero) rather than from a float ``log2``, which can round a value
   just above a power of two down onto it. Scales are stored as fp32 values either way.
3. ``Q = e4m3(x · inv)``: the fp32 product rounded to nearest-even and saturated to ±448 (tilesim's
   conversions to ``float8_e4m3fn`` saturate like the GPU's ``satfinite`` conversions).

Partial groups at the tensor edges: the tile is loaded with ``T.copy``, which reads 0 past the edge.
A 0 never raises an absolute maximum, so the padding does not change ``amax`` — the scale is that of
the valid elements only — and the padded outputs are never written.

NaN/Inf policy: inputs must be finite. A NaN or Inf in a group makes that group's scale and values
unspecified (the NumPy reference propagates NaN; a GPU ``fmaxf`` would drop it). Everything else —
zeros, ±large values up to the input dtype's maximum, subnormal results — is bitwise-defined and the
tests compare kernels and references bit for bit.
"""

import ml_dtypes
import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.registry import KernelSpec, register
from tilesim import dtypes as _dt

FP8 = "float8_e4m3fn"
FP8_MAX = 448.0
AMAX_FLOOR = 1e-4


# ------------------------------------------------------------------------------------------ kernels
@T.macro
def group_scale(amax, use_ue8m0):
    """(scale, quant multiplier) of one group from its absolute maximum (fp32 scalars)."""
    a = T.max(amax, AMAX_FLOOR)
    if use_ue8m0:
        # 2^ceil(log2(a / 448)) from the bits: the exponent, +1 if the mantissa is not zero
        bits = T.reinterpret("int32", a / FP8_MAX)
        e = ((bits >> 23) & 0xFF) + T.if_then_else((bits & 0x7FFFFF) != 0, 1, 0)
        s = T.reinterpret("float32", e << 23)
        inv = 1.0 / s
    else:
        s = a / FP8_MAX
        inv = FP8_MAX / a
    return s, inv


@tilelang.jit(out_idx=[1, 2])
def per_token_cast(M, N, group_size=128, block_M=32, in_dtype="bfloat16", use_ue8m0=False, threads=128):
    """Per-token (1 × group_size) e4m3 quantisation: one block per ``block_M`` rows × one group."""
    G = T.ceildiv(N, group_size)

    @T.prim_func
    def main(X: T.Tensor((M, N), in_dtype), Q: T.Tensor((M, N), FP8), S: T.Tensor((M, G), "float32")):
        with T.Kernel(G, T.ceildiv(M, block_M), threads=threads) as (bx, by):
            x = T.alloc_fragment((block_M, group_size), "float32")
            q = T.alloc_fragment((block_M, group_size), FP8)
            amax = T.alloc_fragment((block_M,), "float32")
            inv = T.alloc_fragment((block_M,), "float32")
            T.copy(X[by * block_M, bx * group_size], x)  # zero-filled past the edges
            T.reduce_absmax(x, amax, dim=1)
            for i in T.Parallel(block_M):
                s, m = group_scale(amax[i], use_ue8m0)
                inv[i] = m
                S[by * block_M + i, bx] = s
            for i, j in T.Parallel(block_M, group_size):
                q[i, j] = T.cast(x[i, j] * inv[i], FP8)
            T.copy(q, Q[by * block_M, bx * group_size])

    return main


@tilelang.jit(out_idx=[1, 2])
def per_block_cast(M, N, block_size=128, in_dtype="bfloat16", use_ue8m0=False, threads=128):
    """Per-block (block_size × block_size) e4m3 quantisation: one block of the grid per scale block."""
    GM, GN = T.ceildiv(M, block_size), T.ceildiv(N, block_size)

    @T.prim_func
    def main(X: T.Tensor((M, N), in_dtype), Q: T.Tensor((M, N), FP8), S: T.Tensor((GM, GN), "float32")):
        with T.Kernel(GN, GM, threads=threads) as (bx, by):
            x = T.alloc_fragment((block_size, block_size), "float32")
            q = T.alloc_fragment((block_size, block_size), FP8)
            row_amax = T.alloc_fragment((block_size,), "float32")
            amax = T.alloc_fragment((1,), "float32")
            T.copy(X[by * block_size, bx * block_size], x)  # zero-filled past the edges
            T.reduce_absmax(x, row_amax, dim=1)
            T.reduce_absmax(row_amax, amax, dim=0)
            s, inv = group_scale(amax[0], use_ue8m0)
            S[by, bx] = s
            for i, j in T.Parallel(block_size, block_size):
                q[i, j] = T.cast(x[i, j] * inv, FP8)
            T.copy(q, Q[by * block_size, bx * block_size])

    return main


@tilelang.jit(out_idx=[2])
def per_token_dequant(M, N, group_size=128, block_M=32, out_dtype="bfloat16", threads=128):
    """``Y = float(Q) · S[row, col // group_size]``, rounded once to ``out_dtype``."""
    G = T.ceildiv(N, group_size)

    @T.prim_func
    def main(Q: T.Tensor((M, N), FP8), S: T.Tensor((M, G), "float32"), Y: T.Tensor((M, N), out_dtype)):
        with T.Kernel(G, T.ceildiv(M, block_M), threads=threads) as (bx, by):
            y = T.alloc_fragment((block_M, group_size), "float32")
            s = T.alloc_fragment((block_M,), "float32")
            T.copy(Q[by * block_M, bx * group_size], y)
            for i in T.Parallel(block_M):
                s[i] = S[by * block_M + i, bx]
            for i, j in T.Parallel(block_M, group_size):
                y[i, j] = y[i, j] * s[i]
            T.copy(y, Y[by * block_M, bx * group_size])

    return main


@tilelang.jit(out_idx=[2])
def per_block_dequant(M, N, block_size=128, out_dtype="bfloat16", threads=128):
    """``Y = float(Q) · S[row // b, col // b]``, rounded once to ``out_dtype``."""
    GM, GN = T.ceildiv(M, block_size), T.ceildiv(N, block_size)

    @T.prim_func
    def main(Q: T.Tensor((M, N), FP8), S: T.Tensor((GM, GN), "float32"), Y: T.Tensor((M, N), out_dtype)):
        with T.Kernel(GN, GM, threads=threads) as (bx, by):
            y = T.alloc_fragment((block_size, block_size), "float32")
            T.copy(Q[by * block_size, bx * block_size], y)
            s = S[by, bx]
            for i, j in T.Parallel(block_size, block_size):
                y[i, j] = y[i, j] * s
            T.copy(y, Y[by * block_size, bx * block_size])

    return main


# ------------------------------------------------------------------------------------------ references
def to_e4m3(v):
    """fp32 → e4m3, round to nearest even, saturating at ±448 (explicit clip: plain casts overflow to NaN)."""
    v = np.asarray(v, dtype=np.float32)
    return np.clip(v, -FP8_MAX, FP8_MAX).astype(ml_dtypes.float8_e4m3fn)


def ceil_pow2(r):
    """``2^ceil(log2(r))`` exactly, for positive normal fp32 ``r``."""
    r = np.asarray(r, dtype=np.float32)
    m, e = np.frexp(r)  # r = m * 2^e, m in [0.5, 1)
    e = np.where(m == 0.5, e - 1, e)
    return np.ldexp(np.float32(1.0), e).astype(np.float32)


def scales_from_amax(amax, use_ue8m0=False):
    """(dequant scale, quant multiplier) in fp32 from group absolute maxima."""
    a = np.maximum(np.asarray(amax, dtype=np.float32), np.float32(AMAX_FLOOR))
    if use_ue8m0:
        s = ceil_pow2(a / np.float32(FP8_MAX))
        return s, (np.float32(1.0) / s).astype(np.float32)
    return (a / np.float32(FP8_MAX)).astype(np.float32), (np.float32(FP8_MAX) / a).astype(np.float32)


def _pad_to(x, rows, cols):
    out = np.zeros((rows, cols), dtype=np.float32)
    out[: x.shape[0], : x.shape[1]] = x
    return out


def ref_per_token_cast(X, group_size=128, use_ue8m0=False, **_):
    """NumPy per-token cast: (Q e4m3, S fp32). Padding columns are zeros and do not affect amax."""
    M, N = X.shape
    G = -(-N // group_size)
    xp = _pad_to(np.asarray(X).astype(np.float32), M, G * group_size).reshape(M, G, group_size)
    s, inv = scales_from_amax(np.abs(xp).max(axis=-1), use_ue8m0)
    q = to_e4m3(xp * inv[..., None]).reshape(M, G * group_size)[:, :N]
    return q, s


def ref_per_block_cast(X, block_size=128, use_ue8m0=False, **_):
    """NumPy per-block cast: (Q e4m3, S fp32 of shape (ceil(M/b), ceil(N/b)))."""
    M, N = X.shape
    b = block_size
    GM, GN = -(-M // b), -(-N // b)
    xp = _pad_to(np.asarray(X).astype(np.float32), GM * b, GN * b).reshape(GM, b, GN, b)
    s, inv = scales_from_amax(np.abs(xp).max(axis=(1, 3)), use_ue8m0)
    q = to_e4m3(xp * inv[:, None, :, None]).reshape(GM * b, GN * b)[:M, :N]
    return q, s


def ref_per_token_dequant(Q, S, group_size=128, out_dtype="bfloat16", **_):
    s = np.repeat(np.asarray(S, np.float32), group_size, axis=1)[:, : Q.shape[1]]
    return (np.asarray(Q).astype(np.float32) * s).astype(_dt.np_dtype(out_dtype))


def ref_per_block_dequant(Q, S, block_size=128, out_dtype="bfloat16", **_):
    s = np.repeat(np.repeat(np.asarray(S, np.float32), block_size, axis=0), block_size, axis=1)
    return (np.asarray(Q).astype(np.float32) * s[: Q.shape[0], : Q.shape[1]]).astype(_dt.np_dtype(out_dtype))


# ------------------------------------------------------------------------------------------ registry
def activations_like(rng, shape, dtype, outlier_scale=100.0):
    """Random activations with a few outlier channels and an all-zero row (never all zeros)."""
    x = rng.standard_normal(shape).astype(np.float32)
    cols = rng.choice(shape[-1], size=max(1, shape[-1] // 64), replace=False)
    x[..., cols] *= outlier_scale
    if shape[0] > 2:
        x[1] = 0.0
    return x.astype(_dt.np_dtype(dtype))


def _inputs_cast(rng, M, N, in_dtype="bfloat16", **_):
    return (activations_like(rng, (M, N), in_dtype),)


def _inputs_token_dequant(rng, M, N, group_size=128, use_ue8m0=False, **_):
    return ref_per_token_cast(activations_like(rng, (M, N), "float32"), group_size, use_ue8m0)


def _inputs_block_dequant(rng, M, N, block_size=128, use_ue8m0=False, **_):
    return ref_per_block_cast(activations_like(rng, (M, N), "float32"), block_size, use_ue8m0)


def _build_token_cast(M, N, group_size, block_M, threads, in_dtype="bfloat16", use_ue8m0=False, **_):
    return per_token_cast(M, N, group_size=group_size, block_M=block_M, in_dtype=in_dtype,
                          use_ue8m0=use_ue8m0, threads=threads)


def _build_block_cast(M, N, block_size, threads, in_dtype="bfloat16", use_ue8m0=False, **_):
    return per_block_cast(M, N, block_size=block_size, in_dtype=in_dtype, use_ue8m0=use_ue8m0, threads=threads)


def _build_token_dequant(M, N, group_size, block_M, threads, out_dtype="bfloat16", **_):
    return per_token_dequant(M, N, group_size=group_size, block_M=block_M, out_dtype=out_dtype, threads=threads)


def _build_block_dequant(M, N, block_size, threads, out_dtype="bfloat16", **_):
    return per_block_dequant(M, N, block_size=block_size, out_dtype=out_dtype, threads=threads)


def _cast_flops(M, N, **_):
    return 3 * M * N  # |x| and max, multiply, convert


def _token_cast_bytes(M, N, group_size=128, in_dtype="bfloat16", **_):
    return int(M * N * (_dt.itemsize(_dt.canon(in_dtype)) + 1) + M * (-(-N // group_size)) * 4)


def _block_cast_bytes(M, N, block_size=128, in_dtype="bfloat16", **_):
    return int(M * N * (_dt.itemsize(_dt.canon(in_dtype)) + 1) + (-(-M // block_size)) * (-(-N // block_size)) * 4)


def _token_dequant_bytes(M, N, group_size=128, out_dtype="bfloat16", **_):
    return int(M * N * (_dt.itemsize(_dt.canon(out_dtype)) + 1) + M * (-(-N // group_size)) * 4)


def _block_dequant_bytes(M, N, block_size=128, out_dtype="bfloat16", **_):
    return int(M * N * (_dt.itemsize(_dt.canon(out_dtype)) + 1) + (-(-M // block_size)) * (-(-N // block_size)) * 4)


_TOKEN_SHAPES = (
    {"label": "DeepSeek-V3 hidden 7168, 4096 tok", "M": 4096, "N": 7168},
    {"label": "DeepSeek-V3 hidden 7168, 16384 tok, UE8M0 scales", "M": 16384, "N": 7168, "use_ue8m0": True},
    {"label": "hidden 8192, 8192 tok", "M": 8192, "N": 8192},
    {"label": "DeepSeek-V3 MoE inter 2048, 16384 tok", "M": 16384, "N": 2048},
)
_BLOCK_SHAPES = (
    {"label": "DeepSeek-V3 expert down_proj weight 7168x2048", "M": 7168, "N": 2048},
    {"label": "DeepSeek-V3 dense FFN weight 18432x7168", "M": 18432, "N": 7168},
    {"label": "Llama-3-70B o_proj weight 8192x8192, UE8M0", "M": 8192, "N": 8192, "use_ue8m0": True},
)
_TEST = (
    {"label": "edges bf16", "M": 45, "N": 300},
    {"label": "edges fp16 ue8m0", "M": 37, "N": 200, "in_dtype": "float16", "use_ue8m0": True},
    {"label": "edges fp32", "M": 20, "N": 130, "in_dtype": "float32"},
)
_TEST_BLOCK = (
    {"label": "edges bf16", "M": 150, "N": 200},
    {"label": "edges fp16 ue8m0", "M": 130, "N": 129, "in_dtype": "float16", "use_ue8m0": True},
    {"label": "edges fp32", "M": 70, "N": 260, "in_dtype": "float32"},
)
_TEST_DQ = (
    {"label": "edges bf16 out", "M": 45, "N": 300},
    {"label": "edges fp32 out ue8m0", "M": 37, "N": 200, "out_dtype": "float32", "use_ue8m0": True},
)
_TEST_BLOCK_DQ = (
    {"label": "edges bf16 out", "M": 150, "N": 200},
    {"label": "edges fp32 out ue8m0", "M": 130, "N": 129, "out_dtype": "float32", "use_ue8m0": True},
)

register(KernelSpec(
    name="fp8_cast_per_token", family="fp8_cast",
    description="per-token (1x128) e4m3 cast: amax floor 1e-4, S = amax/448, q = sat_rne(x * 448/amax); opt. UE8M0",
    build=_build_token_cast, make_inputs=_inputs_cast, reference=ref_per_token_cast, flops=_cast_flops,
    bytes=_token_cast_bytes, shapes=_TOKEN_SHAPES, test_shapes=_TEST,
    tunables={"block_M": [1, 4, 8, 16, 32, 64], "threads": [64, 128, 256]},
    defaults={"group_size": 128, "block_M": 32, "threads": 128, "in_dtype": "bfloat16", "use_ue8m0": False},
    tolerance={"exact": True},
))

register(KernelSpec(
    name="fp8_cast_per_block", family="fp8_cast",
    description="per-block (128x128) e4m3 cast of weights: one scale per block, opt. UE8M0 power-of-two scales",
    build=_build_block_cast, make_inputs=_inputs_cast, reference=ref_per_block_cast, flops=_cast_flops,
    bytes=_block_cast_bytes, shapes=_BLOCK_SHAPES, test_shapes=_TEST_BLOCK,
    tunables={"threads": [128, 256, 512]},
    defaults={"block_size": 128, "threads": 256, "in_dtype": "bfloat16", "use_ue8m0": False},
    tolerance={"exact": True},
))

register(KernelSpec(
    name="fp8_dequant_per_token", family="fp8_cast",
    description="inverse per-token cast: y = float(q) * S[row, col//128], rounded once to bf16/fp32",
    build=_build_token_dequant, make_inputs=_inputs_token_dequant, reference=ref_per_token_dequant,
    flops=lambda M, N, **_: M * N, bytes=_token_dequant_bytes, shapes=_TOKEN_SHAPES, test_shapes=_TEST_DQ,
    tunables={"block_M": [1, 4, 8, 16, 32, 64], "threads": [64, 128, 256]},
    defaults={"group_size": 128, "block_M": 32, "threads": 128, "out_dtype": "bfloat16", "use_ue8m0": False},
    tolerance={"exact": True},
))

register(KernelSpec(
    name="fp8_dequant_per_block", family="fp8_cast",
    description="inverse per-block cast: y = float(q) * S[row//128, col//128], rounded once to bf16/fp32",
    build=_build_block_dequant, make_inputs=_inputs_block_dequant, reference=ref_per_block_dequant,
    flops=lambda M, N, **_: M * N, bytes=_block_dequant_bytes, shapes=_BLOCK_SHAPES, test_shapes=_TEST_BLOCK_DQ,
    tunables={"threads": [128, 256, 512]},
    defaults={"block_size": 128, "threads": 256, "out_dtype": "bfloat16", "use_ue8m0": False},
    tolerance={"exact": True},
))
