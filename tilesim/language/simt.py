"""Per-thread (SIMT) primitives: thread indices, warp and lane indices, block barriers.

Contract
--------
A launch whose body names a thread index (``T.get_thread_binding``, ``T.thread_binding``,
``T.get_warp_idx``, ...) holds **per-thread code**: every scalar statement of its body (stores, ``if``,
serial loops, element atomics, ``T.alloc_var`` / ``T.alloc_local`` variables) runs once per thread of
the block, each thread with its own variables; tile operations (``T.copy``, ``T.gemm``, ``T.fill``,
reductions) and ``T.Parallel`` loops stay block-level (the whole block executes them together), so
their operands must be the same for every thread. ``T.sync_threads()`` is the block barrier: shared
memory written before it by any thread is visible to every thread after it. A program in which two
threads of a block access the same shared element between two barriers, one of them writing without an
atomic, is racy and its result undefined (the interpreter runs the threads in lock-step between
barriers, one legal schedule). ``docs/language.md`` ("Per-thread code") gives the full semantics.

``threads=(x, y, z)`` blocks number their threads ``t = tx + x * (ty + y * tz)`` (x fastest); warps are
groups of 32 consecutive ``t``.
"""

from __future__ import annotations

from ._marker import marker


@marker()
def get_thread_binding(dim=0):
    """``tx = T.get_thread_binding()``: this thread's index along dimension ``dim`` of the block's
    ``threads`` (0 for a dimension the launch does not have)."""


@marker()
def get_block_binding(dim=0):
    """``bx = T.get_block_binding()``: this block's index along grid dimension ``dim`` (0 past the grid's
    dimensions)."""


@marker()
def get_block_bindings():
    """``bx, by, bz = T.get_block_bindings()``."""


@marker()
def get_thread_bindings():
    """``tx, ty, tz = T.get_thread_bindings()``: the thread indices of all three dimensions."""


@marker()
def thread_binding(start, stop=None, thread=None, *, annotations=None):
    """``tx = T.thread_binding(0, threads, thread="threadIdx.x")`` (or the loop form
    ``for tx in T.thread_binding(threads, "threadIdx.x"):``): the thread index of one block dimension;
    the range must be the launch's whole extent of that dimension."""


@marker()
def get_thread_extent(dim=0):
    """The launch's number of threads along ``dim`` (a Python int)."""


@marker()
def get_lane_idx(warp_size=None):
    """This thread's lane in its warp: ``t % warp_size`` (``warp_size`` defaults to 32)."""


@marker()
def get_warp_idx(warp_size=None):
    """This thread's warp in the block: ``t // warp_size`` (``warp_size`` defaults to 32)."""


@marker()
def get_warp_idx_sync(warp_size=None):
    """As :func:`get_warp_idx` (the warp is converged in lock-step execution)."""


@marker()
def get_warp_group_idx(warp_size=None, warps_per_group=None):
    """This thread's warp group: ``t // (warp_size * warps_per_group)`` (defaults 32 and 4)."""


@marker()
def sync_threads(barrier_id=None, arrive_count=None):
    """``T.sync_threads()``: block barrier (``__syncthreads``); with ``barrier_id`` and ``arrive_count``
    a named barrier that ``arrive_count`` threads reach (``bar.sync id, count``). Every thread that
    takes part must reach it (a barrier some threads of the block skip is a deadlock on a GPU and an
    error here)."""


@marker()
def sync_warp(mask=None):
    """Warp barrier; in lock-step execution there is nothing to wait for (accepted, no effect)."""


@marker()
def shfl_sync(value, srcLane, width=32, mask=0xFFFFFFFF):  # noqa: N803
    """``__shfl_sync``: ``value`` as lane ``srcLane % width`` of this thread's group of ``width`` lanes has it.
    Per-thread code only; ``width`` a power of two up to 32 (a Python int); ``mask`` is accepted (lock-step
    execution: every lane of the group takes part)."""


@marker()
def shfl_xor(value, delta, width=32, mask=0xFFFFFFFF):
    """``__shfl_xor_sync``: ``value`` of lane ``lane ^ delta`` (own value if that lane is past the group)."""


@marker()
def any_sync(predicate, mask=0xFFFFFFFF):
    """``__any_sync``: non-zero (int32) if the predicate of any lane of this thread's warp is non-zero."""


@marker()
def all_sync(predicate, mask=0xFFFFFFFF):
    """``__all_sync``: non-zero (int32) only if the predicate of every lane of this thread's warp is non-zero."""


@marker()
def ballot_sync(predicate, mask=0xFFFFFFFF):
    """``__ballot_sync``: a uint64 whose bit ``l`` is set when lane ``l``'s predicate is non-zero."""


@marker()
def shfl_down(value, delta, width=32, mask=0xFFFFFFFF):
    """``__shfl_down_sync``: ``value`` of lane ``lane + delta`` (own value past the group's end)."""


@marker()
def shfl_up(value, delta, width=32, mask=0xFFFFFFFF):
    """``__shfl_up_sync``: ``value`` of lane ``lane - delta`` (own value before the group's start)."""


@marker()
def tvm_warp_shuffle(mask, value, src_lane, width, warp_size):
    """TVM's ``tvm_warp_shuffle(mask, value, src_lane, width, warp_size)``: :func:`shfl_sync` with ``width``
    (``warp_size`` must be 32)."""
