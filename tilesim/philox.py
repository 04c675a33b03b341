"""Philox4x32-10 (Salmon et al., SC'11), as cuRAND's ``curandStatePhilox4_32_10_t`` and Triton's
``tl.randint4x`` compute it: the random stream of ``T.rng_init`` / ``T.rng_rand``.

Contract
--------
:func:`draw(seed, seq, pos)` is the ``pos``-th 32-bit value (0-based) of the stream of ``(seed, seq)``:
``curand_init(seed, seq, offset)`` followed by ``k`` calls of ``curand()`` gives ``draw(seed, seq, offset + k)``.
The block of four values ``pos // 4`` is Philox4x32-10 of the 128-bit counter ``(pos // 4) + (seq << 64)``
(little-endian 32-bit words) under the key ``(seed & 0xFFFFFFFF, seed >> 32)``; ``pos % 4`` picks the word.
Arguments are integers or integer arrays (broadcast; values below ``2**64``); the result is ``uint32``.
"""

from __future__ import annotations

import numpy as np

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_MASK = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)


def philox4x32_10(c0, c1, c2, c3, k0, k1):
    """The four output words of Philox4x32-10 (uint64 arrays holding 32-bit values)."""
    for r in range(10):
        if r:
            k0, k1 = (k0 + _W0) & _MASK, (k1 + _W1) & _MASK
        p0, p1 = _M0 * c0, _M1 * c2  # < 2**64: exact in uint64
        c0, c1, c2, c3 = ((p1 >> _S32) ^ c1 ^ k0) & _MASK, p1 & _MASK, ((p0 >> _S32) ^ c3 ^ k1) & _MASK, p0 & _MASK
    return c0, c1, c2, c3


def draw(seed, seq, pos) -> np.ndarray:
    """The ``pos``-th value of the ``(seed, seq)`` stream (see the module docstring)."""
    u = [np.asarray(v).astype(np.int64).astype(np.uint64) for v in (seed, seq, pos)]
    seed, seq, pos = np.broadcast_arrays(*u)
    ctr = pos >> np.uint64(2)
    words = philox4x32_10(ctr & _MASK, ctr >> _S32, seq & _MASK, seq >> _S32, seed & _MASK, seed >> _S32)
    lane = (pos & np.uint64(3)).astype(np.int64)
    out = np.choose(lane, words)
    return out.astype(np.uint32)
