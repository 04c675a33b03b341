"""Cluster launch control in the interpreter: the order in which clusters start, and ``ClusterCancel``.

Contract
--------
A launch whose body holds a ``ClusterCancel`` (``T.clc_try_cancel_multicast``) runs its chunks one after
another (``runtime.py``), driven by one :class:`Launcher` per launch:

* clusters start in order, cluster ``0, 1, ...`` (cluster ``c`` is blocks ``order[c * size : (c + 1) *
  size]``, ``runtime._cluster_order``; without clusters, block ``c``); a chunk starts the next ``k``
  clusters that have neither started nor been taken (:meth:`Launcher.start`);
* ``ClusterCancel`` in an active block takes the next cluster that has not started — it will never start —
  and writes ``(1, x, y, z)`` (its first block's indices) into the 4 words of ``result`` in every block of
  the asking block's cluster; when every cluster has started or been taken it writes ``(0, 0, 0, 0)``.
  Active blocks of a chunk ask in row order (cluster order, then rank). In per-thread code one thread of
  a block asks (more than one active thread of a block is a ``KernelRuntimeError``: each would ask and
  overwrite the one result). The barrier operand only receives the answer's bytes: transfers complete at
  once here, and the program's own arrivals (``T.mbarrier_arrive_expect_tx``) complete its phase. A result
  index outside the buffer is a ``KernelRuntimeError``.

So with ``mode="serial"`` (one cluster per chunk) cluster 0 takes every other cluster's tile in turn; in a
batched chunk the clusters of the chunk have all started and only later ones can be taken. Results of a
program that computes each tile once do not depend on it.

``PairIssue`` (a 2-CTA instruction, ``use_2cta=True``) issued by the active blocks of a chunk runs its body in
both blocks of each cluster that has an active block, each on its own memory, with the issuing block's values
of every variable (``Let`` names and ``T.alloc_var`` block variables) but the launch's block indices (an issuing pair's first active block is its issuer). It
needs clusters of 2 blocks (else a ``KernelRuntimeError``); a ``PairIssue`` inside per-thread code is refused.
"""

from __future__ import annotations

import numpy as np

from ...errors import KernelRuntimeError
from ...ir import nodes as N
from ...ir.traverse import loads_in, stmt_exprs, walk_stmts
from .exprs import ev
from .rules import run_body
from .state import Ctx, block_mask
from .tables import STMT_RULES


def uses_launch_control(stmts) -> bool:
    return any(type(s) is N.ClusterCancel for s in walk_stmts(stmts))


class Launcher:
    """Which clusters of a launch have started or been taken (see the module docstring)."""

    def __init__(self, order, size: int, grid, total: int):
        self.order, self.size, self.grid = order, size, list(grid) + [1] * (3 - len(grid))
        self.clusters = total // size
        self.next = 0  # clusters below it have started or been taken

    def start(self, k: int) -> int:
        """Start the next ``k`` clusters; returns the first block position (in ``order``) of the chunk."""
        first = self.next
        self.next = min(self.clusters, self.next + k)
        return first * self.size

    def take(self):
        """``(1, x, y, z)`` of the next cluster not started (now taken), or ``(0, 0, 0, 0)``."""
        if self.next >= self.clusters:
            return 0, 0, 0, 0
        c = self.next
        self.next += 1
        b = int(self.order[c * self.size]) if self.order is not None else c
        gx, gy, _ = self.grid
        return 1, b % gx, b // gx % gy, b // (gx * gy)


