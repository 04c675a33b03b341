"""TileLang's split of a gemm tile over a block's warps on NVIDIA GPUs (sm_80/sm_90: mma.sync and WGMMA).

Source read: TileLang's ``src/cuda/op/gemm.cc``, ``ComputeDefaultWarpPartition`` (mma.sync) and
``ComputeWgmmaWarpPartition`` (Warp-Group MMA); the H200 run of 2026-12-02 reproduced its message
("No valid warp partition for T.gemm: M=16, N=16 cannot be evenly covered by 4 warps (policy=FullCol).
Each warp must own a multiple of 16 rows and 8 columns").

Contract
--------
* :func:`warp_partition` ``(M, N, warps, policy="Square", wgmma=False) -> (m_warp, n_warp) | None``: the
  pair TileLang picks, or ``None`` where TileLang stops with "No valid warp partition". ``M``, ``N`` are
  the gemm's C tile, ``warps`` the block's thread count / 32, ``policy`` one of ``"Square"``,
  ``"FullRow"``, ``"FullCol"`` (or a ``T.GemmWarpPolicy``).
* A pair is *valid* when ``m_warp * n_warp == warps``, ``M % (16 m_warp) == 0`` and ``N % (8 n_warp) == 0``
  (each warp owns a multiple of 16 rows and 8 columns); with ``wgmma`` also ``m_warp % 4 == 0`` (whole
  warp groups along M). Every policy searches the same valid set, so whether a partition exists does not
  depend on the policy; the policy only picks among the valid pairs:

  - ``FullRow``: the largest ``m_warp``; ``FullCol``: the largest ``n_warp`` (with ``wgmma`` at most
    ``warps / 4``);
  - ``Square``: the smallest ``|(M / 16 m) / (N / 8 n) - M / N|`` in float32, the first (smallest ``m``)
    on ties.
* The caller checks ``M % 16 == 0`` and ``N % 8 == 0`` first (TileLang's "M must be divisible by 16" /
  "N must be divisible by 8" come before the search); for other values this returns ``None``.
* ``ValueError`` for an unknown policy or ``warps < 1``.
* :func:`mma_sync_grid`: the pair the Numba CUDA backend's ``mma.sync`` lowering uses (and the simulator's
  ``numba_tc`` profile models): TileLang's where it gives every warp pairs of n8 tiles, else all warps along M.
"""

from __future__ import annotations

import numpy as np

__all__ = ["warp_partition", "POLICIES"]

POLICIES = ("Square", "FullRow", "FullCol")
_M_PER_WARP, _N_PER_WARP, _GROUP = 16, 8, 4


def _name(policy) -> str:
    name = getattr(policy, "name", policy)
    if name not in POLICIES:
        raise ValueError(f"unknown GemmWarpPolicy {policy!r}; expected one of {', '.join(POLICIES)}")
    return name


def warp_partition(M: int, N: int, warps: int, policy="Square", wgmma: bool = False) -> tuple[int, int] | None:
    """``(m_warp, n_warp)`` as TileLang picks it, or ``None`` (no valid partition). See the module docstring."""
    name = _name(policy)
    if warps < 1:
        raise ValueError(f"a block needs at least one warp, got {warps}")
    group = _GROUP if wgmma else 1
    if wgmma and warps % _GROUP:
        return None  # TileLang: "Warp-Group MMA requires 128*k threads."

    def valid(m: int, n: int) -> bool:
        return (m * n == warps and m % group == 0 and M % (m * _M_PER_WARP) == 0
                and N % (n * _N_PER_WARP) == 0)

    if name == "FullRow":
        for m in range(warps, group - 1, -group):
            if warps % m == 0 and valid(m, warps // m):
                return m, warps // m
        return None
    if name == "FullCol":
        for n in range(warps // group, 0, -1):
            if warps % n == 0 and valid(warps // n, n):
                return warps // n, n
        return None
    ideal = np.float32(M) / np.float32(N) if N > 0 else np.float32(1)
    best, best_score = None, np.float32(np.inf)
    for m in range(group, warps + 1, group):
        n = warps // m
        if warps % m or not valid(m, n):
            continue
        m_per = np.float32(M) / np.float32(m * _M_PER_WARP)
        n_per = np.float32(N) / np.float32(n * _N_PER_WARP)
        score = np.float32(abs(m_per / n_per - ideal))
        if score < best_score:
            best, best_score = (m, n), score
    return best


def mma_sync_grid(M: int, N: int, warps: int, policy="Square") -> tuple[int, int]:
    """``(m_warp, n_warp)`` of an ``mma.sync`` gemm in the Numba CUDA backend (and the simulator's ``numba_tc``
    profile, which models it): :func:`warp_partition` for ``policy`` where every warp then owns whole m16 tiles
    and *pairs* of n8 tiles (``ldmatrix.x4`` loads B's n8 tiles two at a time), else all warps along M."""
    warps = max(1, warps)
    try:
        pol = getattr(policy, "name", policy) or "Square"
        g = warp_partition(M, N, warps, pol) if M % 16 == 0 and N % 8 == 0 else None
    except ValueError:
        g = None
    if g is not None and M % (16 * g[0]) == 0 and N % (16 * g[1]) == 0:
        return g
    return warps, 1
