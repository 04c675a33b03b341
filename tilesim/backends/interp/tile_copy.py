"""Interpreter rules of ``T.copy``, ``T.fill`` and ``T.atomic_*``: one vectorised NumPy operation per chunk.

A copy reads the source region of every block of the chunk at once, pairs its extents with the
destination's (LANGUAGE.md), converts to the destination dtype and writes; a whole on-chip destination may
adopt the freshly computed array as its storage. Atomics apply ``np.<op>.at`` (narrow floats through an
fp32 round trip, as the hardware rounds once per update).
"""

from __future__ import annotations

import numpy as np

from ... import dtypes as dt
from ...ir import nodes as N
from . import checks, memory, pool
from .exprs import ev
from .state import Ctx, block_mask, is_deferred, storage_dtype
from .tables import STMT_RULES

rule = STMT_RULES.register


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
        if ctx.options.races:
            who = np.broadcast_to(ctx.block_ids.reshape((-1,) + (1,) * len(ext)), m.shape)[m]
            checks.note_atomic(s.dst.buffer, st, full, who, s.kind, ctx, s.loc)
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
    if ctx.options.oob == "check" and s.dst.buffer.scope == "global" and not valid.all():
        checks.check_explicit(s.dst.buffer, st, idx, s.dst.starts, ctx, s.loc, f"atomic {s.kind}")
    vals = np.broadcast_to(np.asarray(v), shape)
    if ctx.options.races:
        who = np.broadcast_to(ctx.block_ids.reshape((-1,) + (1,) * (len(shape) - 1)), shape)[m]
        checks.note_atomic(s.dst.buffer, st, tuple(i[m] for i in idx), who, s.kind, ctx, s.loc)
    _apply_at(st, tuple(i[m] for i in idx), vals[m], s.kind, s.dst.dtype)


def _apply_at(st, full, vals, kind, dtype):
    """Apply atomic updates ``vals`` at indices ``full`` of storage ``st``, in the given (block-major) order.

    Narrow floats go through float32 and are rounded to ``dtype`` after every update, as the hardware
    rounds each atomic: the k-th update of every element is applied in round k, so a batched chunk gives
    the bits a block-by-block (serial) run gives.
    """
    if len(vals) == 0:
        return
    if dtype == "bool" or (dtype in dt.NARROW_FLOATS and kind != "add"):
        # max/min are exact in float32, so one combined update rounds like a sequence of them
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
    if dtype in dt.NARROW_FLOATS:
        lin = np.ravel_multi_index(full, st.shape)
        order = np.argsort(lin, kind="stable")
        sl, sv = lin[order], vals[order].astype(np.float32)
        first = np.r_[0, np.flatnonzero(sl[1:] != sl[:-1]) + 1]
        run = np.repeat(np.arange(len(first)), np.diff(np.r_[first, len(sl)]))
        occurrence = np.arange(len(sl)) - first[run]
        flat = st.reshape(-1)
        cur = flat[sl[first]].astype(np.float32)
        for k in range(int(occurrence.max()) + 1):
            sel = occurrence == k
            r = run[sel]
            cur[r] = dt.convert(cur[r] + sv[sel], dtype).astype(np.float32)
        flat[sl[first]] = dt.convert(cur, dtype)
        return
    _AT[kind].at(st, full, vals.astype(st.dtype))
