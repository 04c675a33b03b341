"""Per-thread (SIMT) code in the CUDA lowering: thread indices, barriers, atomics returning a value.

Contract
--------
* A launch with thread variables (``Launch.thread_vars``) is **per-thread**: the kernel's prologue binds
  each thread variable to ``(_tid // stride) % extent`` (:func:`thread_prologue`); element statements
  outside ``T.Parallel`` (stores, element atomics) run in every thread instead of only thread 0
  (:func:`per_thread`); tile operations and ``T.Parallel`` are lowered as at tile level.
* Barriers: ``T.sync_threads()`` is ``cuda.syncthreads()``. In a per-thread launch the automatic
  barriers of the barrier pass are kept only before statements at the top level of the launch body
  (never inside an ``if``/loop, where threads may diverge and a barrier would deadlock): the program's
  own ``T.sync_threads`` order the rest, as in TileLang with its thread-storage sync disabled. At tile
  level ``T.sync_threads()`` is emitted where it stands (all threads reach it together there).
* Refused with a ``KernelTypeError`` naming the construct: a named barrier
  (``T.sync_threads(barrier_id, arrive_count)`` with fewer threads than the block: Numba has no
  ``bar.sync id, count``), ``T.alloc_local`` arrays in per-thread launches (register fragments here are
  block-wide tiles; use ``T.alloc_var`` scalars), ``T.atomic_*(..., return_prev=True)`` outside
  per-thread code or on a register buffer, warp shuffles (``WarpShuffle``: the values they exchange live
  in per-thread arrays, refused above).
* ``AtomicFetch`` → ``cuda.atomic.add/max/min`` on shared or global memory, which returns the old value
  (global indices out of range skip the update and give 0); on a ``T.alloc_var`` it is a plain
  read-modify-write of the thread's own variable.
"""

from __future__ import annotations

from ... import dtypes as dt
from ...errors import KernelTypeError
from ...ir import nodes as N
from ...ir.traverse import walk_exprs, walk_stmts
from .codestr import _san
from .rules import (
    EVENT_RULES,
    EXPR_RULES,
    STMT_RULES,
    _expr_reads,
    _mem,
    from_storage,
    to_register,
    to_storage,
)


def per_thread(g) -> bool:
    """Whether the launch being generated holds per-thread code."""
    return bool(g.launch.thread_vars)


def prepare(g) -> None:
    """Name the thread variables and refuse what per-thread launches cannot lower."""
    if not per_thread(g):
        return
    for s in walk_stmts(g.launch.body):
        if type(s) is N.Alloc and s.buffer.scope == "local" and s.buffer.alias_of is None:
            raise KernelTypeError(f"T.alloc_local({s.buffer.name}) in per-thread code is not supported by the CUDA "
                                  "backend", s.loc, hint="use T.alloc_var scalars (one per value) or a shared "
                                                         "buffer indexed by the thread")
    _refuse_partial_tile_ops(g.launch)
    for v in g.launch.thread_vars:
        g.names[v.uid] = f"{_san(v.name)}_{v.uid}"


#: statements executed by the whole block at tile level (their work is split over all the block's threads)
_TILE_OPS = (N.Copy, N.Gemm, N.Reduce, N.Fill, N.Cumsum, N.Parallel)


def _refuse_partial_tile_ops(launch) -> None:
    """A tile operation under an ``if`` on the thread index runs in part of the block, but its lowering splits
    the work over every thread of the block: refuse it rather than compute part of the tile."""
    dep = {v.uid for v in launch.thread_vars}
    for s in walk_stmts(launch.body):  # Let names computed from thread indices depend on them too
        if type(s) is N.Let and any(type(e) is N.Var and e.uid in dep for e in walk_exprs(s.value)):
            dep.add(s.var.uid)
    for s in walk_stmts(launch.body):
        if type(s) is N.If and any(type(e) is N.Var and e.uid in dep for e in walk_exprs(s.cond)):
            for t in walk_stmts(s.then + s.orelse):
                if type(t) in _TILE_OPS or (type(t) is N.Atomic and isinstance(t.value, N.Region)):
                    raise KernelTypeError("a tile operation under an `if` on the thread index (executed by part of "
                                          "the block) is not supported by the CUDA backend", t.loc,
                                          hint="run the kernel on the interpreter (target='interp'), or move the "
                                               "tile operation out of the thread-dependent `if`")


