"""Fused execution of the canonical tiled-GEMM K loop: one product per group of blocks and loop.

Why: a 512³ fp32 GEMM with 64×64×32 tiles is, step by step, 16 × (64 small BLAS calls on one core and
two 64-block tile gathers) — about 4× ``numpy.matmul`` on the same arrays. The blocks of a grid row
share their A tiles and the blocks of a grid column their B tiles, and the K loop only accumulates, so
the whole loop of a whole grid is one ``(gy·bm × K) @ (K × gx·bn)`` product, which BLAS runs on every
core, reading the tensors in place when the tiles cover them.

Pattern (:func:`plan_launch`, static, cached per launch): a ``for``/``T.Pipelined`` loop directly in
the launch body whose body is exactly

    T.copy(A[...], A_s)        # whole on-chip buffer, from a global tensor
    T.copy(B[...], B_s)        # (in either order)
    T.gemm(A_s, B_s, C)        # C a register fragment (or tensor memory) of its compute dtype, clear_accum=False

optionally with ``if k == <loop start>: T.fill(C, 0)`` just before the gemm (``clear_accum=k == 0``: C is
set to the product instead of accumulating) and mbarrier commits/waits after it (``T.tcgen05_gemm(...,
mbar=b)`` + ``T.mbarrier_wait_parity(b, k % 2)``: they touch no data, so they are replayed step by step,
in order, after the product — the same phases, the same located errors), where ``A_s`` and ``B_s`` are named nowhere else in the launch (their contents are never observed),
each copy moves a 2-D tile of the same non-unit shape it lands in, and the copies' start expressions
and the loop bounds name only the loop variable, block variables (not the bounds) and values bound
before the launch. A block's *group* — the blocks one product serves — depends on the grid and tile
sizes only:

* ``grid``: every (bx, by) of one bz, when A's start does not name bx, B's does not name by, and the
  group's accumulator has at most ``GROUP_BYTES``;
* ``row``: every bx of one (by, bz), when A's start does not name bx and the row's accumulator fits;
* otherwise, or when the group's operands over K exceed ``OPERAND_BYTES``, the plain path runs.

Meaning: the plain path's up to summation order — every step's tiles are read with the copy's zero
fill (or ``T.annotate_safe_value``) and dtype conversion, converted to the accumulator dtype (TF32
rounding when asked), and ``C + sum over steps of op(A_k) @ op(B_k)`` is formed in C's dtype; BLAS sums
the whole K range in one call where the plain path adds each step's product to C. Determinism: a
block's values depend only on its group (one BLAS call of a fixed shape on fixed operands), never on
which blocks share its chunk, so batched, serial and threaded runs agree bit for bit (a chunk computes
its groups whole: in ``mode="serial"`` each block pays its group's product). The compiled CPU target uses the same plans and
products (:func:`launch_products`: every group's product before the blocks run; ``backends/cpu/codegen_gemm_loop.py``),
so its fused loops give these bits too. The plain path runs when
``InterpOptions.fuse_gemm_loops`` is False, ``oob="error"`` (so the failing access is reported) or
``races=True`` (so every block's reads are recorded) or ``uninit="check"`` (so every step's tiles are
marked initialised).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from ... import dtypes as dt
from ...ir import nodes as N
from ...ir.queries import buffer_refs, referenced_vars
from ...ir.traverse import loads_in, walk_stmts
from . import memory
from .exprs import ev
from .state import Ctx
from .tables import STMT_RULES

#: Largest group product (bytes of its accumulator) fused into one call.
GROUP_BYTES = 4 * 2**20
#: Largest pair of gathered operands (the group's A rows and B columns over the whole K range).
OPERAND_BYTES = 32 * 2**20


@dataclass(frozen=True)
class GemmLoopPlan:
    loop: N.For
    copy_a: N.Copy
    copy_b: N.Copy
    gemm: N.Gemm
    group: str  # "grid" or "row"
    grid: tuple  # (gx, gy, gz)
    tile_a: tuple  # op(A) tile (bm, bk)
    tile_b: tuple  # op(B) tile (bk, bn)
    block_vars: tuple  # uids of the launch's block variables (bx, by, bz order)
    clear: bool = False  # the body clears C at the first step (``if k == start: T.fill(C, 0)``)
    barriers: tuple = ()  # the mbarrier commits/waits after the gemm, replayed per step
    outer: tuple | None = None  # uids of the outer values the copies' starts name (with the steps and the group
    # they fix the windows); None: a start reads memory, the windows are found on every call
    memo: dict = field(default_factory=dict, compare=False, hash=False)  # where operands lie (``_operand``)


# ------------------------------------------------------------------------------------------- planning
def _whole(r: N.Region) -> bool:
    return (all(isinstance(s, N.Const) and s.value == 0 or s == 0 for s in r.starts)
            and tuple(r.extents) == tuple(r.buffer.shape))


def _static_tile(r: N.Region):
    shp = r.tile_shape()
    return tuple(shp) if all(isinstance(e, int) for e in shp) and len(shp) == 2 else None


def _refs_beside_alloc(body, uid) -> int:
    allocs = sum(1 for st in walk_stmts(body) if isinstance(st, N.Alloc) and st.buffer.uid == uid)
    return buffer_refs(body, uid) - allocs


def _first_step_clear(st, loop: N.For, g: N.Gemm) -> bool:
    """``st`` is ``if k == <loop start>: T.fill(C, 0)`` for the gemm's whole accumulator C."""
    return (isinstance(st, N.If) and not st.orelse and len(st.then) == 1 and isinstance(st.then[0], N.Fill)
            and isinstance(st.cond, N.Compare) and st.cond.op == "eq" and st.cond.a == loop.var
            and st.cond.b == loop.start and st.then[0].dst.buffer.uid == g.c.buffer.uid and _whole(st.then[0].dst)
            and isinstance(st.then[0].value, N.Const) and st.then[0].value.value == 0)


