"""``@T.prim_func``: trace the decorated function into a tile-IR program (``PrimFunc``).

The one module of the language that calls the frontend. The frontend imports the language's markers
(``T.Kernel``, ``T.macro``, the types), so the markers live in modules that do not import it
(:mod:`tilesim.language.kernel`, :mod:`tilesim.language.types`) and only this decorator does: the
two packages form no import cycle.
"""

from __future__ import annotations

import sys

from ..errors import user_facing
from ..frontend import trace_prim_func

__all__ = ["prim_func"]


def prim_func(fn=None, *, private: bool = False, check_well_formed: bool = True):
    """``@T.prim_func``: trace the decorated function into a tile-IR program (``PrimFunc``).

    Parameters are annotated with ``T.Tensor(shape, dtype)`` (or a scalar dtype). Python values the
    function closes over (tile sizes, flags, dtypes) are constants folded at trace time. A user error in
    the body is raised where the program is used (compiled, called), not here: a prim_func that is
    defined but never used is never checked.
    """
    # The caller's local names (the kernel factory's parameters): with `from __future__ import
    # annotations` the parameter annotations are strings naming them, and they are not closure cells.
    caller = sys._getframe(1).f_locals if fn is not None else sys._getframe(1).f_locals

    @user_facing
    def wrap(f):
        # Errors surface where the program is used: a factory may define prim_funcs it does not return.
        return trace_prim_func(f, extra_env=dict(caller), defer_errors=True)

    return wrap(fn) if fn is not None else wrap
