"""Builders of the low-level CUDA primitives of ``tilesim.language.ptx``: pointers, ``cp.async``, vector atomics.

Contract
--------
* ``T.access_ptr`` returns a :class:`Pointer` (a trace-time value, never IR): the buffer, the indices of
  its first element and the number of elements it spans. Its base is an element ``A[i, j]``, a region
  ``A[i:i+n, j]`` (its first element) or a buffer (its element 0); ``offset`` is added to the row-major
  position. A ``Pointer`` is accepted only by ``T.ptx_cp_async``; elsewhere it is a ``KernelTypeError``
  (``to_expr`` of a foreign object).
* :func:`element_at` gives the indices of the element ``e`` places after an element in row-major order
  (exact across rows: the position is unflattened against the buffer's shape).
* ``T.ptx_cp_async(dst, src, n, predicate)`` emits ``n`` :class:`~tilesim.ir.nodes.Store` statements
  ``dst[k] = src[k]`` (``select(predicate, src[k], 0)`` with a predicate); ``n`` must be a positive Python
  int no larger than either pointer's extent and the dtypes must match. ``T.ptx_commit_group`` and
  ``T.ptx_wait_group`` emit nothing (copies complete at once in program order).
* ``T.atomic_addx2/x4(dst, value)`` emit 2 / 4 element :class:`~tilesim.ir.nodes.Atomic` adds of
  consecutive elements; ``dst`` and ``value`` are elements (or regions: their first element);
  ``return_prev=True`` is refused.
* Every error is a ``KernelError`` located at the call.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import KernelSyntaxError, KernelTypeError
from ..ir import nodes as N
from . import exprs as X
from .builders import builder


@dataclass(frozen=True)
class Pointer:
    """``T.access_ptr(...)``: ``extent`` consecutive elements of ``buffer`` from ``indices``."""

    buffer: N.Buffer
    indices: tuple
    extent: object  # int or an IR expression
    mask: str

    @property
    def offset(self):
        """The element index of a pointer into a 1-D buffer (what ``T.call_extern``'s decoders take)."""
        if len(self.indices) != 1:
            raise KernelTypeError(f"T.call_extern: a pointer into the {self.buffer.ndim}-D buffer {self.buffer.name}",
                                  self.buffer.loc, hint="point at a 1-D T.alloc_local array or one of its elements")
        return self.indices[0]


def _first_element(base, loc, what):
    """(buffer, indices) of the first element of an element, region or buffer operand."""
    if isinstance(base, N.Buffer):
        if base.scope == "var":
            return base, ()
        return base, tuple(N.Const(0, "int32", loc) for _ in base.shape)
    if isinstance(base, N.Load):
        return base.buffer, tuple(base.indices)
    if isinstance(base, X.Access):
        items = []
        for it in base.items:
            if isinstance(it, slice):
                it = 0 if it.start is None else it.start
            items.append(X.index_expr(it, loc))
        if len(items) != base.buffer.ndim:
            raise KernelTypeError(f"{what}: {base.buffer.name} has {base.buffer.ndim} dimension(s) but is indexed "
                                  f"with {len(items)}", loc)
        return base.buffer, tuple(items)
    raise KernelTypeError(f"{what} takes a buffer element such as A[i, j], got a {type(base).__name__}", loc,
                          hint="write T.access_ptr(A[i, j], 'r', n)")


def element_at(buf: N.Buffer, indices: tuple, e, loc) -> tuple:
    """Indices of the element ``e`` places after ``buf[indices]`` in row-major order."""
    if isinstance(e, int) and e == 0:
        return indices
    if buf.ndim <= 1:
        return tuple(X.index_expr(X.binop("add", i, e, loc), loc) for i in indices)
    flat = indices[0]
    for d in range(1, buf.ndim):
        flat = X.binop("add", X.binop("mul", flat, buf.shape[d], loc), indices[d], loc)
    flat = X.binop("add", flat, e, loc)
    out = []
    for d in range(buf.ndim - 1, 0, -1):
        out.append(X.binop("floormod", flat, buf.shape[d], loc))
        flat = X.binop("floordiv", flat, buf.shape[d], loc)
    out.append(flat)
    return tuple(X.index_expr(i, loc) for i in reversed(out))


@builder("access_ptr")
def _b_access_ptr(tr, loc, base, access_type, extents, offset, extent, ignore_last_ndim):
    if isinstance(access_type, int) and not isinstance(access_type, bool):
        access_type = {1: "r", 2: "w", 3: "rw"}.get(access_type, access_type)
    if access_type not in ("r", "w", "rw"):
        raise KernelTypeError(f"T.access_ptr: access_type must be 'r', 'w' or 'rw' (or 1, 2, 3), got {access_type!r}",
                              loc)
    if ignore_last_ndim:
        raise KernelTypeError("T.access_ptr(..., ignore_last_ndim=...) is not supported by tilesim", loc,
                              hint="take the pointer of the element you mean")
    buf, idx = _first_element(base, loc, "T.access_ptr")
    if len(extents) == 1 and isinstance(extents[0], (list, tuple)):
        extents = tuple(extents[0])
    if extent is None:
        extent = 1
        for x in extents:
            extent = X.binop("mul", extent, x, loc)
    if isinstance(extent, N.Const):
        extent = extent.value
    if not (isinstance(offset, int) and offset == 0):
        idx = element_at(buf, idx, offset, loc)
    return Pointer(buf, idx, extent, access_type)


def _pointer(v, loc, what, write):
    if not isinstance(v, Pointer):
        raise KernelTypeError(f"T.ptx_cp_async: {what} must be a T.access_ptr(...), got a {type(v).__name__}", loc,
                              hint="T.ptx_cp_async(T.access_ptr(S[i, j], 'w', n), T.access_ptr(G[k, l], 'r', n), n)")
    if write and "w" not in v.mask:
        raise KernelTypeError(f"T.ptx_cp_async: the destination pointer into {v.buffer.name} is read-only "
                              f"('{v.mask}')", loc, hint="take it with T.access_ptr(..., 'w', n)")
    return v


@builder("ptx_cp_async")
def _b_ptx_cp_async(tr, loc, dst_access_ptr, src_access_ptr, num_elems, predicate):
    if not tr.in_launch():
        raise KernelSyntaxError("T.ptx_cp_async outside `with T.Kernel(...)`", loc)
    dst = _pointer(dst_access_ptr, loc, "the destination", True)
    src = _pointer(src_access_ptr, loc, "the source", False)
    n = num_elems.value if isinstance(num_elems, N.Const) else num_elems
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        raise KernelTypeError(f"T.ptx_cp_async: num_elems must be a positive Python int, got {num_elems!r}", loc)
    if dst.buffer.dtype != src.buffer.dtype:
        raise KernelTypeError(f"T.ptx_cp_async copies bytes between same-typed buffers: {src.buffer.name} is "
                              f"{src.buffer.dtype}, {dst.buffer.name} is {dst.buffer.dtype}", loc,
                              hint="copy into a buffer of the source's dtype, then convert")
    for p in (dst, src):
        if isinstance(p.extent, int) and p.extent < n:
            raise KernelTypeError(f"T.ptx_cp_async copies {n} elements but the pointer into {p.buffer.name} spans "
                                  f"{p.extent}", loc, hint=f"take it with T.access_ptr(..., {n})")
    pred = None if predicate is None else X.to_bool(predicate, loc)
    for e in range(n):
        v = N.Load(src.buffer, element_at(src.buffer, src.indices, e, loc), src.buffer.dtype, loc)
        if pred is not None:
            v = X.select(pred, v, X.const(0, v.dtype, loc), loc)
        tr.emit(N.Store(dst.buffer, element_at(dst.buffer, dst.indices, e, loc), v, loc))


@builder("ptx_commit_group")
def _b_ptx_commit_group(tr, loc):
    if not tr.in_launch():
        raise KernelSyntaxError("T.ptx_commit_group outside `with T.Kernel(...)`", loc)


@builder("ptx_wait_group")
def _b_ptx_wait_group(tr, loc, num):
    if not tr.in_launch():
        raise KernelSyntaxError("T.ptx_wait_group outside `with T.Kernel(...)`", loc)


def _vector_atomic(tr, loc, width, dst, value, return_prev):
    what = f"T.atomic_addx{width}"
    if not tr.in_launch():
        raise KernelSyntaxError(f"{what} outside `with T.Kernel(...)`", loc)
    if return_prev:
        raise KernelTypeError(f"{what}(..., return_prev=True) is not supported by tilesim", loc,
                              hint="use T.atomic_add(elem, v, return_prev=True) per element")
    db, di = _first_element(dst, loc, f"{what} destination")
    vb, vi = _first_element(value, loc, f"{what} value")
    for e in range(width):
        d = N.Region(db, element_at(db, di, e, loc), tuple(1 for _ in di), loc)
        v = N.Load(vb, element_at(vb, vi, e, loc), vb.dtype, loc)
        tr.emit(N.Atomic("add", d, X.cast_to(v, db.dtype, loc), loc))


@builder("dp4a")
def _b_dp4a(tr, loc, A, B, C):
    if not tr.in_launch():
        raise KernelSyntaxError("T.dp4a outside `with T.Kernel(...)`", loc)
    ab, ai = _first_element(A, loc, "T.dp4a A")
    bb, bi = _first_element(B, loc, "T.dp4a B")
    cb, ci = _first_element(C, loc, "T.dp4a C")
    for what, buf, want in (("A", ab, "int8"), ("B", bb, "int8"), ("C", cb, "int32")):
        if buf.dtype != want:
            raise KernelTypeError(f"T.dp4a: {what} ({buf.name}) is {buf.dtype}, it must be {want}", loc,
                                  hint="dp4a multiplies four int8 pairs into an int32 accumulator")
    acc = N.Load(cb, ci, "int32", loc)
    for e in range(4):
        a = X.cast_to(N.Load(ab, element_at(ab, ai, e, loc), "int8", loc), "int32", loc)
        b = X.cast_to(N.Load(bb, element_at(bb, bi, e, loc), "int8", loc), "int32", loc)
        acc = X.binop("add", acc, X.binop("mul", a, b, loc), loc)
    tr.emit(N.Store(cb, ci, acc, loc))


@builder("atomic_addx2")
def _b_atomic_addx2(tr, loc, dst, value, return_prev):
    _vector_atomic(tr, loc, 2, dst, value, return_prev)


@builder("atomic_addx4")
def _b_atomic_addx4(tr, loc, dst, value, return_prev):
    _vector_atomic(tr, loc, 4, dst, value, return_prev)
