"""Program structure: ``T.prim_func``, ``T.Kernel``, ``T.macro``."""

from __future__ import annotations

from ._marker import marker


def prim_func(fn=None, *, private: bool = False, check_well_formed: bool = True):
    """``@T.prim_func``: trace the decorated function into a tile-IR program (``PrimFunc``).

    Parameters are annotated with ``T.Tensor(shape, dtype)`` (or a scalar dtype). Python values the
    function closes over (tile sizes, flags, dtypes) are constants folded at trace time.
    """
    import sys

    from ..frontend import trace_prim_func

    # The caller's local names (the kernel factory's parameters): with `from __future__ import
    # annotations` the parameter annotations are strings naming them, and they are not closure cells.
    caller = sys._getframe(1).f_locals if fn is not None else sys._getframe(1).f_locals

    from ..errors import user_facing

    @user_facing
    def wrap(f):
        return trace_prim_func(f, extra_env=dict(caller))

    return wrap(fn) if fn is not None else wrap


class _Macro:
    """A ``@T.macro`` helper: inlined at each call site inside a kernel."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "macro")
        self.__doc__ = fn.__doc__
        self.__tilesim_macro__ = True

    def __call__(self, *args, **kwargs):
        from ..errors import KernelSyntaxError
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
