"""The plain meaning of every tile op and element-level rule, for ONE block, on plain NumPy arrays.

This module is the living definition the interpreter's fast paths (a leading block axis, masks, region
adoption, in-place accumulation into pooled scratch, sliding-window gathers, the fused tiled-GEMM K
loop of ``gemm_loop``, chunk threads) are tested against (``tests/interp/test_reference.py``). Each
function is a few obvious lines; nothing here is on the interpreter's hot path.

Value conventions:

* A **tile** is an ndarray of a storage dtype (``dtypes.np_dtype``: ``float16``, ml_dtypes
  ``bfloat16``/``float8_*``, ``int32``, ...), shaped as the region's extents. Its dtype name is
  ``dtypes.canon(tile.dtype)``. Tile ops take and return tiles; none mutates its inputs except
  :func:`write_region` and :func:`atomic`, which update a global tensor in place.
* An **element value** (operands and results of :func:`binary`, :func:`unary`, :func:`call`,
  :func:`compare`, :func:`cast`) is a scalar or ndarray in the *compute* representation of its dtype:
  narrow floats (fp16, bf16, fp8, fp4) as ``float32`` rounded to the narrow type after every operation,
  other floats in their own precision, integers as ``int64`` (they wrap only when stored), ``bool``.
  :func:`to_compute` turns storage values into it; :func:`store` turns it back.
* Global edges (LANGUAGE.md, ``T.copy``): every element index is checked against the tensor's shape;
  out-of-range reads give ``fill`` (0, or ``T.annotate_safe_value``), out-of-range writes are dropped.

Errors: integer division or modulo by zero raises ``ZeroDivisionError`` (the interpreter raises a
located ``KernelRuntimeError``); unknown op names raise ``KeyError``.
"""

from __future__ import annotations

import math

import numpy as np

from ... import dtypes as dt


def name_of(arr) -> str:
    """The canonical dtype name of a storage array."""
    return dt.canon(np.asarray(arr).dtype)


def to_compute(values, dtype: str):
    """Storage values of ``dtype`` → compute representation (narrow floats → float32, integers → int64)."""
    if dt.is_float(dtype):
        return np.asarray(values).astype(dt.compute_dtype(dtype))
    if dtype == "bool":
        return np.asarray(values).astype(bool)
    return np.asarray(values).astype(np.int64)


def store(values, dtype: str) -> np.ndarray:
    """Compute-representation values → storage dtype ``dtype`` (GPU conversion: saturating fp8/fp4,
    float → int truncating toward zero, int → int wrapping; out-of-range fp16/bf16 become inf)."""
    with np.errstate(over="ignore"):
        return dt.convert(np.asarray(values), dtype)


# ------------------------------------------------------------------------------------------- regions
def _indices(starts, extents):
    """Per dimension, the tensor index of every element of the region (arrays shaped ``extents``)."""
    return [np.asarray(s) + g for s, g in zip(starts, np.indices(tuple(extents), dtype=np.int64))]


def _inside(idx, shape):
    ok = np.ones(idx[0].shape if idx else (), dtype=bool)
    for i, n in zip(idx, shape):
        ok &= (i >= 0) & (i < n)
    return ok


def read_region(tensor: np.ndarray, starts, extents, fill=0) -> np.ndarray:
    """``tensor[starts : starts + extents]`` with out-of-range elements reading ``fill``."""
    idx = _indices(starts, extents)
    ok = _inside(idx, tensor.shape)
    out = np.full(tuple(extents), fill, dtype=tensor.dtype)
    out[ok] = tensor[tuple(i[ok] for i in idx)]
    return out


def write_region(tensor: np.ndarray, starts, extents, vals) -> None:
    """``tensor[starts : starts + extents] = vals`` (already of ``tensor``'s dtype), dropping the
    out-of-range elements."""
    idx = _indices(starts, extents)
    ok = _inside(idx, tensor.shape)
    tensor[tuple(i[ok] for i in idx)] = np.broadcast_to(vals, tuple(extents))[ok]


# ------------------------------------------------------------------------------------------- tile ops
def pair(src_tile: np.ndarray, src_extents, dst_extents) -> np.ndarray:
    """The copy pairing rule: with as many non-unit extents on both sides they pair in order (unit dims
    skipped); otherwise the source's non-unit extents are right-aligned and broadcast."""
    s = [e for e in src_extents if e != 1]
    d = [e for e in dst_extents if e != 1]
    vals = np.reshape(src_tile, s)
    if len(s) != len(d):
        vals = np.broadcast_to(vals, d)
    return np.reshape(vals, tuple(dst_extents))


