"""Per-thread (SIMT) code in the interpreter: a launch with thread variables runs with a thread axis.

Contract
--------
A launch whose ``thread_vars`` are not empty (``T.get_thread_binding`` and friends) runs its body at
rank 1: value axis 1 is the **thread axis** (length ``T = prod(threads)``; linear thread ``t = tx + X *
(ty + Y * tz)``), so a value that depends on the thread is an array ``(nb, T)`` and control flow that
differs between threads runs under ``(nb, T)`` masks, exactly as ``T.Parallel`` elements do
(``rules.py``). Every statement is executed for all threads of a block in program order: lock-step
execution, one legal schedule of a race-free program, in which shared-memory writes are visible at once
(so certainly after the next barrier). A program where two threads of a block touch the same shared
element between two barriers, one writing without an atomic, is racy: its result is undefined (the
interpreter gives the lock-step one; it does not detect such races).
Warp groups that wait on mbarriers in divergent code (``if tx < 128: ... else: ...``) run as concurrent
tasks instead (``coroutines.py``): each side in lock-step for its threads, switched at blocking waits.

:func:`prepare` rewrites the launch body once (cached per launch):

* per-thread storage: every ``T.alloc_local`` / ``T.alloc_var`` buffer ``b`` of shape ``S`` becomes a
  block-level ``local`` buffer of shape ``(T, *S)`` indexed by the linear thread ``t`` first (a var's
  initial value becomes a store); ``T.view`` of such a buffer is refused;
* block-level statements (``T.copy``, ``T.gemm``, reductions, ``T.cumsum``, ``T.fill``, region
  ``T.atomic_*``, ``T.Parallel``, 2-CTA instructions ``PairIssue``) run as at tile level (rank 0) through :func:`_block_level`: their
  operands must be the same in every thread of a block — a direct use of a thread index is refused when
  the launch is prepared; a per-thread value (a ``Let`` or a per-thread variable) is checked at run time
  and must agree across the active threads; the threads of a block must all execute the statement or
  none, or whole warps of 32 threads (TileLang's ``T.ws`` is an ``if`` on the thread index that selects warp
  groups, and programs give tile operations to single warps; tile-level meaning does not depend on which
  threads execute an operation) — a tile operation executed by part of a warp is an error naming it. ``T.fill``
  of a per-thread buffer fills every thread's copy; a ``T.copy`` from or to a per-thread buffer is each thread's
  own element loop (TileLang's per-thread copy: its regions may use the thread index); other tile operations
  on per-thread buffers are refused.

Rules added here: ``SyncThreads`` (a barrier: in a per-thread launch the active threads of each block
must be all of them, or ``count`` for a named barrier — otherwise the GPU would deadlock and this raises
``KernelRuntimeError``; at tile level it has nothing to do), ``AtomicFetch`` (updates applied in block,
then thread, order — each thread sees the value the earlier ones left; integer adds vectorised, other
kinds per address); the expression rule ``WarpShuffle`` gathers the value along the thread axis (lanes of
a group of ``width`` threads; a source outside the group reads the thread's own value; a source lane
that is inactive under the current mask gives the value it would have computed — undefined on a GPU).
A shuffle outside per-thread code or inside ``T.Parallel`` is a ``KernelRuntimeError``. Errors are located
``KernelError`` subclasses.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ... import dtypes as dt
from ...errors import KernelRuntimeError, KernelTypeError
from ...ir import nodes as N
from ...ir.traverse import binds, map_expr, map_exprs_in, map_stmts, regions, regions_of, walk, walk_stmts
from . import checks, memory, shadow
from .exprs import ev
from .state import Ctx
from .tables import EXPR_RULES, STMT_RULES

rule = STMT_RULES.register

#: a tile operation may be executed by whole warps of a block (TileLang's ``T.ws`` selects warp groups of 4
#: warps; programs also give tile operations to single warps: ``if tx < 32:`` with a 96-thread block)
WARP = 32
#: statements a whole block executes together (their operands must agree across threads)
BLOCK_LEVEL = (N.Copy, N.Gemm, N.Reduce, N.Fill, N.Cumsum, N.Atomic, N.Parallel, N.PairIssue)
_NAMES = {N.Copy: "T.copy", N.Gemm: "T.gemm", N.Reduce: "T.reduce", N.Fill: "T.fill", N.Cumsum: "T.cumsum",
          N.Atomic: "T.atomic", N.Parallel: "T.Parallel", N.PairIssue: "a 2-CTA (use_2cta=True) instruction"}


@dataclasses.dataclass
class Prepared:
    """A per-thread launch, rewritten (see the module docstring)."""

    body: tuple
    nthreads: int
    tid: N.Var  # the linear thread index
    coords: tuple  # (thread var, stride, extent) per dimension
    block: dict  # id(block-level stmt) -> (name, hoists ((Var, Expr), ...), used var uids)
    thread_uids: frozenset


_PREPARED: dict[int, tuple] = {}


def prepare(launch: N.Launch) -> Prepared:
    hit = _PREPARED.get(id(launch))
    if hit is not None and hit[0] is launch:
        return hit[1]
    p = _prepare(launch)
    _PREPARED[id(launch)] = (launch, p)
    return p


def _region_index(r: N.Region, k: N.Expr) -> tuple:
    """Indices of element ``k`` (row-major over the extents) of region ``r``."""
    idx, stride = [], 1
    for start, ext in reversed(list(zip(r.starts, r.extents))):
        q = k if stride == 1 else N.Binary("floordiv", k, N.Const(stride, "int32"), "int32")
        e = N.Binary("floormod", q, N.Const(int(ext), "int32"), "int32")
        idx.append(N.Binary("add", start, e, "int32") if not (type(start) is N.Const and start.value == 0) else e)
        stride *= int(ext)
    return tuple(reversed(idx))


def _copy_elements(s: N.Copy) -> N.For:
    """A ``T.copy`` from or to a per-thread buffer as the thread's own element loop (same element pairing)."""
    if not all(isinstance(e, int) for e in s.src.extents + s.dst.extents):
        raise KernelTypeError("T.copy of a per-thread buffer with a symbolic extent", s.loc,
                              hint="copy a fixed number of elements per thread")
    n = 1
    for e in s.dst.extents:
        n *= e
    k = N.Var("copy_k", "int32", kind="loop", loc=s.loc)
    value = N.Load(s.src.buffer, _region_index(s.src, k), s.src.buffer.dtype, s.loc)
    if s.src.buffer.dtype != s.dst.buffer.dtype:
        value = N.Cast(value, s.dst.buffer.dtype, s.loc)
    store = N.Store(s.dst.buffer, _region_index(s.dst, k), value, s.loc)
    return N.For(k, N.Const(0, "int32"), N.Const(n, "int32"), 1, "serial", (store,), loc=s.loc)


