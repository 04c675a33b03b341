"""``T.copy`` and the Hopper ``T.tma_copy`` alias."""

from __future__ import annotations

from ._marker import marker


@marker()
def copy(src, dst, coalesced_width=None, disable_tma=False, eviction_policy=None, loop_layout=None, annotations=None):
    """Copy ``src`` to ``dst`` element-wise, converting to ``dst``'s dtype.

    Operands are buffers, slice regions ``A[i0:i1, :]`` or one element ``A[y, x]`` used as the start
    corner (extents come from the other operand). Out-of-range reads of a global tensor give 0 and
    out-of-range writes are skipped, so tiles may overhang the tensor edges.

    Example: ``T.copy(A[by * BM, k * BK], A_shared)``
    """


@marker()
def tma_copy(src, dst, *args, **kwargs):
    """Hopper bulk tensor copy; at tile level it is ``T.copy``."""


@marker()
def async_copy(src, dst, *args, **kwargs):
    """Asynchronous copy; at tile level it is ``T.copy``."""
