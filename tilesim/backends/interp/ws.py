"""Warp-specialised code in the interpreter: ``T.ws`` bodies as concurrent warp groups, mbarrier phases exact.

Contract
--------
* ``WarpSpec``: a run of sibling ``T.ws`` bodies (and ``if`` statements on the thread index) whose code
  waits on a barrier runs as concurrent tasks (``coroutines.py``: switched at waits, deterministic order);
  otherwise the body runs where it stands. In a per-thread launch (``simt.py``) the body runs with the
  threads outside the groups masked off.
* Barrier state lives in ``ctx.env[buffer.uid]`` (a :class:`Barriers`: per block of the chunk and barrier,
  the number of completed phases and the arrivals counted in the current one); ``MBarrier("init")`` makes
  it (phase 0 in progress, no arrivals).
* ``arrive`` / ``cp_async_arrive``: the executing threads arrive once each — at tile level ``s.threads``
  per active block (the enclosing ``T.ws`` groups' threads, or the block's), in a per-thread launch each
  active thread. A phase completes when its barrier's count is reached; further arrivals count towards
  the next phase.
* ``commit`` (``T.tcgen05_mma_arrive``, a ``T.tcgen05_gemm``'s ``mbar``): one arrival per active block,
  whatever the number of executing threads (the gemms complete at once); ``commit_pair`` (``arrive_2cta``,
  a 2-CTA gemm's ``mbar``) one in each block of the active block's 2-block cluster.
* Clusters (``ctx.cluster`` blocks, consecutive rows of the chunk): an ``arrive`` with ``cta`` goes to the
  barrier of the block of that rank in the executing block's cluster (a rank outside the cluster is a
  ``KernelRuntimeError``).
* ``wait(parity)``: returns when the current phase's parity differs from ``parity`` (the phase of that
  parity has completed; PTX ``mbarrier.try_wait.parity``): so before any completion, parity 1 returns at
  once and parity 0 waits. A wait whose phase has not completed blocks its task
  (``coroutines.block``) until other warp groups' arrivals complete it; when every group waits, a
  located ``KernelRuntimeError`` names the barriers (a deadlock): never a hang, never a silent answer.
* A barrier index outside the array is a ``KernelRuntimeError``. Phases are per block (the leading axis).
"""

from __future__ import annotations

import numpy as np

from ...errors import KernelRuntimeError
from ...ir import nodes as N
from . import coroutines
from .exprs import ev
from .rules import _refresh, run_body, run_group
from .state import Ctx, mask_and, none_active
from .tables import STMT_RULES

rule = STMT_RULES.register
WARP_GROUP = 128


class Barriers:
    """The phases of one barrier array for a chunk of ``nb`` blocks."""

    __slots__ = ("counts", "phase", "arrived")

    def __init__(self, nb: int, counts):
        self.counts = np.asarray(counts, dtype=np.int64)
        self.phase = np.zeros((nb, len(counts)), dtype=np.int64)  # completed phases
        self.arrived = np.zeros((nb, len(counts)), dtype=np.int64)  # arrivals in the current phase

    def arrive(self, rows, idx, weight) -> None:
        np.add.at(self.arrived, (rows, idx), weight)
        done = self.arrived // self.counts
        self.phase += done
        self.arrived -= done * self.counts


def _per_thread(ctx: Ctx) -> bool:
    return ctx.simt is not None and ctx.rules is not None and ctx.rank == 1


def _executors(s: N.MBarrier, ctx: Ctx):
    """``(rows, idx, extra)`` of the active executors (blocks, or threads of blocks) and their barrier index."""
    shape = (ctx.nb, ctx.simt.nthreads) if _per_thread(ctx) else (ctx.nb,)
    m = ctx.mask
    act = np.ones(shape, dtype=bool) if m is None else np.broadcast_to(np.asarray(m, dtype=bool), shape)
    rows = np.broadcast_to(np.arange(ctx.nb).reshape((ctx.nb,) + (1,) * (len(shape) - 1)), shape)
    idx = np.broadcast_to(np.asarray(ev(s.index, ctx), dtype=np.int64), shape)
    st: Barriers = ctx.env[s.buffer.uid]
    n = st.counts.shape[0]
    bad = act & ((idx < 0) | (idx >= n))
    if bad.any():
        raise KernelRuntimeError(f"barrier index {int(idx[bad][0])} is out of range for the {n} barrier(s) of "
                                 f"{s.buffer.name}", s.loc, hint=f"index it 0..{n - 1}")
    parity = None
    if s.parity is not None:
        parity = np.broadcast_to(np.asarray(ev(s.parity, ctx), dtype=np.int64), shape)[act] & 1
    rows = rows[act]
    if s.cta is not None:  # an arrival on the barrier of another block of the cluster
        cta = np.broadcast_to(np.asarray(ev(s.cta, ctx), dtype=np.int64), shape)[act]
        bad = (cta < 0) | (cta >= ctx.cluster)
        if bad.any():
            raise KernelRuntimeError(f"T.mbarrier_arrive: cta_id {int(cta[bad][0])} is not a block of the cluster "
                                     f"(ranks 0..{ctx.cluster - 1})", s.loc,
                                     hint="arrive on a block of this cluster (T.block_rank_in_cluster() ranks)")
        rows = rows - rows % ctx.cluster + cta
    return st, rows, idx[act], parity


@rule(N.MBarrier)
def _mbarrier(s: N.MBarrier, ctx: Ctx):
    if s.op == "init":
        ctx.env[s.buffer.uid] = Barriers(ctx.nb, s.counts)
        return
    if ctx.mask is False:
        return
    st, rows, idx, parity = _executors(s, ctx)
    if s.op in ("commit", "commit_pair"):  # one arrival per executing block (the MMA unit's completion)
        rows, first = np.unique(rows, return_index=True)
        idx = idx[first]
        if s.op == "commit_pair":  # ... on the barrier of both blocks of the 2-block cluster
            base = rows - rows % 2
            rows, idx = np.concatenate([base, base + 1]), np.concatenate([idx, idx])
        st.arrive(rows, idx, 1)
        return
    if s.op != "wait":
        st.arrive(rows, idx, 1 if _per_thread(ctx) else s.threads)
        return
    bad = (st.phase[rows, idx] & 1) == parity
    if not bad.any():
        return

    def done() -> bool:
        return not ((st.phase[rows, idx] & 1) == parity).any()

    def describe() -> str:
        k = int(np.argmax((st.phase[rows, idx] & 1) == parity))
        b, i = int(rows[k]), int(idx[k])
        return (f"{s.buffer.name}[{i}] waited for parity {int(parity[k])} in block {int(ctx.block_ids[b])} "
                f"({int(st.arrived[b, i])} of {int(st.counts[i])} arrivals in phase {int(st.phase[b, i])}) at "
                f"line {s.loc.line if s.loc is not None else '?'}")

    coroutines.block(ctx, done, describe, s.loc)


@rule(N.WarpSpec)
def _warp_spec(s: N.WarpSpec, ctx: Ctx):
    if ctx.runs and run_group(s, ctx):
        return
    if not _per_thread(ctx):
        run_body(s.body, ctx)
        return
    saved = ctx.mask
    t = ctx.env[ctx.simt.tid.uid]
    ctx.mask = mask_and(saved, np.isin(t // WARP_GROUP, s.groups))
    if not none_active(ctx.mask):
        run_body(s.body, ctx)
    _refresh(ctx, saved)
