"""Builders of warp-specialised code (``tilesim.language.ws``): ``with T.ws(...)`` and mbarriers.

Contract
--------
* ``with T.ws(*groups):`` (:func:`with_ws`, called by the tracer's ``with`` statement) emits
  :class:`~tilesim.ir.nodes.WarpSpec` holding its body. ``groups`` are distinct Python ints naming warp
  groups of the block (128 threads each; the last may be partial): a group past the block's threads, a
  ``T.ws`` inside another, inside ``T.Parallel`` or outside a launch is a located error. The threads of
  the groups (``threads`` of the node) are recorded for the barrier operations of the body.
* ``T.alloc_barrier(arrive_count)`` (an int or a list of positive ints) makes a buffer of scope
  ``"shared.barrier"`` (dtype ``uint64``, one element per barrier) and a hoisted ``MBarrier("init")``
  holding the counts; the buffer is only an operand of barrier operations.
* A barrier operand is the buffer (barrier 0) or ``b[i]`` with one integer index. ``T.barrier_arrive``,
  ``T.mbarrier_arrive``, ``T.mbarrier_arrive_expect_tx``, ``T.cp_async_barrier_noinc`` emit an arrival
  of the executing threads (``threads``: the enclosing ``T.ws`` groups' threads, else the block's);
  ``T.barrier_wait`` / ``T.mbarrier_wait_parity`` a wait on a parity (an integer expression).
  ``T.mbarrier_expect_tx`` checks its barrier and emits nothing (transfers complete at once);
  ``T.fence_proxy_async`` and ``T.wait_wgmma`` order nothing that program order does not and emit nothing.
  ``T.mbarrier_arrive(b, cta_id)`` (an arrival on another block of a cluster) is built by
  :mod:`.cluster`.
* Every error is a ``KernelError`` located at the call.
"""

from __future__ import annotations

from ..errors import KernelSyntaxError, KernelTypeError
from ..ir import nodes as N
from . import exprs as X
from .builders import builder

#: the scope of barrier arrays
BARRIER_SCOPE = "shared.barrier"
#: threads of a warp group (TileLang's ``T.ws``)
WARP_GROUP = 128


def _context(tr, loc, what):
    if not tr.in_launch():
        raise KernelSyntaxError(f"{what} outside `with T.Kernel(...)`", loc,
                                hint="barriers and warp groups exist inside a kernel launch")
    if tr.parallel_depth:
        raise KernelSyntaxError(f"{what} inside T.Parallel", loc,
                                hint="barriers are reached by threads, not by tile elements; put it between loops")


def _block_threads(tr) -> int:
    n = 1
    for t in tr.launch["threads"]:
        n *= t
    return n


def executing_threads(tr) -> int:
    """Threads that execute a statement here at tile level: the enclosing ``T.ws`` groups', else the block's."""
    ws = tr.launch.get("ws")
    return ws[1] if ws is not None else _block_threads(tr)