def _is_block_level(s) -> bool:
    return type(s) in BLOCK_LEVEL and not (type(s) is N.Atomic and not isinstance(s.value, N.Region))


def _prepare(launch: N.Launch) -> Prepared:
    nt = launch.num_threads
    tid = N.Var("t", "int32", kind="thread", loc=launch.loc)
    coords, stride = [], 1
    for v, ext in zip(launch.thread_vars, launch.threads):
        coords.append((v, stride, ext))
        stride *= ext
    thread_uids = frozenset([tid.uid] + [v.uid for v in launch.thread_vars])
    per: dict[int, N.Buffer] = {}
    tile_level = _tile_level_buffers(launch.body)
    for s in walk_stmts(launch.body):
        if type(s) is N.Alloc:
            b = s.buffer
            if b.alias_of is not None and b.alias_of.uid in per:
                raise KernelTypeError(f"T.view of the per-thread buffer {b.alias_of.name}", s.loc,
                                      hint="in per-thread code, view shared buffers only")
            thread_fragment = b.scope == "fragment" and b.uid not in tile_level
            if (b.scope in ("local", "var") or thread_fragment) and b.alias_of is None:
                per[b.uid] = N.Buffer(b.name, (nt,) + tuple(b.shape), b.dtype, "local", loc=b.loc)
    mine = {b.uid for b in per.values()} | set(per)  # per-thread buffers, before and after the rewrite

    def rx(e):
        if type(e) is N.Load and e.buffer.uid in per:
            return N.Load(per[e.buffer.uid], (tid,) + tuple(e.indices), e.dtype, e.loc)
        return e

    block: dict = {}

    def element(s):
        t = type(s)
        s = map_exprs_in(s, rx) if t not in (N.For, N.While, N.If) else _own_exprs(s, rx)
        if t is N.Alloc and s.buffer.uid in per:
            nb = per[s.buffer.uid]
            if s.init is None:
                return N.Alloc(nb, None, s.loc)
            return [N.Alloc(nb, None, s.loc), N.Store(nb, (tid,), map_expr(s.init, rx), s.loc)]
        if t is N.Store and s.buffer.uid in per:
            return N.Store(per[s.buffer.uid], (tid,) + tuple(s.indices), s.value, s.loc)
        if t is N.AtomicFetch and s.buffer.uid in per:
            return dataclasses.replace(s, buffer=per[s.buffer.uid], indices=(tid,) + tuple(s.indices))
        if t is N.Atomic and s.dst.buffer.uid in per:
            d = s.dst
            return dataclasses.replace(s, dst=N.Region(per[d.buffer.uid], (tid,) + tuple(d.starts),
                                                       (1,) + tuple(d.extents), d.loc))
        return s

    def fn(s):
        if type(s) is N.Copy and (s.src.buffer.uid in per or s.dst.buffer.uid in per):
            return map_stmts([_copy_elements(s)], element)[0]  # each thread copies its own elements
        if not _is_block_level(s):
            return element(s)
        name = _NAMES[type(s)]
        checked = list(regions_of(s))
        if type(s) is N.Fill and s.dst.buffer.uid in per:  # every thread's copy: allowed (see the module doc)
            d = s.dst
            s = dataclasses.replace(s, dst=N.Region(per[d.buffer.uid], (N.Const(0, "int32"),) + tuple(d.starts),
                                                    (nt,) + tuple(d.extents), d.loc))
            checked = [x for x in checked if x is not d]
        for x in checked + [w for st in walk_stmts(_bodies(s)) for w in regions(st)[1]]:
            buf = x.buffer if isinstance(x, N.Region) else x
            if buf.uid in mine:
                raise KernelTypeError(f"{name} on the per-thread buffer {buf.name} in per-thread code", s.loc,
                                      hint="read and write per-thread buffers element by element, or use a "
                                           "shared buffer for data the block works on together")
        inner = {v.uid for st in [s, *walk_stmts(_bodies(s))] for v in binds(st) if isinstance(v, N.Var)}
        hoists = []

        def hoist(e):
            if type(e) is N.Load and e.buffer.uid in mine:
                used = {x.uid for x in walk(e.indices) if type(x) is N.Var}
                if used & inner:
                    raise KernelTypeError(f"{name} reads the per-thread buffer {e.buffer.name} at an index that "
                                          "depends on its own loop variables", e.loc,
                                          hint="copy the value into a shared buffer first")
                h = N.Var(e.buffer.name, e.dtype, kind="let", loc=e.loc)
                hoists.append((h, rx(e)))
                return h
            return e

        s = map_exprs_in(s, hoist)
        used = {x.uid for x in walk(s) if type(x) is N.Var} - inner
        for x in walk(s):
            if type(x) is N.Var and x.uid in thread_uids:
                raise KernelTypeError(f"{name} depends on the thread index {x.name}", x.loc or s.loc,
                                      hint="tile operations are executed by the whole block; index per-thread "
                                           "work with element statements (stores, loads, atomics) instead")
        block[id(s)] = (name, tuple(hoists), frozenset(used))
        return s

    body = map_stmts(launch.body, fn)
    return Prepared(body, nt, tid, tuple(coords), block, thread_uids)


