"""The builder of ``T.mma_gemm_blockscaled`` (SM120 block-scaled gemm): its meaning in existing tile IR.

Contract
--------
``T.mma_gemm_blockscaled(A, B, C, SFA, SFB, transpose_A, transpose_B, policy, clear_accum, k_start=,
sf_a_granularity_k=ga, sf_b_granularity_k=gb, sf_layout=)`` computes::

    C (+)= (A · sa) @ (B · sb)      sa[m, k] = scale of A row m for the K group k // ga (sb likewise)

with ``A``/``B`` on-chip fp4/fp8 tiles (``op(A)`` is ``M × K``, ``op(B)`` is ``K × N``), products exact and
the accumulation in C's dtype (float32). The block's meaning is emitted with existing IR, so every
consumer (interpreter, CUDA lowering, cost analysis) already has its rules:

1. two ``float32`` fragments ``<A>_scaled`` / ``<B>_scaled`` (shapes of the A and B tiles) are allocated;
2. a ``T.Parallel`` over each tile stores ``float32(x) * scale`` into them (a fp4/fp8 value times a power
   of two or a UE4M3 scale is exact in float32);
3. ``T.gemm(<A>_scaled, <B>_scaled, C, ...)`` (``clear_accum`` as ``T.gemm``: a kernel expression clears
   where it holds).

Scale factors (``SFA``: ``M`` rows, ``SFB``: ``N`` rows, on-chip) are ``uint32`` words of four scale bytes,
byte ``j`` (little-endian) for K group ``4 w + j`` of word ``w`` (TileLang's packing), or ``uint8`` tiles of
one scale per group. A byte is **UE4M3** (``float8_e4m3fn`` bits, the NVFP4 scale) when the granularity is
16 and **UE8M0** (``2^(byte - 127)``; 255 is NaN) when it is 32 (MXFP4/MXFP8), as the hardware's
``scale_vec::4X`` / ``2X`` kinds. Word/group index of K element ``k`` of the tile:

* ``sf_layout="rowmajor"`` (default): group ``(k_start + k) // g`` of row ``m`` is ``SF[m, group]`` (uint8)
  or byte ``group % 4`` of ``SF[m, group // 4]`` (uint32): the scale tile spans the K range from 0;
* ``sf_layout="blockscaled_chunk_kmajor"``: the tile holds this K tile's scale words only, stored in
  TileLang's SM120 K-major chunk order: semantic word ``w`` of row ``m`` is flat element
  ``w · R + (m % 32) · (R / 32) + m // 32`` of the ``R × W`` uint32 tile (``R`` a multiple of 32);
  ``k_start`` is not used.

Errors (``KernelTypeError``, located): operands not on-chip, shapes that do not pair, K not a multiple
of the granularity, a granularity other than 16 or 32, scale tiles of the wrong shape or dtype, an
unknown ``sf_layout``.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import KernelTypeError
from ..ir import nodes as N
from . import exprs as X
from . import prims as P
from . import regions as R
from .builders import builder

_LAYOUTS = ("rowmajor", "blockscaled_chunk_kmajor")


def _tile(tr, loc, v, what):
    r = R.operand(v, loc, what)
    if isinstance(r, R.Corner) or r.buffer.scope == "global":
        raise KernelTypeError(f"{what} must be an on-chip tile (a shared or fragment buffer or a slice of one)", loc,
                              hint="copy the tile into T.alloc_shared first")
    ext = R.static_extents(r, what, loc)
    axes = [d for d, e in enumerate(ext) if e != 1]
    if len(axes) != 2:
        if len(ext) >= 2 and len(axes) < 2:
            axes = list(range(len(ext)))[-2:]
        else:
            raise KernelTypeError(f"{what} ({r.buffer.name}) must be a 2-D tile, got extents {tuple(ext)}", loc)
    return r, axes, (ext[axes[0]], ext[axes[1]])


def _load(r, axes, i, j, loc):
    idx = list(r.starts)
    idx[axes[0]] = X.binop("add", idx[axes[0]], i, loc)
    idx[axes[1]] = X.binop("add", idx[axes[1]], j, loc)
    return N.Load(r.buffer, tuple(X.index_expr(x, loc) for x in idx), r.buffer.dtype, loc)


def _decode(byte, gran, loc):
    """The float32 value of a scale byte (an int32 expression 0..255)."""
    if gran == 16:  # UE4M3
        b8 = X.cast_to(byte, "uint8", loc)
        return X.cast_to(N.Reinterpret(b8, "float8_e4m3fn", loc), "float32", loc)
    # UE8M0: 2^(byte - 127) as float32 bits (byte 0 is the subnormal 2^-127, 255 is NaN)
    bits = X.select(X.compare("eq", byte, 0, loc), 0x00400000,
                    X.select(X.compare("eq", byte, 255, loc), 0x7FC00000, X.binop("shl", byte, 23, loc), loc), loc)
    return N.Reinterpret(X.cast_to(bits, "uint32", loc), "float32", loc)


def _scale(sf, row, k, gran, k_start, layout, loc, what):
    """The float32 scale of tile row ``row`` and tile K index ``k`` (IR expressions)."""
    r, axes, (rows, words) = sf
    group = X.binop("floordiv", k if layout != "rowmajor" else X.binop("add", k_start, k, loc), gran, loc)
    if r.buffer.dtype == "uint8":
        if layout != "rowmajor":
            raise KernelTypeError(f"{what}: sf_layout={layout!r} stores uint32 scale words, got uint8", loc)
        return _decode(X.cast_to(_load(r, axes, row, group, loc), "int32", loc), gran, loc)
    word = X.binop("floordiv", group, 4, loc)
    if layout == "blockscaled_chunk_kmajor":
        flat = X.binop("add", X.binop("mul", word, rows, loc),
                       X.binop("add", X.binop("mul", X.binop("floormod", row, 32, loc), rows // 32, loc),
                               X.binop("floordiv", row, 32, loc), loc), loc)
        row, word = X.binop("floordiv", flat, words, loc), X.binop("floormod", flat, words, loc)
    w = X.cast_to(_load(r, axes, row, word, loc), "int64", loc)
    shift = X.binop("mul", X.binop("floormod", group, 4, loc), 8, loc)
    byte = X.cast_to(X.binop("bitand", X.binop("shr", w, X.cast_to(X.to_expr(shift, loc), "int64", loc), loc),
                              255, loc), "int32", loc)
    return _decode(byte, gran, loc)


def _scaled_copy(tr, loc, op, trans, kdim, sf, gran, k_start, layout, what):
    """A float32 fragment holding ``op`` (a tile) with every element multiplied by its scale."""
    r, axes, shape = op
    buf = N.Buffer(f"{r.buffer.name}_scaled", shape, "float32", "fragment", loc=loc)
    tr._alloc(buf)
    i, j = (N.Var(n, "int32", kind="parallel", loc=loc) for n in ("i", "j"))
    # the scale's row is the M/N index, its K index the other one
    mn, k = (j, i) if (kdim == 0) else (i, j)
    val = X.binop("mul", X.cast_to(_load(r, axes, i, j, loc), "float32", loc),
                  _scale(sf, mn, k, gran, k_start, layout, loc, what), loc)
    tr.emit(N.Parallel((i, j), shape, (N.Store(buf, (i, j), X.cast_to(val, "float32", loc), loc),), loc))
    return buf


@builder("mma_gemm_blockscaled")
def _b_mma_gemm_blockscaled(tr, loc, A, B, C, SFA, SFB, transpose_A, transpose_B, policy, clear_accum, k_start,
                            sf_a_granularity_k, sf_b_granularity_k, sf_layout):
    what = "T.mma_gemm_blockscaled"
    P._tile_op_context(tr, loc, "mma_gemm_blockscaled")
    layout = sf_layout or "rowmajor"
    if layout not in _LAYOUTS:
        raise KernelTypeError(f"{what}: unknown sf_layout {sf_layout!r}", loc, hint=f"use one of {_LAYOUTS}")
    a, b = _tile(tr, loc, A, f"{what} A"), _tile(tr, loc, B, f"{what} B")
    for (r, _, _), n in ((a, "A"), (b, "B")):
        if not (dt.is_float(r.buffer.dtype) and dt.bits(r.buffer.dtype) <= 8):
            raise KernelTypeError(f"{what}: {n} ({r.buffer.name}) is {r.buffer.dtype}; block-scaled gemms take fp4/fp8 "
                                  "operands", loc)
    m, k = a[2][::-1] if transpose_A else a[2]
    kb, n = b[2][::-1] if transpose_B else b[2]
    if k != kb:
        raise KernelTypeError(f"{what}: K of A ({k}) and of B ({kb}) differ", loc,
                              hint="check transpose_A / transpose_B and the tile shapes")
    sfs = []
    for v, g, rows, name in ((SFA, sf_a_granularity_k, m, "SFA"), (SFB, sf_b_granularity_k, n, "SFB")):
        g = g.value if isinstance(g, N.Const) else g
        if g not in (16, 32):
            raise KernelTypeError(f"{what}: sf_{name[-1].lower()}_granularity_k must be 16 (UE4M3 scales) or 32 "
                                  f"(UE8M0), got {g!r}", loc)
        if k % g:
            raise KernelTypeError(f"{what}: the K tile ({k}) is not a multiple of the scale granularity {g}", loc)
        sf = _tile(tr, loc, v, f"{what} {name}")
        if sf[0].buffer.dtype not in ("uint32", "uint8"):
            raise KernelTypeError(f"{what}: {name} ({sf[0].buffer.name}) is {sf[0].buffer.dtype}; scale factors are "
                                  "uint32 words of four scale bytes (or uint8 bytes)", loc)
        if sf[2][0] != rows or (layout != "rowmajor" and (rows % 32 or sf[2][1] * 4 * g != k)):
            raise KernelTypeError(f"{what}: {name} ({sf[0].buffer.name}) is {sf[2]}; it needs {rows} rows"
                                  + (f" and {k // (4 * g)} words per row (the K tile's scales)" if layout != "rowmajor"
                                     else ""), loc)
        sfs.append((sf, g))
    ks = X.index_expr(k_start, loc)
    sa = _scaled_copy(tr, loc, a, transpose_A, 0 if transpose_A else 1, sfs[0][0], sfs[0][1], ks, layout, what)
    sb = _scaled_copy(tr, loc, b, transpose_B, 1 if transpose_B else 0, sfs[1][0], sfs[1][1], ks, layout, what)
    P.BUILDERS["gemm"](tr, loc, sa, sb, C, transpose_A, transpose_B, policy, clear_accum, 1, 0, None)
