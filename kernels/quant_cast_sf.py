"""Per-token casts split at the scale: scales only, or values with precomputed scales (TileKernels'
``per_token_cast_with_sf_only`` and ``per_token_cast_with_precomputed_sf``; reference ``cast`` in
``tile_kernels/torch/cast.py``).

Kernels (registry names):

* ``quant_cast_per_token_sf_only`` — ``X`` (M, N) bf16/fp16/fp32 → ``S`` (M, ceil(N/g)) fp32, the scales
  ``per_token_cast`` would produce for format ``fmt`` ∈ {``e4m3``, ``e2m1``} (``g = group_size``), and no
  values: ``amax = max(max|x|, floor)``, ``S = amax / qmax`` or with ``use_ue8m0``
  ``2^ceil(log2(amax / qmax))`` from the fp32 bits (``qmax``/``floor``: e4m3 448 / 1e-4, e2m1 6 / 6·2^-126).
* ``quant_cast_per_token_with_sf`` — ``X`` (M, N) and given scales ``S`` (M, ceil(N/g)) fp32 → ``Q``:
  the multiplier is ``1 / S`` (one fp32 division, TileKernels' ``reciprocal``), ``v = x · (1 / S)`` in fp32,
  then e4m3 (nearest even, saturating at ±448; ``Q`` (M, N)) or e2m1 (nearest even on {0, 0.5, …, 6},
  saturating at 6, sign kept; two codes per int8, element ``2j`` in the low nibble; ``Q`` (M, N/2)).
  ``use_ue8m0`` plays no part here (the scales are given), as in TileKernels.

``sf_only`` gives ``per_token_cast``'s (``kernels.fp8_cast`` / ``kernels.quant_cast``) scales bit for bit.
``with_sf`` on those scales gives its values bit for bit with UE8M0 scales (``1 / S`` is exact); with fp32
scales ``1 / S`` and ``qmax / amax`` may differ in the last bit, so a value can land one code apart (as
with TileKernels' own split; tested both ways). The scale and FP4-code
macros are this module's own copies of ``kernels.quant_cast``'s (a ``T.macro`` belongs to the language
module it was built with, and the GPU benchmark loads each kernel module's source on its own).

Partial groups at the edges read 0 (never raising ``amax``); columns past N are never written. Errors
(``ValueError`` at build time): an unknown ``fmt``; for e2m1 an odd ``N`` or ``group_size``. NaN/Inf
policy: ``X`` finite; given scales positive, finite and with a finite ``1 / S`` (``S ≥ 2^-127``; a
smaller ``S`` gives an infinite multiplier, ``0·inf`` is NaN, stored as e4m3 NaN or an unspecified e2m1
code — the NumPy reference and TileKernels' may then differ from the kernel).
"""

import ml_dtypes
import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.registry import KernelSpec, register
from tilesim import dtypes as _dt

FP8 = "float8_e4m3fn"
QMAX = {"e4m3": 448.0, "e2m1": 6.0}
FLOOR = {"e4m3": 1e-4, "e2m1": 6.0 * 2.0 ** -126}


@T.macro
def scale_of(amax, qmax, floor, use_ue8m0):
    """The dequantisation scale of one group from its fp32 absolute maximum."""
    a = T.max(amax, floor)
    if use_ue8m0:
        bits = T.reinterpret("int32", a / qmax)  # 2^ceil(log2(a / qmax)): exponent, +1 if mantissa != 0
        e = ((bits >> 23) & 0xFF) + T.if_then_else((bits & 0x7FFFFF) != 0, 1, 0)
        s = T.reinterpret("float32", e << 23)
    else:
        s = a / qmax
    return s


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


def _check(fmt, N, group_size):
    if fmt not in QMAX:
        raise ValueError(f"fmt must be one of {', '.join(QMAX)}, got {fmt!r}")
    if fmt == "e2m1" and (N % 2 or group_size % 2):
        raise ValueError(f"FP4 packing needs an even N and group_size (got N={N}, group_size={group_size})")


