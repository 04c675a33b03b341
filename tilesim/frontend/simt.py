"""Builders of the per-thread (SIMT) primitives (``tilesim.language.simt``) and of atomics that return the
previous value.

Contract
--------
* The thread indices of a launch are :class:`~tilesim.ir.nodes.Var` of kind ``"thread"``, made on first
  use and kept in the tracer's launch record (``tr.launch["thread_vars"]``, dim → Var); ``prims.launch``
  stores them in :attr:`Launch.thread_vars`. A dimension the launch does not have is the constant 0.
* ``T.thread_binding(start, stop, thread)`` must name ``threadIdx.x/y/z`` and span the launch's whole
  extent of that dimension (``start`` 0, ``stop`` = ``threads[d]``); anything else is a
  ``KernelTypeError`` saying what the launch has. The loop form binds the loop name to the index and
  visits the body once (no IR loop: every thread runs its own iteration).
* ``T.get_block_binding(dim)`` / ``T.get_block_bindings()`` are the launch's block indices (the constant 0
  past its grid dimensions).
* Warp/lane indices are arithmetic on the linear thread index ``t = tx + X * (ty + Y * tz)``.
* ``T.sync_threads(barrier_id, arrive_count)`` emits :class:`~tilesim.ir.nodes.SyncThreads` (only inside
  a launch, never inside ``T.Parallel``); ``arrive_count`` must be a positive Python int no larger than
  the block.
* ``T.atomic_<op>(dst_element, value, return_prev=True)`` emits
  :class:`~tilesim.ir.nodes.AtomicFetch` and evaluates to its variable (the value before the update).
* ``T.device_assert(cond, msg)`` emits :class:`~tilesim.ir.nodes.DeviceAssert` (a Python-valued ``cond`` is
  checked at trace time instead); ``T.assume(cond)`` (a promise to the compiler) is checked the same way.
* Every error is a ``KernelError`` located at the call.
"""

from __future__ import annotations

import ast

from ..errors import KernelSyntaxError, KernelTypeError
from ..ir import nodes as N
from . import exprs as X
from . import regions as R
from .builders import builder

_THREAD_AXES = {"threadIdx.x": 0, "threadIdx.y": 1, "threadIdx.z": 2}


def _in_launch(tr, loc, what):
    if not tr.in_launch():
        raise KernelSyntaxError(f"{what} outside `with T.Kernel(...)`", loc,
                                hint="thread indices and barriers exist inside a kernel launch")


def thread_index(tr, loc, dim: int):
    """The thread index of dimension ``dim`` of the current launch (the constant 0 past its dims)."""
    _in_launch(tr, loc, f"T.get_thread_binding({dim})")
    if not isinstance(dim, int) or not 0 <= dim <= 2:
        raise KernelTypeError(f"thread dimension must be 0, 1 or 2, got {dim!r}", loc)
    threads = tr.launch["threads"]
    if dim >= len(threads):
        return N.Const(0, "int32", loc)
    tv = tr.launch["thread_vars"]
    if dim not in tv:
        tv[dim] = N.Var("txyz"[dim] if dim else "tx", "int32", kind="thread", loc=loc)
    return tv[dim]


def launch_thread_vars(info: dict, loc) -> tuple:
    """The ``Launch.thread_vars`` of a traced launch: every dimension of ``threads`` once any is named."""
    tv = info.get("thread_vars") or {}
    if not tv:
        return ()
    return tuple(tv.get(d) or N.Var("txyz"[d] if d else "tx", "int32", kind="thread", loc=loc)
                 for d in range(len(info["threads"])))


def linear_thread(tr, loc):
    """``tx + X * (ty + Y * tz)`` for the current launch."""
    threads = tr.launch["threads"]
    t = thread_index(tr, loc, len(threads) - 1)
    for d in range(len(threads) - 2, -1, -1):
        t = X.binop("add", thread_index(tr, loc, d), X.binop("mul", threads[d], t, loc), loc)
    return t


@builder("get_thread_binding")
def _b_get_thread_binding(tr, loc, dim):
    return thread_index(tr, loc, dim)


@builder("get_block_binding")
def _b_get_block_binding(tr, loc, dim=0):
    _in_launch(tr, loc, f"T.get_block_binding({dim})")
    if not isinstance(dim, int) or not 0 <= dim <= 2:
        raise KernelTypeError(f"block dimension must be 0, 1 or 2, got {dim!r}", loc)
    bvars = tr.launch["block_vars"]
    return bvars[dim] if dim < len(bvars) else N.Const(0, "int32", loc)


@builder("get_block_bindings")
def _b_get_block_bindings(tr, loc):
    return tuple(_b_get_block_binding(tr, loc, d) for d in range(3))


@builder("get_thread_bindings")
def _b_get_thread_bindings(tr, loc):
    return tuple(thread_index(tr, loc, d) for d in range(3))


@builder("get_thread_extent")
def _b_get_thread_extent(tr, loc, dim):
    _in_launch(tr, loc, "T.get_thread_extent")
    threads = tr.launch["threads"]
    return threads[dim] if dim < len(threads) else 1


@builder("thread_binding")
def _b_thread_binding(tr, loc, start, stop=None, thread=None, annotations=None):
    if thread is None and isinstance(stop, str):  # T.thread_binding(extent, "threadIdx.x")
        start, stop, thread = 0, start, stop
    elif stop is None:
        start, stop = 0, start
    if thread not in _THREAD_AXES:
        raise KernelTypeError(f"T.thread_binding: thread must be one of {', '.join(_THREAD_AXES)}, got {thread!r}",
                              loc, hint="block indices come from `with T.Kernel(...) as (bx, by)`")
    _in_launch(tr, loc, "T.thread_binding")
    d = _THREAD_AXES[thread]
    threads = tr.launch["threads"]
    ext = threads[d] if d < len(threads) else 1
    if isinstance(start, N.Const):
        start = start.value
    if isinstance(stop, N.Const):
        stop = stop.value
    if start != 0 or stop != ext:
        raise KernelTypeError(
            f"T.thread_binding({start}, {stop}, {thread!r}) must span the launch's {thread} extent (0, {ext})", loc,
            hint=f"the launch has threads={threads if len(threads) > 1 else threads[0]}; bind the whole "
                 "dimension and guard the extra threads with an `if`")
    return thread_index(tr, loc, d)


