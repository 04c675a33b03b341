"""Markers: ``T.*`` functions are recognised by the frontend, not run by Python.

A marker keeps its Python signature (the frontend binds call arguments against it, so argument
errors read like Python's) and its docstring. Called outside a kernel it raises a clear error.
"""

from __future__ import annotations

import functools

from ..errors import KernelSyntaxError


def marker(name: str | None = None, *, python_ok: bool = False):
    """Mark a function as the ``T.<name>`` primitive.

    ``python_ok`` primitives also run as plain Python (on Python values) outside kernels, e.g.
    ``T.ceildiv(1000, 64)`` in a kernel factory.
    """

    def deco(fn):
        prim = name or fn.__name__
        if python_ok:
            fn.__tilesim_prim__ = prim
            return fn

        @functools.wraps(fn)
        def outside(*args, **kwargs):
            raise KernelSyntaxError(
                f"T.{prim} can only be used inside a kernel body",
                hint="call it inside a function decorated with @T.prim_func (lazy style) or "
                     "@tilesim.jit (eager style), within `with T.Kernel(...)` for tile operations",
            )

        outside.__tilesim_prim__ = prim
        outside.__tilesim_sig__ = fn
        return outside

    return deco