def _match(loop: N.For, launch: N.Launch, outer: set):
    body = list(loop.body)
    gemms = [st for st in body if isinstance(st, N.Gemm)]
    copies = [st for st in body if isinstance(st, N.Copy)]
    if len(gemms) != 1 or len(copies) != 2 or gemms[0].pair:  # a 2-CTA gemm runs step by step
        return None
    g = gemms[0]
    gi = body.index(g)
    barriers = tuple(st for st in body[gi + 1:] if isinstance(st, N.MBarrier) and st.op in ("commit", "wait"))
    clear = gi == 3 and _first_step_clear(body[2], loop, g)
    if gi != 2 + clear or len(body) != gi + 1 + len(barriers):
        return None
    by_dst = {c.dst.buffer.uid: c for c in copies}
    ca, cb = by_dst.get(g.a.buffer.uid), by_dst.get(g.b.buffer.uid)
    if ca is None or cb is None or ca is cb or {body.index(ca), body.index(cb)} != {0, 1}:
        return None
    c = g.c.buffer
    if (g.clear_accum or c.scope not in ("fragment", "local", "tmem") or c.alias_of is not None or not _whole(g.c)
            or not dt.is_float(c.dtype) or np.dtype(dt.np_dtype(c.dtype)) != dt.compute_dtype(c.dtype)):
        return None
    for cp, reg in ((ca, g.a), (cb, g.b)):
        buf = cp.dst.buffer
        if (cp.src.buffer.scope != "global" or buf.scope == "global" or buf.alias_of is not None
                or not _whole(cp.dst) or not _whole(reg) or _static_tile(cp.src) != _static_tile(cp.dst)
                or _static_tile(cp.dst) is None or _refs_beside_alloc(launch.body, buf.uid) != 2):
            return None
    allowed = outer | {loop.var.uid} | {v.uid for v in launch.block_vars}
    used_a = set(referenced_vars(ca.src.starts))
    used_b = set(referenced_vars(cb.src.starts))
    if not (used_a | used_b) <= allowed or not set(referenced_vars((loop.start, loop.stop))) <= outer:
        return None
    ta, tb = _static_tile(ca.dst), _static_tile(cb.dst)
    ta = ta[::-1] if g.trans_a else ta
    tb = tb[::-1] if g.trans_b else tb
    if ta[1] != tb[0] or _static_tile(g.c) != (ta[0], tb[1]):
        return None
    return ca, cb, g, used_a, used_b, ta, tb, clear, barriers


