"""The shadow "initialised" mask of ``InterpOptions(uninit="check")``: a read of memory nobody wrote raises
at the reading statement.

Contract
--------
* ``ctx.shadow`` is ``None`` when checking is off (every hook below is then skipped by one test at its
  caller), else a dict: buffer uid → boolean array, ``True`` where the element holds a written value.
  On-chip buffers (shared, fragment, local, var) carry ``(nb, *shape)`` masks made at their ``Alloc``
  (all ``False``, or all ``True`` with an initial value); global tensors tilesim allocated (``out_idx``
  outputs, ``T.empty`` results, global ``T.alloc_*``) carry a mask of the tensor's shape, shared by every
  chunk and launch of the run (:func:`start_run`). A buffer without a mask — a tensor the caller passed —
  is initialised by definition.
* Writes set the mask: element stores (:func:`mark_elements`, also per-thread code and ``var``s), tile
  operations (copies, fills, gemms, reductions, cumsums, region and element atomics, ``AtomicFetch``:
  :func:`tile_op`, which wraps their rules, :func:`wrap`), only for the active blocks / elements and
  only the in-range part of a global region. Padding a copy writes past a tensor edge is a defined
  value: the whole destination region is set.
* Reads are checked: element loads (:func:`check_elements`, under the current mask, so lanes masked
  off by ``T.if_then_else``, an ``if`` or the right side of a short-circuit ``and``/``or`` are not
  read), the read regions of tile operations (``traverse.regions``: a gemm's accumulator unless
  ``clear_accum``, a reduction's destination unless ``clear``, an atomic's destination). The first
  read of an unset element raises :class:`KernelRuntimeError` naming the buffer, the element index,
  the block and the reading statement's location.
* ``T.view`` aliases share their root's mask when the element width is the same; a view of another
  width makes both buffers untracked (counted in ``ctx.shadow["untracked"]``; the sanitizer then falls
  back to its differential runs).
* :func:`finish_run`: an ``out_idx`` output element never written is an error too (the caller gets
  uninitialised memory back).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ... import dtypes as dt
from ...errors import KernelRuntimeError
from ...ir import nodes as N
from ...ir.traverse import regions
from .state import block_mask

UNTRACKED = "untracked"  # key of the list of buffer names whose views make them untracked
FULL = "full"  # key of the set of on-chip uids known to be wholly set in this chunk (checks skipped)


def chunk_shadow(run_shadow: dict) -> dict:
    """A chunk's shadow: the run's global masks (shared) plus room for its own on-chip ones."""
    sh = dict(run_shadow)
    sh[FULL] = set()
    return sh


_HINT = ("write every element before it is read (T.clear / T.fill an accumulator, copy the tile in first), "
         "or keep the read out of lanes that were never written (an `if` or T.if_then_else)")


def _uninit_error(buf, index, block, loc, what="read"):
    at = f" at index {tuple(int(i) for i in index)}" if index is not None else ""
    blk = f" in block {int(block)}" if block is not None else ""
    return KernelRuntimeError(f"{what} of uninitialised {buf.scope} buffer {buf.name}{at}{blk}: no statement "
                              "wrote this element before", loc, hint=_HINT)


# ------------------------------------------------------------------------------------------ run / allocation
def start_run(arrays: dict, fresh) -> dict:
    """The run-wide shadow: a ``False`` mask for every global tensor tilesim allocated (uids ``fresh``)."""
    sh = {UNTRACKED: [], FULL: set()}
    for uid in fresh:
        if uid in arrays:
            sh[uid] = np.zeros(np.shape(arrays[uid]), dtype=bool)
    return sh


def finish_run(pf: N.PrimFunc, shadow: dict, fresh) -> None:
    """Raise if an output tilesim allocated has an element no statement wrote."""
    for p in pf.params:
        m = shadow.get(p.uid) if p.uid in fresh else None
        if m is not None and m.size and not m.all():
            bad = np.argwhere(~m)
            raise KernelRuntimeError(f"output {p.name}: {len(bad)} of {m.size} element(s) are never written, first at "
                                     f"{tuple(int(v) for v in bad[0])} (the caller gets uninitialised memory)", pf.loc,
                                     hint="write the whole output (guard edge tiles with their bounds, not skip them)")


def on_alloc(s: N.Alloc, storage_shape: tuple, ctx) -> None:
    """A (re-)executed allocation: fresh memory is unset, an initial value sets it; views share the root's."""
    b = s.buffer
    sh = ctx.shadow
    sh[FULL].clear()  # (views share masks: forget every "wholly set" fact rather than track which)
    if b.alias_of is not None:
        root = sh.get(b.alias_of.uid)
        if root is None:
            return
        if dt.np_dtype(b.dtype).itemsize != dt.np_dtype(b.alias_of.dtype).itemsize:
            del sh[b.alias_of.uid]  # element widths differ: neither is tracked
            sh[UNTRACKED].append(b.alias_of.name)
            return
        if b.scope == "global":
            sh[b.uid] = root.reshape(storage_shape)
        else:
            sh[b.uid] = root.reshape(root.shape[0], -1).reshape((root.shape[0],) + tuple(b.shape))
        return
    old = sh.get(b.uid)
    if old is not None and old.shape == tuple(storage_shape):
        old[...] = s.init is not None  # in place: views made of it stay views of it
    else:
        sh[b.uid] = np.full(storage_shape, s.init is not None, dtype=bool)