@STMT_RULES.register(N.ClusterCancel)
def _cluster_cancel(s: N.ClusterCancel, ctx: Ctx):
    m = ctx.mask
    if m is False:
        return
    per_thread = ctx.simt is not None and ctx.rules is not None and ctx.rank == 1
    nb = ctx.nb
    shape = (nb, ctx.simt.nthreads) if per_thread else (nb,)
    act = np.ones(shape, dtype=bool) if m is None else np.broadcast_to(np.asarray(m, dtype=bool), shape)
    if per_thread:
        n = act.sum(axis=1)
        if (n > 1).any():
            b = int(np.argmax(n > 1))
            raise KernelRuntimeError(f"T.clc_try_cancel_multicast is executed by {int(n[b])} threads of block "
                                     f"{int(ctx.block_ids[b])}; each would take a cluster into the one result", s.loc,
                                     hint="issue it from one thread: `if tx == 0: T.clc_try_cancel_multicast(...)`")
        rows = np.nonzero(n == 1)[0]
        cols = np.argmax(act, axis=1)
    else:
        rows = np.nonzero(act)[0]
        cols = np.zeros(nb, dtype=np.int64)
    if not len(rows):
        return
    launcher: Launcher | None = getattr(ctx, "clc", None)
    if launcher is None:
        raise KernelRuntimeError("T.clc_try_cancel_multicast outside a launch the interpreter runs cluster by cluster",
                                 s.loc)
    buf = s.result.buffer
    st = ctx.storage[buf.uid]
    starts = [np.broadcast_to(np.asarray(ev(e, ctx), dtype=np.int64), shape) for e in s.result.starts]
    cs = ctx.cluster
    for r in rows:  # row order: cluster order, then rank
        at = [int(v[r, cols[r]]) if per_thread else int(v[r]) for v in starts]
        if any(not 0 <= i < d for i, d in zip(at, buf.shape)) or at[-1] + 4 > buf.shape[-1]:
            raise KernelRuntimeError(f"T.clc_try_cancel_multicast: result {buf.name}{at} (4 words) is outside the "
                                     f"buffer of shape {tuple(buf.shape)}", s.loc)
        words = np.asarray(launcher.take(), dtype=st.dtype)
        base = int(r) - int(r) % cs
        st[(slice(base, base + cs),) + tuple(at[:-1]) + (slice(at[-1], at[-1] + 4),)] = words


@STMT_RULES.register(N.PairIssue)
def _pair_issue(s: N.PairIssue, ctx: Ctx):
    nb = ctx.nb
    if ctx.cluster != 2:
        raise KernelRuntimeError(f"a 2-CTA instruction (use_2cta=True) needs a launch of 2-block clusters, this one "
                                 f"has clusters of {ctx.cluster}", s.loc,
                                 hint="launch with T.ClusterKernel(..., cluster_dims=2)")
    if ctx.simt is not None and ctx.rank:
        raise KernelRuntimeError("a 2-CTA instruction (use_2cta=True) in per-thread code is not supported", s.loc,
                                 hint="issue it at tile level (outside T.Parallel and per-thread loops)")
    bm = block_mask(ctx.mask, nb)
    active = np.ones(nb, dtype=bool) if bm is None else np.asarray(bm, dtype=bool)
    pairs = active.reshape(nb // 2, 2)
    issued = pairs.any(axis=1)
    if not issued.any():
        return
    issuer = np.repeat(np.arange(0, nb, 2) + np.argmax(pairs, axis=1), 2)
    env, mask = ctx.env, ctx.mask
    ctx.env = {k: (v[issuer] if k not in ctx.block_vars and isinstance(v, np.ndarray) and v.ndim >= 1
                   and v.shape[0] == nb else v) for k, v in env.items()}
    # block variables (T.alloc_var) the body reads: the issuer's values too (the body never writes them)
    uids = {e.buffer.uid for st in walk_stmts(s.body) for e in loads_in(stmt_exprs(st)) if e.buffer.scope == "var"}
    held = {u: ctx.storage[u] for u in uids if u in ctx.storage and ctx.storage[u].shape[:1] == (nb,)}
    for u, a in held.items():
        ctx.storage[u] = a[issuer]
    ctx.mask = None if issued.all() else np.repeat(issued, 2)
    try:
        run_body(s.body, ctx)
    finally:
        ctx.env, ctx.mask = env, mask
        for u, a in held.items():
            ctx.storage[u] = a