def _tile_level_buffers(body) -> set:
    """Buffers a tile operation or a ``T.Parallel`` touches. A ``T.alloc_fragment`` touched by neither is read
    and written only element by element in per-thread code: registers of each thread (TileLang replicates such
    a fragment in every thread), so :func:`_prepare` gives it a thread axis like ``T.alloc_local``."""
    out: set = set()
    for s in walk_stmts(body):
        if type(s) in BLOCK_LEVEL:
            for x in walk(s):
                if isinstance(x, N.Buffer):
                    out.add(x.uid)
                elif isinstance(x, (N.Region, N.Load)):
                    out.add(x.buffer.uid)
            for st in walk_stmts(_bodies(s)):
                if type(st) is N.Store:
                    out.add(st.buffer.uid)
    return out


def _bodies(s):
    return s.body if type(s) is N.Parallel else ()


def _own_exprs(s, fn):
    """``s`` with its own expressions (not those of its bodies, already mapped) mapped."""
    stripped = dataclasses.replace(s, **{n: () for n in ("body", "then", "orelse") if hasattr(s, n)})
    mapped = map_exprs_in(stripped, fn)
    if mapped is stripped:
        return s
    return dataclasses.replace(mapped, **{n: getattr(s, n) for n in ("body", "then", "orelse") if hasattr(s, n)})


