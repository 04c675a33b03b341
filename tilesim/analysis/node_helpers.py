"""Small, stateless questions about IR buffers, regions, dtypes and the hardware model.

Contract
--------
Pure functions shared by the cost rules: an element's byte size (``_size``), a static extent
(``_static``, an ``InternalError`` if it is symbolic), the memory class of a buffer (``_scope``:
``global``/``shared``/``reg``), the buffer an alias views (``_root``), a region's element count
(``_elems``), a ``:line`` label (``_label``), the vector-unit dtype of an element dtype
(``_vec_dtype``) and a core kind of the hardware model (``_core``). No analysis state.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import InternalError
from ..ir import nodes as N


def _size(dtype) -> float:
    return float(dt.itemsize(dtype))


def _static(ext) -> int:
    if isinstance(ext, int):
        return ext
    if isinstance(ext, N.Const):
        return int(ext.value)
    raise InternalError(f"on-chip extent {ext!r} is not static")


def _scope(buf: N.Buffer) -> str:
    if buf.scope == "global":
        return "global"
    if buf.scope.startswith("shared"):
        return "shared"
    return "reg"


def _root(buf: N.Buffer) -> N.Buffer:
    while buf.alias_of is not None:
        buf = buf.alias_of
    return buf


def _elems(region: N.Region) -> int:
    n = 1
    for e in region.extents:
        n *= _static(e) if not isinstance(e, int) else e
    return n


def _label(loc) -> str:
    return f":{loc.line}" if loc is not None else ""


def _vec_dtype(dtype: str) -> str:
    return dtype if dt.is_float(dtype) and dtype not in dt.FP8 else "float32"


def _core(hw, name: str):
    return hw.core_kind(name) if name else hw.primary_core


def single_stage(a) -> bool:
    """Inside a ``T.Pipelined`` loop of ``num_stages`` ≤ 1 with the profile's ``single_stage_sync``: TileLang
    does not pipeline it, so its global → shared copies are synchronous loads by the block's threads (no
    copy engine, no producer warpgroup)."""
    return bool(a.profile.single_stage_sync and a.pipelined_depth and a.pipe_stages <= 1)


def guarded_copy(a) -> bool:
    """Inside a ``T.Pipelined`` loop, under an ``if`` that is not taken in every block and iteration, with the
    profile's ``guarded_copies_sync``: TileLang 0.1.15 neither pipelines nor warp-specialises such a copy, so it
    is a synchronous load by the block's threads (the DSA indexer: its key-tile copy under the causal ``if``
    compiles to thread loads at ``__launch_bounds__(128, 1)``; at one query block the condition always holds
    and the same copy is a TMA load with a producer warpgroup)."""
    return bool(a.profile.guarded_copies_sync and a.pipelined_depth and a.guarded_depth)


def _partition(policy: str, units: int, m_units: int, n_units: int) -> tuple[int, int]:
    """(units along M, units along N) of a warp/warpgroup partition (TileLang's policies)."""
    units = max(1, units)
    if policy == "FullRow":
        wm = max(1, min(units, m_units))
        return wm, max(1, units // wm)
    if policy == "FullCol":
        wn = max(1, min(units, n_units))
        return max(1, units // wn), wn
    best = (1, units)
    for wm in range(1, units + 1):
        if units % wm or wm > max(1, m_units):
            continue
        wn = units // wm
        if wn > max(1, n_units):
            continue
        if abs(m_units / wm - n_units / wn) < abs(m_units / best[0] - n_units / best[1]) or \
                (best[1] > max(1, n_units)):
            best = (wm, wn)
    return best
