"""Builders of the Blackwell block-scaled path: ``T.tcgen05_sf_warp_transpose``, ``T.tcgen05_cp_warpx4`` and
``T.tcgen05_gemm_blockscaled`` — scale factors moved into tensor memory and the gemm that reads them.

Contract
--------
Scale-factor words are ``uint32``: four UE8M0 bytes (``2^(byte - 127)``; 255 is NaN), byte ``j``
(little-endian) for K group ``4 w + j``. Shared-memory scale regions are runs of whole 128-word **chunks**
along their last axis (every other extent 1); chunk ``i`` is words ``128 i .. 128 i + 127``.

* ``T.tcgen05_sf_warp_transpose(S)`` permutes each chunk in place, as one warp of the hardware does:
  word ``32 q + l`` (one word per row, rows ``l + 32 q``) moves to ``4 l + q`` (``l < 32``, ``q < 4``).
* ``T.tcgen05_cp_warpx4(S, TM, tmem_col_offset=0, use_2cta=False)`` (``tcgen05.cp.32x128b.warpx4``, one per
  chunk): ``TM[r, off + 4 i + c] = S[128 i + 4 (r % 32) + c]`` for every lane ``r < min(rows, 128)`` (the
  32 lanes' 128-bit rows copied to all four warps' lanes) and ``c < 4``. So after a transpose the word of row
  ``m`` of chunk ``i`` sits at lane ``m % 32`` (of every warp), column ``off + 4 i + (m % 128) // 32`` —
  the layout the block-scaled MMA reads. ``TM`` is a ``uint32`` tensor-memory tile.
* ``T.tcgen05_gemm_blockscaled(A, B, C, SFA, SFB, transpose_A, transpose_B, clear_accum, wg_wait, mbar,
  k_start=, sf_a_granularity_k=ga, sf_b_granularity_k=gb, use_2cta=False)`` computes
  ``C (+)= (A · sa) @ (B · sb)``: the scale of row ``m`` of ``op(A)`` (``M × K``) for tile K index ``k`` is
  byte ``((k_start + k) // ga) % 4`` of word ``SFA[m % 32, (m // 128) * 4 + (m % 128) // 32]`` (``sb``
  likewise from ``SFB`` by column ``n`` of ``op(B)``). The meaning is emitted with existing IR, as
  :mod:`tilesim.frontend.blockscaled` does for SM120: float32 fragments ``<A>_scaled`` / ``<B>_scaled``
  filled by ``T.Parallel`` (fp4/fp8 times a power of two is exact in float32), then ``T.tcgen05_gemm`` on
  them with ``mbar`` (one arrival on completion).
* ``use_2cta=True`` (a launch of 2-block clusters): the copy and the scaling step are a
  :class:`~tilesim.ir.nodes.PairIssue` (they take effect in both blocks of the pair, each from and into its
  own memory); the gemm is the pair's (``Gemm.pair``: each block ``r`` gets ``C_r (+)= A_r @ [B_0 | B_1]``),
  and block ``r``'s half of B is scaled by columns ``r · N_B + n`` of its ``SFB``.

Errors (``KernelTypeError``, located at the call): scale regions that are not ``uint32`` runs of whole
chunks on a shared buffer, a ``TM``/``SFA``/``SFB`` that is not a ``uint32`` tensor-memory tile or is too
narrow, a column offset out of range, operands that are not fp4/fp8 on-chip tiles, K that differs, a
granularity that is not a positive multiple of 32, a missing ``mbar`` (TileLang requires it), ``use_2cta``
outside a launch of 2-block clusters.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import KernelTypeError
from ..ir import nodes as N
from . import blackwell as BW
from . import blockscaled as BS
from . import cluster as CL
from . import exprs as X
from . import prims as P
from . import regions as R
from .builders import builder

CHUNK = 128  # words per tcgen05.cp.32x128b.warpx4 / per warp transpose


def _b(op, a, b, loc):
    return X.binop(op, a, b, loc)


def _sf_words(v, loc, what):
    """A shared ``uint32`` region as (region, number of words); the words run along its last axis."""
    r = R.operand(v, loc, what)
    if isinstance(r, R.Corner) or r.buffer.scope not in ("shared", "shared.dyn"):
        raise KernelTypeError(f"{what} must be a region of a shared-memory buffer", loc,
                              hint="load the packed scale words into T.alloc_shared((..., n), 'uint32') first")
    if r.buffer.dtype != "uint32":
        raise KernelTypeError(f"{what} ({r.buffer.name}) is {r.buffer.dtype}; packed scale factors are uint32 words",
                              loc, hint="allocate the scale buffer as T.alloc_shared((..., 128), 'uint32')")
    ext = R.static_extents(r, what, loc)
    if any(e != 1 for e in ext[:-1]) or ext[-1] % CHUNK:
        raise KernelTypeError(f"{what} ({r.buffer.name}) has extents {tuple(ext)}; it must be whole {CHUNK}-word "
                              "chunks along the last axis", loc, hint="pass a 1-D run such as SF_shared[stage, :]")
    return r, ext[-1]


def _word(r, w, loc):
    """The load of word ``w`` (an IR expression) of a scale-word run ``r``."""
    idx = [X.index_expr(x, loc) for x in r.starts]
    idx[-1] = X.index_expr(_b("add", idx[-1], w, loc), loc)
    return idx


def _tmem_words(v, loc, what):
    r, axes, (rows, cols) = BS._tile(None, loc, v, what)
    if r.buffer.scope != BW.TMEM_SCOPE or r.buffer.dtype != "uint32":
        raise KernelTypeError(f"{what} ({r.buffer.name}) must be a uint32 tensor-memory tile (T.alloc_tmem(shape, "
                              f"'uint32')), got a {r.buffer.scope} {r.buffer.dtype} buffer", loc,
                              hint="allocate it with T.alloc_tmem([128, 4 * chunks], 'uint32')")
    if rows < 32:
        raise KernelTypeError(f"{what} ({r.buffer.name}) has {rows} rows; scale factors need 32 or more lanes", loc,
                              hint="allocate it with T.alloc_tmem([128, 4 * chunks], 'uint32')")
    return r, axes, (rows, cols)


def _pv(names, loc):
    return tuple(N.Var(n, "int32", kind="parallel", loc=loc) for n in names)


def _issue(tr, loc, pair, build):
    """Emit the statements ``build()`` emits, wrapped in a ``PairIssue`` when ``pair``."""
    if not pair:
        build()
        return
    tr.bodies.append([])
    try:
        build()
    finally:
        body = tuple(tr.bodies.pop())
    tr.emit(N.PairIssue(body, loc))


@builder("tcgen05_sf_warp_transpose")
def _b_sf_warp_transpose(tr, loc, smem_src):
    what = "T.tcgen05_sf_warp_transpose"
    P._tile_op_context(tr, loc, "tcgen05_sf_warp_transpose")
    r, n = _sf_words(smem_src, loc, what)
    tmp = N.Buffer(f"{r.buffer.name}_sf_t", (n,), "uint32", "fragment", loc=loc)
    tr._alloc(tmp)
    (w,) = _pv(("w",), loc)
    tr.emit(N.Parallel((w,), (n,), (N.Store(tmp, (w,), N.Load(r.buffer, tuple(_word(r, w, loc)), "uint32", loc),
                                            loc),), loc))
    (w,) = _pv(("w",), loc)
    # new word 4 l + q of a chunk is old word 32 q + l
    src = _b("add", _b("mul", _b("floordiv", w, CHUNK, loc), CHUNK, loc),
             _b("add", _b("mul", _b("floormod", w, 4, loc), 32, loc),
                _b("floordiv", _b("floormod", w, CHUNK, loc), 4, loc), loc), loc)
    tr.emit(N.Parallel((w,), (n,), (N.Store(r.buffer, tuple(_word(r, w, loc)),
                                            N.Load(tmp, (X.index_expr(src, loc),), "uint32", loc), loc),), loc))


@builder("tcgen05_cp_warpx4")
def _b_cp_warpx4(tr, loc, smem_src, tmem_dst, tmem_col_offset, use_2cta):
    what = "T.tcgen05_cp_warpx4"
    P._tile_op_context(tr, loc, "tcgen05_cp_warpx4")
    pair = BW._flag(use_2cta, loc, f"{what}(use_2cta=...)")
    if pair:
        CL.pair_check(tr, loc, f"{what}(use_2cta=True)")
    r, n = _sf_words(smem_src, loc, f"{what} source")
    t, axes, (rows, cols) = _tmem_words(tmem_dst, loc, f"{what} destination")
    off = tmem_col_offset.value if isinstance(tmem_col_offset, N.Const) else tmem_col_offset
    if not isinstance(off, int) or off < 0 or off + 4 * (n // CHUNK) > cols:
        raise KernelTypeError(f"{what}: {n // CHUNK} chunk(s) at column offset {off!r} need columns "
                              f"{off!r}..{off!r}+{4 * (n // CHUNK)} of {t.buffer.name} ({cols} columns)", loc,
                              hint="tmem_col_offset is a Python int; allocate 4 tensor-memory columns per chunk")
    lanes = min(rows, 128)

    def build():
        lane, j = _pv(("r", "j"), loc)
        src = _b("add", _b("mul", _b("floordiv", j, 4, loc), CHUNK, loc),
                 _b("add", _b("mul", _b("floormod", lane, 32, loc), 4, loc), _b("floormod", j, 4, loc), loc), loc)
        val = N.Load(r.buffer, tuple(_word(r, src, loc)), "uint32", loc)
        idx = [X.index_expr(x, loc) for x in t.starts]
        idx[axes[0]] = X.index_expr(_b("add", idx[axes[0]], lane, loc), loc)
        idx[axes[1]] = X.index_expr(_b("add", idx[axes[1]], _b("add", j, off, loc), loc), loc)
        tr.emit(N.Parallel((lane, j), (lanes, 4 * (n // CHUNK)), (N.Store(t.buffer, tuple(idx), val, loc),), loc))

    _issue(tr, loc, pair, build)


def _sf_scale(sf, mn, k, gran, k_start, loc):
    """The float32 scale of row/column ``mn`` for tile K index ``k`` from a tensor-memory scale tile."""
    r, axes, _ = sf
    lane = _b("floormod", mn, 32, loc)
    col = _b("add", _b("mul", _b("floordiv", mn, 128, loc), 4, loc),
             _b("floordiv", _b("floormod", mn, 128, loc), 32, loc), loc)
    w = X.cast_to(BS._load(r, axes, lane, col, loc), "int64", loc)
    group = _b("floormod", _b("floordiv", _b("add", k_start, k, loc), gran, loc), 4, loc)
    shift = X.cast_to(X.to_expr(_b("mul", group, 8, loc), loc), "int64", loc)
    byte = X.cast_to(_b("bitand", _b("shr", w, shift, loc), 255, loc), "int32", loc)
    return BS._decode(byte, 32, loc)


def _scaled(tr, loc, op, kdim, sf, gran, k_start, mn_offset):
    r, axes, shape = op
    buf = N.Buffer(f"{r.buffer.name}_scaled", shape, "float32", "fragment", loc=loc)
    tr._alloc(buf)

    def emit():
        i, j = _pv(("i", "j"), loc)
        mn, k = (j, i) if kdim == 0 else (i, j)
        if mn_offset is not None:
            mn = _b("add", mn, mn_offset, loc)
        val = _b("mul", X.cast_to(BS._load(r, axes, i, j, loc), "float32", loc),
                 _sf_scale(sf, mn, k, gran, k_start, loc), loc)
        tr.emit(N.Parallel((i, j), shape, (N.Store(buf, (i, j), X.cast_to(val, "float32", loc), loc),), loc))
    return buf, emit


@builder("tcgen05_gemm_blockscaled")
def _b_tcgen05_gemm_blockscaled(tr, loc, A, B, C, SFA_tmem, SFB_tmem, transpose_A, transpose_B, clear_accum,
                                wg_wait, mbar, k_start, sf_a_granularity_k, sf_b_granularity_k, use_2cta):
    what = "T.tcgen05_gemm_blockscaled"
    P._tile_op_context(tr, loc, "tcgen05_gemm_blockscaled")
    pair = BW._flag(use_2cta, loc, f"{what}(use_2cta=...)")
    if pair:
        CL.pair_check(tr, loc, f"{what}(use_2cta=True)")
    if mbar is None:
        raise KernelTypeError(f"{what} needs mbar= (the barrier its completion arrives on)", loc,
                              hint="pass mbar=bar[stage] and wait on it before reusing the operands")
    ta = BW._flag(transpose_A, loc, f"{what}(transpose_A=...)")
    tb = BW._flag(transpose_B, loc, f"{what}(transpose_B=...)")
    a, b = BS._tile(tr, loc, A, f"{what} A"), BS._tile(tr, loc, B, f"{what} B")
    for (r, _, _), n in ((a, "A"), (b, "B")):
        if not (dt.is_float(r.buffer.dtype) and dt.bits(r.buffer.dtype) <= 8):
            raise KernelTypeError(f"{what}: {n} ({r.buffer.name}) is {r.buffer.dtype}; block-scaled gemms take "
                                  "fp4/fp6/fp8 operands", loc, hint="quantize the operand to float8_e4m3fn / "
                                                                    "float4_e2m1fn with its scale factors")
    m, k = a[2][::-1] if ta else a[2]
    kb, nb = b[2][::-1] if tb else b[2]
    if k != kb:
        raise KernelTypeError(f"{what}: K of A ({k}) and of B ({kb}) differ", loc,
                              hint="check transpose_A / transpose_B and the tile shapes")
    sfs = []
    for v, g, rows, name in ((SFA_tmem, sf_a_granularity_k, m, "SFA"), (SFB_tmem, sf_b_granularity_k,
                                                                         nb * (2 if pair else 1), "SFB")):
        g = g.value if isinstance(g, N.Const) else g
        if not isinstance(g, int) or isinstance(g, bool) or g <= 0 or g % 32:
            raise KernelTypeError(f"{what}: sf_{name[-1].lower()}_granularity_k must be a positive multiple of 32 "
                                  f"(UE8M0 scales, one per K32 atom or more), got {g!r}", loc,
                                  hint="pass the K elements one scale byte covers, e.g. 32 or 128")
        sf = _tmem_words(v, loc, f"{what} {name}")
        need = -(-rows // 128) * 4
        if sf[2][1] < need:
            raise KernelTypeError(f"{what}: {name} ({sf[0].buffer.name}) has {sf[2][1]} columns; {rows} rows of "
                                  f"scale words need {need}", loc, hint="4 tensor-memory columns per 128 rows")
        sfs.append((sf, g))
    ks = X.index_expr(k_start, loc)
    sa, emit_a = _scaled(tr, loc, a, 0 if ta else 1, sfs[0][0], sfs[0][1], ks, None)
    offset = _b("mul", P.BUILDERS["block_rank_in_cluster"](tr, loc), nb, loc) if pair else None
    sb, emit_b = _scaled(tr, loc, b, 1 if tb else 0, sfs[1][0], sfs[1][1], ks, offset)

    def build():
        emit_a()
        emit_b()

    _issue(tr, loc, pair, build)
    P.BUILDERS["gemm"](tr, loc, sa, sb, C, ta, tb, "Square", clear_accum, 1, 0, None, pair)
    BW._commit(tr, loc, f"{what}(mbar=...)", mbar, pair)
