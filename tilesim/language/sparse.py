"""``T.gemm_sp``: a product with a 2:4 (1:2 for 32-bit types) structured-sparse A, as TileLang's sparse tensor-core
GEMM.

Contract
--------
``T.gemm_sp(A_sparse, E, B, C, transpose_A=False, transpose_E=False, transpose_B=False, policy, clear_accum,
k_pack, wg_wait)`` is ``C += A @ op(B)`` (``C = ...`` with ``clear_accum``) where ``A`` is the dense
``(M, K)`` tile that ``A_sparse`` and its metadata ``E`` describe, in the natural row-major layout of
TileLang's ``sparse_utils.compress`` (and of ``tilesim.cuda.intrinsics.sparse_layout``):

* 8/16-bit A: each group of 4 consecutive K elements keeps 2 values, ``A_sparse[m, 2g]`` and
  ``A_sparse[m, 2g + 1]`` (``A_sparse`` is ``(M, K / 2)``), at the positions written in 4-bit chunk ``g`` of
  the row's metadata: bits 1:0 the first, bits 3:2 the second. ``E`` is ``(M, K / e)`` with
  ``e = bits(E) / 4 * 4`` elements per metadata element; chunk ``g`` is bits ``4 * (g % (bits(E) / 4))`` of
  ``E[m, g // (bits(E) / 4)]``.
* 32-bit A: each group of 2 keeps 1 value ``A_sparse[m, g]``; its chunk is ``0b0100`` (position 0) or
  ``0b1110`` (position 1), i.e. position ``(chunk & 3) // 2``; ``E`` is ``(M, K / (bits(E) / 4 * 2))``.

The dense tile is rebuilt in shared memory (a gather in ``T.Parallel``) and multiplied with ``T.gemm``, so
the values are ``T.gemm``'s. ``transpose_A``/``transpose_E`` are refused (``KernelTypeError``): the layouts
of the transposed operands are not modelled. Operands must be whole buffers (not slices).
"""

from __future__ import annotations

from ..errors import KernelTypeError
from .alloc import alloc_shared
from .gemm import GemmWarpPolicy, gemm
from .kernel import macro
from .loops import Parallel
from .math import if_then_else
from .types import DType

__all__ = ["gemm_sp"]


def _plan(A_sparse, E, transpose_A, transpose_E):
    if transpose_A or transpose_E:
        raise KernelTypeError("T.gemm_sp with transpose_A/transpose_E is not supported by tilesim",
                              hint="store A_sparse and E row-major (M first) and pass transpose_A=False")
    bits = DType(str(A_sparse.dtype)).bits
    groups_per_meta = DType(str(E.dtype)).bits // 4
    keep, group = (1, 2) if bits == 32 else (2, 4)
    m, ks = (int(d) for d in A_sparse.shape)
    return m, ks * group // keep, keep, group, groups_per_meta


_plan.__tilesim_trace_time__ = True


@macro
def gemm_sp(A_sparse, E, B, C, transpose_A=False, transpose_E=False, transpose_B=False,  # noqa: N803
            policy=GemmWarpPolicy.Square, clear_accum=False, k_pack=1, wg_wait=0):
    m, k, keep, group, qb = _plan(A_sparse, E, transpose_A, transpose_E)
    A_dense = alloc_shared((m, k), A_sparse.dtype)
    for i, j in Parallel(m, k):
        g = j // group
        chunk = (E[i, g // qb] >> (4 * (g % qb))) & 15
        if keep == 2:
            A_dense[i, j] = if_then_else(j % 4 == chunk & 3, A_sparse[i, 2 * g],
                                         if_then_else(j % 4 == (chunk >> 2) & 3, A_sparse[i, 2 * g + 1], 0))
        else:
            A_dense[i, j] = if_then_else(j % 2 == (chunk & 3) // 2, A_sparse[i, g], 0)
    gemm(A_dense, B, C, transpose_B=transpose_B, policy=policy, clear_accum=clear_accum)
