"""Execution state of the batched interpreter and the value conventions it relies on.

Value conventions (every rule in ``exprs``/``memory``/``tileops``/``control`` keeps them):

* A **uniform** value (the same for every block and element) is a Python ``int``/``bool`` (integers,
  indices) or a NumPy scalar of the compute dtype (floats keep their precision: ``np.float32``).
* A **varying** value is an ndarray of ndim ``1 + rank``: axis 0 is the block axis (length ``nb`` or
  1), then one axis per enclosing ``T.Parallel`` dimension (length = extent or 1). ``rank`` is the
  number of parallel dimensions in scope. :func:`lift` adds trailing unit axes to values made at an
  outer rank.
* Arithmetic happens in the compute dtype (``dtypes.compute_dtype``): narrow floats in float32 with a
  rounding after each operation, integers in int64.
* On-chip storage has a leading block axis: a ``(M, N)`` fragment is an ``(nb, M, N)`` array; a ``var``
  is ``(nb,)``. Global storage is the tensor itself.
* ``mask`` is ``None`` (all active), ``False`` (none), or a boolean array broadcastable to the current
  value shape: the blocks/elements that statements may write.
"""

from __future__ import annotations

import numpy as np

from .options import InterpOptions


class LoopFrame:
    __slots__ = ("broken", "cont")

    def __init__(self):
        self.broken = False  # blocks/elements that left the loop (False: none, True: all)
        self.cont = False  # blocks/elements that skip the rest of this iteration


class Ctx:
    """Mutable state of one chunk of blocks of one launch."""

    def __init__(self, nb: int, options: InterpOptions, env: dict, storage: dict, block_ids):
        self.nb = nb
        self.options = options
        self.env = env  # Var uid -> value
        self.storage = storage  # Buffer uid -> ndarray
        self.block_ids = block_ids  # (nb,) int64 linear block ids
        self.mask = None
        self.rank = 0
        self.pvars: dict[int, tuple[int, int]] = {}  # parallel var uid -> (axis, extent)
        self.loops: list[LoopFrame] = []
        self.writers: dict[int, np.ndarray] = {}  # race detection: buffer uid -> writer block id
        self.windows: dict = {}  # (global buffer uid, extents) -> sliding-window view
        self.aliased: frozenset = frozenset()  # uids of on-chip buffers that have views (never re-bound)
        self.safe: dict = {}  # global buffer uid -> value out-of-range reads give (T.annotate_safe_value)


def lift(v, rank: int):
    """Give an ndarray made at an outer parallel rank the trailing unit axes of ``rank``."""
    if isinstance(v, np.ndarray) and v.ndim < 1 + rank:
        if v.ndim == 0:
            return v[()]
        return v.reshape(v.shape + (1,) * (1 + rank - v.ndim))
    return v


def mask_and(a, b):
    """Conjunction of two masks (``None`` = all active, ``False`` = none)."""
    if a is None:
        return b
    if b is None:
        return a
    if a is False or b is False:
        return False
    return np.logical_and(a, b)


def set_or(a, b):
    """Union of two block/element sets given as ``False`` (empty), ``True`` (all) or bool arrays."""
    if a is True or b is True:
        return True
    if a is False:
        return b
    if b is False:
        return a
    return np.logical_or(a, b)


def mask_as_set(m):
    """The active set of mask ``m`` (``None`` = all) as ``True``/``False``/array."""
    return True if m is None else m


def mask_minus(m, s):
    """Mask ``m`` without the set ``s``."""
    if s is False:
        return m
    if s is True:
        return False
    return mask_and(m, np.logical_not(s))


def none_active(m) -> bool:
    if m is None:
        return False
    if m is False:
        return True
    if m is True:
        return False
    if isinstance(m, np.ndarray):
        return not m.any()
    return not bool(m)




def block_mask(m, nb: int):
    """A per-block boolean vector (nb,) from a block-level mask, or None when all are active."""
    if m is None or m is True:
        return None
    if m is False:
        return np.zeros(nb, dtype=bool)
    m = np.asarray(m)
    if m.ndim == 0:
        return None if bool(m) else np.zeros(nb, dtype=bool)
    m = m.reshape(m.shape[0], -1)
    if m.shape[1] != 1:
        m = m.any(axis=1)
    else:
        m = m[:, 0]
    return np.broadcast_to(m, (nb,))

