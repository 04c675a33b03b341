"""``T.gemm`` and its policy enum."""

from __future__ import annotations

import enum

from ._marker import marker


class GemmWarpPolicy(enum.IntEnum):
    """How warps split a gemm tile. A scheduling hint: no numeric effect."""

    Square = 0
    FullRow = 1
    FullCol = 2

    def is_square(self) -> bool:
        return self is GemmWarpPolicy.Square

    def is_full_row(self) -> bool:
        return self is GemmWarpPolicy.FullRow

    def is_full_col(self) -> bool:
        return self is GemmWarpPolicy.FullCol

    def compute_warp_partition(self, M: int, N: int, num_warps: int) -> tuple[int, int]:
        """``(m_warp, n_warp)`` with ``m_warp * n_warp == num_warps`` where it can (TileLang's rule, a warp
        owning at least 16 rows and 8 columns): FullRow puts every warp on M (the rest on N when M is too
        short), FullCol every warp on N (the rest on M), Square the split whose per-warp tile ``M/(16 m)`` by
        ``N/(8 n)`` is closest in aspect to ``M/N`` (the smallest ``m`` on ties; ``(1, 1)`` if none fits)."""
        if self.is_full_row():
            m = num_warps
            if M % (m * 16):
                m = M // 16
                return m, max(1, num_warps // m) if m else 1
            return m, 1
        if self.is_full_col():
            n = num_warps
            if N % (n * 8):
                n = N // 8
                return max(1, num_warps // n) if n else 1, n
            return 1, n
        best, best_gap = (1, 1), float("inf")
        target = M / N if N > 0 else 1.0
        for m in range(1, min(M // 16, num_warps) + 1):
            n = num_warps // m
            if n > N // 8 or m * n != num_warps:
                continue
            gap = abs((M / (m * 16)) / (N / (n * 8)) - target)
            if gap < best_gap:
                best, best_gap = (m, n), gap
        return best


@marker()
def gemm(A, B, C, transpose_A=False, transpose_B=False, policy=GemmWarpPolicy.Square,
         clear_accum=False, k_pack=1, wg_wait=0, mbar=None, annotations=None):
    """``C += op(A) @ op(B)`` (``C = ...`` with ``clear_accum=True``), accumulating in C's dtype.

    Products are formed at full (accumulator) precision, as on tensor cores. ``A`` may be a fragment.

    Example: ``T.gemm(A_shared, B_shared, C_local, transpose_B=True)``
    """


@marker()
def wgmma_gemm(A, B, C, transpose_A=False, transpose_B=False, policy=GemmWarpPolicy.Square,
               clear_accum=False, k_pack=1, wg_wait=0, mbar=None):
    """Hopper warpgroup gemm; at tile level it is ``T.gemm``."""


gemm_v2 = gemm
