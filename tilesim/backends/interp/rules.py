"""Statement rules of the interpreter: loops, branches, bindings and stores (``STMT_RULES``, the table of
:mod:`.tables`, complete once this module is imported), and :func:`run_body`, which runs a body through it.

Control flow that differs between blocks (or between elements inside ``T.Parallel``) runs under a
mask: both sides of a block-varying ``if`` run with complementary masks; a loop whose bounds differ
per block runs to the largest bound with the blocks past their own bound masked off; ``break`` and
``continue`` remove the current mask from the loop's live set. A ``while`` loop whose body only stores
to on-chip elements and whose iteration changes none of them can never end (nothing else runs while it
spins): a located ``KernelRuntimeError`` (a deadlock), not a hang.
"""

from __future__ import annotations

import numpy as np

from ...errors import KernelError, KernelRuntimeError
from ...ir import nodes as N
from . import coroutines, gemm_loop, memory, tile_copy, tile_gemm, tile_reduce
from .exprs import ev
from .state import Ctx, LoopFrame, mask_and, mask_as_set, mask_minus, none_active, set_or
from .tables import STMT_RULES

#: imported for their rules: the tile-op modules register ``Copy``/``Fill``/``Atomic``, ``Gemm``,
#: ``Reduce``/``Cumsum`` into :data:`STMT_RULES`
TILE_MODULES = (tile_copy, tile_gemm, tile_reduce)
rule = STMT_RULES.register
_RULES = STMT_RULES.rules  # the plain dict, for the hot path


def run_body(stmts, ctx: Ctx):
    rules = ctx.rules or _RULES
    for s in stmts:
        if ctx.mask is False:
            return
        try:
            fn = rules.get(type(s))
            if fn is None:
                raise STMT_RULES.error(s)
            fn(s, ctx)
        except KernelError as e:
            raise e.with_loc(getattr(s, "loc", None))  # noqa: B904 - the same exception, located
        except (FloatingPointError, IndexError, ValueError, TypeError) as e:
            if isinstance(e, KernelError):
                raise
            raise KernelRuntimeError(f"{type(e).__name__} while running this statement: {e}",
                                     getattr(s, "loc", None)) from e


def _refresh(ctx: Ctx, saved):
    """After a statement that may break/continue: drop the blocks that left."""
    if ctx.loops:
        f = ctx.loops[-1]
        ctx.mask = mask_minus(mask_minus(saved, f.broken), f.cont)
    else:
        ctx.mask = saved
    if ctx.mask is not None and ctx.mask is not False and none_active(ctx.mask):
        ctx.mask = False


@rule(N.Let)
def _let(s, ctx):
    v = ev(s.value, ctx)
    if isinstance(v, np.ndarray) and v.base is not None:
        v = v.copy()  # a load may be a view of the buffer: the name holds the value read now (`val = s[i]`)
    ctx.env[s.var.uid] = v


@rule(N.Store)
def _store(s, ctx):
    idx = [ev(i, ctx) for i in s.indices]
    memory.store(s, idx, ev(s.value, ctx), ctx)


@rule(N.Alloc)
def _alloc(s, ctx):
    memory.allocate_onchip(s, ctx, ev)


def run_group(s, ctx: Ctx) -> bool:
    """Run ``s`` as a warp-group run (``coroutines``) if it is planned as one; False if it is not."""
    members = ctx.runs.get(id(s))
    if members is None:
        return False
    if members:
        saved = ctx.mask
        coroutines.run(members, ctx, run_body)
        _refresh(ctx, saved)
    return True


@rule(N.If)
def _if(s, ctx):
    if ctx.runs and run_group(s, ctx):
        return
    c = ev(s.cond, ctx)
    saved = ctx.mask
    if not isinstance(c, np.ndarray) or c.ndim == 0:
        run_body(s.then if bool(c) else s.orelse, ctx)
        _refresh(ctx, saved)
        return
    ctx.mask = mask_and(saved, c)
    if not none_active(ctx.mask):
        run_body(s.then, ctx)
    if s.orelse:
        ctx.mask = mask_and(saved, np.logical_not(c))
        if not none_active(ctx.mask):
            run_body(s.orelse, ctx)
    _refresh(ctx, saved)


@rule(N.DeviceAssert)
def _device_assert(s, ctx):
    c = ev(s.cond, ctx)
    bad = np.logical_not(np.asarray(c, dtype=bool))
    if ctx.mask is not None:
        bad = np.logical_and(bad, ctx.mask)
    if bad.any():
        per_block = bad.reshape(bad.shape[0], -1).any(axis=1) if bad.ndim else np.ones(1, dtype=bool)
        b = int(np.argmax(per_block)) if per_block.shape[0] == len(ctx.block_ids) else 0
        block = int(ctx.block_ids[b])
        raise KernelRuntimeError(f"T.device_assert failed in block {block}: {s.message}", s.loc,
                                 hint="the program's own check on its data failed (a GPU would trap here)")


@rule(N.Event)
def _event(s, ctx):
    """An iket event changes no value (its payload is read only by the external IKET profiler on a GPU)."""
    return


@rule(N.Break)
def _break(s, ctx):
    f = ctx.loops[-1]
    f.broken = set_or(f.broken, mask_as_set(ctx.mask))
    ctx.mask = False


@rule(N.Continue)
def _continue(s, ctx):
    f = ctx.loops[-1]
    f.cont = set_or(f.cont, mask_as_set(ctx.mask))
    ctx.mask = False


