"""``tilelang.transform`` as TileLang programs use it: ``PassConfigKey`` and ``simplify_prim_func``.

tilesim has no pass pipeline to configure beyond the pass configs ``tilesim.config`` honours; the frontend
already folds constants and simplifies slice bounds while it builds the IR, so simplifying changes nothing.

``simplify_prim_func`` is used two ways, as in TileLang: on a ``@T.prim_func`` it returns the program; as a
decorator on a *function that builds one* (``@simplify_prim_func def make(M, N): ... return kernel``) it
returns a function that calls the builder and checks its result is a ``PrimFunc``. Anything else (a
compiled kernel, a result that is not a program) is a ``KernelTypeError``. ``apply_simplify(pf)`` is the
program itself.
"""

from __future__ import annotations

import functools

from .config import PassConfigKey
from .errors import KernelTypeError
from .ir import nodes as N

__all__ = ["PassConfigKey", "simplify_prim_func", "apply_simplify"]


def apply_simplify(func, inline_let: bool = False):
    """The program ``func`` (a ``@T.prim_func``); the frontend has simplified it already."""
    if not isinstance(func, N.PrimFunc):
        raise KernelTypeError(f"simplify expects a @T.prim_func, got {type(func).__name__}",
                              hint="pass the program (the @T.prim_func), not a compiled kernel")
    return func


def simplify_prim_func(func):
    """A ``@T.prim_func`` unchanged, or a program builder wrapped to check that it builds one."""
    if isinstance(func, N.PrimFunc):
        return func
    if not callable(func) or hasattr(func, "prim_func"):
        raise KernelTypeError(f"simplify_prim_func expects a @T.prim_func or a function that returns one, "
                              f"got {type(func).__name__}",
                              hint="pass the program (the @T.prim_func), not a compiled kernel")

    @functools.wraps(func)
    def build(*args, **kwargs):
        return apply_simplify(func(*args, **kwargs))

    return build
