"""The interpreter's checking rules: out-of-bounds errors, TileLang's edge rule (``oob="check"``) and the
race record (``races=True``), used by :mod:`.memory`, :mod:`.tile_copy` and :mod:`.simt`.

* :func:`oob_error` — the ``KernelRuntimeError`` of an out-of-range access: buffer, shape, index, line.
* :func:`check_explicit` — ``oob="check"``: an out-of-range index in a dimension that is not a masked
  tile edge (one indexed by an enclosing ``T.Parallel`` variable without a memory read) raises.
* The race record lives in ``ctx.writers`` for one launch (shared by its chunks): per global buffer the
  plain writer block of every element (``uid``), the atomic writer (``(uid, "atomic")``, ``-2`` when
  several blocks) and its kind (``(uid, "kind")``), the reader block (``(uid, "read")``, ``-2`` when
  several), and under ``"written"`` the buffers the launch writes (reads of others are not recorded).
  Two blocks writing one element raise unless all writes are atomics of one kind; a block
  reading an element another block writes raises, whichever comes first, so batched and serial runs
  report the same races. A grid barrier (``T.sync_grid``) starts a new record (:func:`new_phase`):
  accesses in different phases are ordered, only those of one phase can race.
"""

from __future__ import annotations

import numpy as np

from ...errors import KernelRuntimeError
from ...ir import nodes as N
from ...ir.traverse import regions, walk_exprs, walk_stmts
from .state import block_mask


def new_phase(ctx) -> None:
    """A grid barrier (``T.sync_grid``): the launch's race record starts over. Its blocks run as one chunk
    in lockstep (``chunks.plan``), so every block has made the accesses before the barrier."""
    written = ctx.writers.get("written")
    ctx.writers.clear()
    if written is not None:
        ctx.writers["written"] = written


def oob_error(buf, loc, what="access", index=None, shape_now=None):
    shape = "(" + ", ".join(d.name if isinstance(d, N.Var) else str(d) for d in buf.shape) + ")"
    if shape_now is not None and any(not isinstance(d, int) for d in buf.shape):
        shape += f" = {tuple(int(n) for n in shape_now)}"
    at = f" at index {tuple(int(i) for i in index)}" if index is not None else ""
    if index is not None and buf.scope == "global":
        return KernelRuntimeError(f"out-of-bounds {what} of {buf.scope} buffer {buf.name} {shape}{at}", loc,
                                  hint="an explicit index (a scalar access, a gather through loaded indices or a "
                                       "serial loop index) went past the tensor; TileLang would read 0 / drop the "
                                       "write silently here. Check the index or guard it with an `if`")
    return KernelRuntimeError(f"out-of-bounds {what} of {buf.scope} buffer {buf.name} {shape}{at}", loc,
                              hint="guard the index with an `if` or T.if_then_else, or fix the tile arithmetic"
                              if buf.scope != "global" else
                              "oob='error' is on; TileLang would zero-fill reads and skip writes here")


def _edge_dim(x, ctx) -> bool:
    """Index expression ``x`` is a tile edge TileLang masks: it varies with an enclosing ``T.Parallel``
    variable and reads no memory (``oob="check"``: such a dimension may overhang the tensor)."""
    names = [e for e in walk_exprs(x)]
    return not any(type(e) is N.Load for e in names) and any(type(e) is N.Var and e.uid in ctx.pvars for e in names)


def check_explicit(buf, st, idx, exprs, ctx, loc, what):
    """``oob="check"``: raise for an out-of-range index in a dimension that is not a masked tile edge."""
    mask = ctx.mask
    if mask is False:
        return
    shape = np.broadcast_shapes(*[np.shape(j) for j in idx], np.shape(mask) if isinstance(mask, np.ndarray) else ())
    for d, i in enumerate(idx):
        if exprs is not None and d < len(exprs) and _edge_dim(exprs[d], ctx):
            continue
        i = np.broadcast_to(np.asarray(i), shape)
        bad = (i < 0) | (i >= st.shape[d])
        if isinstance(mask, np.ndarray):
            bad = bad & np.broadcast_to(mask, shape)
        if np.any(bad):
            k = np.unravel_index(int(np.argmax(bad)), shape) if shape else ()
            raise oob_error(buf, loc, what, [np.broadcast_to(np.asarray(j), shape)[k] for j in idx], st.shape)


def _block_of_elements(ctx, shape):
    b = ctx.block_ids.reshape((ctx.nb,) + (1,) * (len(shape) - 1)) if len(shape) else ctx.block_ids
    return np.broadcast_to(b, shape)


def _race_elements(buf, st, idx, m, ctx, loc):
    shape = np.broadcast_shapes(*[np.shape(i) for i in idx], (ctx.nb,) + (1,) * ctx.rank)
    full = [np.broadcast_to(i, shape) for i in idx]
    who = _block_of_elements(ctx, shape)
    if m is not None:
        mm = np.broadcast_to(m, shape)
        full = [f[mm] for f in full]
        who = who[mm]
    else:
        full = [f.reshape(-1) for f in full]
        who = who.reshape(-1)
    _race_check(buf, st, tuple(full), who, ctx, loc)