def _as_bound(v):
    if isinstance(v, np.ndarray):
        if v.ndim == 0:
            return int(v)
        return v
    return int(v)


@rule(N.For)
def _for(s, ctx):
    plan = ctx.gemm_loops.get(id(s))
    if plan is not None and gemm_loop.run(plan, ctx):
        return
    start, stop = _as_bound(ev(s.start, ctx)), _as_bound(ev(s.stop, ctx))
    entry = ctx.mask
    frame = LoopFrame()
    ctx.loops.append(frame)
    try:
        if not isinstance(start, np.ndarray) and not isinstance(stop, np.ndarray):
            for k in range(start, stop, s.step):
                ctx.env[s.var.uid] = k
                frame.cont = False
                ctx.mask = mask_minus(entry, frame.broken)
                if ctx.mask is False or none_active(ctx.mask):
                    break
                run_body(s.body, ctx)
        else:
            active_set = entry
            lo = int(np.min(start)) if isinstance(start, np.ndarray) else start
            hi = int(np.max(stop)) if isinstance(stop, np.ndarray) else stop
            if s.step < 0:
                lo, hi = (int(np.max(start)) if isinstance(start, np.ndarray) else start,
                          int(np.min(stop)) if isinstance(stop, np.ndarray) else stop)
            for k in range(lo, hi, s.step):
                ctx.env[s.var.uid] = k
                frame.cont = False
                inr = (k >= start) & (k < stop) if s.step > 0 else (k <= start) & (k > stop)
                ctx.mask = mask_minus(mask_and(active_set, inr), frame.broken)
                if ctx.mask is False or none_active(ctx.mask):
                    continue
                run_body(s.body, ctx)
    finally:
        ctx.loops.pop()
        ctx.mask = entry


_SPIN: dict[int, tuple] = {}


def _spin_state(s: N.While):
    """The buffers a loop of only element stores to on-chip buffers writes (a spin-wait's state), else None."""
    hit = _SPIN.get(id(s))
    if hit is not None and hit[0] is s:
        return hit[1]
    ok = all(type(t) is N.Store and t.buffer.scope != "global" for t in s.body)
    out = tuple(sorted({t.buffer.uid for t in s.body})) if ok and s.body else None
    if len(_SPIN) > 512:
        _SPIN.clear()
    _SPIN[id(s)] = (s, out)
    return out


@rule(N.While)
def _while(s, ctx):
    entry = ctx.mask
    frame = LoopFrame()
    ctx.loops.append(frame)
    guard = 0
    spin = _spin_state(s)
    try:
        while True:
            frame.cont = False
            ctx.mask = mask_minus(entry, frame.broken)
            if ctx.mask is False or none_active(ctx.mask):
                break
            c = ev(s.cond, ctx)
            if isinstance(c, np.ndarray) and c.ndim > 0:
                ctx.mask = mask_and(ctx.mask, c)
                frame.broken = set_or(frame.broken, np.logical_not(c))
                if none_active(ctx.mask):
                    break
            elif not bool(c):
                break
            before = [np.array(ctx.storage[u]) for u in spin] if spin is not None else None
            run_body(s.body, ctx)
            if before is not None and all(np.array_equal(b, ctx.storage[u], equal_nan=b.dtype.kind in "fc")
                                          for b, u in zip(before, spin)):
                raise KernelRuntimeError(
                    "deadlock: this while loop makes no progress — an iteration changed nothing it reads, so it spins "
                    "forever (a spin-wait on a value that no block still to run writes: blocks run one after another "
                    "in launch order here, so a block can only wait for earlier blocks — and the blocks of one "
                    "cluster run in lock-step, so not for a block of its own cluster)", s.loc,
                    hint="publish the value from a block that comes earlier in launch order, or use barriers inside "
                         "a block")
            guard += 1
            if guard > 10_000_000:
                raise KernelRuntimeError("while loop ran 10,000,000 iterations", s.loc,
                                         hint="check the loop condition")
    finally:
        ctx.loops.pop()
        ctx.mask = entry


@rule(N.Parallel)
def _parallel(s, ctx):
    base = ctx.rank
    n = len(s.extents)
    new_rank = base + n
    saved_mask, saved_rank = ctx.mask, ctx.rank
    for d, (v, ext) in enumerate(zip(s.vars, s.extents)):
        shape = [1] * (1 + new_rank)
        shape[1 + base + d] = ext
        ctx.env[v.uid] = np.arange(ext, dtype=np.int64).reshape(shape)
        ctx.pvars[v.uid] = (base + d, ext)
    ctx.rank = new_rank
    if isinstance(saved_mask, np.ndarray):
        ctx.mask = saved_mask.reshape(saved_mask.shape + (1,) * (1 + new_rank - saved_mask.ndim))
    saved_loops = ctx.loops
    ctx.loops = [_lift_frame(f, new_rank) for f in ctx.loops]
    try:
        run_body(s.body, ctx)
    finally:
        for v in s.vars:
            ctx.pvars.pop(v.uid, None)
        ctx.rank = saved_rank
        ctx.mask = saved_mask
        ctx.loops = saved_loops


def _lift_frame(f, rank):
    g = LoopFrame()
    for k in ("broken", "cont"):
        v = getattr(f, k)
        if isinstance(v, np.ndarray):
            v = v.reshape(v.shape + (1,) * (1 + rank - v.ndim))
        setattr(g, k, v)
    return g
