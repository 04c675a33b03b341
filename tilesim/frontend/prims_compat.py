"""Builders for TileLang-compatibility primitives: layout annotations and tensor views over another's storage.

Contract
--------
* Registered into :data:`tilesim.frontend.prims.BUILDERS` (same calling convention: ``b(tr, loc, **args)``).
* ``T.annotate_layout({buf: layout})`` checks its map (keys buffers or regions, values
  :mod:`tilesim.layout` objects or forward functions) and emits nothing: layouts do not change results.
"""

from __future__ import annotations

from ..errors import KernelTypeError
from ..ir import nodes as N
from ..layout import is_layout
from . import exprs as X
from .prims import builder


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
