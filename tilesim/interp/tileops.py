"""Tile-operation rules of the interpreter: each op is one vectorised NumPy operation over the chunk."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..ir import nodes as N
from . import memory, pool
from .exprs import ev
from .state import Ctx, block_mask, is_deferred, storage_dtype

TILE_RULES: dict = {}


def rule(cls):
    def deco(fn):
        TILE_RULES[cls] = fn
        return fn
    return deco


def _squeeze_to(vals, src_ext, dst_ext):
    """Reshape/broadcast (n, *src_ext) values to (n, *dst_ext) by the copy pairing rule."""
    n = vals.shape[0]
    s = tuple(e for e in src_ext if e != 1)
    d = tuple(e for e in dst_ext if e != 1)
    if s == d:
        return vals.reshape((n,) + tuple(dst_ext))
    tile = vals.reshape((n,) + s)
    return np.broadcast_to(tile.reshape((n,) + (1,) * (len(d) - len(s)) + s), (n,) + d).reshape((n,) + tuple(dst_ext))


@rule(N.Copy)
def _copy(s: N.Copy, ctx: Ctx):
    vals = memory.read_region(s.src, ctx, ev)
    src_ext = vals.shape[1:]
    where = memory.region_starts(s.dst, ctx, ev)
    dst_starts, dst_ext = where
    vals = _squeeze_to(vals, src_ext, dst_ext)
    vals = dt.convert(vals, s.dst.dtype)
    if _adopt(s.dst, dst_starts, dst_ext, vals, ctx):
        return
    memory.write_region(s.dst, vals, ctx, ev, where)


def _adopt(dst: N.Region, starts, ext, vals, ctx: Ctx) -> bool:
    """Make a freshly computed array the storage of a whole on-chip buffer (saves one tile copy).

    Only when nothing else can see the old storage: no views of the buffer, no mask, the region is
    the whole buffer, and ``vals`` shares memory with no buffer of the program. A deferred allocation
    (``state.Storage``) is never made.
    """
    b = dst.buffer
    if (ctx.mask is not None or b.scope == "global" or b.uid in ctx.aliased or ext != tuple(b.shape)
            or vals.shape[0] != ctx.nb or any(s != 0 for s in starts)):
        return False
    if (vals.dtype != storage_dtype(ctx.storage, b.uid) or not vals.flags.c_contiguous
            or not vals.flags.writeable):
        return False
    if any(np.may_share_memory(vals, st) for st in ctx.storage.values()):
        return False
    ctx.storage[b.uid] = vals
    return True


def _as_matrix(vals):
    n = vals.shape[0]
    ext = [e for e in vals.shape[1:]]
    while len(ext) > 2 and ext[0] == 1:
        ext.pop(0)
    return vals.reshape((n,) + tuple(ext))


@rule(N.Gemm)
def _gemm(s: N.Gemm, ctx: Ctx):
    acc = dt.compute_dtype(s.c.dtype) if dt.is_float(s.c.dtype) else np.dtype(np.int64)
    a = _as_matrix(memory.read_region(s.a, ctx, ev)).astype(acc, copy=False)
    b = _as_matrix(memory.read_region(s.b, ctx, ev)).astype(acc, copy=False)
    if ctx.options.tf32 and s.a.dtype == "float32":
        a, b = dt.to_tf32(a), dt.to_tf32(b)
    if s.trans_a:
        a = a.swapaxes(1, 2)
    if s.trans_b:
        b = b.swapaxes(1, 2)
    if not s.clear_accum and ctx.mask is None and a.ndim == b.ndim == 3 and a.dtype == acc == b.dtype:
        cview = memory.onchip_view(s.c, ctx, ev)
        shape = (max(a.shape[0], b.shape[0]), a.shape[1], b.shape[2])
        if (cview is not None and cview.dtype == acc and cview.size == shape[0] * shape[1] * shape[2]
                and cview.nbytes >= pool.MIN_BYTES):
            # accumulate in place: C is a float32/float64 fragment updated by every block; the
            # product goes to reused scratch memory
            cm = cview.reshape(shape)
            scratch = pool.empty(shape, acc)
            np.matmul(a, b, out=scratch)
            cm += scratch
            probe = np.empty(0)
            pool.give_back(scratch, probe)
            return
    prod = np.matmul(a, b)
    if s.clear_accum and ctx.mask is None and s.c.buffer.scope != "global" and prod.shape[0] == ctx.nb:
        # C = A @ B over the whole of C: the product becomes C's storage (no copy, no NaN fill)
        starts, cext = memory.region_starts(s.c, ctx, ev)
        if prod.size == ctx.nb * int(np.prod(cext)) and _adopt(s.c, starts, cext,
                                                                prod.reshape((ctx.nb,) + cext), ctx):
            return
    cview = memory.onchip_view(s.c, ctx, ev)
    if cview is not None and cview.dtype == acc and ctx.mask is None:
        # accumulate in place: C is a float32/float64 fragment updated by every block
        cm = cview.reshape(prod.shape)
        if s.clear_accum:
            cm[...] = prod
        else:
            cm += prod
        return
    if s.clear_accum:
        out = prod
    else:
        c = _as_matrix(memory.read_region(s.c, ctx, ev)).astype(acc, copy=False)
        out = c + prod
    _, cext = memory.region_starts(s.c, ctx, ev)
    out = dt.convert(out.reshape((out.shape[0],) + cext), s.c.dtype)
    memory.write_region(s.c, out, ctx, ev)


def _reduce_fn(kind):
    return {"sum": np.sum, "abssum": lambda x, axis: np.sum(np.abs(x), axis=axis),
            "max": np.max, "min": np.min, "absmax": lambda x, axis: np.max(np.abs(x), axis=axis)}[kind]


def _combine(kind, old, new):
    if kind in ("sum", "abssum"):
        return old + new
    if kind in ("max", "absmax"):
        return np.maximum(old, new)
    return np.minimum(old, new)


@rule(N.Reduce)
def _reduce(s: N.Reduce, ctx: Ctx):
    src = memory.to_compute(memory.read_region(s.src, ctx, ev), s.src.dtype)
    if dt.is_float(s.dst.dtype) and src.dtype != dt.compute_dtype(s.dst.dtype) and s.kind in ("sum", "abssum"):
        src = src.astype(np.promote_types(src.dtype, dt.compute_dtype(s.dst.dtype)))
    r = _reduce_fn(s.kind)(src, axis=1 + s.dim)
    _, dext = memory.region_starts(s.dst, ctx, ev)
    r = r.reshape((r.shape[0],) + dext)
    if not s.clear:
        old = memory.to_compute(memory.read_region(s.dst, ctx, ev), s.dst.dtype)
        r = _combine(s.kind, old, r)
    memory.write_region(s.dst, dt.convert(r, s.dst.dtype), ctx, ev)


@rule(N.Cumsum)
def _cumsum(s: N.Cumsum, ctx: Ctx):
    src = memory.to_compute(memory.read_region(s.src, ctx, ev), s.src.dtype)
    ax = 1 + s.dim
    if s.reverse:
        r = np.flip(np.cumsum(np.flip(src, axis=ax), axis=ax), axis=ax)
    else:
        r = np.cumsum(src, axis=ax)
    memory.write_region(s.dst, dt.convert(r, s.dst.dtype), ctx, ev)


@rule(N.Fill)
def _fill(s: N.Fill, ctx: Ctx):
    v = ev(s.value, ctx)
    starts, ext = memory.region_starts(s.dst, ctx, ev)
    v = np.asarray(v)
    n = v.shape[0] if v.ndim else 1
    vals = np.broadcast_to(dt.convert(v.reshape((n,) + (1,) * len(ext)), s.dst.dtype), (n,) + ext)
    b = s.dst.buffer
    if (ctx.mask is None and is_deferred(ctx.storage, b.uid) and b.uid not in ctx.aliased
            and ext == tuple(b.shape) and all(type(x) is int and x == 0 for x in starts)):
        # a whole-buffer fill of a buffer nobody has read: write it into fresh memory directly
        arr = pool.empty((ctx.nb,) + ext, storage_dtype(ctx.storage, b.uid))
        arr[...] = vals
        ctx.storage[b.uid] = arr
        return
    memory.write_region(s.dst, vals, ctx, ev, (starts, ext))


_AT = {"add": np.add, "max": np.maximum, "min": np.minimum}


@rule(N.Atomic)
def _atomic(s: N.Atomic, ctx: Ctx):
    st = ctx.storage[s.dst.buffer.uid]
    if isinstance(s.value, N.Region):
        vals = memory.read_region(s.value, ctx, ev)
        idx, valid, ext = memory.region_indices(s.dst, ctx, ev)
        vals = _squeeze_to(vals, vals.shape[1:], ext)
        vals = np.broadcast_to(memory.to_compute(vals, s.value.dtype), (ctx.nb,) + ext)
        m = valid
        bm = block_mask(ctx.mask, ctx.nb)
        if bm is not None:
            m = m & bm.reshape((-1,) + (1,) * len(ext))
        if s.dst.buffer.scope != "global":
            b = np.broadcast_to(np.arange(ctx.nb).reshape((-1,) + (1,) * len(ext)), m.shape)
            idx = [b] + list(idx)
        full = tuple(i[m] for i in idx)
        _apply_at(st, full, vals[m], s.kind, s.dst.dtype)
        return
    # element atomic: indices are the region starts (extents 1), possibly varying per element
    starts = [ev(x, ctx) for x in s.dst.starts]
    v = ev(s.value, ctx)
    shapes = [np.shape(x) for x in starts] + [np.shape(v), (ctx.nb,) + (1,) * ctx.rank]
    shape = np.broadcast_shapes(*shapes)
    idx = [np.broadcast_to(np.asarray(x, dtype=np.int64), shape) for x in starts]
    if s.dst.buffer.scope != "global":
        idx = [np.broadcast_to(np.arange(ctx.nb).reshape((-1,) + (1,) * ctx.rank), shape)] + idx
        dims = st.shape
    else:
        dims = st.shape
    valid = np.ones(shape, dtype=bool)
    for d, i in enumerate(idx):
        valid &= (i >= 0) & (i < dims[d])
    m = valid
    if ctx.mask is not None:
        m = m & np.broadcast_to(ctx.mask, shape)
    vals = np.broadcast_to(np.asarray(v), shape)
    _apply_at(st, tuple(i[m] for i in idx), vals[m], s.kind, s.dst.dtype)


def _apply_at(st, full, vals, kind, dtype):
    if len(vals) == 0:
        return
    if dtype in dt.NARROW_FLOATS or dtype == "bool":
        lin = np.ravel_multi_index(full, st.shape)
        uniq, inv = np.unique(lin, return_inverse=True)
        flat = st.reshape(-1)
        cur = flat[uniq].astype(np.float32)
        if kind == "add":
            acc = np.zeros(len(uniq), dtype=np.float32)
            np.add.at(acc, inv, vals.astype(np.float32))
            cur = cur + acc
        else:
            _AT[kind].at(cur, inv, vals.astype(np.float32))
        flat[uniq] = dt.convert(cur, dtype)
        return
    _AT[kind].at(st, full, vals.astype(st.dtype))
