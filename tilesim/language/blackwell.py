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
* The SM100 block-scaled path: ``T.tcgen05_sf_warp_transpose`` (scale words into the hardware's chunk order),
  ``T.tcgen05_cp_warpx4`` (shared memory to tensor memory) and ``T.tcgen05_gemm_blockscaled`` (``C (+)=
  (A · sfa) @ (B · sfb)`` with the scales read from tensor memory); see :mod:`tilesim.frontend.tcgen05_sf`.

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


@marker()
def tcgen05_sf_warp_transpose(smem_src):
    """Permute each 128-word chunk of packed scale words in place (word ``32 q + l`` to ``4 l + q``)."""


@marker()
def tcgen05_cp_warpx4(smem_src, tmem_dst, tmem_col_offset=0, *, use_2cta=False):
    """``tcgen05.cp.32x128b.warpx4`` per 128-word chunk: ``TM[r, off + 4 i + c] = S[128 i + 4 (r % 32) + c]``."""


@marker()
def tcgen05_gemm_blockscaled(A, B, C, SFA_tmem, SFB_tmem, transpose_A=False, transpose_B=False, clear_accum=False,
                             wg_wait=0, mbar=None, *, k_start, sf_a_granularity_k, sf_b_granularity_k,
                             use_2cta=False):
    """Blackwell block-scaled gemm: ``C (+)= (A · sfa) @ (B · sfb)`` with UE8M0 scales from tensor memory."""
