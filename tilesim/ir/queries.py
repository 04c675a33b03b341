"""Read-only questions about IR subtrees, shared by the lowering and the cost analysis.

* :func:`buffer_refs` — how many times a buffer (or a view aliasing it) is named in a subtree;
* :func:`referenced_buffers` — every buffer named in a subtree, aliases resolved to their root;
* :func:`referenced_vars` — every variable an expression (or tuple of them) names;
* :func:`expr_children` — the sub-expressions of one expression node (re-exported from
  :mod:`tilesim.ir.traverse`, where every walk of the IR lives; these questions are built on it);
* :func:`deferrable_loop_reduce` — the IR side of "defer a loop reduction's cross-thread part": a
  ``T.reduce_*(src, acc, clear=False)`` of a combinable kind directly in a loop body that names ``acc``
  nowhere else. Where the buffers live (registers) and whether the layouts allow it is the caller's
  part (the backend's ``tile_reduce.plan_deferred``, the ``numba`` profile's cost rules).
"""

from __future__ import annotations

from . import nodes as N
from . import traverse as T
from .traverse import expr_children  # noqa: F401  (re-exported)

#: reduction kinds whose partial results combine associatively (a per-thread partial per output)
COMBINABLE_REDUCTIONS = frozenset({"sum", "abssum", "max", "min", "absmax"})


def _named_buffers(node):
    """Every buffer named in ``node`` (a node, a body, a tuple of expressions, a ``Buffer``)."""
    if isinstance(node, N.Buffer):
        yield node
        return
    for x in T.walk(node):
        yield from T.buffers_of(x)
        yield from (b for b in T.binds(x) if isinstance(b, N.Buffer))  # a PrimFunc's parameters


def buffer_refs(node, uid: int) -> int:
    """Occurrences of buffer ``uid`` (or of a view whose ``alias_of`` is it) in ``node``."""
    return sum(1 for b in _named_buffers(node)
               if b.uid == uid or (b.alias_of is not None and b.alias_of.uid == uid))


def referenced_buffers(node, out: dict | None = None) -> dict:
    """``{root uid: root Buffer}`` of every buffer named in ``node`` (views resolved to their root)."""
    out = {} if out is None else out
    for b in _named_buffers(node):
        root = b.alias_of or b
        out[root.uid] = root
    return out


def referenced_vars(e, out: dict | None = None) -> dict:
    """``{uid: Var}`` of the variables expression ``e`` (or a tuple/list of expressions) names."""
    out = {} if out is None else out
    for x in T.walk_exprs(e):
        if type(x) is N.Var:
            out.setdefault(x.uid, x)
    return out


def deferrable_loop_reduce(loop_body, r) -> bool:
    """``r`` is a candidate for deferral in the loop whose body is ``loop_body`` (see the module doc)."""
    return (isinstance(r, N.Reduce) and not r.clear and r.kind in COMBINABLE_REDUCTIONS
            and buffer_refs(loop_body, r.dst.buffer.uid) == 1)
