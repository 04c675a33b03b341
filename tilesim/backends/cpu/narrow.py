"""Narrow floats (fp16, bf16, fp8, fp4) inside compiled CPU code, through their bit patterns.

Contract
--------
Numba's CPU target has no float16/bfloat16/float8 types, so the compiled code keeps global tensors of these
dtypes as unsigned integers of the same width (``storage_view``) and converts at each access:

* ``decode_table(dtype)`` — a float32 array indexed by bit pattern (256 or 65536 entries): a load of a
  narrow element is ``table[bits]`` (exact: every narrow value is a float32).
* ``encode_bits(x, pos, nan_pos, nan_neg, sat, inf_bits, sign_bit)`` (compiled as ``prelude.enc``) that rounds a float32 to the
  nearest representable value, ties to the even bit pattern, exactly as ``ml_dtypes``/NumPy's ``astype``:
  ``pos`` is the sorted float32 values of the positive finite patterns ``0 .. n-1`` (the pattern of
  ``pos[k]`` is ``k``); values past the largest finite one become ``inf_bits`` when the format has an
  infinity and they reach the rounding boundary, else the largest finite value (saturating formats, as
  ``tilesim.dtypes.convert`` clamps fp8/fp4); NaN becomes what ``dtypes.convert`` makes of a positive or
  negative NaN (``nan_pos``/``nan_neg``; fp4 has no NaN).
* ``encode_args(dtype)`` — the constant tuple ``(pos, nan_pos, nan_neg, sat, inf_bits, sign_bit)`` the generated
  code passes; ``table[enc(x, ...)]`` (decode of encode) is the per-operation rounding of narrow arithmetic.

Tested bitwise against ``ml_dtypes`` over every pattern and random/edge float32 inputs
(``tests/backends/test_cpu_narrow.py``).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ... import dtypes as dt

__all__ = ["decode_table", "encode_args", "encode_bits", "storage_view", "STORAGE"]

#: Unsigned storage type of each narrow dtype in compiled code.
STORAGE = {"float16": np.uint16, "bfloat16": np.uint16, "float8_e4m3fn": np.uint8, "float8_e5m2": np.uint8,
           "float4_e2m1fn": np.uint8}


def storage_view(arr: np.ndarray, dtype: str) -> np.ndarray:
    """``arr`` (of narrow ``dtype``) as its bit patterns, sharing memory."""
    return arr.view(STORAGE[dtype])


@functools.cache
def decode_table(dtype: str) -> np.ndarray:
    """float32 value of every bit pattern of ``dtype`` (fp4: 16 patterns, padded to 256 with NaN)."""
    bits = np.dtype(STORAGE[dtype]).itemsize * 8
    if dtype == "float4_e2m1fn":
        table = np.full(256, np.nan, dtype=np.float32)
        table[:16] = np.arange(16, dtype=np.uint8).view(dt.np_dtype(dtype)).astype(np.float32)
        return table
    pats = np.arange(1 << bits, dtype=STORAGE[dtype])
    return pats.view(dt.np_dtype(dtype)).astype(np.float32)


@functools.cache
def encode_args(dtype: str) -> tuple:
    """``(pos, nan_pos, nan_neg, sat, inf_bits, sign_bit)`` for ``encode`` (see the module docstring)."""
    table = decode_table(dtype)
    n_pat = 16 if dtype == "float4_e2m1fn" else len(table)
    sign_bit = n_pat >> 1
    pos = table[:sign_bit]
    finite = np.isfinite(pos)
    n_finite = int(np.argmin(finite)) if not finite.all() else len(pos)
    pos = np.ascontiguousarray(pos[:n_finite])
    assert np.all(np.diff(pos) > 0), dtype
    inf = np.flatnonzero(np.isinf(table[:n_pat]) & (table[:n_pat] > 0))
    inf_bits = int(inf[0]) if len(inf) else -1
    nans = dt.convert(np.array([np.nan, -np.nan], dtype=np.float32), dtype).view(STORAGE[dtype])
    sat = dtype in dt.SAT_MAX
    return pos, int(nans[0]) & (n_pat - 1), int(nans[1]) & (n_pat - 1), sat, inf_bits, sign_bit


def encode_bits(x, pos, nan_pos, nan_neg, sat, inf_bits, sign_bit):
    """Round float32 ``x`` to the format (see the module docstring); returns the bit pattern."""
    neg = math.copysign(1.0, x) < 0
    if x != x:
        return nan_neg if neg else nan_pos
    a = -x if x < 0 else x
    n = pos.shape[0]
    top = pos[n - 1]
    if a >= top:
        if a == top or sat or inf_bits < 0:
            k = n - 1
        else:
            # past the largest finite value: infinity once the tie point with the next binade step is reached
            step = top - pos[n - 2]
            k = n - 1 if np.float64(a) < np.float64(top) + np.float64(step) / 2 else -1
        r = inf_bits if k < 0 else k
    else:
        lo, hi = 0, n - 1  # pos[lo] <= a < pos[hi]
        while hi - lo > 1:
            mid = (lo + hi) >> 1
            if pos[mid] <= a:
                lo = mid
            else:
                hi = mid
        dlo = np.float64(a) - np.float64(pos[lo])
        dhi = np.float64(pos[hi]) - np.float64(a)
        if dlo < dhi:
            r = lo
        elif dhi < dlo:
            r = hi
        else:
            r = lo if lo % 2 == 0 else hi
    if neg and sign_bit > 0:
        r = r | sign_bit
    return r
