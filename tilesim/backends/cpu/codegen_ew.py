"""Elementwise ``T.Parallel`` loops of common shapes as calls of cached external helpers (CPU target).

Contract
--------
``elementwise_call(g, s)`` emits one call of a :mod:`.prelude_tiles` helper for the ``T.Parallel`` statement
``s`` and returns True when ``s`` is one of the shapes below, else emits nothing and returns False (the caller
writes the element loops). A loop of one of these shapes is a few lines of Python but a vectorised loop nest
for Numba and LLVM to type, lower and optimise in every kernel that has it (flash attention has six); as a
helper it is compiled once per machine.

The statement must be a loop over all of a whole on-chip ``float32``/``float64`` buffer ``D`` (``vars``
``(i, j)`` over ``D``'s 2-D shape, or ``(i,)`` over its 1-D shape) whose body is the single store ``D[i, j] =
value`` (``D[i]``). Operands: ``X`` is a load ``X[i, j]`` (``X[i]``) of an on-chip buffer of ``D``'s shape and
dtype; ``R`` a load ``R[i]`` of a 1-D on-chip buffer of ``D``'s dtype and length ``D.shape[0]``; ``a``, ``b``,
``va``, ``vb`` expressions of ``D``'s dtype that read no loop variable and no on-chip buffer (constants, scalar
parameters, lets). Shapes of ``value``:

* ``X op R`` with ``op`` one of ``+ - * /``, ``T.max``, ``T.min``: ``row_op`` (a rescale by a row statistic,
  or, for 1-D loops, an elementwise operation of two vectors);
* ``f(X * a - R * b)``, ``f(X - R)``, ``f((X - R) * a)`` with ``f`` ``T.exp2`` or ``T.exp``, float32 only:
  ``exp_affine`` (the exponentials of online and plain softmax);
* ``va if L cmp M else vb`` with ``L``, ``M`` integer expressions linear in ``i`` and ``j`` (sums, differences
  and products by integer constants of the loop variables and of loop-invariant integers): ``mask_select``
  (causal and offset masks).

Meaning: the helper evaluates the same operations in the same order, in the same types, as the element loops
(``row_op``'s and ``exp_affine``'s ``R[i] * b`` once per row: the same value); integer forms are evaluated in
int64 like every integer of generated code (two's complement, so regrouping the sum does not change it).
"""

from __future__ import annotations

from ... import dtypes as dt
from ...ir import nodes as N
from ...ir.traverse import walk
from .codegen import _Gen

__all__ = ["elementwise_call"]

_ROW_OPS = {"add": 0, "sub": 1, "mul": 2, "div": 3, "max": 4, "min": 5}
#: comparisons as (helper code, operands swapped): ``a > b`` is ``b < a``
_CMP = {"lt": (0, False), "le": (1, False), "gt": (0, True), "ge": (1, True), "eq": (2, False), "ne": (3, False)}


class _Loop:
    def __init__(self, g: _Gen, s: N.Parallel, dst: N.Buffer):
        self.g = g
        self.vars = tuple(v.uid for v in s.vars)
        self.dst = dst
        self.shape = tuple(dst.static_shape())

    def is_x(self, e) -> bool:
        return (isinstance(e, N.Load) and _onchip(e.buffer) and e.buffer.dtype == self.dst.dtype
                and tuple(e.buffer.static_shape()) == self.shape and _vars(e.indices) == self.vars)

    def is_r(self, e) -> bool:
        return (isinstance(e, N.Load) and _onchip(e.buffer) and e.buffer.dtype == self.dst.dtype
                and tuple(e.buffer.static_shape()) == self.shape[:1] and _vars(e.indices) == self.vars[:1])

    def invariant(self, e) -> bool:
        """``e`` reads no loop variable and no on-chip buffer."""
        for x in walk(e):
            if isinstance(x, N.Var) and x.uid in self.vars:
                return False
            if isinstance(x, N.Load) and x.buffer.scope != "global":
                return False
        return True

    def scalar(self, e) -> bool:
        return e.dtype == self.dst.dtype and self.invariant(e)

    def linear(self, e):
        """``(k, a, b)``: ``e`` is ``k + a*i + b*j`` (``k`` generated code of an int64, ``a``, ``b`` ints), or None."""
        if not dt.is_int(e.dtype):
            return None
        if self.invariant(e):
            return self.g.expr(e), 0, 0
        if isinstance(e, N.Var) and e.uid in self.vars:
            return "0", int(e.uid == self.vars[0]), int(len(self.vars) > 1 and e.uid == self.vars[1])
        if not isinstance(e, N.Binary):
            return None
        if e.op in ("add", "sub"):
            x, y = self.linear(e.a), self.linear(e.b)
            if x is None or y is None:
                return None
            sign = 1 if e.op == "add" else -1
            return f"({x[0]} {'+' if sign > 0 else '-'} {y[0]})", x[1] + sign * y[1], x[2] + sign * y[2]
        if e.op == "mul":
            for f, c in ((e.a, e.b), (e.b, e.a)):
                if isinstance(c, N.Const):
                    x = self.linear(f)
                    if x is not None:
                        k = int(c.value)
                        return f"({x[0]} * {self.g.expr(c)})", x[1] * k, x[2] * k
        return None


