"""Shared-memory bank conflicts of element-level code (``T.Parallel`` bodies).

Contract
--------
``conflict_bytes(a, s, elem_size_max)`` → extra shared-memory bytes per element of the ``T.Parallel``
``s`` (a float ≥ 0) that its shared-memory loads and stores cost beyond their size, to be added to the
op's ``smem`` work. Called while the loop's variables are bound in ``a.env`` (small loops only; a loop
bound to zeros — over 2^16 elements — or with an index the analysis cannot evaluate costs nothing
extra).

The model is the GPU's: shared memory serves one *wavefront* per cycle, 32 banks of 4 bytes (128 B).
The loop's elements are dealt to threads in row-major order of its variables, innermost fastest, each
thread taking ``vec`` consecutive elements (``vec``: the widest power of two up to 16 bytes that every
shared access of the loop reads or writes contiguously, as TileLang's vectoriser requires; else 1).
For the first warp's instruction of each shared access, the wavefronts are the larger of the bytes
over 128 and the most distinct 4-byte words any one bank holds (same word: a broadcast). The access
costs ``wavefronts × 128`` bytes of bandwidth instead of its ``32 × vec × size`` bytes: a column read of
a row-major bf16 tile (``tile[i, j]`` with ``i`` the fast variable) is 32 wavefronts for 64 bytes, 64× its
size; a conflict-free 2-byte access uses half a wavefront's width, 2×.

The profile's ``bank_conflicts`` flag switches the rule on (GPU profiles); the banks' count and width
are NVIDIA's (every GPU since Maxwell), not a per-model number.
"""

from __future__ import annotations

import numpy as np

from ..ir import nodes as N
from ..ir.traverse import loads_in, walk_stmts
from .node_helpers import _scope, _size
from .symbolic import DataDependent

__all__ = ["conflict_bytes", "BANKS", "BANK_BYTES"]

BANKS = 32
BANK_BYTES = 4
WAVEFRONT = BANKS * BANK_BYTES


def _shared_accesses(stmts) -> list:
    """(buffer, indices) of every shared-memory load and store in element-level ``stmts``."""
    out = []

    def loads(e):
        for ld in loads_in(e):
            if _scope(ld.buffer) == "shared":
                out.append((ld.buffer, list(ld.indices)))

    for st in walk_stmts(stmts):
        if isinstance(st, N.Store):
            loads(st.value)
            for i in st.indices:
                loads(i)
            if _scope(st.buffer) == "shared":
                out.append((st.buffer, list(st.indices)))
        elif isinstance(st, N.Let):
            loads(st.value)
        elif isinstance(st, N.If):
            loads(st.cond)
    return out


def _addresses(a, s: N.Parallel, buf, idx) -> np.ndarray | None:
    """Element offsets of one access over the loop's elements, row-major (innermost fastest)."""
    shape = buf.static_shape()
    if not shape or len(shape) != len(idx):
        return None
    strides = np.cumprod([1] + list(shape[::-1][:-1]))[::-1]
    addr = 0
    try:
        for e, st in zip(idx, strides):
            addr = addr + np.asarray(a.ev(e), dtype=np.int64) * int(st)
    except (DataDependent, TypeError, ValueError):
        return None
    addr = np.asarray(addr)
    nd, k = a.space.ndim, len(s.extents)
    if addr.ndim < nd:
        addr = addr.reshape(addr.shape + (1,) * (nd - addr.ndim))
    if addr.ndim != nd:
        return None
    addr = addr[(0,) * (nd - k)]  # the first block class and the first sample of enclosing loops
    try:
        addr = np.broadcast_to(addr, tuple(s.extents))
    except ValueError:
        return None
    return np.ascontiguousarray(addr).reshape(-1)


def _wavefronts(byte_addr: np.ndarray, nbytes: int) -> int:
    words: dict = {}
    for base in byte_addr:
        for w in range(int(base) // BANK_BYTES, (int(base) + nbytes - 1) // BANK_BYTES + 1):
            words.setdefault(w % BANKS, set()).add(w)
    worst = max((len(v) for v in words.values()), default=1)
    unique = sum(len(v) for v in words.values()) * BANK_BYTES
    return max(worst, -(-unique // WAVEFRONT), 1)


def conflict_bytes(a, s: N.Parallel, warp: int = 32) -> float:
    if not a.profile.bank_conflicts or not s.extents:
        return 0.0
    E = int(np.prod(s.extents))
    if E > (1 << 16) or E < 2:
        return 0.0
    acc = _shared_accesses(s.body)
    if not acc:
        return 0.0
    addrs = []
    for buf, idx in acc:
        ad = _addresses(a, s, buf, idx)
        if ad is None or ad.size != E:
            return 0.0
        addrs.append((ad, _size(buf.dtype)))
    inner = int(s.extents[-1])
    vec = max(1, 16 // max(int(sz) for _, sz in addrs))
    while vec > 1 and (inner % vec or any(np.any(np.diff(ad.reshape(-1, vec), axis=1) != 1) for ad, _ in addrs)):
        vec //= 2
    lanes = min(warp, max(1, E // vec))
    extra = 0.0
    for ad, sz in addrs:
        firsts = ad[np.arange(lanes) * vec] * int(sz)
        wf = _wavefronts(firsts, vec * int(sz))
        ideal = lanes * vec * float(sz)
        extra += float(sz) * max(0.0, wf * WAVEFRONT / ideal - 1.0)
    return extra
