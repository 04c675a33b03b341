"""The one IR traversal: which fields of each node class hold IR, and generic walks over them.

Contract
--------
* :data:`DECLS` declares, once per node class of :mod:`tilesim.ir.nodes`, the fields that hold IR
  and their kind; every other field (names, dtypes, flags, integers, annotations) is plain data:

  ``expr``    an :class:`~.nodes.Expr`, ``None``, or a tuple whose ``Expr`` items count (ints of
              a shape or an extent tuple are skipped);
  ``operand`` a :class:`~.nodes.Region` or an ``Expr`` (``Atomic.value``);
  ``region``  a :class:`~.nodes.Region`;
  ``buffer``  a :class:`~.nodes.Buffer` named (not declared) by the node, or a tuple of them;
  ``body``    a statement body (tuple of statements);
  ``bind``    a :class:`~.nodes.Var` (or a tuple of them) the node binds.

  A test checks that the table covers every class of :mod:`tilesim.ir.groups` and that every
  declared field exists. Nodes stay frozen slotted dataclasses; this module only reads them.
* Everything returns fields' items in the dataclass field order (then item order), so walks are
  deterministic and pre-order.
* Primitives: :func:`expr_children` (direct sub-expressions), :func:`stmt_exprs` (a statement's own
  expressions, its regions' starts and symbolic extents included), :func:`regions_of`,
  :func:`buffers_of`, :func:`binds`, :func:`bodies`, :func:`stmt_children`, :func:`children`.
* Walks: :func:`walk` (pre-order over statements, regions and expressions, into bodies),
  :func:`walk_stmts` (statements only; ``enter(stmt)`` may stop the descent into a statement's
  bodies), :func:`walk_exprs` (expressions only, pre-order).
* :func:`regions` ``(stmt) -> (reads, writes)``: the regions and buffers a statement itself (not its
  bodies) reads and writes; :func:`map_stmts` rebuilds a body bottom-up, keeping unchanged nodes
  identical (``is``), so caches keyed by ``id(node)`` stay valid.
* :func:`map_expr` rebuilds an expression bottom-up; :func:`map_exprs_in` rebuilds a statement with every
  expression it holds (its own fields, its regions' starts and symbolic extents, and those of its bodies)
  mapped by :func:`map_expr`; unchanged nodes stay identical (``is``).
* A node class without a declaration raises ``InternalError`` naming it.

Every walk over the IR in tilesim goes through this module; consumers with one rule per node class
use :class:`tilesim.ir.rules.RuleTable` instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

from ..errors import InternalError
from . import nodes as N

EXPR, OPERAND, REGION, BUFFER, BODY, BIND = "expr", "operand", "region", "buffer", "body", "bind"
KINDS = (EXPR, OPERAND, REGION, BUFFER, BODY, BIND)

#: node class -> {field: kind} for the fields that hold IR (see the module docstring)
DECLS: dict[type, dict[str, str]] = {
    # expressions
    N.Const: {},
    N.Var: {},
    N.Binary: {"a": EXPR, "b": EXPR},
    N.Compare: {"a": EXPR, "b": EXPR},
    N.Logical: {"a": EXPR, "b": EXPR},
    N.Unary: {"a": EXPR},
    N.Call: {"args": EXPR},
    N.Select: {"cond": EXPR, "a": EXPR, "b": EXPR},
    N.Cast: {"value": EXPR},
    N.Reinterpret: {"value": EXPR},
    N.WarpShuffle: {"value": EXPR, "lane": EXPR},
    N.Load: {"buffer": BUFFER, "indices": EXPR},
    # buffers and regions (a Buffer is a leaf of walks: its shape is declared where it is allocated)
    N.Buffer: {"shape": EXPR, "alias_of": BUFFER},
    N.Region: {"buffer": BUFFER, "starts": EXPR, "extents": EXPR},
    # tile operations
    N.Copy: {"src": REGION, "dst": REGION},
    N.Gemm: {"a": REGION, "b": REGION, "c": REGION},
    N.Reduce: {"src": REGION, "dst": REGION},
    N.Fill: {"dst": REGION, "value": EXPR},
    N.Atomic: {"dst": REGION, "value": OPERAND},
    N.Cumsum: {"src": REGION, "dst": REGION},
    # per-thread code
    N.AtomicFetch: {"buffer": BUFFER, "indices": EXPR, "value": EXPR, "var": BIND},
    N.SyncThreads: {},
    # warp-specialised code
    N.MBarrier: {"buffer": BUFFER, "index": EXPR, "parity": EXPR, "cta": EXPR},
    N.WarpSpec: {"body": BODY},
    N.PairIssue: {"body": BODY},
    N.ClusterCancel: {"result": REGION, "barrier": BUFFER, "index": EXPR},
    # loops
    N.For: {"var": BIND, "start": EXPR, "stop": EXPR, "body": BODY},
    N.Parallel: {"vars": BIND, "body": BODY},
    N.While: {"cond": EXPR, "body": BODY},
    # control flow and bindings
    N.If: {"cond": EXPR, "then": BODY, "orelse": BODY},
    N.Break: {},
    N.DeviceAssert: {"cond": EXPR},
    N.Event: {"payload": EXPR},
    N.Continue: {},
    N.Let: {"var": BIND, "value": EXPR},
    N.Launch: {"grid": EXPR, "block_vars": BIND, "body": BODY, "thread_vars": BIND},
    # memory
    N.Alloc: {"buffer": BUFFER, "init": EXPR},
    N.PtrTensor: {"buffer": BUFFER, "addr": EXPR},
    N.Store: {"buffer": BUFFER, "indices": EXPR, "value": EXPR},
    # the program
    N.PrimFunc: {"params": BIND, "body": BODY, "dyn_vars": BIND},
}


def _ordered(cls, decl: dict) -> tuple:
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = set(decl) - set(names)
    if unknown:
        raise InternalError(f"traverse.DECLS names fields {sorted(unknown)} that {cls.__name__} does not have")
    return tuple((n, decl[n]) for n in names if n in decl)


#: node class -> ((field, kind), ...) in dataclass field order
FIELDS: dict[type, tuple] = {cls: _ordered(cls, d) for cls, d in DECLS.items()}


def _fields(node) -> tuple:
    try:
        return FIELDS[type(node)]
    except KeyError:
        raise InternalError(f"tilesim.ir.traverse has no field declaration for {type(node).__name__}") from None


def _of_kinds(kinds) -> dict[type, tuple]:
    return {cls: tuple(n for n, k in f if k in kinds) for cls, f in FIELDS.items()}


_EXPR_FIELDS = _of_kinds((EXPR, OPERAND))
_REGION_FIELDS = _of_kinds((REGION, OPERAND))
_BUFFER_FIELDS = _of_kinds((BUFFER,))
_BODY_FIELDS = _of_kinds((BODY,))
_BIND_FIELDS = _of_kinds((BIND,))


def _items(node, names, typ) -> tuple:
    out = []
    for n in names:
        v = getattr(node, n)
        if isinstance(v, tuple):
            out.extend(x for x in v if isinstance(x, typ))
        elif isinstance(v, typ):
            out.append(v)
    return tuple(out)


def _fast_expr_children(cls) -> Callable:
    """A specialised ``expr_children`` for one expression class (the cost analysis walks often)."""
    names = _EXPR_FIELDS[cls]
    if not names:
        return lambda x: ()
    if len(names) == 1:
        (n,) = names
        if cls in (N.Load, N.Call):  # a tuple of expressions
            return lambda x: tuple(getattr(x, n))
        return lambda x: (getattr(x, n),)
    if len(names) == 2:
        a, b = names
        return lambda x: (getattr(x, a), getattr(x, b))
    return lambda x: tuple(getattr(x, n) for n in names)


_EXPR_KIDS: dict[type, Callable] = {cls: _fast_expr_children(cls) for cls in FIELDS if issubclass(cls, N.Expr)}


# ------------------------------------------------------------------------------------- primitives
def expr_children(node) -> tuple:
    """The expressions held directly by ``node``: an expression's operands (a ``Load``'s indices, a
    call's arguments; none for ``Var``/``Const``), a region's starts and symbolic extents, a
    statement's own expression fields (not its regions' — see :func:`stmt_exprs`); none for
    anything that is not an IR node."""
    f = _EXPR_KIDS.get(type(node))
    if f is not None:
        return f(node)
    names = _EXPR_FIELDS.get(type(node))
    return _items(node, names, N.Expr) if names else ()


def regions_of(node) -> tuple:
    """The :class:`Region` operands of a statement, in field order."""
    _fields(node)
    return _items(node, _REGION_FIELDS[type(node)], N.Region)


def buffers_of(node) -> tuple:
    """The buffers ``node`` names directly (a load's, store's, region's or allocation's buffer)."""
    _fields(node)
    return _items(node, _BUFFER_FIELDS[type(node)], N.Buffer)


def binds(node) -> tuple:
    """The variables ``node`` binds (loop and block variables, a ``Let``'s name; a ``PrimFunc``'s
    parameters and dynamic dimensions)."""
    _fields(node)
    return _items(node, _BIND_FIELDS[type(node)], (N.Var, N.Buffer))


def bodies(node) -> tuple:
    """The statement bodies of ``node``: a loop's or launch's body, an ``If``'s then and orelse."""
    _fields(node)
    return tuple(getattr(node, n) for n in _BODY_FIELDS[type(node)])


