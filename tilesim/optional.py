"""Optional third-party packages, imported on first use in one place.

Contract
--------
tilesim needs only NumPy, ml_dtypes and matplotlib to import. torch, CuPy, numba(-cuda) and the sweep engines
(Dask ``distributed``, Ray; :mod:`tilesim.sweep`) are optional:
a user without them never pays their import time and never sees an error unless they ask for a feature
that needs them.

* ``module(name)`` returns the imported module or ``None`` when it is not installed (any ``ImportError``
  while importing counts as not installed). Results are cached.
* ``require(name, feature)`` returns the module or raises :class:`~tilesim.errors.KernelError` saying
  which feature needs it and how to install it.
* ``loaded(name)`` returns the module only if the user's program has already imported it (a torch
  tensor cannot reach tilesim unless torch was imported), without importing it: type checks such as
  "is this a torch tensor" use it and stay free for NumPy users.

This module is the only place in tilesim that imports an optional package by name; everything else asks
it. ``numba.cuda`` has its own entry point (:func:`tilesim.backends.cuda.caps.cuda_module`), which
applies a NumPy compatibility fix before the import.
"""

from __future__ import annotations

import importlib
import sys

from .errors import KernelError

__all__ = ["module", "require", "loaded"]

#: how to install each optional package (shown in errors)
INSTALL = {
    "torch": "pip install torch",
    "cupy": "pip install cupy-cuda12x",
    "numba": 'pip install -e ".[cuda]"',
    "numba.cuda": 'pip install -e ".[cuda]"',
    "llvmlite": 'pip install -e ".[cuda]"',
    "matplotlib.pyplot": "pip install matplotlib",
    "distributed": 'pip install -e ".[dask]"',
    "ray": 'pip install -e ".[ray]"',
}

_cache: dict[str, object] = {}


def module(name: str):
    """The module ``name`` if it can be imported, else ``None``."""
    if name not in _cache:
        try:
            _cache[name] = importlib.import_module(name)
        except ImportError:
            _cache[name] = None
    return _cache[name]


def require(name: str, feature: str):
    """The module ``name``, or a :class:`KernelError` naming ``feature`` and the install command."""
    mod = module(name)
    if mod is None:
        how = INSTALL.get(name, f"pip install {name.split('.')[0]}")
        raise KernelError(f"{feature} needs the optional package '{name}', which is not installed",
                          hint=f"install it: {how}")
    return mod


def loaded(name: str):
    """The module ``name`` if the program already imported it, else ``None`` (never imports)."""
    return sys.modules.get(name)
