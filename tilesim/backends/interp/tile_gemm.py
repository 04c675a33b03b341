"""Interpreter rule of ``T.gemm``: one batched ``matmul`` per chunk, in the accumulator's compute dtype.

A 2-CTA gemm (``Gemm.pair``, ``T.tcgen05_gemm(..., use_2cta=True)`` in a launch of 2-block clusters) is
issued by one block and computes its cluster's product: rows ``2p`` and ``2p + 1`` of the chunk are a
cluster (``runtime.py``); each gets ``C_r (+)= op(A_r) @ [op(B_2p) | op(B_2p+1)]`` in its own ``C``, for every
cluster with an active (issuing) block. The regions' start indices are the issuing block's (the instruction
names the same shared-memory and tensor-memory addresses in both blocks).

The fused K-loop fast path (a whole tiled-GEMM loop as one product per group of blocks) is
:mod:`.gemm_loop`; the plain meaning both are tested against is :func:`.reference.gemm`.
"""

from __future__ import annotations

import numpy as np

from ... import dtypes as dt
from ...errors import KernelRuntimeError
from ...ir import nodes as N
from . import memory, pool
from .exprs import ev
from .state import Ctx, block_mask
from .tables import STMT_RULES
from .tile_copy import _adopt

rule = STMT_RULES.register


def _as_matrix(vals):
    n = vals.shape[0]
    ext = [e for e in vals.shape[1:]]
    while len(ext) > 2 and ext[0] == 1:
        ext.pop(0)
    return vals.reshape((n,) + tuple(ext))


@rule(N.Gemm)
def _gemm(s: N.Gemm, ctx: Ctx):
    acc = dt.compute_dtype(s.c.dtype) if dt.is_float(s.c.dtype) else np.dtype(np.int64)
    if s.pair:
        return _pair_gemm(s, ctx, acc)
    a = dt.widen(_as_matrix(memory.read_region(s.a, ctx, ev)), acc)
    b = dt.widen(_as_matrix(memory.read_region(s.b, ctx, ev)), acc)
    if ctx.options.tf32 and s.a.dtype == "float32":
        a, b = dt.to_tf32(a), dt.to_tf32(b)
    if s.trans_a:
        a = a.swapaxes(1, 2)
    if s.trans_b:
        b = b.swapaxes(1, 2)
    if not s.clear_accum and ctx.mask is None and a.ndim == b.ndim == 3 and a.dtype == acc == b.dtype:
        cview = memory.onchip_view(s.c, ctx, ev)
        shape = (max(a.shape[0], b.shape[0]), a.shape[1], b.shape[2])
        if (cview is not None and cview.dtype == acc and cview.size == shape[0] * shape[1] * shape[2]
                and cview.nbytes >= pool.MIN_BYTES):
            # accumulate in place: C is a float32/float64 fragment updated by every block; the
            # product goes to reused scratch memory
            cm = cview.reshape(shape)
            scratch = pool.empty(shape, acc)
            np.matmul(a, b, out=scratch)
            cm += scratch
            probe = np.empty(0)
            pool.give_back(scratch, probe)
            return
    prod = np.matmul(a, b)
    if s.clear_accum and ctx.mask is None and s.c.buffer.scope != "global" and prod.shape[0] == ctx.nb:
        # C = A @ B over the whole of C: the product becomes C's storage (no copy, no NaN fill)
        starts, cext = memory.region_starts(s.c, ctx, ev)
        if prod.size == ctx.nb * int(np.prod(cext)) and _adopt(s.c, starts, cext,
                                                                prod.reshape((ctx.nb,) + cext), ctx):
            return
    cview = memory.onchip_view(s.c, ctx, ev)
    if cview is not None and cview.dtype == acc and ctx.mask is None:
        # accumulate in place: C is a float32/float64 fragment updated by every block
        cm = cview.reshape(prod.shape)
        if s.clear_accum:
            cm[...] = prod
        else:
            cm += prod
        return
    if s.clear_accum:
        out = prod
    else:
        c = dt.widen(_as_matrix(memory.read_region(s.c, ctx, ev)), acc)
        out = c + prod
    _, cext = memory.region_starts(s.c, ctx, ev)
    out = dt.convert(out.reshape((out.shape[0],) + cext), s.c.dtype)
    memory.write_region(s.c, out, ctx, ev)


def _pair_gemm(s: N.Gemm, ctx: Ctx, acc):
    nb = ctx.nb
    if ctx.cluster != 2:
        raise KernelRuntimeError(f"a 2-CTA gemm needs a launch of 2-block clusters, this one has clusters of "
                                 f"{ctx.cluster}", s.loc, hint="launch with T.ClusterKernel(..., cluster_dims=2)")
    bm = block_mask(ctx.mask, nb)
    active = np.ones(nb, dtype=bool) if bm is None else bm
    pairs = active.reshape(nb // 2, 2)
    issued = pairs.any(axis=1)
    if not issued.any():
        return
    # the issuing block's operand addresses name the same places in both blocks' memory
    issuer = np.repeat(np.arange(0, nb, 2) + np.argmax(pairs, axis=1), 2)

    def where(r):
        starts, exts = memory.region_starts(r, ctx, ev)
        return [v[issuer] if isinstance(v, np.ndarray) else v for v in starts], exts

    def operand(r, trans):
        v = _as_matrix(memory.read_region(r, ctx, ev, where(r)))
        v = np.broadcast_to(dt.widen(v, acc), (nb,) + v.shape[1:])
        if ctx.options.tf32 and r.dtype == "float32":
            v = dt.to_tf32(v)
        return v.swapaxes(1, 2) if trans else v

    a, b = operand(s.a, s.trans_a), operand(s.b, s.trans_b)
    b = b.reshape((nb // 2, 2) + b.shape[1:])
    whole = np.repeat(np.concatenate([b[:, 0], b[:, 1]], axis=-1), 2, axis=0)  # [B_0 | B_1] for both rows
    prod = np.matmul(a, whole)
    cwhere = where(s.c)
    saved = ctx.mask
    ctx.mask = None if issued.all() else np.repeat(issued, 2)  # both blocks of each issuing pair
    try:
        if s.clear_accum:
            out = prod
        else:
            out = dt.widen(_as_matrix(memory.read_region(s.c, ctx, ev, cwhere)), acc) + prod
        memory.write_region(s.c, dt.convert(out.reshape((nb,) + cwhere[1]), s.c.dtype), ctx, ev, cwhere)
    finally:
        ctx.mask = saved
