"""Read-only questions about IR subtrees, shared by the lowering and the cost analysis.

* :func:`buffer_refs` — how many times a buffer (or a view aliasing it) is named in a subtree;
* :func:`referenced_buffers` — every buffer named in a subtree, aliases resolved to their root;
* :func:`referenced_vars` — every variable an expression (or tuple of them) names;
* :func:`expr_children` — the sub-expressions of one expression node (for hand-written walks);
* :func:`deferrable_loop_reduce` — the IR side of "defer a loop reduction's cross-thread part": a
  ``T.reduce_*(src, acc, clear=False)`` of a combinable kind directly in a loop body that names ``acc``
  nowhere else. Where the buffers live (registers) and whether the layouts allow it is the caller's
  part (the backend's ``tile_reduce.plan_deferred``, the ``numba`` profile's cost rules).
"""

from __future__ import annotations

import dataclasses

from . import nodes as N

#: reduction kinds whose partial results combine associatively (a per-thread partial per output)
COMBINABLE_REDUCTIONS = frozenset({"sum", "abssum", "max", "min", "absmax"})


def _fields(node):
    return (getattr(node, f.name) for f in dataclasses.fields(node))


def buffer_refs(node, uid: int) -> int:
    """Occurrences of buffer ``uid`` (or of a view whose ``alias_of`` is it) in ``node``."""
    if isinstance(node, N.Buffer):
        return int(node.uid == uid or (node.alias_of is not None and node.alias_of.uid == uid))
    if isinstance(node, (list, tuple)):
        return sum(buffer_refs(x, uid) for x in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        return sum(buffer_refs(x, uid) for x in _fields(node))
    return 0


def referenced_buffers(node, out: dict | None = None) -> dict:
    """``{root uid: root Buffer}`` of every buffer named in ``node`` (views resolved to their root)."""
    out = {} if out is None else out
    if isinstance(node, N.Buffer):
        root = node.alias_of or node
        out[root.uid] = root
    elif isinstance(node, (list, tuple)):
        for x in node:
            referenced_buffers(x, out)
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        for x in _fields(node):
            referenced_buffers(x, out)
    return out


def expr_children(x) -> tuple:
    """The direct sub-expressions of expression ``x`` (a ``Load``'s indices, an operator's operands, a
    call's arguments; none for ``Var``/``Const``)."""
    t = type(x)
    if t is N.Load:
        return tuple(x.indices)
    if t in (N.Binary, N.Compare, N.Logical):
        return (x.a, x.b)
    if t is N.Unary:
        return (x.a,)
    if t is N.Select:
        return (x.cond, x.a, x.b)
    if t in (N.Cast, N.Reinterpret):
        return (x.value,)
    if t is N.Call:
        return tuple(x.args)
    return ()


def referenced_vars(e, out: dict | None = None) -> dict:
    """``{uid: Var}`` of the variables expression ``e`` (or a tuple/list of expressions) names."""
    out = {} if out is None else out
    if isinstance(e, N.Var):
        out.setdefault(e.uid, e)
    elif isinstance(e, (list, tuple)):
        for x in e:
            referenced_vars(x, out)
    elif isinstance(e, N.Expr):
        for x in _fields(e):
            if isinstance(x, (N.Expr, list, tuple)):
                referenced_vars(x, out)
    return out


def deferrable_loop_reduce(loop_body, r) -> bool:
    """``r`` is a candidate for deferral in the loop whose body is ``loop_body`` (see the module doc)."""
    return (isinstance(r, N.Reduce) and not r.clear and r.kind in COMBINABLE_REDUCTIONS
            and buffer_refs(loop_body, r.dst.buffer.uid) == 1)