def _onchip(b: N.Buffer) -> bool:
    return b.scope not in ("global", "var") and b.alias_of is None and b.static_shape() is not None


def _vars(indices) -> tuple:
    return tuple(x.uid if isinstance(x, N.Var) else None for x in indices)


def elementwise_call(g: _Gen, s: N.Parallel) -> bool:
    if len(s.body) != 1 or not isinstance(s.body[0], N.Store) or not 1 <= len(s.vars) <= 2:
        return False
    st = s.body[0]
    d = st.buffer
    if (not _onchip(d) or d.dtype not in ("float32", "float64") or tuple(d.static_shape()) != tuple(s.extents)
            or _vars(st.indices) != tuple(v.uid for v in s.vars) or st.value.dtype != d.dtype):
        return False
    loop = _Loop(g, s, d)
    v = st.value
    return _row_op(g, loop, v) or _exp_affine(g, loop, v) or _mask_select(g, loop, v)


def _row_op(g: _Gen, loop: _Loop, v) -> bool:
    if not (isinstance(v, N.Binary) and v.op in _ROW_OPS and loop.is_x(v.a) and loop.is_r(v.b)):
        return False
    name = g.ext("row_op", loop.dst.dtype)
    same = v.a.buffer.uid == loop.dst.uid
    g.emit(f"{name}({g.buf(loop.dst)}, {g.buf(v.a.buffer)}, {g.buf(v.b.buffer)}, {_ROW_OPS[v.op]}, {same})")
    return True


def _exp_affine(g: _Gen, loop: _Loop, v) -> bool:
    if not (isinstance(v, N.Call) and v.func in ("exp2", "exp") and loop.dst.dtype == "float32" and len(v.args) == 1):
        return False
    e = v.args[0]
    one = g.const("float32", "1")
    if isinstance(e, N.Binary) and e.op == "sub" and loop.is_x(e.a) and loop.is_r(e.b):
        mode, x, r, a, b = 1, e.a, e.b, one, one
    elif (isinstance(e, N.Binary) and e.op == "mul" and isinstance(e.a, N.Binary) and e.a.op == "sub"
          and loop.is_x(e.a.a) and loop.is_r(e.a.b) and loop.scalar(e.b)):
        mode, x, r, a, b = 2, e.a.a, e.a.b, g.expr(e.b), one
    elif (isinstance(e, N.Binary) and e.op == "sub" and all(isinstance(t, N.Binary) and t.op == "mul" for t in (e.a, e.b))
          and loop.is_x(e.a.a) and loop.scalar(e.a.b) and loop.is_r(e.b.a) and loop.scalar(e.b.b)):
        mode, x, r, a, b = 0, e.a.a, e.b.a, g.expr(e.a.b), g.expr(e.b.b)
    else:
        return False
    name = g.ext("exp_affine", "float32")
    same = x.buffer.uid == loop.dst.uid
    g.emit(f"{name}({g.buf(loop.dst)}, {g.buf(x.buffer)}, {g.buf(r.buffer)}, {a}, {b}, {mode}, {v.func == 'exp2'}, {same})")
    return True


def _mask_select(g: _Gen, loop: _Loop, v) -> bool:
    if not (isinstance(v, N.Select) and isinstance(v.cond, N.Compare) and loop.scalar(v.a) and loop.scalar(v.b)):
        return False
    c = v.cond
    if c.op not in _CMP:
        return False
    lhs, rhs = loop.linear(c.a), loop.linear(c.b)
    if lhs is None or rhs is None:
        return False
    code, swap = _CMP[c.op]
    if swap:
        lhs, rhs = rhs, lhs
    va, vb = g.expr(v.a), g.expr(v.b)
    name = g.ext("mask_select", loop.dst.dtype)
    g.emit(f"{name}({g.buf(loop.dst)}, {lhs[0]}, {lhs[1]}, {lhs[2]}, {rhs[0]}, {rhs[1]}, {rhs[2]}, {code}, {va}, {vb})")
    return True
