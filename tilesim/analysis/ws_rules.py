"""Cost rules for warp-specialised code: ``T.ws`` bodies and mbarrier operations.

Contract (a first model)
------------------------
* ``WarpSpec``: its body is costed where it stands, as at tile level; the warp groups' bodies add up
  (the overlap of concurrently running producer and consumer warp groups is not credited).
* ``MBarrier``: a wait is one op with one barrier (``syncs = 1``, no work; the simulator charges the
  hardware model's barrier time); ``init`` and the arrivals cost nothing (a non-blocking arrive is one
  instruction per thread, below the model's resolution).
* ``PairIssue`` (a 2-CTA instruction's effect in both blocks of a pair): its body is costed once, as the issuing
  block's work (the simulator refuses cluster launches before this matters).
* ``ClusterCancel`` (cluster launch control) is refused with a located ``KernelTypeError``: the work each
  block does depends on the order in which blocks start, which the model does not have.
"""

from __future__ import annotations

from ..errors import KernelTypeError
from ..ir import nodes as N
from .analyzer import Analyzer
from .rule_tables import COST_RULES


@COST_RULES.register(N.WarpSpec)
def _warp_spec(a: Analyzer, s: N.WarpSpec):
    return a.body(s.body)


@COST_RULES.register(N.PairIssue)
def _pair_issue(a: Analyzer, s: N.PairIssue):
    return a.body(s.body)


@COST_RULES.register(N.ClusterCancel)
def _cluster_cancel(a: Analyzer, s: N.ClusterCancel):
    raise KernelTypeError("T.clc_try_cancel_multicast (cluster launch control: blocks taking the tiles of blocks "
                          "that have not started) is not modelled by the simulator", s.loc,
                          hint="cost the program with a fixed tile order (T.PersistentTileScheduler or one block "
                               "per tile)")


@COST_RULES.register(N.MBarrier)
def _mbarrier(a: Analyzer, s: N.MBarrier):
    if s.op != "wait":
        return []
    op = a.new_op("compute", s, "vector", label=f"T.barrier_wait {s.buffer.name}")
    op.syncs = 1.0
    return [op]
