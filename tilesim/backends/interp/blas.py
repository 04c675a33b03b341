"""OpenBLAS's own thread count while the interpreter runs chunks on threads.

Contract
--------
``limited(n)`` is a context manager: while at least one ``with limited(n)`` is open (in any thread), the
OpenBLAS that NumPy links runs each product on at most ``n`` threads; when the last one closes, the count it
had before is restored. Chunks on ``w`` threads each calling BLAS with OpenBLAS's default thread count (every
CPU) oversubscribe the machine ``w``-fold, and OpenBLAS's spinning workers then take turns with the chunks:
a threaded fp8 GEMM program (1024 x 1024 x 2048, two chunks on a 2-CPU VM) ran its kernel in 3.84 s with
the default count and in 0.34 s with one BLAS thread per chunk.

The library is found among NumPy's bundled libraries (``numpy.libs`` / ``.dylibs``), by the symbols of
``scipy-openblas`` (64-bit or 32-bit integers) or a plain OpenBLAS; where there is none (Accelerate, MKL, a
system BLAS) ``limited`` does nothing. It never changes values: BLAS results per product do not depend on
its thread count here (each block's product is its own call).
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import threading

import numpy as np

_SYMBOLS = (("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
            ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
            ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
            ("openblas_set_num_threads", "openblas_get_num_threads"))
_lock = threading.Lock()
_api: tuple | None | bool = False  # False: not looked up yet; None: no OpenBLAS found
_open = 0
_saved: int | None = None  # the count to restore when the last `limited` closes (None: unchanged)


def _find():
    base = os.path.dirname(np.__file__)
    paths = glob.glob(os.path.join(base, os.pardir, "numpy.libs", "*openblas*")) + \
        glob.glob(os.path.join(base, ".dylibs", "*openblas*"))
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for set_name, get_name in _SYMBOLS:
            if hasattr(lib, set_name) and hasattr(lib, get_name):
                setter, getter = getattr(lib, set_name), getattr(lib, get_name)
                setter.argtypes, setter.restype, getter.restype = [ctypes.c_int], None, ctypes.c_int
                return setter, getter
    return None


@contextlib.contextmanager
def limited(n: int):
    """OpenBLAS on at most ``n`` threads inside the block (see the module docstring)."""
    global _api, _open, _saved
    with _lock:
        if _api is False:
            _api = _find()
        if _api is not None:
            if _open == 0:
                before = int(_api[1]())
                _saved = before if before > n else None
                if _saved is not None:
                    _api[0](n)
            _open += 1
    try:
        yield
    finally:
        if _api is not None:
            with _lock:
                _open -= 1
                if _open == 0 and _saved is not None:
                    _api[0](_saved)
                    _saved = None


def threads() -> int | None:
    """OpenBLAS's current thread count (None without OpenBLAS)."""
    global _api
    with _lock:
        if _api is False:
            _api = _find()
    return None if _api is None else int(_api[1]())