def _race_scalar(buf, st, idx, m, ctx, loc):
    bm = block_mask(m, ctx.nb) if m is not None else None
    who = ctx.block_ids if bm is None else ctx.block_ids[bm]
    full = tuple(np.full(len(who), i) for i in idx)
    _race_check(buf, st, full, who, ctx, loc)


def _race_check(buf, st, full, who, ctx, loc):
    w = ctx.writers.get(buf.uid)
    if w is None:
        w = ctx.writers[buf.uid] = np.full(st.shape, -1, dtype=np.int64)
    if len(who) == 0:
        return
    lin = np.ravel_multi_index(full, st.shape)
    aw = ctx.writers.get((buf.uid, "atomic"))
    if aw is not None:  # an element some other block updated atomically
        pa = aw.reshape(-1)[lin]
        hit = (pa != -1) & (pa != who)
        if hit.any():
            k = int(np.argmax(hit))
            other = "several blocks" if pa[k] == -2 else f"block {int(pa[k])}"
            el = tuple(int(x) for x in np.unravel_index(lin[k], st.shape))
            raise KernelRuntimeError(f"block {int(who[k])} writes {buf.name}{el}, which {other} updated with an "
                                     "atomic in the same launch (a race)", loc,
                                     hint="use atomics for every cross-block update of an element, or give "
                                          "each block its own output")
    _check_readers(buf, st, lin, who, ctx, loc)
    prev = w.reshape(-1)[lin]
    clash = (prev >= 0) & (prev != who)
    # two blocks of the same chunk writing one element
    order = np.argsort(lin, kind="stable")
    sl, sw = lin[order], who[order]
    dup = (sl[1:] == sl[:-1]) & (sw[1:] != sw[:-1])
    if clash.any() or dup.any():
        if clash.any():
            k = int(np.argmax(clash))
            a, b, el = int(prev[k]), int(who[k]), np.unravel_index(lin[k], st.shape)
        else:
            k = int(np.argmax(dup))
            a, b, el = int(sw[k]), int(sw[k + 1]), np.unravel_index(sl[k], st.shape)
        raise KernelRuntimeError(
            f"blocks {a} and {b} both write {buf.name}{tuple(int(x) for x in el)} without an atomic (a race)", loc,
            hint="give each block its own output tile, or use T.atomic_add for cross-block sums")
    w.reshape(-1)[lin] = who


_ATOMIC_CODE = {"add": 1, "max": 2, "min": 3}


def _raise_on_conflict(record, lin, who, buf, st, loc, verb, other_verb):
    """Raise the race error if an element at flat positions ``lin`` was touched (``record``: the block that
    did, -1 none, -2 several) by a block other than ``who``."""
    prev = record.reshape(-1)[lin]
    hit = (prev != -1) & (prev != who)
    if hit.any():
        k = int(np.argmax(hit))
        other = "several other blocks" if prev[k] == -2 else f"block {int(prev[k])}"
        el = tuple(int(x) for x in np.unravel_index(lin[k], st.shape))
        raise KernelRuntimeError(f"block {int(who[k])} {verb} {buf.name}{el}, which {other} {other_verb} in the same "
                                 "launch (a race: the value read depends on the order of the blocks)", loc,
                                 hint="read and write an element from one block only, or split the work into "
                                      "two kernel launches")


def _never_written(buf, ctx) -> bool:
    """Reads of a buffer no statement of the launch writes cannot race (not recorded)."""
    written = ctx.writers.get("written")
    return written is not None and buf.uid not in written and (buf.alias_of is None or buf.alias_of.uid not in written)


def _check_readers(buf, st, lin, who, ctx, loc):
    """A write by blocks ``who`` at flat positions ``lin``: raise if another block read one of them."""
    r = ctx.writers.get((buf.uid, "read"))
    if r is None:
        return
    _raise_on_conflict(r, lin, who, buf, st, loc, "writes", "read")


def note_read_elements(buf, st, idx, valid, ctx, loc):
    """``note_read`` for element indices ``idx`` (broadcastable to ``(nb, ...)``) where ``valid``/mask."""
    if _never_written(buf, ctx):
        return
    shape = np.broadcast_shapes(*[np.shape(i) for i in idx], (ctx.nb,) + (1,) * ctx.rank,
                                np.shape(valid) if isinstance(valid, np.ndarray) else (),
                                np.shape(ctx.mask) if isinstance(ctx.mask, np.ndarray) else ())
    m = np.ones(shape, dtype=bool)
    if valid is False or ctx.mask is False:
        return
    if isinstance(valid, np.ndarray):
        m &= np.broadcast_to(valid, shape)
    if isinstance(ctx.mask, np.ndarray):
        m &= np.broadcast_to(ctx.mask, shape)
    full = tuple(np.broadcast_to(np.asarray(i), shape)[m] for i in idx)
    who = _block_of_elements(ctx, shape)[m]
    note_read(buf, st, full, who, ctx, loc)


