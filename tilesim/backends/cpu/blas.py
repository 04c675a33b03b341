"""Numba's BLAS without ``scipy.linalg``'s package import (the first-call cost of the CPU target).

Contract: :func:`preload` puts SciPy's ``scipy.linalg.cython_blas`` extension module in ``sys.modules``,
loaded from its file, when neither it nor ``scipy.linalg`` is imported yet; it returns whether it did. Called
by :mod:`.prelude` (imported by every generated kernel module) before Numba's first compilation in a process.

Why: Numba's first compilation in a process loads its NumPy registries, whose ``numba.np.arraymath`` checks
for BLAS with ``import scipy.linalg.cython_blas``; that imports the whole ``scipy.linalg`` package first
(0.17-0.26 s here), although Numba's ``np.dot`` (our ``prelude.mm``) only needs the BLAS function pointers
that ``cython_blas`` exports (``__pyx_capi__``, looked up by name when a product first runs). The
extension module itself loads in about 0.01 s and does not need its package.

What it changes for the rest of the process: ``import scipy.linalg.cython_blas`` (and ``from scipy.linalg import
cython_blas``) give this module; ``scipy.linalg`` imports normally when something asks for it, but its attribute
``cython_blas`` is then absent until something imports ``scipy.linalg.cython_blas`` by name (the import system
sets a package's attribute only when it loads the submodule itself). Any failure (no SciPy, another layout)
leaves ``sys.modules`` as it was: Numba then imports ``scipy.linalg`` as usual.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

NAME = "scipy.linalg.cython_blas"


def preload() -> bool:
    """Load ``scipy.linalg.cython_blas`` without its package (see the module docstring)."""
    if NAME in sys.modules or "scipy.linalg" in sys.modules:
        return False
    try:
        spec = importlib.util.find_spec("scipy")  # a top-level package: found, not imported
        dirs = list(spec.submodule_search_locations or []) if spec is not None else []
        for d in dirs:
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                path = os.path.join(d, "linalg", "cython_blas" + suffix)
                if os.path.exists(path):
                    return _load(path)
    except (ImportError, OSError, ValueError):
        pass
    return False


def _load(path: str) -> bool:
    spec = importlib.util.spec_from_file_location(NAME, path)
    if spec is None or spec.loader is None:
        return False
    mod = importlib.util.module_from_spec(spec)
    sys.modules[NAME] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception:  # noqa: BLE001 - any failure: Numba imports scipy.linalg itself
        del sys.modules[NAME]
        return False
    return hasattr(mod, "__pyx_capi__") or _unload()


def _unload() -> bool:
    del sys.modules[NAME]
    return False
