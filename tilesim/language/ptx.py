"""Low-level CUDA primitives with a tile-level meaning: element pointers, ``cp.async`` and vector atomics.

Contract
--------
* ``T.access_ptr(base, access_type="r", *extents, offset=0, extent=None)`` names a run of ``extent``
  consecutive (row-major) elements of a buffer starting at ``base`` (an element ``A[i, j]``, a region's
  first element, or a whole buffer) plus ``offset``. It is only an operand of the primitives below; used
  elsewhere it is a located error.
* ``T.ptx_cp_async(dst_ptr, src_ptr, num_elems, predicate=None)``: the executing thread copies
  ``num_elems`` consecutive elements from ``src_ptr`` to ``dst_ptr`` (same dtype); with a predicate that is
  false the destination elements are zero (``cp.async``'s zero fill). ``cp.async`` is asynchronous on a
  GPU and its data is visible after the matching ``T.ptx_wait_group`` / mbarrier wait; tilesim runs the
  program in program order, so the copy completes at once (one legal schedule of a correctly synchronised
  program). ``T.ptx_commit_group()`` and ``T.ptx_wait_group(n)`` therefore order nothing further.
* ``T.atomic_addx2(dst, value)`` / ``T.atomic_addx4(dst, value)``: element-wise atomic add of 2 / 4
  consecutive elements starting at the elements ``dst`` and ``value`` (a vector atomic on a GPU: each
  element is one atomic add).
* ``T.dp4a(A, B, C)``: ``C[0] += sum(int32(A[i]) * int32(B[i]) for i in 0..3)`` over four consecutive int8
  elements from ``A`` and ``B`` into the int32 element ``C`` (the ``dp4a`` instruction).
"""

from __future__ import annotations

from ._marker import marker


@marker()
def access_ptr(base, access_type="r", *extents, offset=0, extent=None, ignore_last_ndim=0):
    """A pointer to ``extent`` (default: the product of ``extents``, else 1) consecutive elements from
    ``base`` + ``offset``; an operand of ``T.ptx_cp_async``."""


@marker()
def ptx_cp_async(dst_access_ptr, src_access_ptr, num_elems, predicate=None):
    """Copy ``num_elems`` consecutive elements (``cp.async``; complete at once here)."""


@marker()
def ptx_commit_group():
    """Close the group of outstanding ``cp.async`` copies (they completed already here)."""


@marker()
def ptx_wait_group(num):
    """Wait until at most ``num`` ``cp.async`` groups are outstanding (none are, here)."""


@marker()
def atomic_addx2(dst, value, return_prev=False):
    """Atomically add the 2 consecutive elements from ``value`` to those from ``dst``."""


@marker()
def atomic_addx4(dst, value, return_prev=False):
    """Atomically add the 4 consecutive elements from ``value`` to those from ``dst``."""


@marker()
def dp4a(A, B, C):
    """Four-element signed int8 dot product accumulated into the int32 element ``C``."""
