"""Builders of thread-block clusters (``tilesim.language.cluster``): cluster launches, cluster barriers, the
block's rank, remote arrivals, the checks of 2-CTA gemms, and cluster launch control.

Contract
--------
* :func:`launch_cluster` (called by ``prims.launch`` for ``T.Kernel``/``T.ClusterKernel``) normalises
  ``cluster_dims`` (an int ``n`` → ``(n, 1, 1)``, a list/tuple of 1-3 positive Python ints padded with 1s)
  and returns it, or ``None`` for no cluster or ``(1, 1, 1)``. A cluster extent past the grid's dimensions
  must be 1; a grid extent that is a Python int must be a multiple of its cluster extent (else a located
  ``KernelTypeError``; a symbolic extent is checked when the launch runs). The launch records it as the
  annotation ``("cluster", (cx, cy, cz))`` and in ``tr.launch["cluster"]``.
* ``T.block_rank_in_cluster()`` is the expression ``bx % cx + cx * (by % cy + cy * (bz % cz))`` of the
  launch's block indices (the constant 0 outside a cluster launch); only inside a launch.
* ``T.alloc_cluster_barrier(counts)`` is ``T.alloc_barrier(counts)``.
* :func:`remote_cta` checks the ``cta_id`` of ``T.mbarrier_arrive(b, cta_id)``: only in a cluster launch, an
  integer expression (a Python int must be below the cluster size).
* :func:`pair_check` checks ``use_2cta`` / ``arrive_2cta``: only in a launch whose clusters are 2 blocks.
* Cluster launch control: ``T.clc_try_cancel_multicast(result, mbar)`` emits
  :class:`~tilesim.ir.nodes.ClusterCancel` — ``result`` a region of 4 elements along the last axis of a
  shared ``uint32``/``int32`` buffer (``r`` or ``r[s, :]``), ``mbar`` a barrier operand; inside a launch,
  outside ``T.Parallel``. ``T.clc_is_canceled(result)`` / ``T.clc_get_first_ctaid_x(result)`` load word 0 /
  word 1 of the result. A launch without clusters is one of clusters of one block.
* ``T.atomic_load(X[i], memory_order)`` is a load of the global element, ``T.atomic_store(X[i], v,
  memory_order)`` a store (memory orders are checked by name; the interpreter is sequentially
  consistent). Either marks the launch ``("ordered_blocks", True)``: blocks that spin on a value another
  block publishes run one cluster (or block) at a time, in launch order (``backends/interp/chunks.py``).
* Every error is a ``KernelError`` located at the call.
"""

from __future__ import annotations

from ..errors import KernelSyntaxError, KernelTypeError
from ..ir import nodes as N
from . import exprs as X
from . import regions as R
from . import ws as W
from .builders import builder


def launch_cluster(dims, grid, loc):
    """``cluster_dims`` of a launch over ``grid`` (Python ints or IR), normalised; None for no cluster."""
    if dims is None:
        return None
    raw = dims
    if isinstance(dims, N.Const):
        dims = dims.value
    dims = list(dims) if isinstance(dims, (list, tuple)) else [dims]
    dims = [d.value if isinstance(d, N.Const) else d for d in dims]
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims):
        raise KernelTypeError(f"cluster_dims must be a positive Python int or 1 to 3 of them, got {raw!r}", loc,
                              hint="cluster_dims=2 (two blocks along x) or cluster_dims=(1, 2, 1)")
    dims = tuple(dims) + (1,) * (3 - len(dims))
    if dims == (1, 1, 1):
        return None
    for d, c in enumerate(dims):
        g = grid[d] if d < len(grid) else 1
        if isinstance(g, N.Const):
            g = g.value
        if d >= len(grid) and c != 1:
            raise KernelTypeError(f"cluster_dims {dims} groups blocks along grid dimension {d}, but the grid has "
                                  f"{len(grid)} dimension(s)", loc, hint="give the cluster extent 1 there")
        if isinstance(g, int) and g % c:
            raise KernelTypeError(f"grid extent {g} of dimension {d} is not a multiple of the cluster extent {c} "
                                  f"(cluster_dims {dims})", loc,
                                  hint="launch a whole number of clusters: round the grid up to a multiple")
    return dims


def _cluster(tr, loc, what):
    if not tr.in_launch():
        raise KernelSyntaxError(f"{what} outside `with T.ClusterKernel(...)`", loc,
                                hint="clusters exist inside a kernel launch")
    return tr.launch.get("cluster")


@builder("block_rank_in_cluster")
def _b_block_rank(tr, loc):
    dims = _cluster(tr, loc, "T.block_rank_in_cluster()")
    if dims is None:
        return X.const(0, "int32", loc)
    bvars = tr.launch["block_vars"]
    rank = 0
    for d in (2, 1, 0):
        if dims[d] == 1:
            part = 0
        else:
            part = X.binop("floormod", bvars[d], dims[d], loc)
        rank = X.binop("add", part, X.binop("mul", rank, dims[d], loc), loc)
    return rank if X.is_ir(rank) else X.const(rank, "int32", loc)


@builder("alloc_cluster_barrier")
def _b_alloc_cluster_barrier(tr, loc, arrive_count):
    return W._b_alloc_barrier(tr, loc, arrive_count)


def cluster_size(tr) -> int:
    dims = tr.launch.get("cluster") if tr.in_launch() else None
    return 1 if dims is None else dims[0] * dims[1] * dims[2]


