"""Scheduling annotations with no numeric effect, and primitives tilesim rejects with a reason."""

from __future__ import annotations

from ..layout import Fragment, Layout, make_swizzled_layout  # noqa: F401 - T.Layout, T.Fragment
from ._marker import marker


@marker()
def use_swizzle(panel_size=10, order="row", enable=True):
    """Rasterise blocks in panels for L2 reuse; the simulator models its effect on DRAM traffic."""


@marker()
def annotate_layout(layout_map, allow_reannotation=False, allow_buffer_region=False):
    """``T.annotate_layout({buf: layout})``: memory layouts for buffers (see :mod:`tilesim.layout`); checked,
    no effect on results (tilesim computes on logical elements)."""


@marker()
def annotate_padding(padding_map):
    """Padding hints; accepted, no numeric effect."""


@marker()
def annotate_safe_value(safe_value_map):
    """``T.annotate_safe_value({A: -inf})``: out-of-range reads of global ``A`` in this launch give the value
    instead of 0 (tile copies and element loads)."""


@marker()
def im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad, eviction_policy=None, annotations=None):
    """Fill tile ``col`` (block_M, block_K) with block (``nhw_step``, ``c_step``) of the im2col matrix of the
    NHWC image ``img`` for a square ``kernel`` × ``kernel`` 2-D convolution.

    Row ``r`` of the matrix is output pixel ``(n, oh, ow)`` (row-major over N, OH, OW); column ``q`` is
    ``(kh, kw, c)`` (row-major over kernel, kernel, C, matching HWIO weights). Entries outside the image
    (padding) or past the matrix are 0. ``OH = (H + 2 pad - dilation (kernel - 1) - 1) // stride + 1``.
    """


c2d_im2col = im2col


@marker()
def annotate_l2_hit_ratio(ratio_map):
    """Accepted, no numeric effect."""


@marker()
def no_set_max_nreg():
    """Accepted, no effect."""


@marker()
def set_max_nreg(reg_count, is_inc):
    """Accepted, no effect."""


@marker()
def disable_warp_group_reg_alloc():
    """Accepted, no effect."""


@marker()
def import_source(source=None):
    """``T.import_source(src)``: device source defining functions for :func:`call_extern` (recorded)."""




@marker()
def call_extern(*args, dtype=None):
    """``T.call_extern(dtype, name, *args)``: an external device function. tilesim runs the functions its
    ``frontend/extern.py`` knows (dequantization decoders) when their source was imported; others are
    refused."""


@marker()
def assume(cond):
    """``T.assume(cond)``: the program promises ``cond`` holds (a compiler hint); the interpreter checks it as
    :func:`device_assert` does."""


@marker()
def device_assert(cond, msg=""):
    """``T.device_assert(cond, msg)``: stop the kernel with ``msg`` where ``cond`` is false (checked by the
    interpreter for every active block, thread and ``T.Parallel`` element; not checked on the CUDA backend)."""


@marker()
def print(*args, msg=""):  # noqa: A001
    """Accepted; tilesim's interpreter ignores device prints."""


#: Primitives that need per-thread (SIMT) execution or Hopper async machinery tilesim does not model.
UNSUPPORTED: dict[str, str] = {}
