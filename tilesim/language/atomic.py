"""Atomics: ``T.atomic_add``, ``T.atomic_max``, ``T.atomic_min``."""

from __future__ import annotations

from ._marker import marker


@marker()
def atomic_add(dst, value, memory_order=None, return_prev=False, use_tma=False):
    """Atomically ``dst += value`` for one element or elementwise over a region.

    Cross-block reductions (split-K) use it on outputs the caller zeroed.
    Example: ``T.atomic_add(C[by * BM, bx * BN], C_local)``
    """


@marker()
def atomic_max(dst, value, memory_order=None, return_prev=False):
    """Atomically ``dst = max(dst, value)``."""


@marker()
def atomic_min(dst, value, memory_order=None, return_prev=False):
    """Atomically ``dst = min(dst, value)``."""
