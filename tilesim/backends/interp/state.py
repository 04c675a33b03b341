"""Execution state of the batched interpreter and the value conventions it relies on.

Value conventions (every rule in ``exprs``/``memory``/``tile_*``/``rules`` keeps them):

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

from ... import dtypes as dt
from . import pool
from .options import INT_SENTINEL, InterpOptions


class LoopFrame:
    __slots__ = ("broken", "cont")

    def __init__(self):
        self.broken = False  # blocks/elements that left the loop (False: none, True: all)
        self.cont = False  # blocks/elements that skip the rest of this iteration


def _fill_uninit(arr: np.ndarray, dtype: str, how: str):
    if how == "empty":
        return
    if how == "one":  # the sanitizer's third fill: differs from NaN and 0 through comparisons and casts
        arr[...] = 1
    elif how == "zero" or dtype == "bool":  # (bool memory under "nan"/"check" holds False)
        arr[...] = 0
    elif dt.is_float(dtype):
        arr[...] = np.nan
    else:
        info = np.iinfo(arr.dtype)
        arr[...] = max(info.min, min(info.max, INT_SENTINEL)) if info.min < 0 else info.max


def new_array(shape, dtype: str, how: str) -> np.ndarray:
    """A fresh array of ``dtype`` holding what ``InterpOptions.uninit`` (``how``) says."""
    arr = np.empty(shape, dtype=dt.np_dtype(dtype))
    _fill_uninit(arr, dtype, how)
    return arr


class Storage(dict):
    """Buffer uid → ndarray for one chunk, with **deferred** on-chip allocations.

    ``defer(uid, shape, dtype, how)`` records an allocation without making it: the first
    ``storage[uid]`` makes it (filled as ``new_array`` does, so a read of a never-written buffer still
    sees NaN or the integer sentinel), while a rule that overwrites the whole buffer
    (``tile_copy._adopt``, a whole-buffer ``T.fill``/``T.clear``) installs its own array with
    ``storage[uid] = arr`` and the uninitialised one is never made. A deferred buffer is absent from
    ``keys()``/``values()``/``in``/``get`` (it has no memory yet); ``dtype_of``/``is_deferred`` see it
    without making it. ``release(keep)`` ends the chunk: on-chip arrays go back to ``pool``.
    """

    __slots__ = ("deferred",)

    def __init__(self, *args):
        super().__init__(*args)
        self.deferred: dict[int, tuple] = {}  # uid -> (shape, dtype name, uninit)

    def defer(self, uid: int, shape: tuple, dtype: str, how: str):
        dict.pop(self, uid, None)  # a re-executed Alloc gets fresh (uninitialised) memory
        self.deferred[uid] = (shape, dtype, how)

    def is_deferred(self, uid: int) -> bool:
        return uid in self.deferred

    def dtype_of(self, uid: int) -> np.dtype:
        d = self.deferred.get(uid)
        return dt.np_dtype(d[1]) if d is not None else self[uid].dtype

    def __missing__(self, uid):
        spec = self.deferred.pop(uid, None)
        if spec is None:
            raise KeyError(uid)
        shape, dtype, how = spec
        arr = pool.empty(shape, dt.np_dtype(dtype))
        _fill_uninit(arr, dtype, how)
        dict.__setitem__(self, uid, arr)
        return arr

    def __setitem__(self, uid, arr):
        if self.deferred:
            self.deferred.pop(uid, None)
        dict.__setitem__(self, uid, arr)

    def release(self, keep) -> None:
        """Drop every buffer but those in ``keep``, offering their arrays to ``pool`` for reuse."""
        self.deferred.clear()
        probe = np.empty(0)
        for uid in [u for u in self if u not in keep]:
            arr = dict.pop(self, uid)
            pool.give_back(arr, probe)


def storage_dtype(storage: dict, uid: int) -> np.dtype:
    """Dtype of buffer ``uid``'s storage without making a deferred allocation."""
    return storage.dtype_of(uid) if isinstance(storage, Storage) else storage[uid].dtype


def is_deferred(storage: dict, uid: int) -> bool:
    return isinstance(storage, Storage) and uid in storage.deferred


class Ctx:
    """Mutable state of one chunk of blocks of one launch."""

    def __init__(self, nb: int, options: InterpOptions, env: dict, storage: dict, block_ids):
        self.nb = nb
        self.options = options
        self.env = env  # Var uid -> value
        self.storage = storage  # Buffer uid -> ndarray (a ``Storage`` inside a launch)
        self.block_ids = block_ids  # (nb,) int64 linear block ids
        self.mask = None
        self.rank = 0
        self.cluster = 1  # blocks per cluster: rows r - r % cluster .. of the chunk are r's cluster
        self.block_vars: frozenset = frozenset()  # uids of the launch's block-index variables
        self.clc = None  # the launch's cluster.Launcher when it uses cluster launch control
        self.pvars: dict[int, tuple[int, int]] = {}  # parallel var uid -> (axis, extent)
        self.loops: list[LoopFrame] = []
        self.writers: dict[int, np.ndarray] = {}  # race detection: buffer uid -> writer block id
        self.windows: dict = {}  # (global buffer uid, extents) -> sliding-window view
        self.aliased: frozenset = frozenset()  # uids of on-chip buffers that have views (never re-bound)
        self.gemm_loops: dict = {}  # id(For) -> gemm_loop.GemmLoopPlan (loops run fused)
        self.safe: dict = {}  # global buffer uid -> value out-of-range reads give (T.annotate_safe_value)
        self.simt = None  # simt.Prepared of a per-thread launch
        self.shadow: dict | None = None  # uninit="check": buffer uid -> initialised mask (shadow.py)
        self.rules: dict | None = None  # statement rules in force (None: STMT_RULES; per-thread: simt's)
        self.runs: dict = {}  # coroutines.plan of the launch body: id(stmt) -> warp-group run members
        self.sched = None  # coroutines scheduler while warp groups run as tasks (shared by their Ctx copies)
        self.task = None  # the task this Ctx copy runs


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