def written_roots(body) -> frozenset:
    """uids of the global buffers (and their alias roots) some statement of ``body`` writes: reads of
    any other buffer cannot race, and are not recorded."""
    out = set()
    for s in walk_stmts(body):
        for w in regions(s)[1]:
            buf = getattr(w, "buffer", w)
            if buf.scope == "global":
                out.add(buf.uid)
                if buf.alias_of is not None:
                    out.add(buf.alias_of.uid)
    return frozenset(out)


def note_read(buf, st, full, who, ctx, loc):
    """``races=True``: record that blocks ``who`` read global ``buf`` at ``full``; raise if another block
    wrote one of those elements in this launch (plain store, tile copy or atomic)."""
    if buf.scope != "global" or len(who) == 0:
        return
    if _never_written(buf, ctx):
        return
    lin = np.ravel_multi_index(full, st.shape)
    for key in (buf.uid, (buf.uid, "atomic")):
        w = ctx.writers.get(key)
        if w is None:
            continue
        _raise_on_conflict(w, lin, who, buf, st, loc, "reads", "wrote")
    r = ctx.writers.get((buf.uid, "read"))
    if r is None:
        r = ctx.writers[(buf.uid, "read")] = np.full(st.shape, -1, dtype=np.int64)
    flat = r.reshape(-1)
    prev = flat[lin]
    flat[lin] = np.where((prev == -1) | (prev == who), who, -2)
    order = np.argsort(lin, kind="stable")
    sl, sw = lin[order], who[order]
    dup = (sl[1:] == sl[:-1]) & (sw[1:] != sw[:-1])
    flat[sl[1:][dup]] = -2


def note_atomic(buf, st, full, who, kind, ctx, loc):
    """``races=True``: record atomic updates (kind ``kind``) of global ``buf`` at ``full`` by blocks ``who``;
    raise if another block wrote one of them with a plain store or an atomic of another kind."""
    if buf.scope != "global" or len(who) == 0:
        return
    lin = np.ravel_multi_index(full, st.shape)
    w = ctx.writers.get(buf.uid)
    if w is not None:
        prev = w.reshape(-1)[lin]
        hit = (prev >= 0) & (prev != who)
        if hit.any():
            k = int(np.argmax(hit))
            el = tuple(int(x) for x in np.unravel_index(lin[k], st.shape))
            raise KernelRuntimeError(f"block {int(who[k])} updates {buf.name}{el} with an atomic {kind}, but block "
                                     f"{int(prev[k])} wrote it with a plain store in the same launch (a race)", loc,
                                     hint="use atomics for every cross-block update of an element")
    _check_readers(buf, st, lin, who, ctx, loc)
    aw = ctx.writers.get((buf.uid, "atomic"))
    if aw is None:
        aw = ctx.writers[(buf.uid, "atomic")] = np.full(st.shape, -1, dtype=np.int64)
        ctx.writers[(buf.uid, "kind")] = np.zeros(st.shape, dtype=np.int8)
    ak = ctx.writers[(buf.uid, "kind")]
    code = _ATOMIC_CODE.get(kind, 4)
    pk = ak.reshape(-1)[lin]
    other = (pk != 0) & (pk != code)
    if other.any():
        k = int(np.argmax(other))
        el = tuple(int(x) for x in np.unravel_index(lin[k], st.shape))
        names = {v: n for n, v in _ATOMIC_CODE.items()}
        raise KernelRuntimeError(f"{buf.name}{el} is updated with atomic {names.get(int(pk[k]), '?')} and atomic {kind} "
                                 "by different blocks in the same launch (a race: the result depends on their order)", loc)
    flat, kinds = aw.reshape(-1), ak.reshape(-1)
    prev = flat[lin]
    flat[lin] = np.where((prev == -1) | (prev == who), who, -2)
    # several blocks of this chunk updating one element: mark it as shared
    order = np.argsort(lin, kind="stable")
    sl, sw = lin[order], who[order]
    dup = (sl[1:] == sl[:-1]) & (sw[1:] != sw[:-1])
    flat[sl[1:][dup]] = -2
    kinds[lin] = code


def _note_region_read(r, st, starts, exts, ctx):
    written = ctx.writers.get("written")
    buf = r.buffer
    if written is not None and buf.uid not in written and (buf.alias_of is None or buf.alias_of.uid not in written):
        return  # nobody writes it in this launch: its reads cannot race
    nb = ctx.nb
    grids = np.meshgrid(*[np.arange(e) for e in exts], indexing="ij")
    idx = [np.broadcast_to(np.asarray(s, dtype=np.int64).reshape((-1,) + (1,) * len(exts)) + g[None], (nb,) + exts)
           for s, g in zip(starts, grids)]
    m = np.ones((nb,) + exts, dtype=bool)
    for d, i in enumerate(idx):
        m &= (i >= 0) & (i < st.shape[d])
    bm = block_mask(ctx.mask, nb)
    if bm is not None:
        m &= bm.reshape((nb,) + (1,) * len(exts))
    who = np.broadcast_to(ctx.block_ids.reshape((nb,) + (1,) * len(exts)), m.shape)[m]
    note_read(r.buffer, st, tuple(i[m] for i in idx), who, ctx, r.loc)
