"""``for v0, v1 in T.Persistent(domain, wave_size, index, group_size=8):`` — a persistent kernel's tile loop.

Contract
--------
A persistent kernel launches ``wave_size`` blocks (one per SM, say); block ``index`` visits the tiles of
``domain`` (a list of extents, the last one "grouped") one per wave. TileLang's meaning, which this
builder reproduces as ordinary IR (a serial loop, ``Let`` bindings and an ``If``):

* ``g = max(1, min(group_size, domain[-1]))``; the grouped domain is
  ``[ceildiv(domain[-1], g), domain[0], ..., domain[-2], g]``, of ``padded`` tiles in all;
* ``for w in T.serial(ceildiv(padded, wave_size))``: ``t = w * wave_size + index``; ``t`` is decomposed
  in the grouped domain (row-major, last fastest) into ``[i0, i1, ..., i_{n-1}, ig]``; the loop names
  are ``v_k = i_{k+1}`` for ``k < n - 1`` and ``v_{n-1} = i0 * g + ig``;
* the body runs when ``t < padded`` (TileLang breaks out of the loop otherwise; ``t`` grows with ``w``,
  so the guard is the same) and ``v_{n-1} < domain[-1]`` (a partial last group).

So every tile of ``domain`` is visited exactly once over the blocks ``index = 0 .. wave_size - 1``.
The loop names must be as many as ``domain`` has extents; extents, ``wave_size`` and ``group_size`` are
integer expressions (``group_size`` a positive Python int); anything else is a located ``KernelError``.
"""

from __future__ import annotations

import ast

from ..errors import KernelSyntaxError, KernelTypeError
from ..ir import nodes as N
from . import exprs as X


def _int_expr(v, loc, what):
    if isinstance(v, N.Const):
        v = v.value
    if X.is_ir(v):
        return X.index_expr(v, loc)
    if isinstance(v, bool) or not isinstance(v, int):
        raise KernelTypeError(f"T.Persistent: {what} must be an integer, got {v!r}", loc)
    return v


def _ceildiv(a, b, loc):
    return X.binop("floordiv", X.binop("add", a, X.binop("sub", b, 1, loc), loc), b, loc)


def persistent_loop(tr, node, a):
    """Trace ``for names in T.Persistent(**a):`` (``a``: the bound arguments) as a serial loop."""
    loc = tr.loc(node)
    if not tr.in_launch():
        raise KernelSyntaxError("T.Persistent outside `with T.Kernel(...)`", loc,
                                hint="a persistent loop runs inside the launch: with T.Kernel(sm_num) as bid")
    if tr.parallel_depth:
        raise KernelSyntaxError("T.Persistent inside T.Parallel", loc, hint="put the tile loop outside")
    domain = a["domain"]
    if not isinstance(domain, (list, tuple)) or not domain:
        raise KernelTypeError(f"T.Persistent: domain must be a non-empty list of extents, got {domain!r}", loc)
    domain = [_int_expr(d, loc, "every domain extent") for d in domain]
    wave = _int_expr(a["wave_size"], loc, "wave_size")
    index = _int_expr(a["index"], loc, "index")
    gs = a["group_size"]
    gs = 8 if gs is None else (gs.value if isinstance(gs, N.Const) else gs)
    if not isinstance(gs, int) or isinstance(gs, bool) or gs < 1:
        raise KernelTypeError(f"T.Persistent: group_size must be a positive Python int, got {gs!r}", loc)
    tgt = node.target
    names = [tgt] if isinstance(tgt, ast.Name) else list(getattr(tgt, "elts", []))
    if len(names) != len(domain) or not all(isinstance(n, ast.Name) for n in names):
        raise KernelSyntaxError(f"T.Persistent has {len(domain)} domain extent(s) but the loop binds "
                                f"{len(names)} name(s)", loc, hint="bind one name per extent: for bx, by in ...")
    last = domain[-1]
    g = X.binop("max", 1, X.binop("min", gs, last, loc), loc)
    grouped = [_ceildiv(last, g, loc), *domain[:-1], g]
    padded = grouped[0]
    for e in grouped[1:]:
        padded = X.binop("mul", padded, e, loc)
    w = N.Var("persistent_wave", "int32", kind="loop", loc=loc)
    t = X.binop("add", X.binop("mul", w, wave, loc), index, loc)
    idxs = [None] * len(grouped)
    rem = t
    for i in range(len(grouped) - 1, 0, -1):
        idxs[i] = X.binop("floormod", rem, grouped[i], loc)
        rem = X.binop("floordiv", rem, grouped[i], loc)
    idxs[0] = rem
    values = [*idxs[1:len(domain)], X.binop("add", X.binop("mul", idxs[0], g, loc), idxs[-1], loc)]
    lets = []
    for n, v in zip(names, values):
        var = N.Var(n.id, "int32", kind="let", loc=tr.loc(n))
        lets.append(N.Let(var, X.index_expr(v, loc), loc))
        tr.bind(n.id, var, n, loop_var=True)
    body = tr.sub_body(node.body, loop=True)
    cond = X.logical("and", X.compare("lt", t, padded, loc), X.compare("lt", lets[-1].var, last, loc), loc)
    guarded = (*lets, N.If(X.to_bool(cond, loc), body, (), loc))
    tr.emit(N.For(w, N.Const(0, "int32", loc), X.index_expr(_ceildiv(padded, wave, loc), loc), 1, "serial",
                  guarded, (), loc))
