"""A small pool of on-chip buffer memory reused across chunks and kernel calls.

Why: the on-chip buffers of a chunk are megabytes that the C allocator hands back to the OS when a
call ends; the next call then pays a page fault per 4 KiB page (measured: ~860 faults, about a
quarter of a 512³ GEMM's time). Reusing the arrays avoids that and the allocation itself.

Contract
--------
* ``empty(shape, dtype)`` returns a C-contiguous, writeable array whose contents are unspecified
  (like ``numpy.empty``); callers overwrite or fill all of it.
* ``give_back(arr, probe)`` offers an array for reuse; ``probe`` is a fresh ``numpy.empty(0)`` that
  the caller holds exactly as it holds ``arr`` (one local variable each). The array is taken only if
  it owns its memory and its reference count equals the probe's: no other object refers to it, so
  no view of it can exist. Otherwise it is left alone. Only the interpreter's own on-chip arrays,
  after their chunk is done with them, are offered.
* Only arrays of ``MIN_BYTES`` to ``POOL_BYTES / 4`` are kept, at most ``POOL_BYTES`` in all (oldest
  shapes dropped first). ``clear()`` drops them all.
"""

from __future__ import annotations

import sys
import threading

import numpy as np

POOL_BYTES = 64 * 2**20
#: Smaller arrays are left to the allocator (cheap, and reused without page faults anyway).
MIN_BYTES = 2**16

_lock = threading.Lock()
_free: dict[tuple, list] = {}  # (shape, dtype) -> arrays, in insertion order of the keys
_held = 0


def empty(shape, dtype) -> np.ndarray:
    global _held
    key = (tuple(shape), np.dtype(dtype))
    n = key[1].itemsize
    for d in key[0]:
        n *= d
    if n < MIN_BYTES:
        return np.empty(key[0], dtype=key[1])
    with _lock:
        lst = _free.get(key)
        if lst:
            arr = lst.pop()
            if not lst:
                del _free[key]
            _held -= arr.nbytes
            return arr
    return np.empty(key[0], dtype=key[1])


def give_back(arr, probe) -> None:
    global _held
    if sys.getrefcount(arr) != sys.getrefcount(probe):  # first: nothing here may take a reference
        return
    if (type(arr) is not np.ndarray or not MIN_BYTES <= arr.nbytes <= POOL_BYTES // 4
            or not arr.flags.owndata or not arr.flags.c_contiguous or not arr.flags.writeable):
        return
    key = (arr.shape, arr.dtype)
    with _lock:
        while _held + arr.nbytes > POOL_BYTES and _free:
            k = next(iter(_free))
            lst = _free[k]
            _held -= lst.pop().nbytes
            if not lst:
                del _free[k]
        _free.setdefault(key, []).append(arr)
        _held += arr.nbytes


def clear() -> None:
    global _held
    with _lock:
        _free.clear()
        _held = 0
