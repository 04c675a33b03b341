"""Memory access rules: element loads/stores and tile regions, with TileLang's edge semantics.

* Global reads out of range give 0 and global writes out of range are skipped (``oob="zero"``), or
  raise at the access's source line (``oob="error"``), or follow TileLang's own rule (``oob="check"``,
  the sanitizer): tile copies and ``T.Parallel`` element accesses that overhang a tensor edge in a
  dimension indexed by a parallel variable are masked (legal); any other element access out of range
  — a scalar access, a serial-loop index, a gather through loaded indices — raises, naming the
  buffer, the index and the source line. On-chip accesses out of range always raise.
* ``races=True`` records the writer and reader blocks of every global element in a launch: two blocks
  writing one element raise, whatever the kinds of store (plain, tile copy, atomic), unless every
  write to it is an atomic of one kind (``note_atomic``); a block reading an element another block
  writes raises too (``note_read``), whichever comes first.
* Region reads return storage-dtype arrays shaped ``(nb or 1, *extents)``; region writes take the same.
* Block-varying region starts of global tensors are gathered through a sliding-window view, so a
  chunk of blocks costs one NumPy gather, not one per block; blocks whose window crosses the tensor
  edge take a per-block clipped path.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided, sliding_window_view

from ... import dtypes as dt
from ...ir import nodes as N
from . import shadow
from .checks import (
    _note_region_read,
    _race_check,
    _race_elements,
    _race_scalar,
    check_explicit,
    note_read_elements,
)
from .checks import oob_error as _oob_error
from .state import Ctx, Storage, block_mask, is_deferred, lift, new_array


def to_compute(arr, dtype: str):
    """Storage values → compute representation (narrow floats → float32, integers → int64)."""
    if dt.is_float(dtype):
        return dt.widen(arr, dt.compute_dtype(dtype))
    if dtype == "bool":
        return arr.astype(bool, copy=False)
    return arr.astype(np.int64, copy=False)


def _scalar(v, dtype):
    if dt.is_float(dtype):
        return dt.compute_dtype(dtype).type(v)
    if dtype == "bool":
        return bool(v)
    return int(v)


def _active_expand(mask, shape):
    if mask is None:
        return None
    return np.broadcast_to(mask, shape) if isinstance(mask, np.ndarray) else mask


# ---------------------------------------------------------------------------------------- element loads
def _direct_plan(buf, indices, ctx):
    """If every index is a distinct enclosing parallel var with matching extent: its axes, else None."""
    if not indices or not ctx.pvars:
        return None
    axes = []
    for d, i in enumerate(indices):
        if type(i) is not N.Var or i.uid not in ctx.pvars:
            return None
        ax, ext = ctx.pvars[i.uid]
        if ext != buf.shape[d] or ax in axes:
            return None
        axes.append(ax)
    return axes


def _arrange(storage, axes, rank):
    """View ``storage`` (nb, d0, d1, ...) with dim k on parallel axis ``axes[k]`` (1-sized elsewhere)."""
    order = sorted(range(len(axes)), key=lambda k: axes[k])
    arr = storage.transpose([0] + [1 + k for k in order]) if order != list(range(len(axes))) else storage
    shape = [storage.shape[0]] + [1] * rank
    for k in range(len(axes)):
        shape[1 + axes[k]] = storage.shape[1 + k]
    return arr.reshape(shape)


def load(e: N.Load, idx, ctx: Ctx, checked: bool = False):
    if ctx.shadow is not None and not checked and e.buffer.uid in ctx.shadow:
        v = load(e, idx, ctx, True)  # raises first if the access is out of range
        shadow.check_elements(e.buffer, idx, ctx, e.loc)
        return v
    buf = e.buffer
    st = ctx.storage[buf.uid]
    if buf.scope == "global":
        return _load_global(e, buf, st, idx, ctx)
    if buf.scope == "var" or not idx:
        return lift(to_compute(st, buf.dtype), ctx.rank)
    axes = _direct_plan(buf, e.indices, ctx)
    if axes is not None:
        return to_compute(_arrange(st, axes, ctx.rank), buf.dtype)
    if all(type(i) is int for i in idx):
        for d, i in enumerate(idx):
            if not 0 <= i < buf.shape[d]:
                if ctx.mask is not False:
                    raise _oob_error(buf, e.loc, "read")
                return _scalar(0, buf.dtype)
        return lift(to_compute(st[(slice(None),) + tuple(idx)], buf.dtype), ctx.rank)
    idx = _check_onchip(buf, idx, ctx, e.loc, "read")
    b = np.arange(st.shape[0]).reshape((st.shape[0],) + (1,) * ctx.rank)
    return to_compute(st[(b,) + tuple(idx)], buf.dtype)


def _check_onchip(buf, idx, ctx, loc, what):
    out = []
    for d, i in enumerate(idx):
        n = buf.shape[d]
        if isinstance(i, np.ndarray):
            bad = (i < 0) | (i >= n)
            if bad.any():
                if ctx.mask is not None:
                    bad = bad & ctx.mask
                if np.any(bad):
                    raise _oob_error(buf, loc, what)
                i = np.clip(i, 0, n - 1)
        elif not 0 <= i < n:
            if ctx.mask is None or np.any(ctx.mask):
                raise _oob_error(buf, loc, what)
            i = min(max(i, 0), n - 1)
        out.append(i)
    return out


def _guard(buf, st, idx, ctx, loc, what, exprs=None):
    """Clip global indices; return (clipped indices, valid mask or None)."""
    valid = None
    out = []
    for d, i in enumerate(idx):
        n = st.shape[d]
        if isinstance(i, np.ndarray):
            ok = (i >= 0) & (i < n)
            if not ok.all():
                valid = ok if valid is None else (valid & ok)
                i = np.clip(i, 0, n - 1)
        elif not 0 <= i < n:
            valid = False
            i = 0
        out.append(i)
    if valid is not None and ctx.options.oob == "check":
        check_explicit(buf, st, idx, exprs, ctx, loc, what)
    if valid is not None and ctx.options.oob == "error":
        bad = np.logical_not(valid)
        if ctx.mask is not None:
            bad = bad & ctx.mask
        if np.any(bad):
            raise _oob_error(buf, loc, what)
    return out, valid


def _gather(st: np.ndarray, idx: list) -> np.ndarray:
    """``st[tuple(idx)]`` for in-range int / integer-array indices: on a C-contiguous tensor one ``take`` of
    linear offsets (the same elements, ~2.5x faster than NumPy's multi-array fancy indexing)."""
    if not st.flags.c_contiguous or st.ndim < 2:
        return st[tuple(idx)]
    lin = 0
    for i, stride in zip(idx, st.strides):
        step = stride // st.itemsize
        lin = lin + (i.astype(np.int64, copy=False) * step if isinstance(i, np.ndarray) else int(i) * step)
    return st.reshape(-1).take(lin)


def _load_global(e, buf, st, idx, ctx):
    idx, valid = _guard(buf, st, idx, ctx, e.loc, "read", e.indices)
    if ctx.options.races:
        note_read_elements(buf, st, idx, valid, ctx, e.loc)
    fill = ctx.safe.get(buf.uid, 0)
    if all(type(i) is int for i in idx):
        if valid is False:
            return _scalar(fill, buf.dtype)
        return _scalar(to_compute(st[tuple(idx)], buf.dtype), buf.dtype)
    vals = to_compute(_gather(st, idx), buf.dtype)
    if vals.ndim < 1 + ctx.rank:
        vals = lift(vals, ctx.rank)
    if valid is not None:
        vals = np.where(valid, vals, vals.dtype.type(fill))
    return vals


# ---------------------------------------------------------------------------------------- element stores
def store(s: N.Store, idx, value, ctx: Ctx, checked: bool = False):
    if ctx.shadow is not None and not checked and s.buffer.uid in ctx.shadow:
        store(s, idx, value, ctx, True)
        shadow.mark_elements(s.buffer, idx, ctx)
        return
    buf = s.buffer
    st = ctx.storage[buf.uid]
    mask = ctx.mask
    val = dt.convert(np.asarray(value), buf.dtype) if dt.is_float(buf.dtype) or buf.dtype == "bool" \
        else _to_int_storage(value, buf.dtype)
    if buf.scope == "var" or (buf.scope != "global" and not idx):
        _store_block_level(st, val, mask, ctx)
        return
    if buf.scope != "global":
        axes = _direct_plan(buf, s.indices, ctx)
        if axes is not None and len(axes) == ctx.rank:
            view = _arrange(st, axes, ctx.rank)
            if view.base is None and view is not st:
                axes = None  # reshape copied: fall back to the general path
            else:
                if mask is None:
                    view[...] = val
                else:
                    np.copyto(view, np.broadcast_to(val, view.shape), where=np.broadcast_to(mask, view.shape))
                return
        idx = _check_onchip(buf, idx, ctx, s.loc, "write")
        b = np.arange(st.shape[0]).reshape((st.shape[0],) + (1,) * ctx.rank)
        full = (b,) + tuple(idx)
        _scatter(st, full, val, mask)
        return
    idx, valid = _guard(buf, st, idx, ctx, s.loc, "write", s.indices)
    m = mask
    if valid is not None:
        m = valid if m is None else np.logical_and(m, valid)
    if all(type(i) is int for i in idx) and not isinstance(val, np.ndarray) or (
            all(type(i) is int for i in idx) and np.ndim(val) == 0):
        if m is False or (m is not None and not np.any(m)):
            return
        if ctx.options.races:
            _race_scalar(buf, st, tuple(idx), m, ctx, s.loc)
        st[tuple(idx)] = val if np.ndim(val) == 0 else val.reshape(-1)[-1]
        return
    if ctx.options.races:
        _race_elements(buf, st, idx, m, ctx, s.loc)
    _scatter(st, tuple(idx), val, m)


def _to_int_storage(value, dtype):
    arr = np.asarray(value)
    if arr.dtype.kind == "f" or arr.dtype.kind == "V":
        return dt.convert(arr, dtype)
    return arr.astype(dt.np_dtype(dtype))


def _store_block_level(st, val, mask, ctx):
    val = np.asarray(val)
    if val.ndim > 1:
        val = val.reshape(val.shape[0], -1)[:, 0] if val.shape[0] == st.shape[0] else val.reshape(-1)[:1]
    if mask is None:
        st[...] = val
        return
    bm = block_mask(mask, st.shape[0])
    if bm is not None:
        np.copyto(st, np.broadcast_to(val, st.shape), where=bm)
    else:
        st[...] = val


def _scatter(st, idx, val, mask):
    shape = np.broadcast_shapes(*[np.shape(i) for i in idx], np.shape(val),
                                 np.shape(mask) if isinstance(mask, np.ndarray) else ())
    full = [np.broadcast_to(i, shape) for i in idx]
    v = np.broadcast_to(val, shape)
    if mask is None:
        st[tuple(full)] = v
        return
    if mask is False:
        return
    m = np.broadcast_to(mask, shape)
    st[tuple(f[m] for f in full)] = v[m]


# ---------------------------------------------------------------------------------------- regions
def region_starts(r: N.Region, ctx: Ctx, ev):
    starts = []
    for s in r.starts:
        v = ev(s, ctx)
        if isinstance(v, np.ndarray):
            if v.ndim == 0:
                v = int(v)
            else:
                v = v.reshape(v.shape[0], -1)[:, 0]
        starts.append(v)
    exts = []
    for x in r.extents:
        exts.append(x if isinstance(x, int) else int(ev(x, ctx)))
    return starts, tuple(exts)


def onchip_view(r: N.Region, ctx: Ctx, ev):
    """A writable view of on-chip region ``r`` (nb, *extents) when its starts are uniform, else None."""
    if r.buffer.scope == "global":
        return None
    st = ctx.storage[r.buffer.uid]
    starts, exts = region_starts(r, ctx, ev)
    if not all(type(s) is int for s in starts):
        return None
    for s, e, n in zip(starts, exts, r.buffer.shape):
        if s < 0 or s + e > n:
            raise _oob_error(r.buffer, r.loc, "access")
    v = st[(slice(None),) + tuple(slice(s, s + e) for s, e in zip(starts, exts))]
    return v if v.base is not None or v is st else None


def _all_inside(starts, exts, shape) -> bool:
    """Every block's window lies inside the tensor (checked on per-dimension min/max only)."""
    for s, e, n in zip(starts, exts, shape):
        if e > n:
            return False
        if type(s) is int:
            if s < 0 or s + e > n:
                return False
        elif s.min() < 0 or s.max() + e > n:
            return False
    return True


def read_region(r: N.Region, ctx: Ctx, ev, where=None):
    """Values of region ``r``: storage dtype, shape ``(nb or 1, *extents)``.

    ``where`` is ``region_starts(r, ...)`` when the caller has already evaluated it.
    """
    st = ctx.storage[r.buffer.uid]
    starts, exts = where or region_starts(r, ctx, ev)
    if r.buffer.scope != "global":
        return _onchip_window(r, st, starts, exts, ctx, write=None)
    if ctx.options.races:
        _note_region_read(r, st, starts, exts, ctx)
    fill = ctx.safe.get(r.buffer.uid, 0)
    uniform = all(type(s) is int for s in starts)
    if uniform:
        if ctx.options.oob == "error" and not _all_inside(starts, exts, st.shape):
            bm = block_mask(ctx.mask, ctx.nb)
            if bm is None or bm.any():
                raise _oob_error(r.buffer, r.loc, "read")
        return _global_window_uniform(st, starts, exts, fill)[None]
    nb = ctx.nb
    if _all_inside(starts, exts, st.shape):
        # the common case: one gather of whole windows, no per-block bookkeeping
        return _window(ctx, r.buffer.uid, st, exts)[tuple(starts)]
    sts = np.stack([np.broadcast_to(np.asarray(s, dtype=np.int64), (nb,)) for s in starts], axis=1)
    ext = np.asarray(exts)
    shape = np.asarray(st.shape)
    inb = np.all((sts >= 0) & (sts + ext <= shape), axis=1)
    if ctx.options.oob == "error" and not inb.all():
        bm = block_mask(ctx.mask, nb)
        bad = ~inb if bm is None else (~inb & bm)
        if bad.any():
            raise _oob_error(r.buffer, r.loc, "read")
    if inb.all() and all(e <= n for e, n in zip(exts, st.shape)):
        win = _window(ctx, r.buffer.uid, st, exts)
        return win[tuple(sts[:, d] for d in range(len(exts)))]
    out = np.full((nb,) + exts, fill, dtype=st.dtype)
    if inb.any() and all(e <= n for e, n in zip(exts, st.shape)):
        win = _window(ctx, r.buffer.uid, st, exts)
        sel = sts[inb]
        out[inb] = win[tuple(sel[:, d] for d in range(len(exts)))]
    for b in np.nonzero(~inb)[0]:
        out[b] = _global_window_uniform(st, [int(x) for x in sts[b]], exts, fill)
    return out


def window_view(st, exts, writeable: bool = False):
    """Sliding-window view of ``st``: ``view[i0, i1, ...]`` is the ``exts``-sized window starting there.

    NumPy's stride tricks rebuild the array from its ``__array_interface__``, which cannot describe some
    ml_dtypes types (``float8_e5m2`` reports typestr ``'<f1'``): those go through a same-width unsigned view
    and back."""
    raw = st.view(f"u{st.dtype.itemsize}") if st.dtype.type.__module__.startswith("ml_dtypes") else st
    if writeable:
        w = as_strided(raw, shape=tuple(n - e + 1 for n, e in zip(raw.shape, exts)) + tuple(exts),
                       strides=raw.strides + raw.strides, writeable=True)
    else:
        w = sliding_window_view(raw, exts)
    return w if raw is st else w.view(st.dtype)


def _window(ctx, uid, st, exts):
    """Read-only sliding-window view of global storage ``st`` (cached per launch chunk)."""
    key = (uid, exts)
    w = ctx.windows.get(key)
    if w is None or w.base is None:
        w = ctx.windows[key] = window_view(st, exts)
    return w


def _clip_slices(starts, exts, shape):
    src, dst = [], []
    for s, e, n in zip(starts, exts, shape):
        lo, hi = max(s, 0), min(s + e, n)
        if hi <= lo:
            return None, None
        src.append(slice(lo, hi))
        dst.append(slice(lo - s, hi - s))
    return tuple(src), tuple(dst)


def _global_window_uniform(st, starts, exts, fill=0):
    src, dst = _clip_slices(starts, exts, st.shape)
    if src is not None and all(d.start == 0 and d.stop == e for d, e in zip(dst, exts)):
        return st[src]
    out = np.full(exts, fill, dtype=st.dtype)
    if src is not None:
        out[dst] = st[src]
    return out


def _onchip_window(r, st, starts, exts, ctx, write):
    buf = r.buffer
    if all(type(s) is int for s in starts):
        for s, e, n in zip(starts, exts, buf.shape):
            if s < 0 or s + e > n:
                raise _oob_error(buf, r.loc, "read" if write is None else "write")
        sl = (slice(None),) + tuple(slice(s, s + e) for s, e in zip(starts, exts))
        if write is None:
            return st[sl]
        _assign_masked(st[sl], write, ctx.mask)
        return None
    # block-varying start inside an on-chip buffer: one block at a time
    nb = st.shape[0]
    sts = [np.broadcast_to(np.asarray(s, dtype=np.int64), (nb,)) for s in starts]
    out = None if write is not None else np.empty((nb,) + exts, dtype=st.dtype)
    bm = block_mask(ctx.mask, nb)
    for b in range(nb):
        bs = [int(s[b]) for s in sts]
        active = bm is None or bm[b]
        if any(s < 0 or s + e > n for s, e, n in zip(bs, exts, buf.shape)):
            if active:
                raise _oob_error(buf, r.loc, "read" if write is None else "write")
            continue
        sl = (b,) + tuple(slice(s, s + e) for s, e in zip(bs, exts))
        if write is None:
            out[b] = st[sl]
        elif active:
            st[sl] = write[b] if write.shape[0] == nb else write[0]
    return out


def _assign_masked(view, vals, mask):
    if mask is None:
        view[...] = vals
        return
    bm = block_mask(mask, view.shape[0])
    if bm is None:
        view[...] = vals
    else:
        np.copyto(view, np.broadcast_to(vals, view.shape), where=bm.reshape((-1,) + (1,) * (view.ndim - 1)))


def write_region(r: N.Region, vals, ctx: Ctx, ev, where=None):
    """Write ``vals`` (storage dtype of ``r``, shape ``(nb or 1, *extents)``) into region ``r``."""
    st = ctx.storage[r.buffer.uid]
    starts, exts = where or region_starts(r, ctx, ev)
    if r.buffer.scope != "global":
        _onchip_window(r, st, starts, exts, ctx, write=vals)
        return
    nb = ctx.nb
    bm = block_mask(ctx.mask, nb)
    if ctx.options.races or ctx.options.oob == "error":
        _write_global_elementwise(r, st, starts, exts, vals, bm, ctx)
        return
    if all(type(s) is int for s in starts):
        src, dst = _clip_slices(starts, exts, st.shape)
        if src is None:
            return
        if bm is None:
            k = vals.shape[0] - 1
        else:
            act = np.nonzero(bm)[0]
            if len(act) == 0:
                return
            k = int(act[-1]) if vals.shape[0] > 1 else 0
        st[src] = vals[k][dst]
        return
    sts = np.stack([np.broadcast_to(np.asarray(s, dtype=np.int64), (nb,)) for s in starts], axis=1)
    vals = np.broadcast_to(vals, (nb,) + exts)
    ext = np.asarray(exts)
    inb = np.all((sts >= 0) & (sts + ext <= np.asarray(st.shape)), axis=1)
    act = np.ones(nb, dtype=bool) if bm is None else bm.copy()
    sel = act & inb
    if sel.any() and all(e <= n for e, n in zip(exts, st.shape)):
        win = window_view(st, exts, writeable=True)
        if sel.all():
            win[tuple(sts[:, d] for d in range(len(exts)))] = vals
        else:
            s2 = sts[sel]
            win[tuple(s2[:, d] for d in range(len(exts)))] = vals[sel]
    else:
        sel[:] = False
    for b in np.nonzero(act & ~sel)[0]:
        src, dst = _clip_slices([int(x) for x in sts[b]], exts, st.shape)
        if src is not None:
            st[src] = vals[b][dst]


def _write_global_elementwise(r, st, starts, exts, vals, bm, ctx):
    nb = ctx.nb
    vals = np.broadcast_to(vals, (nb,) + exts)
    grids = np.meshgrid(*[np.arange(e) for e in exts], indexing="ij")
    idx = []
    for d, s in enumerate(starts):
        s = np.asarray(s, dtype=np.int64).reshape((-1,) + (1,) * len(exts))
        idx.append(np.broadcast_to(s + grids[d][None], (nb,) + exts))
    shape = np.asarray(st.shape)
    valid = np.ones((nb,) + exts, dtype=bool)
    for d, i in enumerate(idx):
        valid &= (i >= 0) & (i < shape[d])
    act = np.ones(nb, dtype=bool) if bm is None else bm
    actb = np.broadcast_to(act.reshape((nb,) + (1,) * len(exts)), valid.shape)
    if ctx.options.oob == "error" and np.any(actb & ~valid):
        raise _oob_error(r.buffer, r.loc, "write")
    m = actb & valid
    full = tuple(i[m] for i in idx)
    if ctx.options.races:
        who = np.broadcast_to(ctx.block_ids.reshape((nb,) + (1,) * len(exts)), m.shape)[m]
        _race_check(r.buffer, st, full, who, ctx, r.loc)
    st[full] = vals[m]


def region_indices(r: N.Region, ctx: Ctx, ev):
    """Per-element global indices of region ``r``: (index arrays of shape (nb, *ext), valid mask)."""
    st = ctx.storage[r.buffer.uid]
    starts, exts = region_starts(r, ctx, ev)
    nb = ctx.nb
    grids = np.meshgrid(*[np.arange(e) for e in exts], indexing="ij")
    idx = []
    for d, s in enumerate(starts):
        s = np.asarray(s, dtype=np.int64).reshape((-1,) + (1,) * len(exts))
        idx.append(np.broadcast_to(s + grids[d][None], (nb,) + exts))
    valid = np.ones((nb,) + exts, dtype=bool)
    for d, i in enumerate(idx):
        valid &= (i >= 0) & (i < st.shape[d])
    return idx, valid, exts


def allocate_onchip(s: N.Alloc, ctx: Ctx, ev, checked: bool = False):
    """Make the storage of ``T.alloc_*`` ``s`` (a view of its root for ``T.view``; deferred when uninitialised)."""
    if ctx.shadow is not None and not checked:
        allocate_onchip(s, ctx, ev, True)
        shadow.on_alloc(s, ctx.storage[s.buffer.uid].shape if not is_deferred(ctx.storage, s.buffer.uid)
                        else ctx.storage.deferred[s.buffer.uid][0], ctx)
        return
    b = s.buffer
    if b.alias_of is not None:
        root = ctx.storage[b.alias_of.uid]
        if b.scope == "global":
            shape = tuple(int(ev(d, ctx)) if not isinstance(d, int) else d for d in b.shape)
            ctx.storage[b.uid] = root.view(dt.np_dtype(b.dtype)).reshape(shape)
        else:
            nbk = root.shape[0]
            flat = root.reshape(nbk, -1).view(dt.np_dtype(b.dtype))
            ctx.storage[b.uid] = flat.reshape((nbk,) + tuple(b.shape))
        return
    if b.scope == "global":
        shape = tuple(int(ev(d, ctx)) if not isinstance(d, int) else d for d in b.shape)
        ctx.storage[b.uid] = new_array(shape, b.dtype, ctx.options.uninit)
        return
    shape = (ctx.nb,) + tuple(b.shape)
    if s.init is None and isinstance(ctx.storage, Storage):
        ctx.storage.defer(b.uid, shape, b.dtype, ctx.options.uninit)  # made when first read
        return
    arr = new_array(shape, b.dtype, ctx.options.uninit)
    if s.init is not None:
        v = ev(s.init, ctx)
        arr[...] = dt.convert(np.asarray(v), b.dtype).reshape(-1)[: ctx.nb] if np.ndim(v) else \
            dt.convert(np.asarray(v), b.dtype)
    ctx.storage[b.uid] = arr