def with_ws(tr, node, call):
    """``with T.ws(*groups):`` — the tracer's ``with`` statement hands the call here."""
    loc = tr.loc(node)
    if node.items[0].optional_vars is not None:
        raise KernelSyntaxError("`with T.ws(...)` binds no name", loc, hint="write `with T.ws(1):`")
    args, kwargs = tr.call_args(call)
    if kwargs or not args:
        raise KernelTypeError("T.ws takes one or more warp-group indices: T.ws(0) or T.ws(0, 1)", loc)
    _context(tr, loc, "T.ws")
    if tr.launch.get("ws") is not None:
        raise KernelSyntaxError("T.ws inside another T.ws", loc, hint="name every group in one T.ws(0, 1)")
    nt = _block_threads(tr)
    ngroups = -(-nt // WARP_GROUP)
    for g in args:
        if isinstance(g, N.Const):
            g = g.value
        if not isinstance(g, int) or isinstance(g, bool):
            raise KernelTypeError(f"T.ws: warp-group indices are Python ints, got {g!r}", loc)
        if not 0 <= g < ngroups:
            raise KernelTypeError(f"T.ws({g}): the block has {nt} threads, warp groups 0..{ngroups - 1}", loc,
                                  hint=f"a warp group is {WARP_GROUP} threads; launch with threads="
                                       f"{WARP_GROUP * (g + 1)} or more to have group {g}")
    groups = tuple(sorted({a.value if isinstance(a, N.Const) else a for a in args}))
    threads = sum(min(WARP_GROUP, nt - WARP_GROUP * g) for g in groups)
    tr.launch["ws"] = (groups, threads)
    try:
        body = tr.sub_body(node.body)
    finally:
        tr.launch["ws"] = None
    tr.emit(N.WarpSpec(groups, threads, body, loc))


# ------------------------------------------------------------------------------------------ barriers
@builder("alloc_barrier")
def _b_alloc_barrier(tr, loc, arrive_count):
    _context(tr, loc, "T.alloc_barrier")
    counts = list(arrive_count) if isinstance(arrive_count, (list, tuple)) else [arrive_count]
    counts = [c.value if isinstance(c, N.Const) else c for c in counts]
    if not counts or not all(isinstance(c, int) and not isinstance(c, bool) and c > 0 for c in counts):
        raise KernelTypeError(f"T.alloc_barrier: arrive_count must be a positive Python int or a list of them, "
                              f"got {arrive_count!r}", loc, hint="T.alloc_barrier(128) or T.alloc_barrier([128] * 2)")
    buf = N.Buffer(tr.assign_name or "mbar", (len(counts),), "uint64", BARRIER_SCOPE, loc=loc)
    tr.launch["allocs"].append(N.MBarrier("init", buf, None, None, tuple(counts), 0, loc))
    return buf


def barrier_operand(v, loc, what):
    """``(buffer, index)`` of a barrier operand: a barrier array (barrier 0) or ``b[i]``."""
    if isinstance(v, N.Buffer) and v.scope == BARRIER_SCOPE:
        return v, N.Const(0, "int32", loc)
    if isinstance(v, X.Access) and v.buffer.scope == BARRIER_SCOPE:
        if len(v.items) != 1 or isinstance(v.items[0], slice):
            raise KernelTypeError(f"{what}: index the barrier array {v.buffer.name} with one integer, "
                                  f"e.g. {v.buffer.name}[i]", loc)
        return v.buffer, X.index_expr(v.items[0], loc)
    raise KernelTypeError(f"{what} takes a barrier made by T.alloc_barrier, got {_kind(v)}", loc,
                          hint="bars = T.alloc_barrier([128] * n); then pass bars[i]")


def _kind(v):
    if isinstance(v, N.Buffer):
        return f"the {v.scope} buffer {v.name}"
    if isinstance(v, X.Access):
        return f"an element of the {v.buffer.scope} buffer {v.buffer.name}"
    return f"a {type(v).__name__}"


def _arrive(tr, loc, what, mbarrier, op="arrive", cta=None):
    _context(tr, loc, what)
    buf, idx = barrier_operand(mbarrier, loc, what)
    tr.emit(N.MBarrier(op, buf, idx, None, (), executing_threads(tr), loc, cta=cta))


@builder("barrier_arrive")
def _b_barrier_arrive(tr, loc, mbarrier):
    _arrive(tr, loc, "T.barrier_arrive", mbarrier)


@builder("mbarrier_arrive_expect_tx")
def _b_mbarrier_arrive_expect_tx(tr, loc, mbarrier, tx):
    _arrive(tr, loc, "T.mbarrier_arrive_expect_tx", mbarrier)


@builder("cp_async_barrier_noinc")
def _b_cp_async_barrier_noinc(tr, loc, barrier):
    _arrive(tr, loc, "T.cp_async_barrier_noinc", barrier, op="cp_async_arrive")


@builder("mbarrier_expect_tx")
def _b_mbarrier_expect_tx(tr, loc, mbarrier, tx):
    _context(tr, loc, "T.mbarrier_expect_tx")
    barrier_operand(mbarrier, loc, "T.mbarrier_expect_tx")


def _wait(tr, loc, what, mbarrier, parity):
    _context(tr, loc, what)
    buf, idx = barrier_operand(mbarrier, loc, what)
    if isinstance(parity, bool):
        parity = int(parity)
    p = X.index_expr(parity, loc)
    tr.emit(N.MBarrier("wait", buf, idx, p, (), executing_threads(tr), loc))


@builder("barrier_wait")
def _b_barrier_wait(tr, loc, mbarrier, parity):
    _wait(tr, loc, "T.barrier_wait", mbarrier, parity)


@builder("mbarrier_wait_parity")
def _b_mbarrier_wait_parity(tr, loc, mbarrier, parity):
    _wait(tr, loc, "T.mbarrier_wait_parity", mbarrier, parity)


@builder("fence_proxy_async")
def _b_fence_proxy_async(tr, loc):
    _context(tr, loc, "T.fence_proxy_async")


@builder("wait_wgmma")
def _b_wait_wgmma(tr, loc, id):  # noqa: A002 - TileLang's name
    _context(tr, loc, "T.wait_wgmma")
    if not isinstance(id, int) or id < 0:
        raise KernelTypeError(f"T.wait_wgmma takes a non-negative Python int, got {id!r}", loc)


@builder("ws")
def _b_ws(tr, loc, warp_group_idx):
    raise KernelSyntaxError("T.ws is used as `with T.ws(0):`", loc,
                            hint="the statements of the with-body are executed by the named warp groups")
