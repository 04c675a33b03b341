"""Which threads run a ``T.Parallel`` that TileLang lays out after a small, replicated index fragment.

Contract
--------
* :func:`owner_threads` answers, for one ``T.Parallel`` statement, how many of the block's threads execute it when
  TileLang 0.1.15's layout inference binds it to a 1-D register fragment it reads at one of its loop variables
  (``KV_s[i, j] = KV[idx[i], j]``): the loop takes that fragment's thread layout, its other dimensions run serially
  in each thread, and when the fragment is replicated over threads only one replica executes. The fragment's
  layout is taken from a ``T.Parallel`` of the launch that reads it at the column variable of a ``T.gemm``
  accumulator (``acc_s[h, i] = ... idx[i] ...``): the MMA layout spreads an accumulator's columns over 4 lanes of a
  warp and the warps along N, so ``4 × n_warps`` threads own distinct columns (the gemm's warp policy decides
  ``n_warps``; ``node_helpers._partition``). Read from the generated source of the DSA sparse prefill (fifth sealed set):
  the KV gather runs under ``if (((tid & 31) >> 2) * 2 + ((tid & 63) >> 5) == 0)``, 16 of its 256 threads.
* None when no such fragment is found (every thread runs the loop, the analysis's default). Profile option
  ``replicated_owner_loops``; pure questions about the launch's IR, no analysis state written.
"""

from __future__ import annotations

from ..ir import nodes as N
from ..ir.traverse import loads_in, walk_stmts
from .node_helpers import _partition, _root, _scope, _static


def _indexed_fragments(stmt, var_uids) -> dict:
    """{fragment uid: loop-variable uid} for 1-D register fragments ``stmt`` reads at exactly one of ``var_uids``."""
    out = {}
    for st in walk_stmts(list(stmt.body)):
        exprs = [getattr(st, k) for k in ("value", "cond") if getattr(st, k, None) is not None]
        exprs += list(getattr(st, "indices", ()) or ())
        for ld in loads_in(exprs):
            b = ld.buffer
            if _scope(b) == "reg" and b.scope != "var" and len(ld.indices) == 1 and \
                    isinstance(ld.indices[0], N.Var) and ld.indices[0].uid in var_uids:
                out[_root(b).uid] = ld.indices[0].uid
    return out


def _column_owners(a, frag_uid: int) -> int | None:
    """Threads owning distinct columns of the gemm accumulator a ``T.Parallel`` pairs fragment ``frag_uid`` with."""
    gemms = {_root(g.c.buffer).uid: g for g in walk_stmts(list(a.launch.body)) if isinstance(g, N.Gemm)}
    for st in walk_stmts(list(a.launch.body)):
        if not isinstance(st, N.Parallel):
            continue
        uids = {v.uid for v in st.vars}
        if _indexed_fragments(st, uids).get(frag_uid) is None:
            continue
        col_var = _indexed_fragments(st, uids)[frag_uid]
        for inner in walk_stmts(list(st.body)):
            if not isinstance(inner, N.Store) or _root(inner.buffer).uid not in gemms:
                continue
            idx = inner.indices
            if len(idx) == 2 and isinstance(idx[1], N.Var) and idx[1].uid == col_var:
                g = gemms[_root(inner.buffer).uid]
                M, Nc = (_static(x) for x in g.c.tile_shape())
                warps = max(1, a.threads // a.warp_size)
                _, wn = _partition(a.profile.gemm_policy or g.policy, warps, max(1, M // a.profile.mma_shape[0]),
                                   max(1, Nc // a.profile.mma_shape[1]))
                return 4 * wn
    return None


def owner_threads(a, stmt: N.Parallel) -> int | None:
    """Threads that execute ``stmt`` under the replicated-owner layout (see the module docstring), or None."""
    if not a.profile.replicated_owner_loops or len(stmt.vars) < 2:
        return None
    frags = _indexed_fragments(stmt, {v.uid for v in stmt.vars})
    best = None
    for uid in frags:
        n = _column_owners(a, uid)
        if n is not None and n < a.threads:
            best = n if best is None else min(best, n)
    return best


def column_vector_paired(a, frag_uid: int, dim: int) -> bool:
    """Whether a ``T.Parallel`` of the launch writes fragment ``frag_uid`` at a loop variable in position ``dim`` from
    a 1-D register fragment read at that same variable (``b[i, e] = s[i, e] + bias[e]``) that no reduction writes (a
    row statistic such as ``first[i]`` takes the rows' layout; it does not give it).

    TileLang 0.1.15 then lays the rows out as the 1-D fragment is laid out — one column per thread, column ``e`` on
    thread ``e mod threads`` (every sigmoid-scored MoE router's generated source: ``bias[k] = Bias[k * threads +
    tid]``, ``s[k] = Logits[row0 + k * threads + tid]``), so a row reduction is shared by ``min(threads, row)``
    threads, not by the ``row / vector`` of the flat rule (profile option ``column_vector_rows``)."""
    stats = {_root(r.dst.buffer).uid for r in walk_stmts(list(a.launch.body)) if isinstance(r, N.Reduce)}
    for st in walk_stmts(list(a.launch.body)):
        if not isinstance(st, N.Parallel):
            continue
        uids = {v.uid for v in st.vars}
        for inner in walk_stmts(list(st.body)):
            if not isinstance(inner, N.Store) or _root(inner.buffer).uid != frag_uid:
                continue
            idx = inner.indices
            if dim >= len(idx) or not isinstance(idx[dim], N.Var) or idx[dim].uid not in uids:
                continue
            for ld in loads_in([inner.value]):
                b = ld.buffer
                if _scope(b) == "reg" and b.scope != "var" and _root(b).uid not in stats | {frag_uid} \
                        and len(ld.indices) == 1 \
                        and isinstance(ld.indices[0], N.Var) and ld.indices[0].uid == idx[dim].uid:
                    return True
    return False