_LOCAL = threading.local()


def _scratch(name: str, shape: tuple, dtype) -> np.ndarray:
    """A per-thread work array reused across calls (fresh large allocations cost page faults); its
    contents never leave :func:`run`."""
    bufs = getattr(_LOCAL, "bufs", None)
    if bufs is None:
        bufs = _LOCAL.bufs = {}
    arr = bufs.get(name)
    if arr is None or arr.shape != shape or arr.dtype != dtype:
        arr = bufs[name] = np.empty(shape, dtype=dtype)
    return arr


_PLANS: dict = {}  # (id(launch), grid, outer vars) -> (launch, plans); the launch is kept so ids stay unique


def plan_launch(launch: N.Launch, grid: tuple, outer_env: dict) -> dict:
    """``{id(loop): GemmLoopPlan}`` for the launch's top-level loops that match the pattern (cached)."""
    key = (id(launch), tuple(grid), frozenset(outer_env))
    hit = _PLANS.get(key)
    if hit is not None and hit[0] is launch:
        return hit[1]
    if len(_PLANS) > 512:
        _PLANS.clear()
    plans = _plan(launch, grid, set(outer_env))
    _PLANS[key] = (launch, plans)
    return plans


def _plan(launch: N.Launch, grid: tuple, outer: set) -> dict:
    gx, gy, gz = (tuple(grid) + (1, 1, 1))[:3]
    bv = [v.uid for v in launch.block_vars]
    plans = {}
    for st in launch.body:
        if not isinstance(st, N.For):
            continue
        m = _match(st, launch, outer)
        if m is None:
            continue
        ca, cb, g, used_a, used_b, ta, tb, clear, barriers = m
        a_has_bx = len(bv) > 0 and bv[0] in used_a
        b_has_by = len(bv) > 1 and bv[1] in used_b
        if a_has_bx:
            continue
        acc = dt.compute_dtype(g.c.dtype).itemsize
        if not b_has_by and gy * ta[0] * gx * tb[1] * acc <= GROUP_BYTES:
            group = "grid"
        elif ta[0] * gx * tb[1] * acc <= GROUP_BYTES:
            group = "row"
        else:
            continue
        # the windows are a function of the steps, the group and these outer values unless a start reads memory
        names = None if any(loads_in(tuple(ca.src.starts) + tuple(cb.src.starts))) else tuple(sorted((used_a | used_b) & outer))
        plans[id(st)] = GemmLoopPlan(st, ca, cb, g, group, (gx, gy, gz), ta, tb, tuple(bv), clear, barriers, names)
    return plans


# ------------------------------------------------------------------------------------------- running
def _window_starts(cp: N.Copy, ctx: Ctx, env: dict, n: int) -> list:
    """Per dimension of the source tensor, the ``n`` windows' starts (int64 arrays)."""
    sub = Ctx(n, ctx.options, env, ctx.storage, np.zeros(n, dtype=np.int64))
    starts, _ = memory.region_starts(cp.src, sub, ev)
    return [np.broadcast_to(np.asarray(x, dtype=np.int64), (n,)) for x in starts]


