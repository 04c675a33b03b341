"""Builders of the warp shuffles (``T.shfl_sync/xor/down/up``, ``T.tvm_warp_shuffle``): a
:class:`~tilesim.ir.nodes.WarpShuffle` expression.

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
from .simt import thread_index

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