# ------------------------------------------------------------------------------------------ elements
def _element_cells(buf, sh, idx, ctx, valid_extra=None):
    """(index tuple into ``sh``, active-and-in-range mask, broadcast shape) of element indices ``idx``."""
    mask = ctx.mask
    onchip = buf.scope != "global"
    shape = np.broadcast_shapes(*[np.shape(i) for i in idx], (ctx.nb,) + (1,) * ctx.rank,
                                np.shape(mask) if isinstance(mask, np.ndarray) else (),
                                np.shape(valid_extra) if isinstance(valid_extra, np.ndarray) else ())
    full = [np.broadcast_to(np.asarray(i, dtype=np.int64), shape) for i in idx]
    if onchip:
        nbs = sh.shape[0]
        full = [np.broadcast_to(np.arange(shape[0]).reshape((-1,) + (1,) * (len(shape) - 1)) % nbs, shape)] + full
    ok = np.ones(shape, dtype=bool)
    for d, i in enumerate(full):
        ok &= (i >= 0) & (i < sh.shape[d])
    if isinstance(mask, np.ndarray):
        ok &= np.broadcast_to(mask, shape)
    if isinstance(valid_extra, np.ndarray):
        ok &= np.broadcast_to(valid_extra, shape)
    return tuple(f[ok] for f in full), ok


def _block_level(buf, idx, ctx) -> bool:
    return buf.scope != "global" and (buf.scope == "var" or not idx)


def check_elements(buf, idx, ctx, loc, what="read") -> None:
    """Raise if an active element of ``buf`` at indices ``idx`` (evaluated, broadcastable) is unset."""
    sh = ctx.shadow.get(buf.uid)
    if sh is None or ctx.mask is False or buf.uid in ctx.shadow[FULL]:
        return
    if _block_level(buf, idx, ctx):
        per = sh.reshape(sh.shape[0], -1).all(axis=1)
        bm = block_mask(ctx.mask, ctx.nb)
        bad = ~per if bm is None else (~per & bm[: len(per)])
        if bad.any():
            k = int(np.argmax(bad))
            raise _uninit_error(buf, None, ctx.block_ids[k] if k < len(ctx.block_ids) else None, loc, what)
        return
    cells, ok = _element_cells(buf, sh, idx, ctx)
    vals = sh[cells]
    if not vals.all():
        k = int(np.argmax(~vals))
        el = [int(c[k]) for c in cells]
        block = ctx.block_ids[el[0]] if buf.scope != "global" else \
            ctx.block_ids[min(int(np.argwhere(ok)[k][0]), len(ctx.block_ids) - 1)]
        raise _uninit_error(buf, el[1:] if buf.scope != "global" else el, block, loc, what)


def mark_elements(buf, idx, ctx, valid=None) -> None:
    """Set the mask of the active elements of ``buf`` at ``idx`` (``valid``: also in range, global)."""
    sh = ctx.shadow.get(buf.uid)
    if sh is None or ctx.mask is False or valid is False or buf.uid in ctx.shadow[FULL]:
        return
    if _block_level(buf, idx, ctx):
        bm = block_mask(ctx.mask, ctx.nb)
        if bm is None:
            sh[...] = True
        else:
            sh[bm[: sh.shape[0]]] = True
        return
    cells, _ = _element_cells(buf, sh, idx, ctx, valid)
    sh[cells] = True


