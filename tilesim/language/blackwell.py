"""Blackwell (sm_100 / sm_120) primitives at tile level: tensor memory, ``tcgen05`` gemms, block-scaled
gemms.

Contract
--------
tilesim interprets a program's meaning, not the chip, so these primitives mean what they compute:

* ``T.alloc_tmem(shape, dtype)`` is **on-chip accumulator storage** of the block (Blackwell's tensor
  memory): a tile buffer (scope ``"tmem"``) that gemms accumulate into and ``T.copy`` moves to and from
  fragments. Its contents start undefined (NaN-filled by the interpreter, as every allocation).
* ``T.tcgen05_gemm(A, B, C, ...)`` is ``T.gemm`` (``C`` may be a tensor-memory or fragment tile) issued
  asynchronously; here it completes at once. ``mbar=b`` arrives **once** on ``b`` when it completes
  (``tcgen05.commit``), as does ``T.tcgen05_mma_arrive(b)``. ``clear_accum`` may be a kernel expression
  (``k == 0``): the accumulator is cleared where it is true.
* ``T.mma_gemm_blockscaled`` / ``T.tcgen05_gemm_blockscaled``: ``C += (A · sfa) @ (B · sfb)`` with one
  scale per ``sf_*_granularity_k`` elements of K (see :mod:`tilesim.frontend.blackwell`).
* ``use_2cta=True`` / ``arrive_2cta=True`` (a gemm spread over the two blocks of a cluster) are given their
  meaning in :mod:`tilesim.language.cluster`.
* The tensor-memory scale-factor moves (``T.tcgen05_cp_warpx4``, ``T.tcgen05_sf_warp_transpose``,
  ``T.tcgen05_gemm_blockscaled``) are refused with a ``KernelSyntaxError`` naming the construct and why
  (:data:`tilesim.language.annotate.UNSUPPORTED`).

The CUDA backend refuses tensor memory (the lent GPU is an H200; sm_100 code cannot run there).
``docs/language.md`` ("Blackwell programs") has the details.
"""

from __future__ import annotations

from ._marker import marker
from .gemm import GemmWarpPolicy


@marker()
def alloc_tmem(shape, dtype):
    """Blackwell tensor memory: an on-chip accumulator tile of the block (scope ``"tmem"``)."""


@marker()
def tcgen05_gemm(A, B, C, transpose_A=False, transpose_B=False, policy=GemmWarpPolicy.Square,
                 clear_accum=False, *, mbar=None, use_2cta=False, annotations=None):
    """Blackwell asynchronous gemm: ``T.gemm`` that completes at once; ``mbar`` gets one arrival when done."""


@marker()
def tcgen05_mma_arrive(mbar, arrive_2cta=False):
    """``tcgen05.commit``: one arrival on ``mbar`` once the gemms issued before it complete (at once here)."""


@marker()
def mma_gemm_blockscaled(A, B, C, SFA, SFB, transpose_A=False, transpose_B=False,
                         policy=GemmWarpPolicy.Square, clear_accum=False, *, k_start, sf_a_granularity_k,
                         sf_b_granularity_k, sf_layout=None):
    """SM120 block-scaled gemm: ``C += (A · sfa) @ (B · sfb)``, scales per K group (see the frontend)."""
