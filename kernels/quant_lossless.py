"""Lossless per-block FP4 → FP8 cast (TileKernels' ``per_block_cast_lossless``; its test checks
``cast_back(out) == cast_back(in)`` with the references of ``tile_kernels/torch/cast.py``).

Kernel ``per_block_cast_lossless(M, N, x_block, out_block, in_layout, sf_layout, block_M, threads)``:

* input: packed e2m1 values ``Q (M, N/2)`` int8 (element ``2j`` in the low nibble) with power-of-two scales of
  blocks ``x_block = (bh, bw)`` (TileKernels: 1 × 32) in ``in_layout`` (``rows``/``tma`` fp32 — the exponent bits are
  used, ``bits >> 23`` — or ``tma_ue8m0``; ``kernels.quant_requant.sf_storage``).
* output: e4m3 values ``Y (M, N)`` with scales of blocks ``out_block = (BH, BW)`` (multiples of ``x_block``;
  TileKernels tests 1 × 128, 32 × 32, 128 × 128) stored in ``sf_layout``. With ``e`` the biased exponent of an input
  block's scale and ``E`` the largest ``e`` over the input blocks of an output block that start inside the tensor,
  the output block's exponent is ``E' = max(E − 6, 0)`` (its scale ``2^(E'−127)``; ``E' = 0`` stores fp32 +0,
  as TileKernels), and each value is ``e4m3(fp4 · 2^(e − E'))``. Since ``e − E' ≤ 6`` (6 · 2^6 = 384 ≤ 448) and,
  when ``e − E' ≥ −5``, the smallest FP4 step 0.5 · 2^−5 = 2^−6 is e4m3's smallest normal, every value is exact:
  ``float(y) · 2^(E'−127) == float(q) · 2^(e−127)``. An input block with ``e + 5 < E'`` (scales of one output
  block spread over more than 2^11) cannot be cast losslessly: the kernel stops at its ``T.device_assert`` (as
  TileKernels' kernel) and the reference raises ``ValueError``.

One block per ``block_M`` rows (a multiple of ``BH``; default ``max(BH, 32)``) × one output block column ``BW``: the
input exponents of the tile's blocks are gathered (0 for blocks past the edges, which never raise ``E``), reduced
per output block into a fragment, the lossless condition asserted, the values scaled by exact powers of two and
stored clipped at the edges. Scale storage as ``kernels/quant_block_sf.py``: the last row tile writes the TMA
padding rows, the last column the unused UE8M0 bytes, so every byte is defined. Deterministic; bitwise equal to the
NumPy reference below.

Errors (``ValueError`` at build time): unknown layouts; block widths not powers of two; an odd ``N`` or input block
width; output blocks not multiples of the input blocks; ``block_M`` not a multiple of ``BH``.
"""

import ml_dtypes
import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.quant_requant import LAYOUTS, compare_bitwise, e2m1_value, layout_sf, logical_sf, sf_storage
from kernels.registry import KernelSpec, register

FP8 = "float8_e4m3fn"


def _pow2(v):
    return v >= 1 and v & (v - 1) == 0


def _check(N, x_block, out_block, in_layout, sf_layout, tile_M):
    for name, lay in (("in_layout", in_layout), ("sf_layout", sf_layout)):
        if lay not in LAYOUTS:
            raise ValueError(f"{name} must be one of {', '.join(LAYOUTS)}, got {lay!r}")
    (bh, bw), (BH, BW) = x_block, out_block
    if min(bh, bw, BH, BW) < 1 or not (_pow2(bw) and _pow2(BW)):
        raise ValueError(f"block widths must be powers of two (got x_block={x_block}, out_block={out_block})")
    if N % 2 or bw % 2:
        raise ValueError(f"FP4 packing needs an even N and input block width (got N={N}, x_block={x_block})")
    if BH % bh or BW % bw:
        raise ValueError(f"out_block {out_block} must be a multiple of x_block {x_block}")
    if tile_M % BH:
        raise ValueError(f"block_M must be a multiple of the output block height {BH}, got {tile_M}")


