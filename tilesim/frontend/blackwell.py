"""Builders of the Blackwell primitives (``tilesim.language.blackwell``): tensor memory, ``tcgen05`` gemms,
their completion arrivals, and the SM120 block-scaled gemm.

Contract
--------
* ``T.alloc_tmem(shape, dtype)`` allocates a static-shape buffer of scope ``"tmem"`` (hoisted like every
  on-chip allocation). Tile operations take it wherever they take a fragment; a gemm may accumulate into it.
* ``T.tcgen05_gemm(A, B, C, trans_A, trans_B, policy, clear_accum, mbar=, use_2cta=)`` emits what
  ``T.gemm`` emits (same checks, same messages) and then, when ``mbar`` is given, ``MBarrier("commit")``
  on it: one arrival per executing block. ``use_2cta=True`` (only in a launch of 2-block clusters, else a
  located ``KernelTypeError``) marks the ``Gemm`` as the pair's (``Gemm.pair``) and its ``mbar`` arrival
  as ``MBarrier("commit_pair")`` (one arrival in both blocks of the cluster).
* ``T.tcgen05_mma_arrive(mbar, arrive_2cta=False)`` emits ``MBarrier("commit")`` (``"commit_pair"`` with
  ``arrive_2cta=True``).
* ``T.mma_gemm_blockscaled``: :mod:`tilesim.frontend.blockscaled`.
* Every error is a ``KernelError`` located at the call.
"""

from __future__ import annotations

from ..errors import KernelTypeError
from ..ir import nodes as N
from . import cluster as CL
from . import prims as P
from . import ws as W
from .builders import builder

#: the scope of tensor-memory buffers
TMEM_SCOPE = "tmem"


@builder("alloc_tmem")
def _b_alloc_tmem(tr, loc, shape, dtype):
    return P._alloc(tr, loc, shape, dtype, TMEM_SCOPE, "T.alloc_tmem")


def _commit(tr, loc, what, mbar, pair=False):
    W._context(tr, loc, what)
    buf, idx = W.barrier_operand(mbar, loc, what)
    tr.emit(N.MBarrier("commit_pair" if pair else "commit", buf, idx, None, (), 1, loc))


def _flag(v, loc, what):
    if isinstance(v, N.Const):
        v = v.value
    if not isinstance(v, (bool, int)):
        raise KernelTypeError(f"{what} must be a Python bool, got {v!r}", loc)
    return bool(v)


@builder("tcgen05_gemm")
def _b_tcgen05_gemm(tr, loc, A, B, C, transpose_A, transpose_B, policy, clear_accum, mbar, use_2cta,
                    annotations):
    pair = _flag(use_2cta, loc, "T.tcgen05_gemm(use_2cta=...)")
    if pair:
        CL.pair_check(tr, loc, "T.tcgen05_gemm(use_2cta=True)")
    P.BUILDERS["gemm"](tr, loc, A, B, C, transpose_A, transpose_B, policy, clear_accum, 1, 0, None, pair)
    if mbar is not None:
        _commit(tr, loc, "T.tcgen05_gemm(mbar=...)", mbar, pair)


@builder("tcgen05_mma_arrive")
def _b_tcgen05_mma_arrive(tr, loc, mbar, arrive_2cta):
    pair = _flag(arrive_2cta, loc, "T.tcgen05_mma_arrive(arrive_2cta=...)")
    if pair:
        CL.pair_check(tr, loc, "T.tcgen05_mma_arrive(arrive_2cta=True)")
    _commit(tr, loc, "T.tcgen05_mma_arrive", mbar, pair)
