"""Small functions the generated CPU code calls (compiled with Numba on first use, inlined by LLVM).

Contract
--------
``namespace()`` returns the dict the generated source is executed in: ``np``, ``math``, ``prange`` and
the compiled helpers below. Semantics are the interpreter's (``backends/interp/exprs.py``):

* ``ld{n}(a, i0..)`` — a guarded global load: an index outside ``a``'s shape reads ``fill`` (TileLang's
  edge rule: 0, or the launch's ``T.annotate_safe_value``); ``st{n}(a, i0.., v)`` skips such a store.
* ``fmin``/``fmax`` propagate NaN (``numpy.minimum``/``maximum``); ``tdiv``/``tmod`` are C's truncating
  integer division and remainder and raise ``ZeroDivisionError`` on a zero divisor (the runtime turns it
  into a located ``KernelRuntimeError``); ``f2i(x, lo, hi)`` is the GPU float→int conversion (truncate,
  saturate, NaN → 0).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ... import optional

MAX_DIMS = 6


def _ld_src(n: int) -> str:
    idx = ", ".join(f"i{k}" for k in range(n))
    cond = " and ".join(f"0 <= i{k} < a.shape[{k}]" for k in range(n))
    return (f"def ld{n}(a, fill, {idx}):\n"
            f"    if {cond}:\n        return a[{idx}]\n"
            f"    return a.dtype.type(fill)\n")


def _st_src(n: int) -> str:
    idx = ", ".join(f"i{k}" for k in range(n))
    cond = " and ".join(f"0 <= i{k} < a.shape[{k}]" for k in range(n))
    return f"def st{n}(a, {idx}, v):\n    if {cond}:\n        a[{idx}] = v\n"


def _fmin(a, b):
    if a != a or b != b:
        return a + b
    return a if a <= b else b


def _fmax(a, b):
    if a != a or b != b:
        return a + b
    return a if a >= b else b


def _tdiv(a, b):
    if b == 0:
        raise ZeroDivisionError("integer division by zero")
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


def _tmod(a, b):
    if b == 0:
        raise ZeroDivisionError("integer division by zero")
    q = abs(a) // abs(b)
    return a - b * (-q if (a < 0) != (b < 0) else q)


def _fdiv(a, b):
    if b == 0:
        raise ZeroDivisionError("integer division by zero")
    return a // b


def _fmod(a, b):
    if b == 0:
        raise ZeroDivisionError("integer division by zero")
    return a % b


def _f2i(x, lo, hi):
    if x != x:
        return 0
    t = math.trunc(x) if math.isfinite(x) else (hi if x > 0 else lo)
    if t < lo:
        return lo
    if t > hi:
        return hi
    return int(t)


@functools.cache
def namespace() -> dict:
    numba = optional.require("numba", "the compiled CPU target (target='cpu')")
    inline = numba.njit(error_model="numpy")
    ns = {"np": np, "math": math, "prange": numba.prange}
    src = "".join(_ld_src(n) + _st_src(n) for n in range(1, MAX_DIMS + 1))
    plain: dict = {}
    exec(compile(src, "<tilesim.cpu.helpers>", "exec"), plain)
    for n in range(1, MAX_DIMS + 1):
        ns[f"ld{n}"] = inline(plain[f"ld{n}"])
        ns[f"st{n}"] = inline(plain[f"st{n}"])
    for name, fn in (("fmin", _fmin), ("fmax", _fmax), ("tdiv", _tdiv), ("tmod", _tmod), ("fdiv", _fdiv),
                     ("fmod", _fmod), ("f2i", _f2i)):
        ns[name] = inline(fn)
    return ns
