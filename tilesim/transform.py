"""``tilelang.transform`` as TileLang programs use it: ``PassConfigKey`` and ``simplify_prim_func``.

tilesim has no pass pipeline to configure beyond the pass configs ``tilesim.config`` honours; the frontend
already folds constants and simplifies slice bounds while it builds the IR, so ``simplify_prim_func``
returns the program unchanged (after checking it is one).
"""

from __future__ import annotations

from .config import PassConfigKey
from .errors import KernelTypeError
from .ir import nodes as N

__all__ = ["PassConfigKey", "simplify_prim_func"]


def simplify_prim_func(func):
    """The program ``func`` (a ``@T.prim_func``); the frontend has simplified it already."""
    if not isinstance(func, N.PrimFunc):
        raise KernelTypeError(f"simplify_prim_func expects a @T.prim_func, got {type(func).__name__}")
    return func
