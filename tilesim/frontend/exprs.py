"""Typing of element expressions: Python values meet IR expressions here.

Contract
--------
* Trace-time values are either Python values (ints, floats, bools, strings, tuples, dtypes, ...) or
  IR values (:class:`~tilesim.ir.nodes.Expr`, :class:`~tilesim.ir.nodes.Buffer`, :class:`Access`).
* Arithmetic on two Python values stays Python (constant folding). Arithmetic with an IR operand
  builds IR: a Python literal adopts the other operand's dtype (a float literal next to an integer
  becomes float32); two typed operands of different dtypes are promoted as TVM does
  (``tilesim.dtypes.promote``).
* :func:`to_expr` is the one coercion to an IR expression; it raises ``KernelTypeError`` naming the
  value's kind when that is impossible.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import numpy as np

from .. import dtypes as dt
from ..errors import KernelTypeError, Loc
from ..ir import nodes as N


@dataclass
class Access:
    """``buffer[items]`` before its use is known: a load (all items scalar) or a tile-op region."""

    buffer: N.Buffer
    items: tuple  # each an Expr/int, or a Python slice of Expr/int/None
    loc: Loc | None
    lets: dict | None = None  # the tracer's pure Let bindings, for slice extents (frontend/simplify.py)

    @property
    def has_slice(self) -> bool:
        return any(isinstance(i, slice) for i in self.items)


class ElementVar(Access):
    """A ``T.alloc_var`` made inside ``T.Parallel``: one variable per element of the parallel loops, held
    in a fragment indexed by their variables; reading the name loads it, assigning to it stores."""


def is_ir(v) -> bool:
    return isinstance(v, (N.Expr, N.Buffer, Access))


def literal_dtype(v, other: str | None = None) -> str:
    """Dtype a Python literal takes, next to an operand of dtype ``other`` (if any)."""
    if isinstance(v, (bool, np.bool_)):
        return "bool"
    if isinstance(v, (int, np.integer)):
        if other is not None and other != "bool":
            return other
        return "int32" if -(2**31) <= int(v) < 2**31 else "int64"
    if isinstance(v, (float, np.floating)):
        if other is not None and dt.is_float(other):
            return other
        return "float32"
    raise KernelTypeError(f"cannot use a {type(v).__name__} value in a kernel expression")


def const(v, dtype: str, loc: Loc | None = None) -> N.Const:
    if dt.is_float(dtype):
        return N.Const(float(v), dtype, loc)
    if dtype == "bool":
        return N.Const(bool(v), dtype, loc)
    return N.Const(int(v), dtype, loc)


def to_expr(v, loc: Loc | None = None, like: str | None = None) -> N.Expr:
    """Coerce a trace-time value to an IR expression (``like``: dtype a literal should adopt)."""
    if isinstance(v, N.Expr):
        return v
    if isinstance(v, Access):
        if v.has_slice:
            raise KernelTypeError(
                f"the region {v.buffer.name}[...] is not a single element", loc,
                hint="use a region only as an argument of a tile operation (T.copy, T.gemm, ...)")
        return make_load(v.buffer, v.items, v.loc or loc)
    if isinstance(v, N.Buffer):
        if v.scope == "var" or v.ndim == 0:
            return N.Load(v, (), v.dtype, loc)
        raise KernelTypeError(f"buffer {v.name} is used as a scalar value", loc,
                              hint=f"index it, e.g. {v.name}[i, j]")
    if isinstance(v, (bool, int, float, np.integer, np.floating, np.bool_)):
        return const(v, literal_dtype(v, like), loc)
    raise KernelTypeError(f"a {type(v).__name__} cannot be used as a kernel value", loc)


def make_load(buf: N.Buffer, items, loc) -> N.Load:
    if len(items) != buf.ndim and not (buf.scope == "var" and len(items) in (0, 1)):
        raise KernelTypeError(f"{buf.name} has {buf.ndim} dimension(s) but is indexed with {len(items)}", loc,
                              hint=f"write {buf.name}[" + ", ".join("i" + str(k) for k in range(buf.ndim)) + "]")
    if buf.scope == "var":
        items = ()
    idx = tuple(index_expr(i, loc) for i in items)
    return N.Load(buf, idx, buf.dtype, loc)


def index_expr(v, loc) -> N.Expr:
    e = to_expr(v, loc, like="int32")
    if not (dt.is_int(e.dtype) or e.dtype == "bool"):
        raise KernelTypeError(f"index must be an integer expression, got {e.dtype}", loc,
                              hint="cast it with T.cast(x, 'int32') or use // instead of /")
    return e


_PY_BINOPS = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
    "floordiv": operator.floordiv, "floormod": operator.mod, "pow": operator.pow,
    "bitand": operator.and_, "bitor": operator.or_, "bitxor": operator.xor,
    "shl": operator.lshift, "shr": operator.rshift, "min": min, "max": max,
}
_PY_CMP = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
           "eq": operator.eq, "ne": operator.ne}


def _fold(node):
    """Constant-fold an expression with constant operands (keeps IR small and shapes static)."""
    if isinstance(node, N.Binary) and isinstance(node.a, N.Const) and isinstance(node.b, N.Const):
        a, b = node.a.value, node.b.value
        if dt.is_int(node.dtype) and node.op in ("add", "sub", "mul", "floordiv", "floormod", "min", "max"):
            if node.op in ("floordiv", "floormod") and b == 0:
                return node
            return N.Const(int(_PY_BINOPS[node.op](a, b)), node.dtype, node.loc)
    if isinstance(node, N.Binary) and dt.is_int(node.dtype):
        # x + 0, x * 1, 0 + x, 1 * x
        if node.op in ("add", "sub") and isinstance(node.b, N.Const) and node.b.value == 0:
            return node.a
        if node.op == "add" and isinstance(node.a, N.Const) and node.a.value == 0:
            return node.b
        if node.op == "mul" and isinstance(node.b, N.Const) and node.b.value == 1:
            return node.a
        if node.op == "mul" and isinstance(node.a, N.Const) and node.a.value == 1:
            return node.b
    return node


def binop(op: str, a, b, loc: Loc | None):
    """``a <op> b`` at trace time: Python if both are Python values, else an IR node."""
    if not is_ir(a) and not is_ir(b):
        if op in _PY_BINOPS:
            return _PY_BINOPS[op](a, b)
        if op == "truncmod":
            return int(np.fmod(a, b))
    ea = to_expr(a, loc) if is_ir(a) else None
    eb = to_expr(b, loc) if is_ir(b) else None
    if ea is None:
        ea = to_expr(a, loc, like=eb.dtype)
    if eb is None:
        eb = to_expr(b, loc, like=ea.dtype)
    dtype = dt.promote(ea.dtype, eb.dtype)
    if op in ("bitand", "bitor", "bitxor", "shl", "shr") and not (dt.is_int(dtype) or dtype == "bool"):
        raise KernelTypeError(f"bitwise operator on {dtype} values", loc, hint="bitwise operators need integers")
    if op in ("floordiv", "floormod") and dt.is_float(dtype):
        pass  # float floor division is allowed (Python semantics)
    if dtype == "bool" and op in ("add", "sub", "mul", "div"):
        dtype = "int32"
    ea, eb = cast_to(ea, dtype, loc), cast_to(eb, dtype, loc)
    return _fold(N.Binary(op, ea, eb, dtype, loc))


def compare(op: str, a, b, loc):
    if not is_ir(a) and not is_ir(b):
        return _PY_CMP[op](a, b)
    ea = to_expr(a, loc) if is_ir(a) else None
    eb = to_expr(b, loc) if is_ir(b) else None
    if ea is None:
        ea = to_expr(a, loc, like=eb.dtype)
    if eb is None:
        eb = to_expr(b, loc, like=ea.dtype)
    dtype = dt.promote(ea.dtype, eb.dtype)
    return N.Compare(op, cast_to(ea, dtype, loc), cast_to(eb, dtype, loc), "bool", loc)


def to_bool(v, loc) -> N.Expr:
    e = to_expr(v, loc)
    if e.dtype == "bool":
        return e
    return N.Compare("ne", e, const(0, e.dtype), "bool", loc)


def logical(op: str, a, b, loc):
    if not is_ir(a) and not is_ir(b):
        return (a and b) if op == "and" else (a or b)
    return N.Logical(op, to_bool(a, loc), to_bool(b, loc), "bool", loc)


def unary(op: str, a, loc):
    if not is_ir(a):
        return {"neg": operator.neg, "not": operator.not_, "bitnot": operator.invert, "pos": operator.pos}[op](a)
    e = to_expr(a, loc)
    if op == "pos":
        return e
    if op == "neg" and isinstance(e, N.Const) and not isinstance(e.value, bool):
        return N.Const(-e.value, e.dtype, e.loc)  # fold: -T.infinity(...) stays a constant
    if op == "not":
        return N.Unary("not", to_bool(e, loc), "bool", loc)
    return N.Unary(op, e, e.dtype, loc)


def cast_to(e: N.Expr, dtype: str, loc=None) -> N.Expr:
    if e.dtype == dtype:
        return e
    if isinstance(e, N.Const):
        if dt.is_float(dtype):
            return N.Const(float(e.value), dtype, e.loc)
        if dtype == "bool":
            return N.Const(bool(e.value), dtype, e.loc)
        if dt.is_int(dtype) and not dt.is_float(e.dtype):
            return N.Const(int(e.value), dtype, e.loc)
    return N.Cast(e, dtype, loc)


def call_math(func: str, args, loc, dtype: str | None = None) -> N.Expr:
    """A math intrinsic; integer arguments of float functions are promoted to float32."""
    exprs = [to_expr(a, loc) if is_ir(a) else None for a in args]
    typed = [e.dtype for e in exprs if e is not None]
    base = typed[0] if typed else "float32"
    for t in typed[1:]:
        base = dt.promote(base, t)
    exprs = [e if e is not None else to_expr(a, loc, like=base) for e, a in zip(exprs, args)]
    out = dtype or base
    if func in ("isnan", "isinf", "isfinite"):
        out = "bool"
    elif func not in ("abs",) and not dt.is_float(base):
        base = out = "float32"
    exprs = [cast_to(e, base, loc) for e in exprs]
    return N.Call(func, tuple(exprs), out, loc)


def select(cond, a, b, loc):
    if not is_ir(cond):
        return a if cond else b
    c = to_bool(cond, loc)
    ea = to_expr(a, loc) if is_ir(a) else None
    eb = to_expr(b, loc) if is_ir(b) else None
    if ea is None and eb is None:
        ea = to_expr(a, loc)
        eb = to_expr(b, loc, like=ea.dtype)
    elif ea is None:
        ea = to_expr(a, loc, like=eb.dtype)
    elif eb is None:
        eb = to_expr(b, loc, like=ea.dtype)
    dtype = dt.promote(ea.dtype, eb.dtype)
    return N.Select(c, cast_to(ea, dtype, loc), cast_to(eb, dtype, loc), dtype, loc)
