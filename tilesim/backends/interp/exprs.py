"""Expression rules of the interpreter: one function per IR expression class (``EXPR_RULES``, the table
of :mod:`.tables`), and :func:`ev`, which evaluates an expression through it."""

from __future__ import annotations

import math

import numpy as np

from ... import dtypes as dt
from ... import philox
from ...errors import InternalError, KernelRuntimeError
from ...ir import nodes as N
from . import memory
from .state import Ctx, lift
from .tables import EXPR_RULES

rule = EXPR_RULES.register
_RULES = EXPR_RULES.rules  # the plain dict, for the hot path


def ev(e, ctx: Ctx):
    try:
        fn = _RULES[type(e)]
    except KeyError:
        raise EXPR_RULES.error(e) from None
    return fn(e, ctx)


def scalar_of(value, dtype: str):
    """A uniform value of ``dtype`` in its compute representation."""
    if dt.is_float(dtype):
        return dt.compute_dtype(dtype).type(value)
    if dtype == "bool":
        return bool(value)
    return int(value)


@rule(N.Const)
def _const(e, ctx):
    return scalar_of(e.value, e.dtype)


@rule(N.Var)
def _var(e, ctx):
    try:
        v = ctx.env[e.uid]
    except KeyError:
        raise InternalError(f"variable {e.name} has no value at {e.loc}") from None
    return lift(v, ctx.rank)


def _truncdiv(a, b):
    q = np.floor_divide(np.abs(a), np.abs(b))
    return np.where(np.sign(a) * np.sign(b) < 0, -q, q)


def _truncdiv_int(a, b) -> int:
    """C's integer division of two uniform values, exactly (no float round trip above 2**53)."""
    q = abs(int(a)) // abs(int(b))
    return -q if (a < 0) != (b < 0) else q


_INT_OPS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b, "floormod": lambda a, b: a % b,
    "div": lambda a, b: _truncdiv(a, b) if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) else _truncdiv_int(a, b),
    "truncmod": lambda a, b: np.fmod(a, b),
    "min": np.minimum, "max": np.maximum, "pow": lambda a, b: a ** b,
    "bitand": lambda a, b: a & b, "bitor": lambda a, b: a | b, "bitxor": lambda a, b: a ^ b,
    "shl": lambda a, b: a << b, "shr": lambda a, b: a >> b,
}
_FLOAT_OPS = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "floordiv": np.floor_divide, "floormod": np.mod, "truncmod": np.fmod,
    "min": np.minimum, "max": np.maximum, "pow": np.power,
}


def _bool_and(a, b):
    return np.logical_and(a, b) if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) else (a and b)


def _bool_or(a, b):
    return np.logical_or(a, b) if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) else (a or b)


_BOOL_OPS = {"bitand": _bool_and, "min": _bool_and, "bitor": _bool_or, "max": _bool_or, "bitxor": np.logical_xor}


@rule(N.Binary)
def _binary(e, ctx):
    a = ev(e.a, ctx)
    b = ev(e.b, ctx)
    d = e.dtype
    if dt.is_float(d):
        with np.errstate(all="ignore"):
            r = _FLOAT_OPS[e.op](a, b)
        if d in dt.NARROW_FLOATS:
            r = _round(r, d)
        return r
    if d == "bool":
        f = _BOOL_OPS.get(e.op)
        if f is not None:
            return f(a, b)
    if e.op in ("floordiv", "floormod", "div", "truncmod") and _has_zero(b, ctx.mask):
        raise KernelRuntimeError("integer division by zero", e.loc)
    if isinstance(b, np.ndarray) and e.op in ("floordiv", "floormod", "div", "truncmod"):
        b = np.where(b == 0, 1, b)  # lanes masked off (an enclosing `if` is false there) divide by 1
    r = _INT_OPS[e.op](a, b)
    if isinstance(r, np.ndarray) and r.ndim == 0:
        r = int(r)
    elif isinstance(r, np.integer):
        r = int(r)
    return r


def _has_zero(b, mask=None):
    """Whether an active lane divides by zero (lanes where ``mask`` is false do not run)."""
    if mask is False:
        return False
    if isinstance(b, np.ndarray):
        zero = b == 0
        if mask is not None and mask is not True:
            zero = zero & np.broadcast_to(mask, np.broadcast_shapes(np.shape(mask), zero.shape))
        return bool(zero.any())
    return b == 0


def _round(r, d):
    if isinstance(r, np.ndarray) and r.ndim > 0:
        return dt.round_to(r, d)
    return np.float32(dt.round_to(np.asarray(r, dtype=np.float32), d))


_CMP = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
        "eq": np.equal, "ne": np.not_equal}


@rule(N.Compare)
def _compare(e, ctx):
    r = _CMP[e.op](ev(e.a, ctx), ev(e.b, ctx))
    return bool(r) if not isinstance(r, np.ndarray) or r.ndim == 0 else r