def remote_cta(tr, loc, what, cta_id):
    """The ``cta_id`` operand of a remote arrival, as an integer expression."""
    n = cluster_size(tr)
    if n == 1:
        raise KernelTypeError(f"{what}(..., cta_id) arrives on another block of a cluster, but this launch has no "
                              "clusters", loc, hint="launch with T.ClusterKernel(..., cluster_dims=2), or drop cta_id")
    if isinstance(cta_id, N.Const):
        cta_id = cta_id.value
    if isinstance(cta_id, int) and not 0 <= cta_id < n:
        raise KernelTypeError(f"{what}: cta_id {cta_id} is not a block of the cluster (ranks 0..{n - 1})", loc)
    return X.index_expr(cta_id, loc)


@builder("mbarrier_arrive")
def _b_mbarrier_arrive(tr, loc, mbarrier, cta_id):
    """``T.mbarrier_arrive(b)``: as ``T.barrier_arrive``; with ``cta_id``, on ``b`` of that block of the cluster."""
    W._context(tr, loc, "T.mbarrier_arrive")
    cta = None if cta_id is None else remote_cta(tr, loc, "T.mbarrier_arrive", cta_id)
    W._arrive(tr, loc, "T.mbarrier_arrive", mbarrier, cta=cta)


def pair_check(tr, loc, what):
    """``use_2cta`` / ``arrive_2cta`` need a launch whose clusters are two blocks."""
    n = cluster_size(tr)
    if n != 2:
        raise KernelTypeError(f"{what} spreads the work over the two blocks of a cluster, but this launch has "
                              f"{'no clusters' if n == 1 else f'clusters of {n} blocks'}", loc,
                              hint="launch with T.ClusterKernel(..., cluster_dims=2) (or (1, 2, 1))")


# ------------------------------------------------------------------------------------------ launch control
def _result(tr, loc, what, result):
    """The region of a CLC result operand: 4 ``uint32`` words along the last axis of a shared buffer."""
    reg = R.operand(result, loc, what)
    if isinstance(reg, R.Corner):
        reg = R.complete(reg, (4,), loc, what)
    buf = reg.buffer
    if buf.scope not in ("shared", "shared.dyn") or buf.dtype not in ("uint32", "int32"):
        raise KernelTypeError(f"{what} takes 4 words of a shared uint32 buffer, got the {buf.scope} {buf.dtype} "
                              f"buffer {buf.name}", loc, hint="clc_result = T.alloc_shared((4,), 'uint32')")
    if reg.extents[-1] != 4 or any(e != 1 for e in reg.extents[:-1]):
        raise KernelTypeError(f"{what}: the result is 4 words along the last axis of {buf.name}, got a region of "
                              f"extents {tuple(reg.extents)}", loc, hint="pass clc_result or clc_result[s, :]")
    return reg


@builder("clc_try_cancel_multicast")
def _b_clc_try_cancel(tr, loc, result, mbar):
    W._context(tr, loc, "T.clc_try_cancel_multicast")
    reg = _result(tr, loc, "T.clc_try_cancel_multicast", result)
    buf, idx = W.barrier_operand(mbar, loc, "T.clc_try_cancel_multicast")
    tr.emit(N.ClusterCancel(reg, buf, idx, loc))


def _word(tr, loc, what, result, k):
    if not tr.in_launch():
        raise KernelSyntaxError(f"{what} outside a launch", loc, hint="it reads a result of this launch")
    reg = _result(tr, loc, what, result)
    idx = tuple(reg.starts[:-1]) + (X.binop("add", reg.starts[-1], k, loc),)
    return N.Load(reg.buffer, tuple(X.index_expr(i, loc) for i in idx), reg.buffer.dtype, loc)


@builder("clc_is_canceled")
def _b_clc_is_canceled(tr, loc, result):
    return _word(tr, loc, "T.clc_is_canceled", result, 0)


@builder("clc_get_first_ctaid_x")
def _b_clc_first_x(tr, loc, result):
    return _word(tr, loc, "T.clc_get_first_ctaid_x", result, 1)


# ------------------------------------------------------------------------------------------ atomic load/store
_LOAD_ORDERS = ("relaxed", "consume", "acquire", "seq_cst")
_STORE_ORDERS = ("relaxed", "release", "seq_cst")


def _element(tr, loc, what, v, order, orders):
    if not tr.in_launch():
        raise KernelSyntaxError(f"{what} outside a launch", loc, hint="atomics run inside `with T.Kernel(...)`")
    if order not in orders:
        raise KernelTypeError(f"{what}: memory_order must be one of {', '.join(orders)}, got {order!r}", loc)
    e = X.to_expr(v, loc) if isinstance(v, (X.Access, N.Buffer)) else None
    if not isinstance(e, N.Load) or e.buffer.scope != "global":
        raise KernelTypeError(f"{what} takes one element of a global tensor, e.g. Flag[i]", loc,
                              hint="blocks publish to each other through global memory")
    if ("ordered_blocks", True) not in tr.launch["annotations"]:
        tr.launch["annotations"].append(("ordered_blocks", True))
    return e


@builder("atomic_load")
def _b_atomic_load(tr, loc, src, memory_order):
    """``T.atomic_load(X[i])``: the element's value (every access is sequentially consistent here)."""
    return _element(tr, loc, "T.atomic_load", src, memory_order, _LOAD_ORDERS)


@builder("atomic_store")
def _b_atomic_store(tr, loc, dst, src, memory_order):
    """``T.atomic_store(X[i], v)``: a store of ``v`` into the element."""
    e = _element(tr, loc, "T.atomic_store", dst, memory_order, _STORE_ORDERS)
    tr.emit(N.Store(e.buffer, e.indices, X.cast_to(X.to_expr(src, loc, like=e.dtype), e.dtype, loc), loc))