def _slab_index(cp: N.Copy, trans: bool, st: np.ndarray, starts: list, nk: int, nw: int, k_axis: int):
    """Where the group's whole operand lies in the source tensor ``st`` as one slice — ``(index, dims)``
    — when its ``nk × nw`` windows ((k, window) order) tile a rectangle of it exactly and in bounds; else
    None. ``k_axis``: the op-form axis K runs along (1 for A, 0 for B)."""
    exts = [int(e) for e in cp.src.extents]
    dims = [d for d, e in enumerate(exts) if e != 1]
    if len(dims) != 2 or any(int(x.min()) != int(x.max()) for d, x in enumerate(starts) if d not in dims):
        return None
    # op-form axis of each tensor dim: the tile (t0, t1) is op-form transposed when ``trans``
    op_axis = {dims[0]: 1 if trans else 0, dims[1]: 0 if trans else 1}
    idx = [slice(int(x[0]), int(x[0]) + 1) if d not in dims else None for d, x in enumerate(starts)]
    for d in dims:
        x = starts[d].reshape(nk, nw)
        along_k = op_axis[d] == k_axis
        count = nk if along_k else nw
        step = np.arange(count, dtype=np.int64) * exts[d]
        want = (x[:, :1] - x[0, 0] == step[:, None]) if along_k else (x[:1, :] - x[0, 0] == step[None, :])
        same = (x == x[:, :1]) if along_k else (x == x[:1, :])
        if not (want.all() and same.all()):
            return None
        lo, hi = int(x[0, 0]), int(x[0, 0]) + count * exts[d]
        if lo < 0 or hi > st.shape[d]:
            return None
        idx[d] = slice(lo, hi)
    return tuple(idx), tuple(dims)


def _slab(cp: N.Copy, trans: bool, st: np.ndarray, where, acc, tf32: bool) -> np.ndarray:
    """The operand :func:`_slab_index` located, as the gemm reads it (conversion, TF32, op form)."""
    idx, dims = where
    m = st[idx]
    m = m.reshape([m.shape[d] for d in dims])
    m = dt.widen(dt.convert(m, cp.dst.buffer.dtype), acc)
    if tf32:
        m = dt.to_tf32(m)
    return m.T if trans else m


def _tiles(cp: N.Copy, trans: bool, ctx: Ctx, env: dict, n: int, acc, tf32: bool) -> np.ndarray:
    """The ``n`` tiles of copy ``cp`` whose block/loop variables ``env`` gives as length-``n`` arrays, as
    the gemm reads them: the copy's fill and dtype conversion, in ``acc``, transposed when ``trans``;
    shape ``(n, rows, cols)``."""
    st = ctx.storage[cp.src.buffer.uid]
    fill = ctx.safe.get(cp.src.buffer.uid, 0)
    exts = tuple(int(e) for e in cp.src.extents)
    tile = _static_tile(cp.dst)
    starts = _window_starts(cp, ctx, env, n)
    inside = all(e <= d for e, d in zip(exts, st.shape)) and all(
        int(x.min()) >= 0 and int(x.max()) + e <= d for x, e, d in zip(starts, exts, st.shape))
    if inside:  # one gather of all windows
        raw = memory.window_view(st, exts)[tuple(starts)].reshape((n,) + tile)
    else:
        raw = np.stack([memory._global_window_uniform(st, [int(x[i]) for x in starts], exts, fill).reshape(tile)
                        for i in range(n)])
    out = dt.widen(dt.convert(raw, cp.dst.buffer.dtype), acc)
    if tf32:
        out = dt.to_tf32(out)
    return out.swapaxes(1, 2) if trans else out


