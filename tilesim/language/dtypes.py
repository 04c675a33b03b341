"""``tilelang.language.dtypes``: the :class:`~tilesim.language.types.dtype` class and torch dtype names.

``_TORCH_DTYPE_TO_STR`` maps each torch dtype tilesim computes with to its dtype name (TileLang's table,
used by programs to turn a tensor's dtype into a ``T.dtype``); it is empty when torch is not installed.
"""

from __future__ import annotations

from .. import dtypes as _dt
from ..errors import KernelError
from ..optional import module as _module
from .types import dtype

__all__ = ["dtype", "_TORCH_DTYPE_TO_STR"]


def _torch_names() -> dict:
    torch = _module("torch")
    if torch is None:
        return {}
    out = {}
    for a in dir(torch):
        t = getattr(torch, a, None)
        if isinstance(t, torch.dtype):
            name = str(t).replace("torch.", "")
            try:
                if _dt.canon(name) == name:  # tilesim computes with it under the same name
                    out[t] = name
            except KernelError:
                pass
    return out


_TORCH_DTYPE_TO_STR = _torch_names()
