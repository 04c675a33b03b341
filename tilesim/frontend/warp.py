"""Builders of the warp shuffles (``T.shfl_sync/xor/down/up``, ``T.tvm_warp_shuffle``): a
:class:`~tilesim.ir.nodes.WarpShuffle` expression; and the warp votes ``T.any_sync``/``T.all_sync``/
``T.ballot_sync`` (int32 non-zero if any / all lanes' predicate is non-zero; uint64 bit mask of the lanes),
built from xor shuffles, so every backend runs them with no node of their own.

Contract
--------
* A shuffle exchanges a value between the lanes of a warp, so it is per-thread code: it must be inside a
  launch and outside ``T.Parallel`` (``KernelSyntaxError``), and it makes the launch per-thread (as naming
  the thread index does).
* ``width`` must be a Python int, a power of two from 1 to 32; ``T.tvm_warp_shuffle``'s ``warp_size`` must
  be 32 (``KernelTypeError``). ``mask`` is accepted and not modelled (lock-step execution: every lane of the
  group takes part). The lane / delta argument is an integer value; the result has the value's dtype.
"""

from __future__ import annotations

from ..errors import KernelSyntaxError, KernelTypeError
from ..ir import nodes as N
from . import exprs as X
from .builders import builder
from .simt import linear_thread, thread_index

_NAMES = {"idx": "T.shfl_sync", "xor": "T.shfl_xor", "down": "T.shfl_down", "up": "T.shfl_up"}


def shuffle(tr, loc, kind: str, value, lane, width, what: str | None = None) -> N.WarpShuffle:
    what = what or _NAMES[kind]
    if not tr.in_launch() or tr.parallel_depth:
        raise KernelSyntaxError(f"{what} outside per-thread code", loc,
                                hint="shuffle in scalar statements of a launch, outside T.Parallel")
    if isinstance(width, bool) or not isinstance(width, int) or not 1 <= width <= 32 or width & (width - 1):
        raise KernelTypeError(f"{what}: width must be a power of two from 1 to 32 (a Python int), got {width!r}",
                              loc)
    thread_index(tr, loc, 0)  # the launch runs per thread
    v = X.to_expr(value, loc)
    lane_e = X.to_expr(lane, loc)
    if not lane_e.dtype.startswith(("int", "uint")):
        raise KernelTypeError(f"{what}: the lane argument must be an integer, got {lane_e.dtype}", loc)
    return N.WarpShuffle(kind, v, X.cast_to(lane_e, "int32", loc), width, v.dtype, loc)


@builder("shfl_sync")
def _b_shfl_sync(tr, loc, value, srcLane, width=32, mask=None):  # noqa: N803
    return shuffle(tr, loc, "idx", value, srcLane, width)


@builder("shfl_xor")
def _b_shfl_xor(tr, loc, value, delta, width=32, mask=None):
    return shuffle(tr, loc, "xor", value, delta, width)


@builder("shfl_down")
def _b_shfl_down(tr, loc, value, delta, width=32, mask=None):
    return shuffle(tr, loc, "down", value, delta, width)


@builder("shfl_up")
def _b_shfl_up(tr, loc, value, delta, width=32, mask=None):
    return shuffle(tr, loc, "up", value, delta, width)


@builder("tvm_warp_shuffle")
def _b_tvm_warp_shuffle(tr, loc, mask, value, src_lane, width, warp_size):
    if warp_size != 32:
        raise KernelTypeError(f"T.tvm_warp_shuffle: warp_size must be 32, got {warp_size!r}", loc)
    return shuffle(tr, loc, "idx", value, src_lane, width, "T.tvm_warp_shuffle")


# ------------------------------------------------------------------------------------------- warp votes
def vote(tr, loc, kind: str, predicate, what: str) -> N.Expr:
    """``any``/``all``/``ballot`` over the 32 lanes of each warp, built from five xor shuffles (a butterfly
    reduction: after it every lane holds the OR / AND of the warp's values). ``mask`` is not modelled."""
    p = X.to_expr(predicate, loc)
    if p.dtype != "bool" and not p.dtype.startswith(("int", "uint")):
        raise KernelTypeError(f"{what} requires an integer or boolean predicate, got {p.dtype}", loc,
                              hint="compare first, e.g. T.any_sync(x < 1.0)")
    bit = X.cast_to(X.compare("ne", p, 0, loc), "int32" if kind != "ballot" else "uint32", loc)
    if kind == "ballot":
        bit = X.binop("shl", bit, X.cast_to(X.binop("floormod", linear_thread(tr, loc), 32, loc), "uint32", loc), loc)
    op = "bitand" if kind == "all" else "bitor"
    v = bit
    for delta in (16, 8, 4, 2, 1):
        v = X.binop(op, v, shuffle(tr, loc, "xor", v, delta, 32, what), loc)
    return X.cast_to(v, "uint64", loc) if kind == "ballot" else v


@builder("any_sync")
def _b_any_sync(tr, loc, predicate, mask=None):
    return vote(tr, loc, "any", predicate, "T.any_sync")


@builder("all_sync")
def _b_all_sync(tr, loc, predicate, mask=None):
    return vote(tr, loc, "all", predicate, "T.all_sync")


@builder("ballot_sync")
def _b_ballot_sync(tr, loc, predicate, mask=None):
    return vote(tr, loc, "ballot", predicate, "T.ballot_sync")
