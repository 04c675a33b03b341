"""Running a program on bound arguments: allocating memory, executing launches in block chunks.

Contract
--------
``run(pf, arrays, scalars, options)`` executes ``pf`` on NumPy arrays (one per buffer parameter, in
parameter order, already of the declared dtype and shape — ``tilesim.binding.bind_host`` checks and
converts them) and returns nothing: outputs are written in place.

A launch over ``G`` blocks runs in chunks of ``nb`` consecutive blocks, each with its own ``Ctx``
(``options.chunk_bytes`` bounds the on-chip memory of the chunks in flight; ``mode="serial"`` uses
``nb = 1``). Block ``b`` of a 3-D grid ``(gx, gy, gz)`` has indices ``(b % gx, b // gx % gy,
b // (gx*gy))``. With ``options.threads > 1`` (or auto) the chunks of a launch that is safe to run
concurrently run on several threads; results are bitwise those of a sequential run. ``chunks.py``
holds the chunk sizes, the safety rule and the scheduling.

A launch with thread variables runs its per-thread body (``simt.py``): values carry a thread axis.

A cluster launch (annotation ``("cluster", (cx, cy, cz))``, ``T.ClusterKernel``) runs its blocks cluster by
cluster: the chunks hold whole clusters (``ctx.cluster`` blocks each, in rank order, so row ``r`` of a
chunk has rank ``r % ctx.cluster``), and the blocks of a cluster run together — their warp groups are
the same concurrent tasks (``coroutines.py``), so barrier arrivals from one block to another
(``ws.py``) and the 2-CTA gemm (``tile_gemm.py``) see the other blocks' state. A grid extent that is not a
multiple of its cluster extent is a ``KernelRuntimeError``. A launch with cluster launch control
(``T.clc_try_cancel_multicast``) runs its chunks one after another, each starting the clusters that have
neither started nor been taken (``cluster.py``).

On-chip allocations without an initial value are deferred (``state.Storage``): the uninitialised
array is made when the buffer is first read, and never when the first access overwrites the whole
buffer. When a chunk ends, its on-chip arrays go to ``pool`` for reuse by later chunks and calls.
``progress(launch_index, blocks_done, blocks_total)`` is called after each chunk, in launch order,
on the calling thread.
"""

from __future__ import annotations

import numpy as np

from ... import dtypes as dt
from ...errors import KernelRuntimeError
from ...ir import nodes as N
from ...ir.traverse import walk_stmts
from . import checks, chunks, cluster, coroutines, gemm_loop, memory, shadow, simt
from . import pointers as _pointers  # noqa: F401 - registers the PtrTensor rule (T.make_tensor)
from . import ws as _ws  # noqa: F401 - registers the WarpSpec / MBarrier rules
from .exprs import ev
from .options import InterpOptions
from .rules import STMT_RULES, run_body
from .state import Ctx, Storage, new_array

__all__ = ["new_array", "run"]


def _onchip_bytes(stmts) -> int:
    total = 0
    for s in walk_stmts(stmts):
        if isinstance(s, N.Alloc) and s.buffer.scope != "global" and s.buffer.alias_of is None:
            n = 1
            for d in s.buffer.shape:
                n *= d
            total += n * max(4, dt.np_dtype(s.buffer.dtype).itemsize)
    return total


def _alias_roots(stmts):
    out = set()
    for s in walk_stmts(stmts):
        if isinstance(s, N.Alloc) and s.buffer.alias_of is not None:
            out.add(s.buffer.alias_of.uid)
            out.add(s.buffer.uid)
    return out


def run(pf: N.PrimFunc, arrays: dict, scalars: dict, options: InterpOptions, progress=None):
    """Execute ``pf``. ``arrays``: buffer uid → ndarray; ``scalars``: var uid → value (dyn dims, params).

    ``progress(launch_index, blocks_done, blocks_total)`` is called after each chunk of blocks.
    """
    env = dict(scalars)
    storage = dict(arrays)
    top = Ctx(1, options, env, storage, np.zeros(1, dtype=np.int64))
    if options.uninit == "check":
        top.shadow = shadow.start_run(arrays, options.fresh)
    n_launch = 0
    for s in pf.body:
        if isinstance(s, N.Launch):
            _launch(s, top, options, progress, n_launch)
            n_launch += 1
        else:
            STMT_RULES(s)(s, top)
    if top.shadow is not None:
        shadow.finish_run(pf, top.shadow, options.fresh)


