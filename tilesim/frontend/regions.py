"""Regions of tile operations: from ``A[...]`` subscripts to :class:`~tilesim.ir.nodes.Region`.

Contract
--------
* ``A`` (a buffer) is its full region. ``A[i0:i1, j]`` is a region whose sliced dims have extent
  ``i1 - i0`` and whose indexed dims have extent 1. ``A[y, x]`` (no slice) is a **corner**: its
  extents come from the other operand of the tile op, right-aligned, leading dims padded with 1.
* Extents of on-chip regions must be compile-time constants; extents are simplified as linear forms
  (:mod:`.simplify`) so ``A[bx*BM:(bx+1)*BM]`` has extent ``BM`` and ``X[lo:lo + c]`` extent ``c`` for
  any integer ``lo`` (a variable, a ``T.alloc_var``, a tensor element).
* :func:`pair_shapes` is the copy pairing rule (shared by every consumer): drop unit extents from
  both sides; equal → element-wise pairing; otherwise the source must broadcast (right-aligned).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import KernelTypeError, Loc
from ..ir import nodes as N
from . import exprs as X
from . import simplify as S


@dataclass
class Corner:
    """``A[y, x]`` used as a tile-op operand: the start corner of a region of unknown extent."""

    buffer: N.Buffer
    starts: tuple
    loc: Loc | None


def extent_of(start, stop, loc, lets=None):
    """``stop - start`` simplified (:mod:`.simplify`, through pure ``lets``): an int when the bounds
    share their symbolic part."""
    if isinstance(start, int) and isinstance(stop, int):
        return stop - start
    d = S.difference(start, stop, loc, lets)
    return d if d is not None else X.binop("sub", stop, start, loc)


def operand(v, loc, what: str):
    """A tile-op operand: a :class:`Region`, a :class:`Corner` or raise a typed error."""
    if isinstance(v, N.Buffer):
        return N.full_region(v, loc)
    if isinstance(v, N.Region):
        return v
    if isinstance(v, X.Access):
        buf = v.buffer
        if len(v.items) != buf.ndim:
            raise KernelTypeError(f"{what}: {buf.name} has {buf.ndim} dimension(s) but is indexed with {len(v.items)}",
                                  v.loc or loc)
        if not v.has_slice:
            return Corner(buf, tuple(X.index_expr(i, loc) for i in v.items), v.loc or loc)
        starts, extents = [], []
        for d, item in enumerate(v.items):
            if isinstance(item, slice):
                if item.step not in (None, 1):
                    raise KernelTypeError(f"{what}: strided slices are not supported", v.loc or loc)
                start = 0 if item.start is None else item.start
                stop = buf.shape[d] if item.stop is None else item.stop
                ext = extent_of(start if not isinstance(start, N.Const) else start.value,
                                stop if not isinstance(stop, N.Const) else stop.value, loc, v.lets)
                starts.append(X.index_expr(start, loc))
                extents.append(ext)
            else:
                starts.append(X.index_expr(item, loc))
                extents.append(1)
        for e in extents:
            if isinstance(e, int) and e <= 0:
                raise KernelTypeError(f"{what}: region of {buf.name} has a non-positive extent {e}", v.loc or loc)
        return N.Region(buf, tuple(starts), tuple(extents), v.loc or loc)
    raise KernelTypeError(f"{what}: expected a buffer or a region, got {type(v).__name__}", loc,
                          hint="pass a buffer (A_shared) or a region (A[by * 64, k * 32], A[0:64, :])")


def complete(c, other_extents, loc, what):
    """Give a :class:`Corner` the extents of the other operand (right-aligned, padded with 1)."""
    if isinstance(c, N.Region):
        return c
    n = c.buffer.ndim
    ext = list(other_extents)
    while len(ext) > n and ext[0] == 1:
        ext.pop(0)
    if len(ext) > n:
        ext = [e for e in ext if e != 1]
        if len(ext) > n:
            raise KernelTypeError(
                f"{what}: a {len(other_extents)}-D tile does not fit {c.buffer.name}, which has {n} dimension(s)", loc)
    ext = [1] * (n - len(ext)) + ext
    return N.Region(c.buffer, c.starts, tuple(ext), c.loc)


def pair_shapes(src_ext, dst_ext):
    """True if a copy from extents ``src_ext`` to ``dst_ext`` pairs (or broadcasts)."""
    s = [e for e in src_ext if e != 1]
    d = [e for e in dst_ext if e != 1]
    if len(s) == len(d):
        return all(_same(a, b) for a, b in zip(s, d))
    if len(s) > len(d):
        return False
    s = [1] * (len(d) - len(s)) + s
    return all(a == 1 or _same(a, b) for a, b in zip(s, d))


def _same(a, b):
    return S.same(a, b)


def static_extents(r: N.Region, what, loc):
    for e in r.extents:
        if not isinstance(e, int):
            raise KernelTypeError(f"{what}: the tile shape of {r.buffer.name} is not a compile-time constant", loc,
                                  hint="tile extents must be Python ints (closure constants); "
                                       "index the global tensor with a start corner instead")
    return tuple(r.extents)
