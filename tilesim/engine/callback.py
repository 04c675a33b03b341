"""``tilelang.engine.callback``: hooks TileLang calls on its generated CUDA C++ source.

tilesim generates no CUDA C++ (its CUDA backend emits Numba Python, its interpreter nothing), so a
registered post-processing callback is kept (``registered``) but never called; registering one is not an
error, so programs that install one for their GPU build still run here.
"""

from __future__ import annotations

__all__ = ["register_cuda_postproc_callback", "register_cuda_postproc", "registered"]

registered: list = []


def register_cuda_postproc(func, override: bool = True):
    """Record ``func(code, target) -> code``; tilesim never calls it (see the module docstring)."""
    registered.append(func)
    return func


def register_cuda_postproc_callback(func=None, override: bool = True):
    """Decorator form of :func:`register_cuda_postproc`."""
    if func is None:
        return lambda f: register_cuda_postproc(f, override)
    return register_cuda_postproc(func, override)
