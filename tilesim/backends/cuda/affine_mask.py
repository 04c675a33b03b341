"""Strength-reduced integer comparisons in ``T.Parallel`` loops (a causal mask's ``row >= col``).

Contract
--------
:func:`plan` finds, in the body of a ``T.Parallel`` loop, every ``Compare`` (``<``, ``<=``, ``>``, ``>=``) of two
integer expressions that are *affine in the loop's variables*: sums of ``constant * loop variable``, integer
constants and *invariant* terms (expressions that name no loop variable of this ``T.Parallel`` and read no
memory), with a proof from value ranges (:func:`interval`) that no sum involved can overflow 64-bit integers.
The comparison ``a op b`` is rewritten, exactly, as ``H op -S``: with a thread's element index along loop
dimension ``d`` being ``t_d + s_d`` (``t_d`` the thread's part, ``s_d`` the slot's part, a constant once NVVM
unrolls the slot loops — :attr:`~.emitter.ParCtx.parts`), ``H = (a - b)`` without the slot parts is computed
once per thread before the loop and ``S = sum(c_d * s_d)`` is a per-element constant: one integer compare of a
register with an immediate per element instead of two 64-bit affine evaluations. ``H`` is ``int32`` when its
terms provably fit (so the compare is one 32-bit ``ISETP``), else ``int64``.

:func:`emit_parallel` lowers the loop in two versions when any comparison was reduced: if every reduced
comparison holds for every element of the thread (``H`` against the extreme of ``-S`` over the thread's slots —
a causal mask's tile off the diagonal), the comparisons are the constant ``True``; else the reduced forms.
Both versions compute exactly what the interpreter computes (Python integers: no rounding, no wrap-around);
anything not proven falls back to the ordinary lowering.

Value ranges (:func:`interval`): constants; a ``T.Parallel`` variable ``[0, extent)``; a block variable
``[0, grid)`` (static grid); a serial loop variable from its loop's bounds; a ``Let`` from its value; thread
indices ``[0, threads)``; any other integer variable from its dtype (``int32``: ``[-2**31, 2**31)``; 64-bit: unknown,
so no rewrite); ``+ - *``, ``min``/``max``, floor division/modulo by a positive constant.
"""

from __future__ import annotations

from dataclasses import dataclass

from ... import dtypes as dt
from ...ir import nodes as N
from ...ir.traverse import binds, loads_in, stmt_exprs, walk_exprs, walk_stmts

#: the rewritten comparisons
_OPS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_I32 = (-(2 ** 31), 2 ** 31 - 1)
_DT_RANGE = {"int8": (-128, 127), "int16": (-(2 ** 15), 2 ** 15 - 1), "int32": _I32, "uint8": (0, 255),
             "uint16": (0, 2 ** 16 - 1), "uint32": (0, 2 ** 32 - 1), "bool": (0, 1)}
_LIMIT64 = 2 ** 62


@dataclass
class Reduced:
    """One rewritten comparison: ``H op -S`` (module docstring)."""

    node: N.Compare
    op: str
    coefs: dict  # loop dim -> coefficient of its index in a - b
    h: str = ""  # the hoisted name of H
    smin: int = 0  # min / max over the thread's slots of S
    smax: int = 0

    def all_true(self) -> str:
        """Code: the comparison holds for every slot of the thread."""
        if self.op in ("ge", "gt"):
            return f"{self.h} {_OPS[self.op]} {-self.smin}"
        return f"{self.h} {_OPS[self.op]} {-self.smax}"

    def element(self, parts) -> str:
        """Code of the comparison for the current element (``parts``: per loop dim (thread part, slot part))."""
        s = " + ".join(f"{c} * {parts[d][1]}" for d, c in sorted(self.coefs.items()) if parts[d][1] != "0")
        return f"({self.h} {_OPS[self.op]} -({s or '0'}))"


