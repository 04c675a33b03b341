"""``tilelang.layout``: memory-layout objects for ``T.annotate_layout`` (``T.Layout``, ``T.Fragment``, swizzles).

Contract
--------
* A layout says how a buffer's logical elements are placed in memory or across threads. tilesim's
  interpreter and simulator compute on logical elements, so **a layout has no effect on any result**:
  ``T.annotate_layout({buf: layout})`` is checked (keys are buffers, values layouts) and recorded nowhere.
  The constructors still check what TileLang checks at construction: the shape is a sequence of
  dimensions and the forward function takes one index per dimension (plus the replicate index of a
  ``Fragment`` with ``replicate > 1``).
* ``make_*_layout(buffer)`` accept a buffer, a region (``A[0:64, 0:32]``) or an element access, as
  TileLang's do, and return a :class:`SwizzledLayout` naming the swizzle; anything else is a
  ``KernelTypeError``.
* ``Layout.map_forward_index(indices)`` applies the forward function to concrete indices (Python
  values; in a kernel, kernel values).
"""

from __future__ import annotations

import inspect

from .errors import KernelTypeError


def _shape(shape, what) -> tuple:
    if not isinstance(shape, (list, tuple)):
        raise KernelTypeError(f"{what}: shape must be a list or tuple of dimensions, got {type(shape).__name__}",
                              hint="e.g. T.Layout([8, 4], lambda i, j: (j, i))")
    return tuple(shape)


def _check_arity(fn, n, what):
    if not callable(fn):
        raise KernelTypeError(f"{what}: the forward function must be callable, got {type(fn).__name__}")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(*range(n))
    except TypeError:
        raise KernelTypeError(f"{what}: the forward function takes {sig} but the layout has {n} index(es)",
                              hint="give it one parameter per dimension of the shape") from None


class Layout:
    """``T.Layout(shape, forward_fn)``: element ``(i0, i1, ...)`` is stored at ``forward_fn(i0, i1, ...)``."""

    def __init__(self, shape, forward_fn):
        self.shape = _shape(shape, "T.Layout")
        _check_arity(forward_fn, len(self.shape), "T.Layout")
        self.forward_fn = forward_fn

    def get_input_shape(self):
        return list(self.shape)

    def map_forward_index(self, indices):
        out = self.forward_fn(*indices)
        return list(out) if isinstance(out, (list, tuple)) else [out]

    def __repr__(self):
        return f"{type(self).__name__}(shape={list(self.shape)})"


class Fragment(Layout):
    """``T.Fragment(shape, forward_fn=None, forward_thread_fn=None, replicate=1, forward_index_fn=None)``:
    which thread holds each element, and where in that thread's registers."""

    def __init__(self, shape, forward_fn=None, forward_thread_fn=None, replicate=1, forward_index_fn=None):
        self.shape = _shape(shape, "T.Fragment")
        if not isinstance(replicate, int) or replicate < 1:
            raise KernelTypeError(f"T.Fragment: replicate must be a positive int, got {replicate!r}")
        self.replicate_count = replicate
        n = len(self.shape) + (1 if replicate > 1 else 0)
        if forward_fn is None and forward_thread_fn is None:
            raise KernelTypeError("T.Fragment needs forward_fn or forward_thread_fn",
                                  hint="forward_fn(*indices) returns (thread, index)")
        if forward_fn is not None:
            _check_arity(forward_fn, n, "T.Fragment")
        else:
            _check_arity(forward_thread_fn, n, "T.Fragment forward_thread_fn")
            if forward_index_fn is not None:
                _check_arity(forward_index_fn, len(self.shape), "T.Fragment forward_index_fn")
        self.forward_fn = forward_fn
        self.forward_thread_fn = forward_thread_fn
        self.forward_index_fn = forward_index_fn

    def map_forward_index(self, indices):
        if self.forward_fn is not None:
            out = self.forward_fn(*indices)[1]
        elif self.forward_index_fn is not None:
            out = self.forward_index_fn(*indices)
        else:
            out = []
        return list(out) if isinstance(out, (list, tuple)) else [out]