def copy(src_tile: np.ndarray, dst_dtype: str, src_extents, dst_extents) -> np.ndarray:
    """``T.copy``: the source tile paired with the destination's extents, converted to ``dst_dtype``."""
    return store(pair(src_tile, src_extents, dst_extents), dst_dtype)


def fill(shape, value, dtype: str) -> np.ndarray:
    """``T.fill``/``T.clear``: a tile of ``value`` converted to ``dtype``."""
    return np.full(tuple(shape), store(value, dtype), dtype=dt.np_dtype(dtype))


def _matrix(tile):
    """A gemm operand region as a matrix: leading unit dims dropped."""
    shape = list(tile.shape)
    while len(shape) > 2 and shape[0] == 1:
        shape.pop(0)
    return tile.reshape(shape)


def gemm(a, b, c, trans_a=False, trans_b=False, clear_accum=False, tf32=False) -> np.ndarray:
    """``T.gemm``: ``C (+)= op(A) @ op(B)``, the result as a new tile of C's dtype.

    Operands are converted exactly to C's compute dtype (float32 for fp16/bf16/fp8 accumulators,
    int64 for integer ones), so products are formed at full precision and summed in that dtype; with
    ``tf32`` float32 operands are first rounded to TF32. C's values are added after the product and
    the sum is converted to C's dtype once. Float summation order is BLAS's (not part of the meaning).
    """
    cname = name_of(c)
    acc = dt.compute_dtype(cname) if dt.is_float(cname) else np.dtype(np.int64)
    x, y = _matrix(a).astype(acc), _matrix(b).astype(acc)
    if tf32 and name_of(a) == "float32":
        x, y = dt.to_tf32(x), dt.to_tf32(y)
    prod = (x.T if trans_a else x) @ (y.T if trans_b else y)
    out = prod if clear_accum else _matrix(c).astype(acc) + prod
    return store(out, cname).reshape(c.shape)


#: Reduction of ``|x|`` or ``x`` along an axis, per kind.
REDUCERS = {"sum": np.sum, "abssum": lambda x, axis: np.sum(np.abs(x), axis=axis),
            "max": np.max, "min": np.min, "absmax": lambda x, axis: np.max(np.abs(x), axis=axis)}


def combine(kind: str, old, new):
    """Fold a reduction's new values into ``old`` (``clear=False``)."""
    if kind in ("sum", "abssum"):
        return old + new
    return np.maximum(old, new) if kind in ("max", "absmax") else np.minimum(old, new)


def reduce(kind: str, src: np.ndarray, dim: int, dst: np.ndarray, clear: bool = True) -> np.ndarray:
    """``T.reduce_<kind>(src, dst, dim, clear)``: a new tile of ``dst``'s dtype and shape.

    Values are reduced in the source's compute dtype; float sums into a float destination are carried
    out in the wider of that and the destination's compute dtype (an int32 source summed into float32
    sums in float64). ``clear=False`` folds ``dst``'s current values in (sums add, max/min compare).
    Float sums follow NumPy's order (not part of the meaning); max/min are exact.
    """
    sname, dname = name_of(src), name_of(dst)
    x = to_compute(src, sname)
    if kind in ("sum", "abssum") and dt.is_float(dname) and x.dtype != dt.compute_dtype(dname):
        x = x.astype(np.promote_types(x.dtype, dt.compute_dtype(dname)))
    r = REDUCERS[kind](x, axis=dim).reshape(dst.shape)
    if not clear:
        r = combine(kind, to_compute(dst, dname), r)
    return store(r, dname)


def cumsum(src: np.ndarray, dim: int, reverse: bool = False, dtype: str | None = None) -> np.ndarray:
    """``T.cumsum``: running sums along ``dim`` (from the end with ``reverse``) in the source's compute
    dtype, left to right, converted to ``dtype`` (default: the source's)."""
    x = to_compute(src, name_of(src))
    if reverse:
        x = np.flip(x, axis=dim)
    r = np.cumsum(x, axis=dim)
    if reverse:
        r = np.flip(r, axis=dim)
    return store(r, dtype or name_of(src))


_ATOMIC = {"add": np.add, "max": np.maximum, "min": np.minimum}


def atomic(kind: str, dst: np.ndarray, idx, vals) -> None:
    """``T.atomic_<kind>``: ``dst[idx[k]] = op(dst[idx[k]], vals[k])`` for each ``k`` in order, in place.

    ``idx`` is one integer array per dimension of ``dst``; out-of-range updates are dropped. Narrow
    floats (and bool) update through float32 and are rounded back after every update; other dtypes
    update in ``dst``'s own dtype (integers wrap).
    """
    op = _ATOMIC[kind]
    name = name_of(dst)
    idx = [np.asarray(i).reshape(-1) for i in idx]
    vals = np.broadcast_to(np.asarray(vals), idx[0].shape if idx else ())
    ok = _inside(idx, dst.shape)
    with np.errstate(over="ignore"):
        for k in np.nonzero(ok)[0]:
            at = tuple(int(i[k]) for i in idx)
            if name in dt.NARROW_FLOATS or name == "bool":
                dst[at] = store(op(np.float32(dst[at]), np.float32(vals[k])), name)
            else:
                dst[at] = op(dst[at], np.asarray(vals[k]).astype(dst.dtype))