def thread_prologue(g) -> list:
    """Prologue lines binding the thread variables."""
    out, stride = [], 1
    for v, ext in zip(g.launch.thread_vars, g.launch.threads):
        q = "_tid" if stride == 1 else f"(_tid // {stride})"
        out.append(f"{g.names[v.uid]} = {q} % {ext}" if stride * ext < g.nt else f"{g.names[v.uid]} = {q}")
        stride *= ext
    return out


def top_level_barriers(g) -> None:
    """In a per-thread launch, keep the automatic barriers of top-level statements only."""
    if per_thread(g):
        top = {id(s) for s in g.launch.body}
        g.barrier_before &= top


@STMT_RULES.register(N.SyncThreads)
def _sync_threads(g, s):
    if s.grid:
        raise KernelTypeError("T.sync_grid (a grid-wide barrier: a cooperative launch) is not supported by the CUDA "
                              "backend", s.loc, hint="split the kernel into two launches at the barrier, or run it on "
                                                     "the interpreter (target='interp')")
    if s.count is not None:
        raise KernelTypeError(f"T.sync_threads({s.barrier_id}, {s.count}) (a named barrier of {s.count} of the "
                              f"{g.nt} threads) is not supported by the CUDA backend", s.loc,
                              hint="use T.sync_threads() reached by every thread of the block")
    g.emit("cuda.syncthreads()")


@STMT_RULES.register(N.AtomicFetch)
def _atomic_fetch(g, s):
    buf, d = s.buffer, s.buffer.dtype
    name = g.bind_let(s.var)
    v = g.hoist(g.expr(s.value))
    w = g.where(buf)
    if w == "var":
        old = g.var_name(buf)
        g.emit(f"{name} = {g.load(buf, [])}")
        new = {"add": f"{name} + {v}", "max": f"max({name}, {v})", "min": f"min({name}, {v})"}[s.kind]
        g.emit(f"{old} = {to_register(new, d)}")
        return
    if not per_thread(g) or g.par is not None:
        raise KernelTypeError(f"T.atomic_{s.kind}(..., return_prev=True) outside per-thread code is not supported by "
                              "the CUDA backend", s.loc, hint="bind a thread index (T.get_thread_binding) and "
                                                              "write the update per thread")
    if w == "reg":
        raise KernelTypeError(f"T.atomic_{s.kind}(..., return_prev=True) on the register buffer {buf.name}", s.loc,
                              hint="atomics act on shared or global memory")
    if d in dt.NARROW_FLOATS or d == "bool":
        raise KernelTypeError(f"T.atomic_{s.kind}(..., return_prev=True) on a {d} buffer is not supported by the "
                              "CUDA backend", s.loc, hint="use a 32-bit buffer")
    idx = [g.hoist(g.expr(i)) for i in s.indices]
    arr = g.arr(buf)
    call = f"cuda.atomic.{s.kind}({arr}, {{lin}}, {to_storage(v, d)})"
    if w == "shared":
        g.emit(f"{name} = {from_storage(call.format(lin=g.lin(g.sstrides(buf), idx)), d)}")
        return
    dims, strides = g.gdims(buf)
    cond = " and ".join(f"{i} >= 0 and {i} < {n}" for i, n in zip(idx, dims)) or "True"
    lin = g.lin(strides, idx)
    zero = "0" if dt.is_int(d) else "0.0"
    g.emit(f"{name} = {from_storage(call.format(lin=lin), d)} if ({cond}) else {zero}")


@EVENT_RULES.register(N.SyncThreads)
def _ev_sync(g, s):
    return [("SYNC",)]


@EVENT_RULES.register(N.AtomicFetch)
def _ev_atomic_fetch(g, s):
    return _expr_reads(g, list(s.indices) + [s.value]) + _mem(g, s.buffer, "R") + _mem(g, s.buffer, "W")


@EXPR_RULES.register(N.WarpShuffle)
def _warp_shuffle(g, e):
    raise KernelTypeError("warp shuffles (T.shfl_*, T.tvm_warp_shuffle) are not lowered by the CUDA backend: "
                          "it refuses the per-thread T.alloc_local arrays they exchange", e.loc,
                          hint="run this kernel on the interpreter (target='interp')")
