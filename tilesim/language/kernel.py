"""Program structure: ``T.Kernel`` and ``T.macro`` (``T.prim_func`` is in :mod:`.program`).

This module does not import the frontend (the frontend imports it: ``T.Kernel``'s signature and the
``T.macro`` wrapper class ``_Macro``).
"""

from __future__ import annotations

from ..errors import KernelSyntaxError
from ._marker import marker


class _Macro:
    """A ``@T.macro`` helper: inlined at each call site inside a kernel."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "macro")
        self.__doc__ = fn.__doc__
        self.__tilesim_macro__ = True

    def __call__(self, *args, **kwargs):
        raise KernelSyntaxError(f"macro {self.__name__} can only be called inside a kernel body")


def macro(fn=None, **_kw):
    """``@T.macro``: a function of T statements inlined where it is called inside a kernel."""
    return _Macro(fn) if fn is not None else (lambda f: _Macro(f))


@marker("Kernel")
def Kernel(*blocks, threads=128, is_cpu=False, prelude=None, cluster_dims=None):  # noqa: N802
    """``with T.Kernel(gx, gy, threads=128) as (bx, by):`` one launch over a 1–3-D grid of blocks.

    Args:
        *blocks: grid extents (ints or integer expressions).
        threads: threads per block (int or a tuple of up to 3 ints).

    Yields the block index (1-D grid) or a tuple of block indices.
    """
