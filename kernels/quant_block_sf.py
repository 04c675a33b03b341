"""Per-block (2-D) e4m3 / packed e2m1 casts with TileKernels' scale layouts (its ``per_block_cast``; reference
``cast(x, fmt, block_size, round_sf=..., use_tma_aligned_col_major_sf=..., use_packed_ue8m0=...)`` in
``tile_kernels/torch/cast.py``), the weight-side counterpart of ``kernels/quant_requant.py``'s per-token layouts.

Kernel ``per_block_cast_sf(M, N, fmt, block, round_sf, sf_layout, in_dtype, threads)``:

* input ``X (M, N)`` bf16 or fp32; one scale per block of ``block = (bh, bw)`` elements (TileKernels: 32 or 128
  each), logical scale matrix ``S (GM, GN) = (ceil(M/bh), ceil(N/bw))``.
* per block: ``amax = max(max|x|, floor)`` over its valid elements (e4m3 1e-4, e2m1 6·2^-126), ``S = amax / qmax``;
  with ``round_sf`` rounded up to a power of two from its bits (``(bits + 0x7FFFFF) & 0x7F800000``) and the
  multiplier ``1 / S``, otherwise the multiplier ``qmax / amax``; ``q = fmt(x · multiplier)`` nearest even,
  saturating (e4m3 ±448, e2m1 ±6, sign of zero kept). ``Q (M, N)`` e4m3 or ``(M, N/2)`` int8 (two e2m1 codes per
  byte, element ``2j`` in the low nibble).
* ``S`` stored in ``sf_layout`` (``kernels.quant_requant.sf_storage``): ``rows`` fp32 ``(GM, GN)``; ``tma`` fp32
  ``(GN, align4(GM))`` (the memory of TileKernels' TMA-aligned column-major tensor), rows ``GM…`` 0; ``tma_ue8m0``
  uint8 ``(ceil(GN/4), 4·align4(GM))``, byte ``[g // 4, 4r + g % 4]`` the biased exponent (``.view(int32)`` is
  TileKernels' packed int32 words), unused bytes 0. ``tma_ue8m0`` needs ``round_sf``.

One block of the grid per scale block: the tile is read once into shared memory (zero past the edges, which never
raises ``amax``), its absolute maximum reduced in a fragment (rows, then the row maxima), the scale stored, the
tile quantised. The blocks of the last block row write the TMA padding rows of their column, the blocks of the last
block column the unused exponent bytes, so the whole storage is defined. Deterministic; bitwise equal to the NumPy
reference below and to TileKernels' reference (``benchmarks/tilekernels_fidelity.py --families block_sf``).

Errors (``ValueError`` at build time): unknown format, layout or input dtype; e2m1 with an odd ``N`` or ``bw``;
``tma_ue8m0`` without ``round_sf``; a block dimension < 1. Inputs finite.
"""

import ml_dtypes
import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.quant_cast import e2m1_code
from kernels.quant_requant import FLOOR, LAYOUTS, PLAIN, QMAX, compare_bitwise, layout_sf, sf_storage
from kernels.registry import KernelSpec, register
from tilesim import dtypes as _dt

FP8 = "float8_e4m3fn"


def _check(N, fmt, block, round_sf, sf_layout, in_dtype):
    if fmt not in QMAX:
        raise ValueError(f"fmt must be one of {', '.join(QMAX)}, got {fmt!r}")
    if sf_layout not in LAYOUTS:
        raise ValueError(f"sf_layout must be one of {', '.join(LAYOUTS)}, got {sf_layout!r}")
    if in_dtype not in PLAIN:
        raise ValueError(f"in_dtype must be one of {', '.join(PLAIN)}, got {in_dtype!r}")
    if len(block) != 2 or min(block) < 1:
        raise ValueError(f"block must be (rows, cols) >= 1, got {block!r}")
    if fmt == "e2m1" and (N % 2 or block[1] % 2):
        raise ValueError(f"FP4 packing needs an even N and block width (got N={N}, block={block})")
    if sf_layout == "tma_ue8m0" and not round_sf:
        raise ValueError("the packed UE8M0 layout stores exponents only: it needs round_sf=True")