def stmt_children(node) -> tuple:
    """The statements of every body of ``node``, in order."""
    out = []
    for b in bodies(node):
        out.extend(b)
    return tuple(out)


def stmt_exprs(s) -> tuple:
    """Every expression statement ``s`` holds itself: its expression fields and its regions' starts
    and symbolic extents, in field order (not those of its bodies)."""
    out = []
    for n, k in _fields(s):
        v = getattr(s, n)
        if k == EXPR or (k == OPERAND and isinstance(v, N.Expr)):
            out.extend(_items(s, (n,), N.Expr))
        elif k in (REGION, OPERAND):
            out.extend(expr_children(v))
    return tuple(out)


def children(node) -> tuple:
    """The direct IR children :func:`walk` descends into: expressions, regions and the statements of
    bodies, in field order (buffers and bound variables are not children; see :func:`buffers_of`
    and :func:`binds`)."""
    out = []
    for n, k in _fields(node):
        v = getattr(node, n)
        if k == BODY:
            out.extend(v)
        elif k in (EXPR, OPERAND, REGION):
            out.extend(_items(node, (n,), (N.Expr, N.Region)))
    return tuple(out)


# ------------------------------------------------------------------------------------------ walks
def walk(node) -> Iterator:
    """Pre-order over ``node`` (a node, or a body / tuple / list of nodes) and every statement,
    region and expression beneath it."""
    stack = list(reversed(node)) if isinstance(node, (tuple, list)) else [node]
    while stack:
        x = stack.pop()
        yield x
        stack.extend(reversed(children(x)))