def _cluster_order(s: N.Launch, grid):
    """``(order, cluster size)``: the linear block ids cluster by cluster (each cluster's blocks in rank order)
    and the blocks per cluster; ``(None, 1)`` for a launch without clusters."""
    dims = s.annotation("cluster")
    if not dims:
        return None, 1
    g = list(grid) + [1] * (3 - len(grid))
    for d in range(3):
        if g[d] % dims[d]:
            raise KernelRuntimeError(f"grid extent {g[d]} of dimension {d} is not a multiple of the cluster extent "
                                     f"{dims[d]} (cluster_dims {tuple(dims)})", s.loc,
                                     hint="launch a whole number of clusters: round the grid up to a multiple")
    n = [g[d] // dims[d] for d in range(3)]
    cz, cy, cx, rz, ry, rx = np.meshgrid(*(np.arange(k) for k in (n[2], n[1], n[0], dims[2], dims[1], dims[0])),
                                         indexing="ij")
    bx, by, bz = cx * dims[0] + rx, cy * dims[1] + ry, cz * dims[2] + rz
    return (bx + g[0] * (by + g[1] * bz)).reshape(-1).astype(np.int64), dims[0] * dims[1] * dims[2]


def _launch(s: N.Launch, top: Ctx, options: InterpOptions, progress=None, index=0):
    grid = []
    for g in s.grid:
        v = ev(g, top)
        if isinstance(v, np.ndarray):
            raise KernelRuntimeError("grid extent depends on a tensor value", s.loc)
        grid.append(int(v))
    if any(g < 0 for g in grid):
        raise KernelRuntimeError(f"negative grid extent {tuple(grid)}", s.loc)
    total = int(np.prod(grid)) if grid else 1
    if total == 0:
        return
    prep = simt.prepare(s) if s.thread_vars else None
    body = s.body if prep is None else prep.body
    per_block = max(1, _onchip_bytes(body)) * 3  # tiles plus temporaries of the same size
    if prep is not None:
        per_block += prep.nthreads * 256  # per-thread values are (blocks, threads) arrays
    rules = None if prep is None else simt.simt_rules()
    if top.shadow is not None:  # tile operations check and set the initialised mask
        rules = shadow.wrap(rules or STMT_RULES.rules, STMT_RULES.rules, (ev, memory.region_starts))
    order, unit = _cluster_order(s, grid)
    chunk, workers = chunks.plan(s, total, per_block, options, unit)
    launcher = cluster.Launcher(order, unit, grid, total) if cluster.uses_launch_control(body) else None
    gemm_plans = gemm_loop.plan_launch(s, grid, top.env) if prep is None else {}
    runs = coroutines.plan(body)
    writers: dict = {"written": checks.written_roots(s.body)} if options.races else {}  # the race record
    aliased = frozenset(_alias_roots(s.body))
    safe = dict(s.annotation("safe_value", ()))
    keep = aliased | set(top.storage)  # arrays the chunks do not own

    def run_chunk(start: int) -> int:
        stop = min(total, start + chunk)
        ids = np.arange(start, stop, dtype=np.int64) if order is None else order[start:stop]
        nb = len(ids)
        env = dict(top.env)
        rem = ids
        for v, g in zip(s.block_vars, grid):
            idx = rem % g
            rem = rem // g
            env[v.uid] = int(idx[0]) if nb == 1 else idx
        ctx = Ctx(nb, options, env, Storage(top.storage), ids)
        ctx.writers = writers
        ctx.aliased = aliased
        ctx.safe = safe
        ctx.gemm_loops = gemm_plans
        ctx.runs = runs
        if top.shadow is not None:
            ctx.shadow = shadow.chunk_shadow(top.shadow)  # global masks shared, on-chip ones per chunk
        ctx.rules = rules
        ctx.cluster = unit
        ctx.block_vars = frozenset(v.uid for v in s.block_vars)
        ctx.clc = launcher
        if prep is not None:
            simt.enter(ctx, prep, rules)
        run_body(body, ctx)
        ctx.storage.release(keep)  # only after success: a traceback may still show the buffers
        return stop

    done = None if progress is None else (lambda blocks_done: progress(index, blocks_done, total))
    if launcher is not None:  # cluster launch control: chunks start the clusters not yet started or taken
        while launcher.next < launcher.clusters:
            r = run_chunk(launcher.start(chunk // unit))
            if done is not None:
                done(r)
        return
    chunks.run_chunks(range(0, total, chunk), run_chunk, done, workers)