@tilelang.jit(out_idx=[1])
def per_token_cast_sf_only(M, N, fmt="e4m3", group_size=128, block_M=32, in_dtype="bfloat16", use_ue8m0=False,
                           threads=128):
    """Scales only: one block per ``block_M`` rows × one group."""
    _check(fmt, N, group_size)
    G = T.ceildiv(N, group_size)
    qmax, floor = QMAX[fmt], FLOOR[fmt]

    @T.prim_func
    def main(X: T.Tensor((M, N), in_dtype), S: T.Tensor((M, G), "float32")):
        with T.Kernel(G, T.ceildiv(M, block_M), threads=threads) as (bx, by):
            x = T.alloc_fragment((block_M, group_size), "float32")
            amax = T.alloc_fragment((block_M,), "float32")
            T.copy(X[by * block_M, bx * group_size], x)  # zero-filled past the edges
            T.reduce_absmax(x, amax, dim=1)
            for i in T.Parallel(block_M):
                S[by * block_M + i, bx] = scale_of(amax[i], qmax, floor, use_ue8m0)

    return main


@tilelang.jit(out_idx=[2])
def per_token_cast_with_sf(M, N, fmt="e4m3", group_size=128, block_M=32, in_dtype="bfloat16", threads=128):
    """Values with given scales: one block per ``block_M`` rows × one group."""
    _check(fmt, N, group_size)
    G = T.ceildiv(N, group_size)
    fp4 = fmt == "e2m1"
    out_shape, out_dtype = ((M, N // 2), "int8") if fp4 else ((M, N), FP8)

    @T.prim_func
    def main(X: T.Tensor((M, N), in_dtype), S: T.Tensor((M, G), "float32"), Q: T.Tensor(out_shape, out_dtype)):
        with T.Kernel(G, T.ceildiv(M, block_M), threads=threads) as (bx, by):
            xs = T.alloc_shared((block_M, group_size), "float32")
            inv = T.alloc_fragment((block_M,), "float32")
            T.copy(X[by * block_M, bx * group_size], xs)  # zero-filled past the edges
            for i in T.Parallel(block_M):
                inv[i] = 1.0 / S[T.min(by * block_M + i, M - 1), bx]
            if fp4:
                half = group_size // 2
                q4 = T.alloc_fragment((block_M, half), "int8")
                for i, j in T.Parallel(block_M, half):
                    b = e2m1_code(xs[i, 2 * j] * inv[i]) | (e2m1_code(xs[i, 2 * j + 1] * inv[i]) << 4)
                    q4[i, j] = T.cast(b - T.if_then_else(b >= 128, 256, 0), "int8")
                T.copy(q4, Q[by * block_M, bx * half])
            else:
                q8 = T.alloc_fragment((block_M, group_size), FP8)
                for i, j in T.Parallel(block_M, group_size):
                    q8[i, j] = T.cast(xs[i, j] * inv[i], FP8)
                T.copy(q8, Q[by * block_M, bx * group_size])

    return main


# ------------------------------------------------------------------------------------------ references
def _groups(x, g):
    x = np.asarray(x, np.float32)
    M, N = x.shape
    G = -(-N // g)
    return np.pad(x, ((0, 0), (0, G * g - N))).reshape(M, G, g), N


def ref_sf_only(X, fmt="e4m3", group_size=128, use_ue8m0=False, **_):
    """fp32 scales in NumPy: amax floored, ``amax / qmax`` or the power of two rounded up (from the bits)."""
    xg, _n = _groups(X, group_size)
    a = np.maximum(np.abs(xg).max(axis=2), np.float32(FLOOR[fmt])).astype(np.float32)
    s = (a / np.float32(QMAX[fmt])).astype(np.float32)
    if use_ue8m0:
        b = s.view(np.int32)
        e = (((b >> 23) & 0xFF) + ((b & 0x7FFFFF) != 0)).astype(np.int32)
        s = (e << 23).astype(np.int32).view(np.float32)
    return s


def ref_with_sf(X, S, fmt="e4m3", group_size=128, **_):
    """Q from the given scales: ``x · float32(1 / S)``, then ml_dtypes' e4m3 (clipped to ±448) or e2m1
    conversion (clipped to ±6, -0 kept), packed two per byte for e2m1."""
    xg, N = _groups(X, group_size)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        inv = (np.float32(1.0) / np.asarray(S, np.float32)).astype(np.float32)
        v = (xg * inv[:, :, None]).astype(np.float32).reshape(xg.shape[0], -1)[:, :N]
    qmax = np.float32(QMAX[fmt])
    v = np.where(np.isnan(v), v, np.clip(v, -qmax, qmax))
    if fmt == "e4m3":
        return v.astype(ml_dtypes.float8_e4m3fn)
    codes = v.astype(ml_dtypes.float4_e2m1fn).view(np.uint8).astype(np.int32) & 0xF
    packed = codes[:, 0::2] | (codes[:, 1::2] << 4)
    return packed.astype(np.uint8).view(np.int8)


def compare_bitwise(out, ref, *_args, **_kw):
    out, ref = np.asarray(out), np.asarray(ref)
    if out.shape != ref.shape or out.tobytes() != ref.tobytes():
        raise AssertionError(f"not bitwise equal ({out.shape} vs {ref.shape})")


# ------------------------------------------------------------------------------------------ registry
def cast_inputs(rng, M, N, in_dtype="bfloat16", **_):
    x = (rng.standard_normal((M, N)) * 2.0).astype(np.float32)
    x[0, : min(N, 7)] = 0.0  # a partly zero group
    return (x.astype(_dt.np_dtype(in_dtype)),)


def with_sf_inputs(rng, M, N, fmt="e4m3", group_size=128, in_dtype="bfloat16", **_):
    (x,) = cast_inputs(rng, M, N, in_dtype)
    s = ref_sf_only(np.asarray(x, np.float32), fmt, group_size)
    s = (s * rng.choice(np.float32([0.25, 0.5, 1.0, 2.0, 0.7]), s.shape)).astype(np.float32)  # some saturate
    return x, s


_SHAPES = ({"label": "DeepSeek-V3 hidden 7168, 4096 tok", "M": 4096, "N": 7168},
           {"label": "MoE intermediate 2048, 16384 tok", "M": 16384, "N": 2048})
_TUNE = {"block_M": [8, 16, 32, 64], "threads": [64, 128, 256]}

register(KernelSpec(
    name="quant_cast_per_token_sf_only", family="fp8_cast",
    description="per-token cast scales only, e4m3 or e2m1 recipe (TileKernels' per_token_cast_with_sf_only)",
    build=lambda M, N, fmt, group_size, block_M, in_dtype, use_ue8m0, threads, **_: per_token_cast_sf_only(
        M, N, fmt=fmt, group_size=group_size, block_M=block_M, in_dtype=in_dtype, use_ue8m0=use_ue8m0,
        threads=threads),
    make_inputs=cast_inputs, reference=ref_sf_only,
    flops=lambda M, N, **_: 2 * M * N,
    bytes=lambda M, N, in_dtype="bfloat16", group_size=128, **_:
        M * N * np.dtype(_dt.np_dtype(in_dtype)).itemsize + 4 * M * -(-N // group_size),
    shapes=_SHAPES,
    test_shapes=({"label": "e4m3 ue8m0, 37x200", "M": 37, "N": 200, "use_ue8m0": True},
                 {"label": "e2m1 1x32 fp32, 13x70", "M": 13, "N": 70, "fmt": "e2m1", "group_size": 32,
                  "in_dtype": "float32"}),
    tunables=_TUNE,
    defaults={"fmt": "e4m3", "group_size": 128, "block_M": 32, "in_dtype": "bfloat16", "use_ue8m0": False,
              "threads": 128},
    tolerance={"exact": True},
    compare=compare_bitwise,
))

register(KernelSpec(
    name="quant_cast_per_token_with_sf", family="fp8_cast",
    description="per-token e4m3/e2m1 cast with precomputed scales (TileKernels' per_token_cast_with_precomputed_sf)",
    build=lambda M, N, fmt, group_size, block_M, in_dtype, threads, **_: per_token_cast_with_sf(
        M, N, fmt=fmt, group_size=group_size, block_M=block_M, in_dtype=in_dtype, threads=threads),
    make_inputs=with_sf_inputs, reference=ref_with_sf,
    flops=lambda M, N, **_: 2 * M * N,
    bytes=lambda M, N, fmt="e4m3", in_dtype="bfloat16", group_size=128, **_:
        M * N * np.dtype(_dt.np_dtype(in_dtype)).itemsize + 4 * M * -(-N // group_size) + (M * N // 2 if fmt == "e2m1" else M * N),
    shapes=_SHAPES,
    test_shapes=({"label": "e4m3, 37x200", "M": 37, "N": 200},
                 {"label": "e2m1 1x32 fp32, 13x70", "M": 13, "N": 70, "fmt": "e2m1", "group_size": 32,
                  "in_dtype": "float32"}),
    tunables=_TUNE,
    defaults={"fmt": "e4m3", "group_size": 128, "block_M": 32, "in_dtype": "bfloat16", "threads": 128},
    tolerance={"exact": True},
    compare=compare_bitwise,
))
