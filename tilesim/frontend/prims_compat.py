"""Builders for TileLang-compatibility primitives: layout annotations and tensor views over another's storage.

Contract
--------
* Registered into :data:`tilesim.frontend.prims.BUILDERS` (same calling convention: ``b(tr, loc, **args)``).
* ``T.annotate_layout({buf: layout})`` checks its map (keys buffers or regions, values
  :mod:`tilesim.layout` objects or forward functions) and emits nothing: layouts do not change results.
* ``T.Tensor(shape, dtype, other.data)`` in a kernel body is a view of ``other``'s storage, built as
  ``T.view`` builds one (a buffer with ``alias_of``); :func:`tensor_view` checks the sizes.
"""

from __future__ import annotations

import inspect

from .. import dtypes as dt
from ..errors import KernelTypeError
from ..ir import nodes as N
from ..layout import is_layout
from . import exprs as X
from .builders import builder
from .prims import _b_view


@builder("annotate_layout")
def _b_annotate_layout(tr, loc, layout_map, allow_reannotation=False, allow_buffer_region=False):
    if not isinstance(layout_map, dict):
        raise KernelTypeError(f"T.annotate_layout takes a dict {{buffer: layout}}, got {type(layout_map).__name__}",
                              loc, hint="e.g. T.annotate_layout({A_shared: tilelang.layout.make_swizzled_layout(A_shared)})")
    for key, value in layout_map.items():
        buf = key.buffer if isinstance(key, (X.Access, N.Region)) else key
        if not isinstance(buf, N.Buffer):
            raise KernelTypeError(f"T.annotate_layout: key {key!r} is not a buffer", loc)
        if not is_layout(value):
            raise KernelTypeError(f"T.annotate_layout: the layout of {buf.name} is a {type(value).__name__}", loc,
                                  hint="use T.Layout(shape, fn), T.Fragment(...) or a tilelang.layout.make_*_layout")


class BufferData:
    """``buf.data`` in a kernel: the storage of ``buf``, only good for ``T.Tensor(shape, dtype, buf.data)``."""

    def __init__(self, buffer: N.Buffer):
        self.buffer = buffer

    def __repr__(self):
        return f"{self.buffer.name}.data"


def _numel(shape):
    n = 1
    for s in shape:
        if isinstance(s, N.Const):
            s = s.value
        if not isinstance(s, int):
            return None
        n *= s
    return n


def tensor_view(tr, loc, args, kwargs):
    """``T.Tensor(shape, dtype, other.data)``: a view of ``other``'s storage (``T.view`` semantics).

    The element count must equal ``other``'s (checked when both are static), or with another dtype
    the byte count; a strided view is refused.
    """
    try:
        ba = inspect.signature(_tensor_sig).bind(*args, **kwargs)
    except TypeError as e:
        raise KernelTypeError(f"T.Tensor: {e}", loc) from None
    ba.apply_defaults()
    a = ba.arguments
    data = a["data"]
    if not isinstance(data, BufferData):
        raise KernelTypeError(f"T.Tensor(shape, dtype, data): data must be another tensor's .data, got "
                              f"{type(data).__name__}", loc, hint="e.g. T.Tensor((M * N,), dtype, A.data)")
    if a["strides"] is not None:
        raise KernelTypeError("T.Tensor(shape, dtype, data, strides=...): strided views are not supported", loc,
                              hint="view the storage row-major (no strides)")
    src = data.buffer
    shape = tuple(a["shape"]) if isinstance(a["shape"], (tuple, list)) else (a["shape"],)
    dtype = dt.canon(a["dtype"])
    n_new, n_old = _numel(shape), _numel(src.shape)
    if n_new is not None and n_old is not None:
        if dtype == src.dtype and n_new != n_old:
            raise KernelTypeError(f"T.Tensor view of {src.name}: {n_new} elements of shape {shape} but {src.name} "
                                  f"{tuple(src.shape)} has {n_old}", loc,
                                  hint="a view covers exactly the storage of the tensor it views")
        if dtype != src.dtype and n_new * dt.bits(dtype) != n_old * dt.bits(src.dtype):
            raise KernelTypeError(f"T.Tensor view of {src.name}: {shape} {dtype} is {n_new * dt.bits(dtype) // 8} "
                                  f"bytes but {src.name} {tuple(src.shape)} {src.dtype} is "
                                  f"{n_old * dt.bits(src.dtype) // 8}", loc)
    return _b_view(tr, loc, src, shape, dtype)


def _tensor_sig(shape, dtype="float32", data=None, strides=None, scope="global"):
    """The signature of ``T.Tensor`` as a call with storage."""