# ------------------------------------------------------------------------------------------ tile operations
def _region_index(r: N.Region, dims, ctx, ev):
    """(per-element indices into an array of shape ``dims``, in-range mask, extents) of region ``r``
    for every block of the chunk (``ev`` is ``(expression evaluator, memory.region_starts)``)."""
    starts, exts = ev[1](r, ctx, ev[0])
    nb = ctx.nb
    grids = np.meshgrid(*[np.arange(e) for e in exts], indexing="ij")
    idx = [np.broadcast_to(np.asarray(s, dtype=np.int64).reshape((-1,) + (1,) * len(exts)) + g[None], (nb,) + exts)
           for s, g in zip(starts, grids)]
    if r.buffer.scope != "global":
        idx = [np.broadcast_to(np.arange(nb).reshape((-1,) + (1,) * len(exts)), (nb,) + exts)] + idx
    ok = np.ones((nb,) + exts, dtype=bool)
    for d, i in enumerate(idx):
        ok &= (i >= 0) & (i < dims[d])
    return idx, ok, exts


def _region_cells(r: N.Region, sh, ctx, ev, keep=None):
    """(index tuple into ``sh``, (block, *offset) of each) of region ``r``'s in-range elements for the
    chunk's active blocks; ``keep`` (``(nb, *extents)``) narrows them further."""
    idx, ok, exts = _region_index(r, sh.shape, ctx, ev)
    bm = block_mask(ctx.mask, ctx.nb)
    if bm is not None:
        ok &= bm.reshape((ctx.nb,) + (1,) * len(exts))
    if keep is not None:
        ok &= keep
    return tuple(i[ok] for i in idx), ok


def _global_windows(r: N.Region, sh, ctx, ev):
    """``(windows, starts)`` when every active block's window of global region ``r`` lies inside the tensor
    (the common case): ``windows`` is a writable sliding-window view of ``sh`` and ``windows[starts]``
    the active blocks' windows, ``(n, *extents)`` — one gather or scatter, no index arrays. Else None."""
    if r.buffer.scope != "global":
        return None
    starts, exts = ev[1](r, ctx, ev[0])
    if any(e > n for e, n in zip(exts, sh.shape)):
        return None
    nb = ctx.nb
    sts = [np.broadcast_to(np.asarray(s, dtype=np.int64).reshape(-1), (nb,)) for s in starts]
    bm = block_mask(ctx.mask, nb)
    if bm is not None:
        sts = [s[bm] for s in sts]
    if any(len(s) and (s.min() < 0 or s.max() + e > n) for s, e, n in zip(sts, exts, sh.shape)):
        return None
    win = as_strided(sh, shape=tuple(n - e + 1 for n, e in zip(sh.shape, exts)) + tuple(exts),
                     strides=sh.strides + sh.strides, writeable=True)
    return win, tuple(sts)


def _copy_source_kept(s: N.Copy, ctx, ev):
    """A tile copy into a global tensor reads only the source elements whose destination is inside the
    tensor (the rest is masked off at the edge): that mask over the source region, or None (all)."""
    src, dst = s.src, s.dst
    if dst.buffer.scope != "global" or src.buffer.scope == "global":
        return None
    dims = ctx.storage[dst.buffer.uid].shape
    _, ok, dexts = _region_index(dst, dims, ctx, ev)
    if ok.all():
        return None
    sexts = ev[1](src, ctx, ev[0])[1]
    if tuple(e for e in sexts if e != 1) != tuple(e for e in dexts if e != 1):
        return None  # a broadcasting copy: every source element feeds some destination
    return ok.reshape((ctx.nb,) + tuple(sexts))


def _onchip_window(r: N.Region, sh, ctx, ev):
    """``(view of sh over region r for every block, whole buffer?)`` when ``r`` is on-chip with starts
    the same in every block and inside the buffer; else None (the index path)."""
    if r.buffer.scope == "global":
        return None
    starts, exts = ev[1](r, ctx, ev[0])
    if not all(type(s) is int for s in starts):
        return None
    if any(s < 0 or s + e > n for s, e, n in zip(starts, exts, sh.shape[1:])):
        return None
    view = sh[(slice(None),) + tuple(slice(s, s + e) for s, e in zip(starts, exts))]
    return view, all(s == 0 for s in starts) and tuple(exts) == sh.shape[1:]


