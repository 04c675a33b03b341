"""Warp-specialised code: ``T.ws`` warp-group bodies and mbarriers (Hopper producer/consumer programs).

Contract
--------
``with T.ws(*groups):`` holds statements executed by the threads of warp groups ``groups`` (group ``g`` is
threads ``128 g .. 128 g + 127`` of the block, as TileLang's ``T.ws``). ``T.alloc_barrier(arrive_count)``
allocates an array of mbarriers (one for an int, ``len(list)`` for a list), each with its own arrival count.
A barrier has a current phase (0 at first); when as many threads as its count have arrived, the phase
completes and the next begins. ``T.barrier_wait(b, parity)`` waits until the phase of parity ``parity``
has completed: waiting on parity 1 before any phase completed returns at once (PTX ``try_wait.parity``).

tilesim runs a block's warp groups **concurrently** (``backends/interp/coroutines.py``: the groups' bodies
are tasks switched when a wait blocks, in a deterministic order) and tracks every barrier's phase exactly.
``T.tma_copy(src, dst, barrier=b)`` completes its transfer at once and does not arrive (TileLang issues
``expect_tx``; the arrivals are the program's own ``T.barrier_arrive``). When every group waits (a
deadlock on the GPU) that is a ``KernelRuntimeError`` naming the barriers, never a hang or a wrong answer. ``docs/language.md`` ("Warp-specialised code") has the full semantics.
"""

from __future__ import annotations

from ._marker import marker


@marker()
def ws(*warp_group_idx):
    """``with T.ws(1):``: the body is executed by warp group 1 (threads 128-255); ``T.ws(0, 1)`` by both."""


@marker()
def alloc_barrier(arrive_count):
    """``b = T.alloc_barrier(128)`` (one mbarrier) or ``T.alloc_barrier([128, 128])`` (an array, indexed
    ``b[i]``): each barrier's phase completes when ``arrive_count`` threads have arrived."""


@marker()
def barrier_arrive(mbarrier):
    """Every executing thread arrives once at the barrier (``mbarrier.arrive``)."""


@marker()
def mbarrier_arrive(mbarrier, cta_id=None):
    """As :func:`barrier_arrive` (``cta_id``, a peer CTA of a cluster, is not supported)."""


@marker()
def barrier_wait(mbarrier, parity):
    """Wait until the barrier's phase of parity ``parity`` (0 or 1) has completed."""


@marker()
def mbarrier_wait_parity(mbarrier, parity):
    """As :func:`barrier_wait`."""


@marker()
def mbarrier_expect_tx(mbarrier, tx):
    """Expect ``tx`` bytes of asynchronous transfers on the barrier; transfers complete at once here, so it
    has no effect on phases (the barrier is checked)."""


@marker()
def mbarrier_arrive_expect_tx(mbarrier, tx):
    """Arrive and expect ``tx`` bytes: as :func:`barrier_arrive` (transfers complete at once)."""


@marker()
def cp_async_barrier_noinc(barrier):
    """``cp.async.mbarrier.arrive.noinc``: each executing thread arrives once when its earlier
    ``cp.async`` copies complete (at once here)."""


@marker()
def fence_proxy_async():
    """Order shared-memory writes before later asynchronous-proxy reads; program order already does."""


@marker()
def wait_wgmma(id):  # noqa: A002 - TileLang's name
    """Wait for outstanding ``T.wgmma_gemm`` groups; each completes at once in program order."""