def _operand(cp: N.Copy, trans: bool, ctx: Ctx, env_of, nk: int, nw: int, k_axis: int, acc, tf32: bool,
             memo: dict, key):
    """A group's operand over K in op form — (nw·rows, nk·K tile) for A (``k_axis=1``), (nk·K tile,
    nw·cols) for B (``k_axis=0``): a slice of the tensor when the tiles cover a rectangle of it, else
    the tiles gathered ((k, window) order) into a scratch array. ``env_of()``: the windows' variables as
    length-``nk·nw`` arrays. ``memo[key]`` keeps where the slice is (or that there is none) for later
    calls with the same ``key`` (the values the windows depend on)."""
    n = nk * nw
    st = ctx.storage[cp.src.buffer.uid]
    key = None if key is None else key + (st.shape,)
    where = memo.get(key, False) if key is not None else False
    if where is False:
        where = _slab_index(cp, trans, st, _window_starts(cp, ctx, env_of(), n), nk, nw, k_axis)
        if key is not None:
            if len(memo) > 64:
                memo.clear()
            memo[key] = where
    if where is not None:
        return _slab(cp, trans, st, where, acc, tf32)
    t = _tiles(cp, trans, ctx, env_of(), n, acc, tf32)
    r, c = t.shape[1:]
    t = t.reshape(nk, nw, r, c)
    if k_axis == 1:  # rows of windows, K along the columns
        out = _scratch("a", (nw * r, nk * c), acc)
        out.reshape(nw, r, nk, c)[...] = t.transpose(1, 2, 0, 3)
    else:
        out = _scratch("b", (nk * r, nw * c), acc)
        out.reshape(nk, r, nw, c)[...] = t.transpose(0, 2, 1, 3)
    return out


def _steps(plan: GemmLoopPlan, ctx: Ctx):
    """The loop's steps as a range, or None when they cannot be fused (bounds vary per block, the
    options ask for the plain path, or the group's operands are too large)."""
    if (not ctx.options.fuse_gemm_loops or ctx.options.oob == "error" or ctx.options.races or ctx.mask is not None
            or ctx.shadow is not None):
        return None
    loop, g = plan.loop, plan.gemm
    start, stop = ev(loop.start, ctx), ev(loop.stop, ctx)
    if isinstance(start, np.ndarray) or isinstance(stop, np.ndarray):
        return None
    ks = range(int(start), int(stop), loop.step)
    na = plan.grid[1] if plan.group == "grid" else 1
    isz = dt.compute_dtype(g.c.dtype).itemsize
    if len(ks) * plan.tile_a[1] * (na * plan.tile_a[0] + plan.grid[0] * plan.tile_b[1]) * isz > OPERAND_BYTES:
        return None
    return ks


def _group_product(plan: GemmLoopPlan, ctx: Ctx, ks: range, z: int, rows, out: np.ndarray) -> np.ndarray:
    """One group's product over the whole K range into ``out`` ((na·bm, gx·bn), C's compute dtype):
    group ``z`` (the bz of its blocks) and ``rows`` (the by values it serves: all of them for a grid
    group, one for a row group)."""
    loop, g = plan.loop, plan.gemm
    gx = plan.grid[0]
    na = len(rows)
    tf32 = ctx.options.tf32 and g.a.dtype == "float32"
    nk = len(ks)

    def envs():  # the windows' loop and block variables, (k, window) order
        kk = np.asarray(ks, dtype=np.int64)
        env_a, env_b = dict(ctx.env), dict(ctx.env)
        env_a[loop.var.uid], env_b[loop.var.uid] = np.repeat(kk, na), np.repeat(kk, gx)
        for uid, va, vb in zip(plan.block_vars, (0, np.tile(rows, nk), z),
                               (np.tile(np.arange(gx), nk), int(rows[0]) if na == 1 else 0, z)):
            env_a[uid], env_b[uid] = va, vb
        return env_a, env_b
    outer = None if plan.outer is None else tuple(ctx.env.get(u) for u in plan.outer)
    key = (None if outer is None or any(isinstance(v, np.ndarray) for v in outer)
           else (ks.start, ks.stop, ks.step, z, tuple(int(r) for r in rows), outer))
    a_all = _operand(plan.copy_a, g.trans_a, ctx, lambda: envs()[0], nk, na, 1, out.dtype, tf32, plan.memo,
                     key and ("a",) + key)
    b_all = _operand(plan.copy_b, g.trans_b, ctx, lambda: envs()[1], nk, gx, 0, out.dtype, tf32, plan.memo,
                     key and ("b",) + key)
    return np.matmul(a_all, b_all, out=out)


#: Largest total of a launch's group products computed before its blocks run (:func:`launch_products`).
LAUNCH_BYTES = 256 * 2**20


