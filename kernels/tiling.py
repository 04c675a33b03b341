"""Tile sizes that real TileLang accepts for a gemm, for kernels whose natural tile is too small.

Decode-style kernels put few rows in a gemm (a handful of heads, ``q_len * groups`` GQA rows); TileLang
0.1.15 refuses a gemm whose M is not a multiple of 16, whose K is not a multiple of the tensor-core
instruction's K, or whose (M, N) tile the block's warps cannot split (see :mod:`tilesim.lint_rules`
and :mod:`tilesim.warp_partition`). The kernels pad such tiles with masked rows / zero columns (as
TileLang's own decode examples pad ``block_H``) and pick a thread count that splits every gemm.

Contract
--------
* ``round_up(x, m) -> int``: the smallest multiple of ``m`` that is ``>= x`` (``x >= 0``, ``m >= 1``).
* ``gemm_rows(rows) -> int``: ``rows`` rounded up to 16, at least 16 (a gemm's M).
* ``pow2_at_least(n) -> int``: the smallest power of two ``>= n`` (``n >= 1``): fragment extents and reductions
  TileLang lays out over threads (its XOR-butterfly all-reduce needs a power-of-two width).
* ``mma_k(dtype) -> int``: the K that a tensor-core instruction of ``dtype`` operands steps by on sm_90
  (``256 // bits``: 16 for fp16/bf16, 32 for 8-bit types, 8 for fp32/tf32); pad a gemm's K to a multiple.
* ``fit_threads(threads, gemms) -> int``: the largest of ``threads, threads // 2, ...`` (multiples of 32; else
  32, one warp, which splits any tile) whose warps
  split every ``(M, N)`` of ``gemms`` (each ``M % 16 == 0``, ``N % 8 == 0``); where the warp count is a
  multiple of 4 and ``M >= 64`` the split must also suit Warp-Group MMA (TileLang may pick WGMMA there).
  ``threads`` itself (the kernel keeps its launch unchanged) whenever that works. A tile that is not a
  multiple of (16, 8) is skipped (no thread count helps it; the lint's ``gemm-shape`` names it).
  ``ValueError`` when ``threads`` is not a positive multiple of 32.
"""

from __future__ import annotations

from tilesim import dtypes as _dt
from tilesim.warp_partition import warp_partition

__all__ = ["round_up", "gemm_rows", "pow2_at_least", "mma_k", "fit_threads"]


def round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def gemm_rows(rows: int) -> int:
    return max(16, round_up(rows, 16))


def pow2_at_least(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def mma_k(dtype: str) -> int:
    return 256 // _dt.bits(dtype)


def _splits(m: int, n: int, warps: int) -> bool:
    if warp_partition(m, n, warps) is None:
        return False
    return not (m >= 64 and warps % 4 == 0) or warp_partition(m, n, warps, wgmma=True) is not None


def fit_threads(threads: int, gemms) -> int:
    """The largest power-of-two fraction of ``threads`` whose warps split every gemm tile (module docstring)."""
    if threads < 32 or threads % 32:
        raise ValueError(f"threads must be a positive multiple of 32, got {threads}")
    gemms = [(int(m), int(n)) for m, n in gemms if m % 16 == 0 and n % 8 == 0]
    t = threads
    while t >= 32:
        if t % 32 == 0 and all(_splits(m, n, t // 32) for m, n in gemms):
            return t
        t //= 2
    return 32  # one warp owns the whole (16k, 8j) tile