def walk_stmts(body, enter: Callable | None = None) -> Iterator:
    """Pre-order over the statements of ``body`` and of their bodies; with ``enter``, the bodies of a
    statement ``s`` are visited only when ``enter(s)`` is true."""
    stack = list(reversed(body))
    while stack:
        s = stack.pop()
        yield s
        if enter is None or enter(s):
            stack.extend(reversed(stmt_children(s)))


def walk_exprs(x) -> Iterator:
    """Pre-order over the expressions of ``x``: an expression, a tuple/list of them (``None`` and
    ints, e.g. static extents, are skipped)."""
    stack = list(reversed(x)) if isinstance(x, (tuple, list)) else [x]
    while stack:
        e = stack.pop()
        if isinstance(e, N.Expr):
            yield e
            stack.extend(reversed(expr_children(e)))


def loads_in(exprs) -> Iterator:
    """The ``Load`` nodes of an expression or a tuple/list of them, pre-order."""
    return (e for e in walk_exprs(exprs) if type(e) is N.Load)


def regions(s) -> tuple[tuple, tuple]:
    """``(reads, writes)``: the regions and buffers statement ``s`` itself reads and writes.

    Tile operations read and write their regions (``Gemm``: A and B read, C read unless
    ``clear_accum``, C written; ``Reduce``: dst also read unless ``clear``; ``Atomic``: dst read and
    written, a region value read); a ``Store`` writes its buffer, an ``Alloc`` with an initial value
    writes its buffer; the buffer of every ``Load`` in the statement's own expressions (see
    :func:`stmt_exprs`) is read. Bodies are not included: walk them with :func:`walk_stmts`.
    """
    t = type(s)
    reads: list = []
    writes: list = []
    if t is N.Copy or t is N.Cumsum:
        reads.append(s.src)
        writes.append(s.dst)
    elif t is N.Gemm:
        reads += [s.a, s.b] + ([] if s.clear_accum else [s.c])
        writes.append(s.c)
    elif t is N.Reduce:
        reads += [s.src] + ([] if s.clear else [s.dst])
        writes.append(s.dst)
    elif t is N.Fill:
        writes.append(s.dst)
    elif t is N.Atomic:
        reads += ([s.value] if isinstance(s.value, N.Region) else []) + [s.dst]
        writes.append(s.dst)
    elif t is N.Store:
        writes.append(s.buffer)
    elif t is N.AtomicFetch:
        reads.append(s.buffer)
        writes.append(s.buffer)
    elif t is N.Alloc and s.init is not None:
        writes.append(s.buffer)
    elif t is N.ClusterCancel:
        writes.append(s.result)
    reads.extend(e.buffer for e in loads_in(stmt_exprs(s)))
    return tuple(reads), tuple(writes)


