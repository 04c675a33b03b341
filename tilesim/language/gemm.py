"""``T.gemm`` and its policy enum."""

from __future__ import annotations

import enum

from ._marker import marker


class GemmWarpPolicy(enum.IntEnum):
    """How warps split a gemm tile. A scheduling hint: no numeric effect."""

    Square = 0
    FullRow = 1
    FullCol = 2


@marker()
def gemm(A, B, C, transpose_A=False, transpose_B=False, policy=GemmWarpPolicy.Square,
         clear_accum=False, k_pack=1, wg_wait=0, mbar=None):
    """``C += op(A) @ op(B)`` (``C = ...`` with ``clear_accum=True``), accumulating in C's dtype.

    Products are formed at full (accumulator) precision, as on tensor cores. ``A`` may be a fragment.

    Example: ``T.gemm(A_shared, B_shared, C_local, transpose_B=True)``
    """


@marker()
def wgmma_gemm(A, B, C, transpose_A=False, transpose_B=False, policy=GemmWarpPolicy.Square,
               clear_accum=False, k_pack=1, wg_wait=0, mbar=None):
    """Hopper warpgroup gemm; at tile level it is ``T.gemm``."""


gemm_v2 = gemm
