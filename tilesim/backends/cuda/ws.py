"""Warp-specialised code in the CUDA lowering: refused, naming the construct.

Contract
--------
Numba's CUDA target has no mbarrier instructions and the lowering here runs tile operations with the
whole block, so ``with T.ws(...)`` (``WarpSpec``), the barrier operations (``MBarrier``:
``T.alloc_barrier``, ``T.barrier_arrive``, ``T.barrier_wait``, ...) and cluster launch control
(``ClusterCancel``) and 2-CTA instructions (``PairIssue``) are refused with a ``KernelTypeError``
at the first such statement of a launch (:func:`refuse`, called before any planning) — and by the
statement and event rules, should a launch reach them. The interpreter runs these programs.
"""

from __future__ import annotations

from ...errors import KernelTypeError
from ...ir import nodes as N
from ...ir.traverse import walk_stmts
from .rules import EVENT_RULES, STMT_RULES

_NAMES = {"init": "T.alloc_barrier", "arrive": "T.barrier_arrive", "cp_async_arrive": "T.cp_async_barrier_noinc",
          "commit": "T.tcgen05_mma_arrive",
          "wait": "T.barrier_wait"}


def _error(s) -> KernelTypeError:
    if type(s) is N.PairIssue:
        return KernelTypeError("a 2-CTA tensor-memory instruction (T.tcgen05_cp_warpx4 / T.tcgen05_gemm_blockscaled "
                               "with use_2cta=True) is not supported by the CUDA backend: Numba has no tcgen05 "
                               "instructions and cannot launch clusters", s.loc,
                               hint="run it on the interpreter (target='interp')")
    if type(s) is N.ClusterCancel:
        return KernelTypeError("T.clc_try_cancel_multicast (cluster launch control) is not supported by the CUDA "
                               "backend: Numba has no clusterlaunchcontrol instructions", s.loc,
                               hint="run it on the interpreter (target='interp'), or launch one block per tile")
    what = f"with T.ws{s.groups}" if type(s) is N.WarpSpec else f"{_NAMES.get(s.op, s.op)} (an mbarrier)"
    return KernelTypeError(f"{what} is not supported by the CUDA backend: Numba has no mbarriers and runs tile "
                           "operations with the whole block", s.loc,
                           hint="run it on the interpreter (target='interp'), or write the plain tile program "
                                "(T.copy + T.gemm in T.Pipelined) for the GPU")


def refuse(g) -> None:
    """Raise at the launch's first warp-specialised statement, if any."""
    stmts = list(walk_stmts(g.launch.body))
    for s in sorted(stmts, key=lambda s: type(s) not in (N.ClusterCancel, N.PairIssue)):  # the construct with no fallback first
        if type(s) in (N.WarpSpec, N.MBarrier, N.ClusterCancel, N.PairIssue):
            raise _error(s)


@STMT_RULES.register(N.WarpSpec, N.MBarrier, N.ClusterCancel, N.PairIssue)
def _stmt(g, s):
    raise _error(s)


@EVENT_RULES.register(N.WarpSpec, N.MBarrier, N.ClusterCancel, N.PairIssue)
def _events(g, s):
    raise _error(s)