def map_stmts(body, fn: Callable) -> tuple:
    """``body`` rebuilt bottom-up: each statement's bodies are mapped first, then ``fn(stmt)`` gives
    its replacement — a statement, or a tuple/list of statements spliced in its place (empty: the
    statement is dropped). Unchanged statements are returned as the same objects."""
    out = []
    for s in body:
        _fields(s)
        changes = {}
        for n in _BODY_FIELDS[type(s)]:
            old = getattr(s, n)
            new = map_stmts(old, fn)
            if len(new) != len(old) or any(a is not b for a, b in zip(new, old)):
                changes[n] = new
        if changes:
            s = dataclasses.replace(s, **changes)
        r = fn(s)
        if isinstance(r, (tuple, list)):
            out.extend(r)
        else:
            out.append(r)
    return tuple(out)


def map_expr(e, fn: Callable):
    """Expression ``e`` rebuilt bottom-up: operands first, then ``fn(node)`` gives each node's
    replacement (return the node itself to keep it). ``None`` and ints pass through."""
    if not isinstance(e, N.Expr):
        return e
    changes = {}
    for n, k in _fields(e):
        if k not in (EXPR, OPERAND):
            continue
        old = getattr(e, n)
        new = tuple(map_expr(x, fn) for x in old) if isinstance(old, tuple) else map_expr(old, fn)
        if new is not old and (not isinstance(old, tuple) or any(a is not b for a, b in zip(new, old))):
            changes[n] = new
    if changes:
        e = dataclasses.replace(e, **changes)
    return fn(e)


def _map_region(r, fn):
    starts = tuple(map_expr(x, fn) for x in r.starts)
    exts = tuple(map_expr(x, fn) for x in r.extents)
    if all(a is b for a, b in zip(starts, r.starts)) and all(a is b for a, b in zip(exts, r.extents)):
        return r
    return dataclasses.replace(r, starts=starts, extents=exts)


def map_exprs_in(s, fn: Callable):
    """Statement ``s`` with every expression it holds, its bodies' included, mapped by :func:`map_expr`."""
    changes = {}
    for n, k in _fields(s):
        old = getattr(s, n)
        if k == BODY:
            new = tuple(map_exprs_in(x, fn) for x in old)
        elif k == REGION or (k == OPERAND and isinstance(old, N.Region)):
            new = _map_region(old, fn)
        elif k in (EXPR, OPERAND):
            new = tuple(map_expr(x, fn) for x in old) if isinstance(old, tuple) else map_expr(old, fn)
        else:
            continue
        if isinstance(old, tuple):
            if len(new) != len(old) or any(a is not b for a, b in zip(new, old)):
                changes[n] = new
        elif new is not old:
            changes[n] = new
    return dataclasses.replace(s, **changes) if changes else s


__all__ = ["DECLS", "FIELDS", "KINDS", "binds", "bodies", "buffers_of", "children", "expr_children", "loads_in",
           "map_expr", "map_exprs_in", "map_stmts", "regions", "regions_of", "stmt_children", "stmt_exprs", "walk", "walk_exprs",
           "walk_stmts"]