def thread_binding_loop(tr, node, fn, args, kwargs):
    """``for tx in T.thread_binding(...):`` — binds the index and visits the body once."""
    loc = tr.loc(node)
    if not isinstance(node.target, ast.Name):
        raise KernelSyntaxError("a T.thread_binding loop binds one name", loc)
    try:
        tx = _b_thread_binding(tr, loc, *args, **kwargs)
    except TypeError as e:
        raise KernelTypeError(f"T.thread_binding: {e}", loc) from None
    tr.bind(node.target.id, tx, node.target)
    tr.visit_body(node.body)


def _warp_size(v, loc):
    if v is None:
        return 32
    if isinstance(v, N.Const):
        v = v.value
    if not isinstance(v, int) or v <= 0:
        raise KernelTypeError(f"warp_size must be a positive Python int, got {v!r}", loc)
    return v


@builder("get_lane_idx")
def _b_lane(tr, loc, warp_size):
    return X.binop("floormod", linear_thread(tr, loc), _warp_size(warp_size, loc), loc)


@builder("get_warp_idx", "get_warp_idx_sync")
def _b_warp(tr, loc, warp_size):
    return X.binop("floordiv", linear_thread(tr, loc), _warp_size(warp_size, loc), loc)


@builder("get_warp_group_idx")
def _b_warp_group(tr, loc, warp_size, warps_per_group):
    n = _warp_size(warp_size, loc) * _warp_size(4 if warps_per_group is None else warps_per_group, loc)
    return X.binop("floordiv", linear_thread(tr, loc), n, loc)


@builder("sync_threads")
def _b_sync_threads(tr, loc, barrier_id, arrive_count):
    _in_launch(tr, loc, "T.sync_threads")
    if tr.parallel_depth:
        raise KernelSyntaxError("T.sync_threads inside T.Parallel", loc,
                                hint="a barrier is reached by threads, not by tile elements; put it between loops")
    nt = 1
    for t in tr.launch["threads"]:
        nt *= t
    for name, v in (("barrier_id", barrier_id), ("arrive_count", arrive_count)):
        if v is not None and (not isinstance(v, int) or v < 0):
            raise KernelTypeError(f"T.sync_threads: {name} must be a non-negative Python int, got {v!r}", loc)
    if arrive_count is not None and not 0 < arrive_count <= nt:
        raise KernelTypeError(f"T.sync_threads: arrive_count {arrive_count} for a block of {nt} threads", loc)
    if barrier_id is not None and barrier_id > 15:
        raise KernelTypeError(f"T.sync_threads: barrier_id {barrier_id} (a block has 16 named barriers, 0-15)", loc)
    count = None if arrive_count is None or arrive_count == nt else arrive_count
    tr.emit(N.SyncThreads(barrier_id, count, loc=loc))


@builder("device_assert")
def _b_device_assert(tr, loc, cond, msg=""):
    _in_launch(tr, loc, "T.device_assert")
    if not X.is_ir(cond):
        if not cond:
            raise KernelTypeError(f"T.device_assert failed: {msg}", loc)
        return
    tr.emit(N.DeviceAssert(X.to_bool(cond, loc), str(msg), loc))


@builder("assume")
def _b_assume(tr, loc, cond):
    """``T.assume(cond)``: a promise to the compiler; the interpreter checks it as ``T.device_assert``."""
    _b_device_assert(tr, loc, cond, "T.assume: the assumed condition does not hold")


@builder("sync_warp")
def _b_sync_warp(tr, loc, mask):
    _in_launch(tr, loc, "T.sync_warp")


def atomic_fetch(tr, loc, kind, dst, value):
    """``T.atomic_<kind>(dst, value, return_prev=True)``: emits ``AtomicFetch``; returns its variable."""
    _in_launch(tr, loc, f"T.atomic_{kind}(..., return_prev=True)")
    d = R.operand(dst, loc, f"T.atomic_{kind} destination")
    if isinstance(d, N.Region):
        if any(e != 1 for e in d.extents):
            raise KernelTypeError(f"T.atomic_{kind}(..., return_prev=True) needs one element, got a region of "
                                  f"{d.buffer.name}", loc, hint="index a single element: dst[i, j]")
    if d.buffer.scope == "fragment":
        raise KernelTypeError(f"T.atomic_{kind}(..., return_prev=True) on the fragment {d.buffer.name}", loc,
                              hint="atomics act on shared or global memory (or a T.alloc_var)")
    if X.is_ir(value) and not isinstance(value, (N.Expr, X.Access)) or \
            isinstance(value, X.Access) and value.has_slice:
        raise KernelTypeError(f"T.atomic_{kind}(..., return_prev=True) takes a scalar value", loc)
    dtype = d.buffer.dtype
    v = X.cast_to(X.to_expr(value, loc, like=dtype), dtype, loc)
    idx = tuple(X.index_expr(s, loc) for s in d.starts) if d.buffer.scope != "var" else ()
    var = N.Var(tr.assign_name or "prev", dtype, kind="let", loc=loc)
    tr.emit(N.AtomicFetch(kind, d.buffer, idx, v, var, loc))
    return var