# ------------------------------------------------------------------------------------------- elements
def _trunc_div(a, b):
    """Integer division rounding toward zero (C ``/``)."""
    q = np.abs(a) // np.abs(b)
    return np.where((np.asarray(a) < 0) != (np.asarray(b) < 0), -q, q)


def _check_divisor(op, b):
    if op in ("div", "floordiv", "floormod", "truncmod") and np.any(np.asarray(b) == 0):
        raise ZeroDivisionError("integer division by zero")


#: Integer binary ops on int64 values: ``floordiv``/``floormod`` are Python's ``//``/``%``; ``div`` and
#: ``truncmod`` round toward zero as C does.
INT_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": _trunc_div, "truncmod": np.fmod,
    "floordiv": np.floor_divide, "floormod": np.mod, "min": np.minimum, "max": np.maximum,
    "pow": np.power, "bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor,
    "shl": np.left_shift, "shr": np.right_shift,
}
#: Float binary ops in the compute dtype (IEEE: no errors, inf/NaN results).
FLOAT_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "floordiv": np.floor_divide,
    "floormod": np.mod, "truncmod": np.fmod, "min": np.minimum, "max": np.maximum, "pow": np.power,
}
BOOL_BINARY = {"bitand": np.logical_and, "min": np.logical_and, "bitor": np.logical_or, "max": np.logical_or,
               "bitxor": np.logical_xor}


def _rounded(r, dtype: str):
    """A float result in ``dtype``'s compute representation (narrow floats rounded to ``dtype``)."""
    if dtype in dt.NARROW_FLOATS:
        return to_compute(store(np.asarray(r, dtype=np.float32), dtype), dtype)
    return np.asarray(r).astype(dt.compute_dtype(dtype))


def binary(op: str, a, b, dtype: str):
    """``a <op> b`` of result type ``dtype`` on compute-representation values."""
    if dt.is_float(dtype):
        with np.errstate(all="ignore"):
            return _rounded(FLOAT_BINARY[op](a, b), dtype)
    if dtype == "bool":
        return BOOL_BINARY[op](a, b)
    _check_divisor(op, b)
    return INT_BINARY[op](np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _erf(x):
    x = np.asarray(x)
    return np.vectorize(math.erf, otypes=[np.float64])(x).astype(x.dtype)


#: Math functions (``T.exp``, ...), applied in the compute dtype.
MATH = {
    "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(np.asarray(x).dtype.type(10), x),
    "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "expm1": np.expm1,
    "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "tanh": np.tanh, "sigmoid": _sigmoid,
    "abs": np.abs, "fabs": np.abs, "sin": np.sin, "cos": np.cos, "tan": np.tan, "floor": np.floor,
    "ceil": np.ceil, "round": np.rint, "trunc": np.trunc, "isnan": np.isnan, "isinf": np.isinf,
    "isfinite": np.isfinite, "atan": np.arctan, "asin": np.arcsin, "acos": np.arccos, "sinh": np.sinh,
    "cosh": np.cosh, "pow": np.power, "fmod": np.fmod, "erf": _erf,
}


def call(func: str, args, dtype: str):
    """A math function of result type ``dtype``: computed in the arguments' compute dtype, floats
    rounded to ``dtype``."""
    with np.errstate(all="ignore"):
        r = MATH[func](*args)
    if dt.is_float(dtype):
        return _rounded(r, dtype)
    return r


def unary(op: str, a, dtype: str):
    """``-a`` (``neg``), ``not a`` (``not``), ``~a`` (``bitnot``), or a one-argument math function."""
    if op == "neg":
        return np.negative(a)
    if op == "not":
        return np.logical_not(a)
    if op == "bitnot":
        return np.invert(a)
    return call(op, (a,), dtype)


COMPARE = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
           "eq": np.equal, "ne": np.not_equal}


def compare(op: str, a, b):
    """``a <op> b`` → bool."""
    return COMPARE[op](a, b)


def cast(v, dtype: str):
    """``T.cast(v, dtype)`` of a compute-representation value: stored as ``dtype`` (GPU conversion)
    and read back in ``dtype``'s compute representation."""
    return to_compute(store(v, dtype), dtype)