@tilelang.jit(out_idx=[1, 2])
def per_block_cast_sf(M, N, fmt="e4m3", block=(128, 128), round_sf=True, sf_layout="tma_ue8m0", in_dtype="bfloat16",
                      threads=128):
    _check(N, fmt, block, round_sf, sf_layout, in_dtype)
    bh, bw = block
    GM, GN = T.ceildiv(M, bh), T.ceildiv(N, bw)
    pad = (GM + 3) // 4 * 4 - GM  # TMA padding rows
    unused = 3 - (GN - 1) % 4  # packed UE8M0: unused bytes of the last word
    qmax, floor = QMAX[fmt], FLOOR[fmt]
    out_shape, out_dtype = ((M, N // 2), "int8") if fmt == "e2m1" else ((M, N), FP8)
    s_shape, s_dtype = sf_storage(GM, GN, sf_layout)

    @T.prim_func
    def main(X: T.Tensor((M, N), in_dtype), Q: T.Tensor(out_shape, out_dtype), S: T.Tensor(s_shape, s_dtype)):
        with T.Kernel(GN, GM, threads=threads) as (bx, by):
            xs = T.alloc_shared((bh, bw), "float32")
            x = T.alloc_fragment((bh, bw), "float32")
            row_amax = T.alloc_fragment((bh,), "float32")
            amax = T.alloc_fragment((1,), "float32")
            T.copy(X[by * bh, bx * bw], xs)  # zero-filled past the edges
            T.copy(xs, x)
            T.reduce_absmax(x, row_amax, dim=1)
            T.reduce_absmax(row_amax, amax, dim=0)
            a = T.max(amax[0], floor)
            if round_sf:
                sf = T.reinterpret("float32", (T.reinterpret("int32", a / qmax) + 0x7FFFFF) & 0x7F800000)
                inv = 1.0 / sf
            else:
                sf = a / qmax
                inv = qmax / a
            if sf_layout == "rows":
                S[by, bx] = sf
            elif sf_layout == "tma":
                S[bx, by] = sf
                if pad:
                    if by == GM - 1:  # the padding rows of this column
                        for p in T.serial(pad):
                            S[bx, GM + p] = 0.0
            else:
                S[bx // 4, 4 * by + bx % 4] = T.cast(T.reinterpret("int32", sf) >> 23, "uint8")
                if pad:
                    if by == GM - 1:
                        for p in T.serial(pad):
                            S[bx // 4, 4 * (GM + p) + bx % 4] = T.cast(0, "uint8")
                if unused:  # the bytes past the last group in the last word: this row, and the padding rows
                    if bx == GN - 1:
                        for k in T.serial(unused):
                            S[bx // 4, 4 * by + 4 - unused + k] = T.cast(0, "uint8")
                        if pad:
                            if by == GM - 1:
                                for p, k in T.Parallel(pad, unused):
                                    S[bx // 4, 4 * (GM + p) + 4 - unused + k] = T.cast(0, "uint8")
            if fmt == "e2m1":
                half = bw // 2
                q4 = T.alloc_fragment((bh, half), "int8")
                for i, j in T.Parallel(bh, half):
                    b = e2m1_code(xs[i, 2 * j] * inv) | (e2m1_code(xs[i, 2 * j + 1] * inv) << 4)
                    q4[i, j] = T.cast(b - T.if_then_else(b >= 128, 256, 0), "int8")
                T.copy(q4, Q[by * bh, bx * half])
            else:
                q8 = T.alloc_fragment((bh, bw), FP8)
                for i, j in T.Parallel(bh, bw):
                    q8[i, j] = T.cast(x[i, j] * inv, FP8)
                T.copy(q8, Q[by * bh, bx * bw])

    return main


# ------------------------------------------------------------------------------------------ reference
def ref_block_cast(X, fmt="e4m3", block=(128, 128), round_sf=True, sf_layout="tma_ue8m0", **_):
    """NumPy meaning: (bh, bw) blocks, fp32 scales, ml_dtypes conversions, the scale layout's storage."""
    x = np.asarray(X).astype(np.float32)
    M, N = x.shape
    bh, bw = block
    GM, GN = -(-M // bh), -(-N // bw)
    xp = np.pad(x, ((0, GM * bh - M), (0, GN * bw - N))).reshape(GM, bh, GN, bw)
    qmax, floor = np.float32(QMAX[fmt]), np.float32(FLOOR[fmt])
    a = np.maximum(np.abs(xp).max(axis=(1, 3)), floor).astype(np.float32)
    s = (a / qmax).astype(np.float32)
    if round_sf:
        s = ((s.view(np.int32) + 0x7FFFFF) & 0x7F800000).astype(np.int32).view(np.float32)
        mult = (np.float32(1.0) / s).astype(np.float32)
    else:
        mult = (qmax / a).astype(np.float32)
    v = np.clip((xp * mult[:, None, :, None]).astype(np.float32).reshape(GM * bh, -1)[:M, :N], -qmax, qmax)
    if fmt == "e4m3":
        q = v.astype(ml_dtypes.float8_e4m3fn)
    else:
        codes = v.astype(ml_dtypes.float4_e2m1fn).view(np.uint8).astype(np.int32) & 0xF
        q = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8).view(np.int8)
    return q, layout_sf(s, sf_layout)


def block_inputs(rng, M, N, in_dtype="bfloat16", **_):
    """``N(0, 2)`` values, an all-zero first row and a few ×1e4 outliers (never all zeros)."""
    x = (rng.standard_normal((M, N)) * 2.0).astype(np.float32)
    x[0] = 0.0
    x[-1, : min(N, 5)] *= 1e4
    return (x.astype(_dt.np_dtype(in_dtype)),)


# ------------------------------------------------------------------------------------------ registry
def _build(M, N, fmt, bh, bw, round_sf, sf_layout, in_dtype, threads, **_):
    return per_block_cast_sf(M, N, fmt, (bh, bw), round_sf, sf_layout, in_dtype, threads)


def _bytes(M, N, fmt, bh, bw, in_dtype="bfloat16", **_):
    return int(M * N * _dt.itemsize(_dt.canon(in_dtype)) + M * N * (8 if fmt == "e4m3" else 4) // 8
               + 4 * -(-M // bh) * -(-N // bw))


register(KernelSpec(
    name="quant_cast_per_block_sf_layout", family="fp8_cast",
    description="per-block (2-D) e4m3 / packed e2m1 cast with row-major, TMA-aligned or packed-UE8M0 scales "
                "(TileKernels' per_block_cast; DeepGEMM's weight layout)",
    build=_build, make_inputs=block_inputs,
    reference=lambda *ins, bh, bw, **p: ref_block_cast(*ins, block=(bh, bw), **p),
    compare=lambda outs, refs, p: compare_bitwise(outs, refs),
    flops=lambda M, N, **_: 3 * M * N, bytes=_bytes,
    shapes=({"label": "DeepSeek-V3 expert weight 7168x2048, 128x128 e4m3, packed UE8M0", "M": 7168, "N": 2048},
            {"label": "DeepSeek-V3 hidden 7168, 4096 tok, 32x32 e2m1, TMA fp32", "M": 4096, "N": 7168, "fmt": "e2m1",
             "bh": 32, "bw": 32, "sf_layout": "tma"}),
    test_shapes=({"label": "ragged 150x200 bf16, 32x32 e4m3, packed UE8M0 (GN 7: a part word)", "M": 150, "N": 200,
                  "bh": 32, "bw": 32},
                 {"label": "ragged 37x130 fp32, 32x128 e2m1, TMA fp32, plain scales", "M": 37, "N": 130,
                  "in_dtype": "float32", "fmt": "e2m1", "bh": 32, "bw": 128, "sf_layout": "tma", "round_sf": False}),
    tunables={"threads": [64, 128, 256]},
    defaults={"fmt": "e4m3", "bh": 128, "bw": 128, "round_sf": True, "sf_layout": "tma_ue8m0", "in_dtype": "bfloat16",
              "threads": 128},
    tolerance={"exact": True}))