@rule(N.Logical)
def _logical(e, ctx):
    a = ev(e.a, ctx)
    if not isinstance(a, np.ndarray):  # uniform short-circuit
        if e.op == "and" and not a:
            return False
        if e.op == "or" and a:
            return True
        return ev(e.b, ctx)
    if ctx.shadow is None:
        b = ev(e.b, ctx)
    else:  # uninit="check": the right side is read only where it decides, as CUDA's && and || do
        saved = ctx.mask
        take = a if e.op == "and" else np.logical_not(a)
        ctx.mask = take if saved is None else (False if saved is False else np.logical_and(saved, take))
        try:
            b = ev(e.b, ctx) if np.any(take) else False
        finally:
            ctx.mask = saved
    return np.logical_and(a, b) if e.op == "and" else np.logical_or(a, b)


_UNARY = {
    "neg": lambda a: -a,
    "not": lambda a: np.logical_not(a) if isinstance(a, np.ndarray) else (not a),
    "bitnot": lambda a: ~a,
}


@rule(N.Unary)
def _unary(e, ctx):
    return _UNARY[e.op](ev(e.a, ctx))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


_MATH = {
    "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(x.dtype.type(10) if hasattr(x, "dtype") else 10.0, x),
    "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "expm1": np.expm1,
    "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "tanh": np.tanh, "sigmoid": _sigmoid,
    "abs": np.abs, "fabs": np.abs, "sin": np.sin, "cos": np.cos, "tan": np.tan, "floor": np.floor,
    "ceil": np.ceil, "round": np.rint, "trunc": np.trunc, "isnan": np.isnan, "isinf": np.isinf,
    "isfinite": np.isfinite, "atan": np.arctan, "asin": np.arcsin, "acos": np.arccos, "sinh": np.sinh,
    "cosh": np.cosh, "pow": np.power, "fmod": np.fmod,
}


def _erf(x):
    f = np.vectorize(math.erf, otypes=[np.float64])
    return f(x).astype(np.asarray(x).dtype)


_MATH["erf"] = _erf
_MATH["philox"] = philox.draw


@rule(N.Call)
def _call(e, ctx):
    args = [ev(a, ctx) for a in e.args]
    with np.errstate(all="ignore"):
        r = _MATH[e.func](*args)
    d = e.dtype
    if d in dt.NARROW_FLOATS:
        r = _round(r, d)
    elif dt.is_float(d):
        cd = dt.compute_dtype(d)
        r = r.astype(cd, copy=False) if isinstance(r, np.ndarray) else cd.type(r)
    elif dt.is_int(d) and not isinstance(r, np.ndarray):
        r = int(r)
    if isinstance(r, np.ndarray) and r.ndim == 0:
        r = r[()]
    return r


@rule(N.Select)
def _select(e, ctx):
    c = ev(e.cond, ctx)
    if not isinstance(c, np.ndarray):
        return ev(e.a, ctx) if c else ev(e.b, ctx)
    # Evaluate each branch only where it is taken: loads are masked by the branch condition.
    saved = ctx.mask
    try:
        ctx.mask = c if saved is None else np.logical_and(saved, c)
        a = ev(e.a, ctx) if c.any() else None
        ctx.mask = np.logical_not(c) if saved is None else np.logical_and(saved, np.logical_not(c))
        b = ev(e.b, ctx) if not c.all() else None
    finally:
        ctx.mask = saved
    if a is None:
        return b
    if b is None:
        return a
    return np.where(c, a, b)


def convert_value(v, dtype: str):
    """Convert a computed value to ``dtype``, returned in ``dtype``'s compute representation."""
    if isinstance(v, np.ndarray) and v.ndim > 0:
        if dt.is_float(dtype):
            cd = dt.compute_dtype(dtype)
            if dtype in dt.NARROW_FLOATS:
                return dt.widen(dt.convert(v, dtype), np.dtype(np.float32))
            return v.astype(cd, copy=False)
        if dtype == "bool":
            return v != 0
        src = v
        if src.dtype.kind == "f" or src.dtype in (np.dtype(np.float16),):
            src = dt.convert(src, dtype)
        return src.astype(dt.np_dtype(dtype)).astype(np.int64)
    # uniform
    if dt.is_float(dtype):
        if dtype in dt.NARROW_FLOATS:
            return np.float32(dt.convert(np.asarray(v, dtype=np.float32), dtype).astype(np.float32))
        return dt.compute_dtype(dtype).type(v)
    if dtype == "bool":
        return bool(v)
    arr = np.asarray(v)
    if arr.dtype.kind == "f" or arr.dtype.kind == "V" or str(arr.dtype) in ("bfloat16",):
        return int(dt.convert(arr.astype(np.float64), dtype).astype(np.int64))
    return int(np.asarray(int(v)).astype(dt.np_dtype(dtype)))


@rule(N.Cast)
def _cast(e, ctx):
    return convert_value(ev(e.value, ctx), e.dtype)


@rule(N.Reinterpret)
def _reinterpret(e, ctx):
    v = ev(e.value, ctx)
    src = dt.convert(np.asarray(v), e.value.dtype)
    out = np.ascontiguousarray(src).view(dt.np_dtype(e.dtype))
    return convert_value(out.astype(dt.compute_dtype(e.dtype)) if dt.is_float(e.dtype) else out.astype(np.int64),
                         e.dtype) if out.ndim else convert_value(out[()], e.dtype)


@rule(N.Load)
def _load(e, ctx):
    idx = [ev(i, ctx) for i in e.indices]
    return memory.load(e, idx, ctx)