def _ranges(g) -> dict:
    """uid -> (lo, hi) of the launch's serial loop variables and lets, where their bounds are known."""
    got = getattr(g, "_affine_ranges", None)
    if got is not None:
        return got
    out: dict = {}
    g._affine_ranges = out
    for s in walk_stmts(g.launch.body):
        if isinstance(s, N.Let) and dt.is_int(s.var.dtype):
            r = interval(g, s.value)
            if r is not None:
                out[s.var.uid] = r
        elif isinstance(s, N.For) and isinstance(s.step, int) and s.step > 0:
            lo, hi = interval(g, s.start), interval(g, s.stop)
            if lo is not None and hi is not None:
                out[s.var.uid] = (lo[0], max(lo[0], hi[1] - 1))
    return out


def interval(g, e):
    """``(lo, hi)`` bounds of integer expression ``e`` (module docstring), or None."""
    if isinstance(e, int):
        return (e, e)
    if isinstance(e, N.Const):
        return (int(e.value), int(e.value)) if isinstance(e.value, (int, bool)) else None
    if isinstance(e, N.Var):
        if g.par is not None and e.uid in g.par.dims:
            return (0, g.par.layout.shape[g.par.dims[e.uid]] - 1)
        if e.kind == "block" and e in g.launch.block_vars:
            n = interval(g, g.launch.grid[g.launch.block_vars.index(e)])
            return (0, n[1] - 1) if n is not None and n[1] >= 1 else _DT_RANGE.get(e.dtype)
        if e.kind == "thread":
            return (0, g.nt - 1)
        r = _ranges(g).get(e.uid) if e.kind in ("loop", "let") else None
        return r if r is not None else _DT_RANGE.get(e.dtype)
    if isinstance(e, N.Cast):
        r = interval(g, e.value)
        lim = _DT_RANGE.get(e.dtype, (-_LIMIT64, _LIMIT64) if e.dtype == "int64" else None)
        return r if (r is not None and lim is not None and lim[0] <= r[0] and r[1] <= lim[1]) else None
    op = e.op if isinstance(e, N.Binary) else e.func if isinstance(e, N.Call) and len(e.args) == 2 else None
    if op is None or not dt.is_int(e.dtype):
        return None
    a, b = (e.a, e.b) if isinstance(e, N.Binary) else e.args
    x, y = interval(g, a), interval(g, b)
    if x is None or y is None:
        return None
    if op == "add":
        return (x[0] + y[0], x[1] + y[1])
    if op == "sub":
        return (x[0] - y[1], x[1] - y[0])
    if op == "mul":
        ps = [p * q for p in x for q in y]
        return (min(ps), max(ps))
    if op == "min":
        return (min(x[0], y[0]), min(x[1], y[1]))
    if op == "max":
        return (max(x[0], y[0]), max(x[1], y[1]))
    if op in ("floordiv", "floormod") and y[0] == y[1] and y[0] > 0:
        c = y[0]
        return (x[0] // c, x[1] // c) if op == "floordiv" else (0, c - 1)
    return None


def _affine(g, dims: dict, e, sign: int, coefs: dict, rest: list) -> bool:
    """Add ``sign * e`` to ``coefs`` (loop dim -> coefficient) and ``rest`` ((sign, invariant expr)); False if ``e``
    is not affine in the loop variables (``dims``: var uid -> loop dim, -1 for names bound inside the body)."""
    if isinstance(e, N.Var) and e.uid in dims:
        if dims[e.uid] < 0:  # bound inside the body
            return False
        coefs[dims[e.uid]] = coefs.get(dims[e.uid], 0) + sign
        return True
    uses = any(isinstance(x, N.Var) and x.uid in dims for x in walk_exprs(e))
    if not uses:
        if any(True for _ in loads_in(e)) or not dt.is_int(e.dtype) or interval(g, e) is None:
            return False
        rest.append((sign, e))
        return True
    if isinstance(e, N.Cast) and dt.is_int(e.dtype) and interval(g, e) is not None:
        return _affine(g, dims, e.value, sign, coefs, rest)
    if isinstance(e, N.Binary) and e.op in ("add", "sub"):
        return (_affine(g, dims, e.a, sign, coefs, rest)
                and _affine(g, dims, e.b, sign if e.op == "add" else -sign, coefs, rest))
    if isinstance(e, N.Binary) and e.op == "mul":
        for k, x in ((e.a, e.b), (e.b, e.a)):
            if isinstance(k, N.Const) and isinstance(k.value, int):
                return _affine(g, dims, x, sign * int(k.value), coefs, rest)
    return False


def _slot_offsets(lay, d: int) -> list:
    """The slot parts of a thread's indices along dim ``d`` of layout ``lay`` (:meth:`.emitter.Emitter.slot_loops`)."""
    P, V = lay.tcount[d], lay.vec[d]
    return [(s // V) * P * V + s % V for s in range(lay.slots[d])]


def plan(g, s: N.Parallel, lay) -> list:
    """The comparisons of ``s``'s body to rewrite (module docstring), with their proofs; H not yet emitted."""
    out = []
    seen = set()
    dims = {v.uid: d for d, v in enumerate(s.vars)}
    # names bound inside the body (lets, inner loops) vary per element: never invariant (key -1: not a loop dim)
    for st in walk_stmts(s.body):
        dims.update({v.uid: -1 for v in binds(st) if isinstance(v, N.Var)})
    for st in walk_stmts(s.body):
        for e in stmt_exprs(st):
            for c in walk_exprs(e):
                if not isinstance(c, N.Compare) or c.op not in _OPS or id(c) in seen:
                    continue
                if not (dt.is_int(c.a.dtype) and dt.is_int(c.b.dtype)) or "bool" in (c.a.dtype, c.b.dtype):
                    continue
                coefs, rest = {}, []
                if not (_affine(g, dims, c.a, 1, coefs, rest) and _affine(g, dims, c.b, -1, coefs, rest)):
                    continue
                coefs = {d: k for d, k in coefs.items() if k}
                if not coefs:
                    continue
                seen.add(id(c))
                out.append((c, coefs, rest))
    return out


def hoist(g, planned: list, lay) -> list:
    """Emit each planned comparison's ``H`` (here, before the slot loops); the :class:`Reduced` forms."""
    out = []
    for c, coefs, rest in planned:
        terms, bound = [], 0
        for k, x in rest:  # k: the term's integer coefficient
            r = interval(g, x)
            bound += abs(k) * max(abs(r[0]), abs(r[1]))
            code = g._outer_expr(x)
            terms.append(code if k == 1 else f"-({code})" if k == -1 else f"{k} * ({code})")
        for d, k in sorted(coefs.items()):
            t = _thread_part(g, lay, d)
            if t != "0":
                terms.append(f"{k} * {t}")
            bound += abs(k) * (lay.shape[d] + lay.tcount[d] * lay.vec[d])
        offs = {d: [k * o for o in _slot_offsets(lay, d)] for d, k in coefs.items()}
        smin = sum(min(v) for v in offs.values())
        smax = sum(max(v) for v in offs.values())
        if bound + max(abs(smin), abs(smax)) >= _LIMIT64:
            continue
        code = " + ".join(terms) or "0"
        narrow = bound + max(abs(smin), abs(smax)) < _I32[1]
        h = g.fresh("_hm")
        g.emit(f"{h} = int32({code})" if narrow else f"{h} = int64({code})")
        out.append(Reduced(c, c.op, coefs, h, smin, smax))
    return out


def _thread_part(g, lay, d: int) -> str:
    t = g.group(lay, d)
    return t if lay.vec[d] == 1 or t == "0" else f"({t} * {lay.vec[d]})"


def emit_parallel(g, s: N.Parallel, lay, body) -> bool:
    """Lower ``s`` with its affine comparisons rewritten, in two versions (module docstring); False (nothing
    emitted) when it has none."""
    planned = plan(g, s, lay)
    if not planned:
        return False
    red = hoist(g, planned, lay)
    if not red:
        return False
    g.emit(f"if {' and '.join(r.all_true() for r in red)}:")
    with g.indent():
        g.cmp_forms = {id(r.node): "True" for r in red}
        g.slot_loops(lay, body)
    g.emit("else:")
    with g.indent():
        g.cmp_forms = {id(r.node): r for r in red}
        g.slot_loops(lay, body)
    g.cmp_forms = {}
    return True


def compare_form(g, e: N.Compare) -> str | None:
    """The code of comparison ``e`` in the current ``T.Parallel`` version, or None (the ordinary form)."""
    f = getattr(g, "cmp_forms", None)
    if not f or g.par is None:
        return None
    r = f.get(id(e))
    if r is None:
        return None
    return r if isinstance(r, str) else r.element(g.par.parts)
