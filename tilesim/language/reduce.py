"""Reductions over one dimension of a tile, and ``T.cumsum``."""

from __future__ import annotations

from ._marker import marker


@marker()
def reduce_max(buffer, out, dim=-1, clear=True, annotations=None):
    """``out = max(buffer, dim)``; ``clear=False`` folds into ``out``'s values (running max)."""


@marker()
def reduce_min(buffer, out, dim=-1, clear=True, annotations=None):
    """``out = min(buffer, dim)``; ``clear=False`` folds into ``out``."""


@marker()
def reduce_sum(buffer, out, dim=-1, clear=True, annotations=None):
    """``out = sum(buffer, dim)``; ``clear=False`` adds to ``out``."""


@marker()
def reduce_absmax(buffer, out, dim=-1, clear=True, annotations=None):
    """``out = max(|buffer|, dim)``; ``clear=False`` folds into ``out``."""


@marker()
def reduce_abssum(buffer, out, dim=-1):
    """``out = sum(|buffer|, dim)`` (always starts from 0)."""


@marker()
def reduce(buffer, out, reduce_type, dim=-1, clear=True):
    """Generic reduction: ``reduce_type`` is "sum", "max", "min", "absmax" or "abssum"."""


@marker()
def cumsum(src, dst=None, dim=0, reverse=False):
    """Inclusive prefix sum along ``dim`` (in place when ``dst`` is omitted)."""


@marker()
def fill(buffer, value, annotations=None):
    """Set every element of ``buffer`` (or a region) to ``value``."""


@marker()
def clear(buffer):
    """``T.fill(buffer, 0)``."""