def _check_region(r: N.Region, ctx, ev, loc, keep=None) -> None:
    uid = r.buffer.uid
    sh = ctx.shadow.get(uid)
    if sh is None or uid in ctx.shadow[FULL]:
        return
    win = _onchip_window(r, sh, ctx, ev) if keep is None else None
    if win is not None:
        view, whole = win
        bm = block_mask(ctx.mask, ctx.nb)
        if (view.all() if bm is None else view[bm].all()):
            if whole and bm is None:
                ctx.shadow[FULL].add(uid)
            return
    gw = _global_windows(r, sh, ctx, ev) if keep is None else None
    if gw is not None and gw[0][gw[1]].all():
        return
    cells, ok = _region_cells(r, sh, ctx, ev, keep)
    vals = sh[cells]
    if not vals.all():
        k = int(np.argmax(~vals))
        el = [int(c[k]) for c in cells]
        b = int(np.argwhere(ok)[k][0])
        raise _uninit_error(r.buffer, el[1:] if r.buffer.scope != "global" else el, ctx.block_ids[b], loc)


def _mark_region(r: N.Region, ctx, ev) -> None:
    uid = r.buffer.uid
    sh = ctx.shadow.get(uid)
    if sh is None or uid in ctx.shadow[FULL]:
        return
    win = _onchip_window(r, sh, ctx, ev)
    if win is not None:
        view, whole = win
        bm = block_mask(ctx.mask, ctx.nb)
        if bm is None:
            view[...] = True
            if whole:
                ctx.shadow[FULL].add(uid)
        else:
            view[bm] = True
        return
    gw = _global_windows(r, sh, ctx, ev)
    if gw is not None:
        gw[0][gw[1]] = True  # overlapping windows of one array: NumPy writes them all
        return
    cells, _ = _region_cells(r, sh, ctx, ev)
    sh[cells] = True


def _element_atomic_indices(s, ctx, ev):
    if isinstance(s, N.AtomicFetch):
        return s.buffer, [ev[0](i, ctx) for i in s.indices]
    return s.dst.buffer, [ev[0](x, ctx) for x in s.dst.starts]


def tile_op(fn, s, ctx, ev) -> None:
    """Run tile-operation rule ``fn`` on ``s``: check the regions it reads, run it, set the regions it writes.
    ``ev``: ``(exprs.ev, memory.region_starts)`` (this module imports neither: they import it)."""
    if ctx.mask is False:
        return fn(s, ctx)
    if isinstance(s, N.AtomicFetch) or (isinstance(s, N.Atomic) and not isinstance(s.value, N.Region)):
        buf, idx = _element_atomic_indices(s, ctx, ev)
        if buf.uid in ctx.shadow:
            check_elements(buf, idx, ctx, s.loc, "atomic update")
        fn(s, ctx)
        if buf.uid in ctx.shadow:
            mark_elements(buf, idx, ctx)
        return None
    reads, writes = regions(s)
    for r in reads:
        if isinstance(r, N.Region) and r.buffer.uid in ctx.shadow:
            keep = _copy_source_kept(s, ctx, ev) if isinstance(s, N.Copy) else None
            _check_region(r, ctx, ev, s.loc or r.loc, keep)
    fn(s, ctx)
    for r in writes:
        if isinstance(r, N.Region) and r.buffer.uid in ctx.shadow:
            _mark_region(r, ctx, ev)
    return None


#: statement classes whose rules :func:`wrap` runs through :func:`tile_op`
TILE_OPS = (N.Copy, N.Cumsum, N.Gemm, N.Reduce, N.Fill, N.Atomic, N.AtomicFetch)


def wrap(rules: dict, base: dict, ev) -> dict:
    """``rules`` with every tile-operation rule that is the plain one of ``base`` run through :func:`tile_op`
    (a per-thread launch's block-level wrappers do their own, ``simt._block_level``)."""
    out = dict(rules)
    for cls in TILE_OPS:
        fn = rules.get(cls)
        if fn is not None and fn is base.get(cls):
            out[cls] = (lambda f: lambda s, ctx: tile_op(f, s, ctx, ev))(fn)
    return out