@tilelang.jit(out_idx=[2, 3])
def per_block_cast_lossless(M, N, x_block=(1, 32), out_block=(128, 128), in_layout="tma_ue8m0",
                            sf_layout="tma_ue8m0", block_M=None, threads=128):
    (bh, bw), (BH, BW) = x_block, out_block
    tM = block_M if block_M is not None else max(BH, 32)
    _check(N, x_block, out_block, in_layout, sf_layout, tM)
    Rin, Gin = T.ceildiv(M, bh), T.ceildiv(N, bw)
    Rout, Gout = T.ceildiv(M, BH), T.ceildiv(N, BW)
    nim, nik = tM // bh, BW // bw  # input blocks of a tile
    nom, pm = tM // BH, BH // bh  # output blocks of a tile (one column); input block rows per output block
    per = pm * nik  # input blocks per output block
    A = (Rout + 3) // 4 * 4
    pad, unused = A - Rout, 3 - (Gout - 1) % 4
    sin_shape, sin_dtype = sf_storage(Rin, Gin, in_layout)
    s_shape, s_dtype = sf_storage(Rout, Gout, sf_layout)

    @T.macro
    def in_exp(Sin, r, c):
        if in_layout == "rows":
            e = (T.reinterpret("int32", Sin[r, c]) >> 23) & 0xFF
        elif in_layout == "tma":
            e = (T.reinterpret("int32", Sin[c, r]) >> 23) & 0xFF
        else:
            e = T.cast(Sin[c // 4, 4 * r + c % 4], "int32")
        return e

    @T.macro
    def store(S, ro, co, e):
        if sf_layout == "rows":
            S[ro, co] = T.reinterpret("float32", e << 23)
        elif sf_layout == "tma":
            S[co, ro] = T.reinterpret("float32", e << 23)
        else:
            S[co // 4, 4 * ro + co % 4] = T.cast(e, "uint8")

    @T.prim_func
    def main(Q: T.Tensor((M, N // 2), "int8"), Sin: T.Tensor(sin_shape, sin_dtype), Y: T.Tensor((M, N), FP8),
             S: T.Tensor(s_shape, s_dtype)):
        with T.Kernel(Gout, T.ceildiv(M, tM), threads=threads) as (bx, by):
            ein = T.alloc_shared((nim, nik), "int32")
            grouped = T.alloc_fragment((nom, per), "int32")
            eout = T.alloc_fragment((nom,), "int32")
            es = T.alloc_shared((nom,), "int32")
            ys = T.alloc_shared((tM, BW), FP8)
            for a, b in T.Parallel(nim, nik):
                ri, ci = by * nim + a, bx * nik + b
                ein[a, b] = T.if_then_else((ri < Rin) & (ci < Gin),
                                           in_exp(Sin, T.min(ri, Rin - 1), T.min(ci, Gin - 1)), 0)
            for o, t in T.Parallel(nom, per):
                grouped[o, t] = ein[o * pm + t // nik, t % nik]
            T.reduce_max(grouped, eout, dim=1)
            for o in T.Parallel(nom):
                es[o] = T.max(eout[o] - 6, 0)
            for a, b in T.Parallel(nim, nik):
                if (by * nim + a < Rin) & (bx * nik + b < Gin):
                    T.device_assert(ein[a, b] + 5 >= es[a // pm],
                                    "per_block_cast_lossless: input scales of one output block span more than 2^11")
            for i, j in T.Parallel(tM, BW // 2):
                r = T.min(by * tM + i, M - 1)
                c = T.min(bx * BW + 2 * j, N - 2)
                byte = T.cast(Q[r, c // 2], "int32") & 0xFF
                f = T.reinterpret("float32", (ein[i // bh, (2 * j) // bw] - es[i // BH] + 127) << 23)
                ys[i, 2 * j] = T.cast(e2m1_value(byte & 0xF) * f, FP8)
                ys[i, 2 * j + 1] = T.cast(e2m1_value(byte >> 4) * f, FP8)
            T.copy(ys, Y[by * tM, bx * BW])  # clipped at M, N
            for o in T.Parallel(nom):
                if by * nom + o < Rout:
                    store(S, by * nom + o, bx, es[o])
            if sf_layout != "rows":
                if pad:
                    if by == T.ceildiv(M, tM) - 1:  # the TMA padding rows of this column
                        for p in T.serial(pad):
                            store(S, Rout + p, bx, 0)
                if sf_layout == "tma_ue8m0":
                    if unused:
                        if bx == Gout - 1:  # the bytes past the last group: this tile's rows and the padding
                            for o, k in T.Parallel(nom, unused):
                                if by * nom + o < A:
                                    S[bx // 4, 4 * (by * nom + o) + 4 - unused + k] = T.cast(0, "uint8")
                            if by == T.ceildiv(M, tM) - 1:
                                for p, k in T.Parallel(4, unused):  # at most 3 padding rows past the tile
                                    if by * nom + nom + p < A:
                                        S[bx // 4, 4 * (by * nom + nom + p) + 4 - unused + k] = T.cast(0, "uint8")

    return main


# ------------------------------------------------------------------------------------------ reference
def ref_lossless(Q, Sin, x_block=(1, 32), out_block=(128, 128), in_layout="tma_ue8m0", sf_layout="tma_ue8m0", **_):
    """NumPy meaning of the module docstring: (e4m3 Y, scale storage); ``ValueError`` where it cannot be lossless."""
    b = np.asarray(Q).view(np.uint8)
    M, N = b.shape[0], 2 * b.shape[1]
    (bh, bw), (BH, BW) = x_block, out_block
    Rin, Gin, Rout, Gout = -(-M // bh), -(-N // bw), -(-M // BH), -(-N // BW)
    pm, pk = BH // bh, BW // bw
    e = ((logical_sf(Sin, Rin, Gin, in_layout).view(np.int32) >> 23) & 0xFF).astype(np.int64)
    ep = np.zeros((Rout * pm, Gout * pk), np.int64)
    ep[:Rin, :Gin] = e
    E = np.maximum(ep.reshape(Rout, pm, Gout, pk).max(axis=(1, 3)) - 6, 0)
    Ex = np.repeat(np.repeat(E, pm, axis=0), pk, axis=1)[:Rin, :Gin]
    if np.any(e + 5 < Ex):
        raise ValueError("per_block_cast_lossless: input scales of one output block span more than 2^11")
    f = ((e - Ex + 127) << 23).astype(np.int32).view(np.float32)
    codes = np.stack([b & 0xF, b >> 4], axis=-1).reshape(M, N).astype(np.uint8)
    v = codes.view(ml_dtypes.float4_e2m1fn).astype(np.float32)
    y = (v * np.repeat(np.repeat(f, bh, axis=0), bw, axis=1)[:M, :N]).astype(ml_dtypes.float8_e4m3fn)
    return y, layout_sf((E.astype(np.int32) << 23).view(np.float32), sf_layout)


def lossless_inputs(rng, M, N, x_block=(1, 32), in_layout="tma_ue8m0", spread=11):
    """Random FP4 bytes and power-of-two scales ``2^[−spread/2, spread/2] · 2^-3`` (lossless when ``spread ≤ 11``)."""
    bh, bw = x_block
    q = rng.integers(0, 256, (M, N // 2), dtype=np.uint8).view(np.int8)
    lo = -(spread // 2) - 3
    s = np.ldexp(np.float32(1.0), rng.integers(lo, lo + spread + 1, (-(-M // bh), -(-N // bw)))).astype(np.float32)
    return q, layout_sf(s, in_layout)


# ------------------------------------------------------------------------------------------ registry
def _build(M, N, xbh, xbw, obh, obw, in_layout, sf_layout, block_M=None, threads=128, **_):
    return per_block_cast_lossless(M, N, (xbh, xbw), (obh, obw), in_layout, sf_layout, block_M, threads)


register(KernelSpec(
    name="quant_cast_lossless", family="fp8_cast",
    description="lossless per-block FP4 (e2m1, power-of-two block scales) -> FP8 (e4m3) cast with larger blocks: "
                "scale exponents re-based by the block maximum - 6 (TileKernels' per_block_cast_lossless)",
    build=_build,
    make_inputs=lambda rng, M, N, xbh, xbw, in_layout, **_: lossless_inputs(rng, M, N, (xbh, xbw), in_layout),
    reference=lambda *ins, xbh, xbw, obh, obw, **p: ref_lossless(*ins, x_block=(xbh, xbw), out_block=(obh, obw), **p),
    compare=lambda outs, refs, p: compare_bitwise(outs, refs),
    flops=lambda M, N, **_: 2 * M * N,
    bytes=lambda M, N, xbh, xbw, obh, obw, **_: M * N // 2 + M * N + -(-M // xbh) * -(-N // xbw)
    + -(-M // obh) * -(-N // obw),
    shapes=({"label": "DeepSeek-V3 expert weight 7168x2048: e2m1 1x32 -> e4m3 128x128, packed UE8M0", "M": 7168,
             "N": 2048},
            {"label": "DeepSeek-V3 hidden 7168, 4096 tok: e2m1 1x32 -> e4m3 1x128, packed UE8M0", "M": 4096,
             "N": 7168, "obh": 1, "obw": 128}),
    test_shapes=({"label": "ragged 37x200: e2m1 1x32 TMA fp32 -> e4m3 32x32 rows", "M": 37, "N": 200, "obh": 32,
                  "obw": 32, "in_layout": "tma", "sf_layout": "rows"},
                 {"label": "ragged 130x100: e2m1 1x32 packed -> e4m3 128x128 packed (part words, padding)", "M": 130,
                  "N": 100}),
    tunables={"threads": [64, 128, 256]},
    defaults={"xbh": 1, "xbw": 32, "obh": 128, "obw": 128, "in_layout": "tma_ue8m0", "sf_layout": "tma_ue8m0",
              "block_M": None, "threads": 128},
    tolerance={"exact": True}))