class SwizzledLayout(Layout):
    """A named swizzle of a buffer (``make_swizzled_layout(A_shared)``); ``kind`` names it."""

    def __init__(self, buffer, kind: str, **params):
        self.buffer = buffer
        self.kind = kind
        self.params = params
        self.shape = tuple(buffer.shape)
        self.forward_fn = None

    def map_forward_index(self, indices):
        raise KernelTypeError(f"the {self.kind} swizzle of {self.buffer.name} has no forward function in tilesim",
                              hint="layouts have no effect on results in tilesim")

    def __repr__(self):
        return f"SwizzledLayout({self.kind}, {self.buffer.name})"


def _buffer_of(x, what):
    buf = getattr(x, "buffer", x)  # a region or element access names its buffer
    if not (hasattr(buf, "shape") and hasattr(buf, "scope") and hasattr(buf, "name")):
        raise KernelTypeError(f"{what} takes a buffer or a region, got {type(x).__name__}",
                              hint=f"e.g. T.annotate_layout({{A_shared: {what}(A_shared)}})")
    return buf


def make_swizzled_layout(buffer, k_major: bool = True, allow_pad: bool = True):
    return SwizzledLayout(_buffer_of(buffer, "make_swizzled_layout"), "swizzled", k_major=k_major,
                          allow_pad=allow_pad)


def make_volta_swizzled_layout(buffer, is_a: bool = True, k_inner: bool = True):
    return SwizzledLayout(_buffer_of(buffer, "make_volta_swizzled_layout"), "volta", is_a=is_a, k_inner=k_inner)


def make_wgmma_swizzled_layout(buffer, continuity: int | None = None, k_major: bool = True):
    return SwizzledLayout(_buffer_of(buffer, "make_wgmma_swizzled_layout"), "wgmma", continuity=continuity,
                          k_major=k_major)


def make_tcgen05mma_swizzled_layout(buffer, continuity: int | None = None, k_major: bool = True):
    return SwizzledLayout(_buffer_of(buffer, "make_tcgen05mma_swizzled_layout"), "tcgen05mma",
                          continuity=continuity, k_major=k_major)


def make_full_bank_swizzled_layout(buffer):
    return SwizzledLayout(_buffer_of(buffer, "make_full_bank_swizzled_layout"), "128B")


def make_half_bank_swizzled_layout(buffer):
    return SwizzledLayout(_buffer_of(buffer, "make_half_bank_swizzled_layout"), "64B")


def make_quarter_bank_swizzled_layout(buffer):
    return SwizzledLayout(_buffer_of(buffer, "make_quarter_bank_swizzled_layout"), "32B")


def make_linear_layout(buffer):
    """Row-major: element ``(i0, ..., in)`` at the same indices."""
    buf = _buffer_of(buffer, "make_linear_layout")
    return Layout(buf.shape, lambda *idx: idx)


def make_fully_replicated_layout_fragment(buffer, threads: int):
    """Every one of ``threads`` threads holds the whole buffer."""
    buf = _buffer_of(buffer, "make_fully_replicated_layout_fragment")
    return Fragment(buf.shape, forward_thread_fn=lambda *idx: idx[-1], replicate=threads,
                    forward_index_fn=lambda *idx: idx)


def is_layout(v) -> bool:
    """What ``T.annotate_layout`` accepts as a value: a layout object or a forward function."""
    return isinstance(v, Layout) or callable(v)


def make_gemm_fragment_8x8():
    """The 8x8 tile of an mma operand as ldmatrix loads it: thread ``4 i + j // 2`` holds ``(i, j)`` at ``j % 2``."""
    return Fragment([8, 8], forward_thread_fn=lambda i, j: i * 4 + j // 2, forward_index_fn=lambda i, j: j % 2)


def make_gemm_fragment_8x8_transposed():
    """:func:`make_gemm_fragment_8x8` with the roles of ``i`` and ``j`` exchanged."""
    return Fragment([8, 8], forward_thread_fn=lambda i, j: j * 4 + i // 2, forward_index_fn=lambda i, j: i % 2)


# These run at trace time on kernel values (buffers, regions): the frontend calls them as Python.
for _fn in (make_swizzled_layout, make_volta_swizzled_layout, make_wgmma_swizzled_layout,
            make_tcgen05mma_swizzled_layout, make_full_bank_swizzled_layout, make_half_bank_swizzled_layout,
            make_quarter_bank_swizzled_layout, make_linear_layout, make_fully_replicated_layout_fragment):
    _fn.__tilesim_trace_time__ = True