def launch_products(plan: GemmLoopPlan, ctx: Ctx):
    """Every group's product of a launch, computed on the host before its blocks run (the compiled CPU
    target's form of the fusion): ``(P, (kz, ky, ry))`` where block (bx, by, bz) adds (or, with
    ``plan.clear``, stores) ``P[bz·kz + by·ky, (by·ry)·bm :+ bm, bx·bn :+ bn]`` to its C; or None when the
    plain path must run (the conditions of :func:`run`, an empty loop, or more than ``LAUNCH_BYTES``).
    ``ctx`` holds the launch's outer values and global tensors (no block variables). The products are
    :func:`run`'s, call for call, so both targets give the same bits."""
    ks = _steps(plan, ctx)
    if not ks:
        return None
    gx, gy, gz = plan.grid
    bm, bn = plan.tile_a[0], plan.tile_b[1]
    acc = dt.compute_dtype(plan.gemm.c.dtype)
    grid_group = plan.group == "grid"
    n_groups, na = (gz, gy) if grid_group else (gz * gy, 1)
    if n_groups * na * bm * gx * bn * acc.itemsize > LAUNCH_BYTES:
        return None
    # a per-thread array reused by later launches (fresh large allocations cost page faults): the blocks
    # of this launch read it before the launching thread starts another
    prods = _scratch("launch", (n_groups, na * bm, gx * bn), acc)
    for key in range(n_groups):
        z, rows = (key, np.arange(gy)) if grid_group else (key // gy, np.array([key % gy]))
        _group_product(plan, ctx, ks, z, rows, prods[key])
    return prods, ((1, 0, 1) if grid_group else (gy, 1, 0))


def run(plan: GemmLoopPlan, ctx: Ctx) -> bool:
    """Run the loop fused (see the module docstring); False: the caller runs the plain path."""
    ks = _steps(plan, ctx)
    if ks is None:
        return False
    if not len(ks):
        return True
    loop, g = plan.loop, plan.gemm
    gx, gy, _ = plan.grid
    bm, bn = plan.tile_a[0], plan.tile_b[1]
    na = gy if plan.group == "grid" else 1
    cst = ctx.storage[g.c.buffer.uid]
    acc_dt = cst.dtype
    ids = ctx.block_ids
    bx, by, bz = ids % gx, ids // gx % gy, ids // (gx * gy)
    keys = bz if plan.group == "grid" else bz * gy + by
    for key in np.unique(keys):
        members = np.nonzero(keys == key)[0]
        z = int(bz[members[0]])
        rows = np.arange(gy) if plan.group == "grid" else by[members[:1]]
        # the group's operands over the whole K range, then one product added to the members' C tiles
        prod = _group_product(plan, ctx, ks, z, rows, _scratch("p", (na * bm, gx * bn), acc_dt))
        tiles = prod.reshape(na, bm, gx, bn).transpose(0, 2, 1, 3)  # (row, column, bm, bn) view
        lo = int(members[0])
        whole = len(members) == na * gx and int(members[-1]) == lo + na * gx - 1  # the whole group, in order
        if whole and cst.flags.c_contiguous:  # (a reshape of a contiguous slice is a view)
            view = cst[lo:lo + na * gx].reshape(na, gx, bm, bn)
            if plan.clear:
                view[...] = tiles
            else:
                np.add(view, tiles, out=view)
        else:
            ra = by[members] if plan.group == "grid" else np.zeros(len(members), dtype=np.int64)
            part = tiles[ra, bx[members]]
            base = 0 if plan.clear else cst[members].reshape(part.shape)
            cst[members] = (base + part).reshape(cst[members].shape)
    for k in ks if plan.barriers else ():  # the steps' barrier operations, in order (data-independent)
        ctx.env[loop.var.uid] = k
        for st in plan.barriers:
            STMT_RULES(st)(st, ctx)
    ctx.env[loop.var.uid] = ks[-1]
    return True