# ------------------------------------------------------------------------------------------ running
def enter(ctx: Ctx, p: Prepared, rules: dict) -> None:
    """Set up ``ctx`` (a chunk of blocks) for the per-thread body ``p.body``."""
    t = np.arange(p.nthreads, dtype=np.int64).reshape(1, p.nthreads)
    ctx.env[p.tid.uid] = t
    for v, stride, ext in p.coords:
        ctx.env[v.uid] = (t // stride) % ext
    ctx.rank = 1
    ctx.simt = p
    ctx.rules = rules


def _block_mask(ctx, name, loc):
    m = ctx.mask
    if m is None or m is False:
        return m
    m = np.asarray(m)
    if m.ndim < 2 or m.shape[1] == 1:
        return m.reshape(m.shape[0], -1)[:, 0] if m.ndim else bool(m)
    anyb = m.any(axis=1)
    bad = anyb != m.all(axis=1)
    if bad.any():  # whole warps may execute it (an `if` on the thread index selecting warps or warp groups)
        t = m.shape[1]
        g = np.zeros((m.shape[0], -(-t // WARP) * WARP), dtype=bool)
        g[:, :t] = m
        g = g.reshape(m.shape[0], -1, WARP)
        tail = t % WARP
        if tail:  # the last group is partial: its missing threads follow its first thread
            g[:, -1, tail:] = g[:, -1, :1]
        bad = (g.any(axis=2) != g.all(axis=2)).any(axis=1)
    if bad.any():
        b = int(np.argmax(bad))
        raise KernelRuntimeError(f"{name} is executed by {int(m[b].sum())} of the {m.shape[1]} threads of block "
                                 f"{int(ctx.block_ids[b]) if m.shape[0] == ctx.nb else b}", loc,
                                 hint="tile operations are executed by the whole block (or whole warps of "
                                      "32 threads): move it out of the thread-dependent `if` / loop")
    return anyb if m.shape[0] == ctx.nb else np.broadcast_to(anyb, (ctx.nb,))


def _collapse(v, mask, what, loc, nb):
    """A rank-1 value ``(nb|1, T|1)`` as a block-level one, checked equal across the active threads."""
    if not isinstance(v, np.ndarray) or v.ndim != 2:
        return v
    if v.shape[1] != 1:
        m = np.ones(v.shape, dtype=bool) if mask is None or mask is False else np.broadcast_to(mask, v.shape)
        first = np.argmax(np.broadcast_to(m, v.shape), axis=1)
        ref = v[np.arange(v.shape[0]), first]
        if (m & (v != ref[:, None])).any():
            raise KernelRuntimeError(f"{what} differs between the threads of a block", loc,
                                     hint="operands of tile operations must be the same for every thread")
        v = ref[:, None]
    if v.shape[0] == 1:
        x = v[0, 0]
        return int(x) if v.dtype.kind in "iu" else (bool(x) if v.dtype == bool else x)
    return v[:, 0]


def _block_level(s, ctx: Ctx):
    name, hoists, used = ctx.simt.block[id(s)]
    saved = (ctx.env, ctx.rank, ctx.mask, ctx.rules, ctx.loops)
    mask = ctx.mask
    bm = _block_mask(ctx, name, s.loc)
    env = dict(ctx.env)
    for h, e in hoists:
        env[h.uid] = ev(e, ctx)
    for uid in used:
        v = env.get(uid)
        if isinstance(v, np.ndarray) and v.ndim == 2:
            env[uid] = _collapse(v, mask, f"an operand of {name}", s.loc, ctx.nb)
    ctx.env, ctx.rank, ctx.mask, ctx.rules, ctx.loops = env, 0, bm, None, []
    try:
        if ctx.shadow is None:
            STMT_RULES.rules[type(s)](s, ctx)
        else:  # the initialised-mask checks of the tile operation
            shadow.tile_op(STMT_RULES.rules[type(s)], s, ctx, (ev, memory.region_starts))
    finally:
        ctx.env, ctx.rank, ctx.mask, ctx.rules, ctx.loops = saved


def _maybe_block_level(s, ctx: Ctx):
    if id(s) in ctx.simt.block:
        return _block_level(s, ctx)
    if ctx.shadow is None:
        return STMT_RULES.rules[type(s)](s, ctx)
    return shadow.tile_op(STMT_RULES.rules[type(s)], s, ctx, (ev, memory.region_starts))


def simt_rules() -> dict:
    """The statement rules of a per-thread launch: block-level classes go through :func:`_block_level`."""
    rules = dict(STMT_RULES.rules)
    for cls in BLOCK_LEVEL:
        rules[cls] = _maybe_block_level
    return rules


# ------------------------------------------------------------------------------------------ rules
@rule(N.SyncThreads)
def _sync_threads(s: N.SyncThreads, ctx: Ctx):
    if s.grid and ctx.options.races:
        checks.new_phase(ctx)  # a grid barrier orders every access before it against every one after it
    if ctx.simt is None or ctx.rules is None:
        return  # tile level: one logical thread per block, nothing to wait for
    want = ctx.simt.nthreads if s.count is None else s.count
    m = ctx.mask
    if m is False:
        return
    if m is None:
        arrived = np.full(ctx.nb, ctx.simt.nthreads)
    else:
        m = np.broadcast_to(np.asarray(m).reshape(np.shape(m)[0], -1), (np.shape(m)[0], ctx.simt.nthreads))
        arrived = np.broadcast_to(m.sum(axis=1), (ctx.nb,))
    bad = (arrived != 0) & (arrived != want)
    if bad.any():
        b = int(np.argmax(bad))
        what = "T.sync_threads()" if s.count is None else f"T.sync_threads({s.barrier_id}, {s.count})"
        raise KernelRuntimeError(f"{what} is reached by {int(arrived[b])} threads of block {int(ctx.block_ids[b])}, "
                                 f"but {want} must arrive (a deadlock on the GPU)", s.loc,
                                 hint="every thread that takes part must reach the barrier: move it out of the "
                                      "thread-dependent `if` / loop, or give the named barrier the right count")


@rule(N.AtomicFetch)
def _atomic_fetch(s: N.AtomicFetch, ctx: Ctx):
    buf = s.buffer
    st = ctx.storage[buf.uid]
    idx = [ev(i, ctx) for i in s.indices]
    v = ev(s.value, ctx)
    mshape = np.shape(ctx.mask) if isinstance(ctx.mask, np.ndarray) else ()
    shape = np.broadcast_shapes(*[np.shape(i) for i in idx], np.shape(v), (ctx.nb,) + (1,) * ctx.rank, mshape)
    full = [np.broadcast_to(np.asarray(i, dtype=np.int64), shape) for i in idx]
    if buf.scope != "global":
        full = [np.broadcast_to(np.arange(ctx.nb).reshape((-1,) + (1,) * ctx.rank), shape)] + full
    valid = np.ones(shape, dtype=bool)
    for d, i in enumerate(full):
        valid &= (i >= 0) & (i < st.shape[d])
    m = valid if ctx.mask is None else valid & np.broadcast_to(ctx.mask, shape)
    if buf.scope != "global" and ctx.mask is not False:
        act = np.ones(shape, dtype=bool) if ctx.mask is None else np.broadcast_to(ctx.mask, shape)
        if (act & ~valid).any():
            raise memory._oob_error(buf, s.loc, "atomic")
    cd = dt.compute_dtype(buf.dtype) if dt.is_float(buf.dtype) else np.dtype(np.int64)
    prev = np.zeros(shape, dtype=cd)
    if m.any() and ctx.options.races:
        who = np.broadcast_to(ctx.block_ids.reshape((-1,) + (1,) * (len(shape) - 1)), shape)[m]
        checks.note_atomic(buf, st, tuple(i[m] for i in full), who, s.kind, ctx, s.loc)
    if m.any():
        lin = np.ravel_multi_index(tuple(i[m] for i in full), st.shape)
        vals = np.broadcast_to(np.asarray(v, dtype=cd), shape)[m]
        prev[m] = _fetch(st.reshape(-1), lin, vals, s.kind, buf.dtype, cd)
    ctx.env[s.var.uid] = prev.reshape(-1)[0].item() if prev.size == 1 and cd.kind == "i" else \
        (prev.reshape(-1)[0] if prev.size == 1 else prev)


_OPS = {"add": np.add, "max": np.maximum, "min": np.minimum}


def _fetch(flat, lin, vals, kind, dtype, cd):
    """Apply updates ``vals`` at flat positions ``lin`` in order; return the value each one saw."""
    out = np.empty(len(lin), dtype=cd)
    order = np.argsort(lin, kind="stable")
    sl, sv = lin[order], vals[order]
    starts = np.flatnonzero(np.r_[True, sl[1:] != sl[:-1]])
    cur = memory.to_compute(flat[sl[starts]], dtype).astype(cd)
    if kind == "add" and cd.kind == "i":
        cs = np.cumsum(sv)
        excl = cs - sv
        seg = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(sl)]))
        seen = cur[seg] + excl - excl[starts][seg]
        out[order] = seen
        last = np.r_[starts[1:], len(sl)] - 1
        flat[sl[starts]] = (seen[last] + sv[last]).astype(flat.dtype)  # wraps like the hardware
        return out
    op = _OPS[kind]
    bounds = np.r_[starts, len(sl)]
    seen = np.empty(len(sl), dtype=cd)
    for g in range(len(starts)):
        a, b = bounds[g], bounds[g + 1]
        acc = cur[g]
        for k in range(a, b):
            seen[k] = acc
            acc = op(acc, sv[k])
            if dtype in dt.NARROW_FLOATS:
                acc = np.float32(dt.round_to(np.asarray(acc, dtype=np.float32), dtype))
        flat[sl[a]] = dt.convert(np.asarray(acc), dtype) if dt.is_float(dtype) else np.asarray(acc).astype(flat.dtype)
    out[order] = seen
    return out


@EXPR_RULES.register(N.WarpShuffle)
def _warp_shuffle(e, ctx: Ctx):
    if ctx.simt is None or ctx.rank != 1:
        raise KernelRuntimeError("a warp shuffle runs in per-thread code, outside T.Parallel", e.loc,
                                 hint="name the thread index (tx = T.get_thread_binding()) and shuffle in "
                                      "scalar statements")
    nt = ctx.simt.nthreads
    value = np.broadcast_to(np.asarray(ev(e.value, ctx)), (ctx.nb, nt))
    arg = np.broadcast_to(np.asarray(ev(e.lane, ctx), dtype=np.int64), (ctx.nb, nt))
    t = np.arange(nt, dtype=np.int64)
    wl = t % 32  # lane in the warp
    lane = wl % e.width  # lane in the group
    if e.kind == "idx":
        src = arg % e.width
    elif e.kind == "xor":
        src = lane ^ arg
    elif e.kind == "down":
        src = lane + arg
    else:
        src = lane - arg
    src = np.where((src >= 0) & (src < e.width), src, lane)
    src_t = np.minimum(t - lane + src, nt - 1)
    return np.take_along_axis(value, src_t, axis=1)
