"""Vectorised evaluation of index expressions over all blocks at once.

Contract
--------
* A :class:`Space` is a list of axes: first the launch's block axes (always three: ``bx``, ``by``,
  ``bz``; size 1 where the grid has fewer), then one axis per enclosing loop whose iterations are
  *sampled* (all of them up to :data:`EXACT_TRIPS`, otherwise the first and last
  :data:`EDGE_SAMPLES` exactly and evenly spaced ones in between, each standing for its share) and one
  axis per ``T.Parallel`` dimension. Values are Python scalars or NumPy arrays broadcastable to the
  space (size 1 on axes they do not depend on), so a quantity that depends on ``bx`` only costs
  ``grid_x`` numbers however large the grid.
* :meth:`Space.mean` averages a value over the inner (loop/parallel) axes with the sample weights
  and the loops' validity masks (``j < trip`` per block), leaving an array over the block axes.
* ``Let`` variables are evaluated lazily from their expressions (memoised per call), so a ``Let``
  inside a ``T.Parallel`` never materialises an array larger than the expression that uses it.
* A value that depends on tensor *data* (a ``Load``) is read from the tensors the caller passed
  (vectorised gather); without them, or for on-chip data, :class:`DataDependent` is raised and the
  caller falls back to a hint.
"""

from __future__ import annotations

import numpy as np

from ..ir import nodes as N
from ..ir.traverse import expr_children

__all__ = ["Space", "Evaluator", "DataDependent", "EXACT_TRIPS", "EDGE_SAMPLES", "free_vars"]

#: Loops up to this many iterations are evaluated at every iteration.
EXACT_TRIPS = 32
#: Iterations evaluated exactly at each end of a longer loop (edge tiles live there).
EDGE_SAMPLES = 8
#: Evenly spaced interior samples of a longer loop.
MID_SAMPLES = 16
#: Largest array (elements) the evaluator builds before it samples the block axes instead.
MAX_ELEMENTS = 1 << 23


class DataDependent(Exception):
    """An expression needs tensor data the analysis was not given."""

    def __init__(self, what: str, loc=None):
        super().__init__(what)
        self.what = what
        self.loc = loc


def fit(v, ndim: int):
    if isinstance(v, np.ndarray) and v.ndim < ndim:
        return v.reshape(v.shape + (1,) * (ndim - v.ndim))
    return v


class Space:
    """Axes of the evaluation: 3 block axes, then sampled loop axes and parallel axes."""

    def __init__(self, block_sizes):
        sizes = list(block_sizes) + [1] * (3 - len(block_sizes))
        self.block_sizes = tuple(int(s) for s in sizes[:3])
        self.sizes: list[int] = list(self.block_sizes)
        #: per inner axis: (weights 1-D or None, validity mask array or None)
        self.inner: list[tuple[np.ndarray | None, np.ndarray | None]] = []

    @property
    def ndim(self) -> int:
        return len(self.sizes)

    def axis_array(self, values, axis: int) -> np.ndarray:
        shape = [1] * self.ndim
        shape[axis] = len(values)
        return np.asarray(values).reshape(shape)

    def push(self, n: int, weights=None, valid=None) -> int:
        self.sizes.append(int(n))
        self.inner.append((weights, valid))
        return self.ndim - 1

    def pop(self):
        self.sizes.pop()
        self.inner.pop()

    def mean(self, v):
        """Average ``v`` over the inner axes (sample weights, loop validity); block axes remain."""
        if not isinstance(v, np.ndarray) or v.ndim <= 3:
            return v if not isinstance(v, np.ndarray) else fit(v, 3)
        v = fit(v, self.ndim)
        axes = {a for a in range(3, self.ndim) if v.shape[a] > 1}
        changed = True
        while changed:
            changed = False
            for a in list(axes):
                valid = self.inner[a - 3][1]
                if isinstance(valid, np.ndarray):
                    valid = fit(valid, self.ndim)
                    for b in range(3, self.ndim):
                        if valid.shape[b] > 1 and b not in axes:
                            axes.add(b)
                            changed = True
        if not axes:
            out = v
        else:
            w = np.ones([1] * self.ndim)
            for a in sorted(axes):
                wts, valid = self.inner[a - 3]
                if wts is not None:
                    w = w * self.axis_array(wts, a)
                if isinstance(valid, np.ndarray):
                    w = w * fit(valid, self.ndim)
            ax = tuple(sorted(axes))
            num = np.sum(v * w, axis=ax, keepdims=True)
            den = np.sum(np.broadcast_to(w, np.broadcast_shapes(w.shape, v.shape)), axis=ax, keepdims=True)
            out = np.where(den > 0, num / np.where(den > 0, den, 1), 0.0)
        # drop inner axes (all size 1 now or ignored)
        idx = tuple([slice(None)] * 3 + [0] * (self.ndim - 3))
        out = out[idx] if out.ndim == self.ndim else out
        return out


def loop_samples(trip_max: int):
    """Sample indices and weights for a loop of ``trip_max`` iterations (see module docs)."""
    if trip_max <= EXACT_TRIPS:
        j = np.arange(trip_max)
        return j, np.ones(trip_max)
    head = np.arange(EDGE_SAMPLES)
    tail = np.arange(trip_max - EDGE_SAMPLES, trip_max)
    inner_n = trip_max - 2 * EDGE_SAMPLES
    mid = np.unique(np.linspace(EDGE_SAMPLES, trip_max - EDGE_SAMPLES - 1, MID_SAMPLES).round().astype(np.int64))
    j = np.concatenate([head, mid, tail])
    w = np.concatenate([np.ones(EDGE_SAMPLES), np.full(len(mid), inner_n / len(mid)), np.ones(EDGE_SAMPLES)])
    return j, w


def _truncdiv(a, b):
    q = np.floor_divide(np.abs(a), np.abs(b))
    return np.where(np.sign(a) * np.sign(b) < 0, -q, q)


_INT = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b, "floormod": lambda a, b: a % b, "div": _truncdiv,
    "truncmod": np.fmod, "min": np.minimum, "max": np.maximum, "pow": lambda a, b: a ** b,
    "bitand": lambda a, b: a & b, "bitor": lambda a, b: a | b, "bitxor": lambda a, b: a ^ b,
    "shl": lambda a, b: a << b, "shr": lambda a, b: a >> b,
}
_FLOAT = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "floordiv": np.floor_divide,
    "floormod": np.mod, "truncmod": np.fmod, "min": np.minimum, "max": np.maximum, "pow": np.power,
}
_CMP = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
        "eq": np.equal, "ne": np.not_equal}


def _scalarise(r):
    if isinstance(r, np.ndarray) and r.ndim == 0:
        return r[()]
    if isinstance(r, np.integer):
        return int(r)
    if isinstance(r, np.bool_):
        return bool(r)
    return r


class Evaluator:
    """Evaluate integer/boolean index expressions over a :class:`Space`.

    ``env`` maps variable uids to values, ``lets`` maps ``Let`` variable uids to their expressions,
    ``tensors`` maps global buffer uids to NumPy arrays (for data-dependent indices).
    """

    def __init__(self, space: Space, env: dict, lets: dict, tensors: dict | None = None):
        self.space = space
        self.env = env
        self.lets = lets
        self.tensors = tensors or {}
        #: ``T.alloc_var`` scalars: buffer uid -> the expression last stored (None: run-time data)
        self.var_exprs: dict = {}
        self._memo: dict[int, object] = {}

    def __call__(self, e):
        self._memo = {}
        return self.ev(e)

    def ev(self, e):
        if isinstance(e, int | float | bool):
            return e
        t = type(e)
        if t is N.Const:
            return e.value
        if t is N.Var:
            if e.uid in self.env:
                return fit(self.env[e.uid], self.space.ndim)
            if e.uid in self.lets:
                if e.uid not in self._memo:
                    self._memo[e.uid] = self.ev(self.lets[e.uid])
                return fit(self._memo[e.uid], self.space.ndim)
            raise DataDependent(f"the value of '{e.name}'", e.loc)
        if t is N.Binary:
            a, b = self.ev(e.a), self.ev(e.b)
            if e.dtype.startswith(("float", "bfloat")):
                with np.errstate(all="ignore"):
                    return _scalarise(_FLOAT[e.op](a, b))
            if e.op in ("floordiv", "floormod", "div", "truncmod"):
                if isinstance(b, np.ndarray):
                    safe = np.where(b == 0, 1, b)
                    return _INT[e.op](a, safe)
                if b == 0:
                    return 0
            return _scalarise(_INT[e.op](a, b))
        if t is N.Compare:
            return _scalarise(_CMP[e.op](self.ev(e.a), self.ev(e.b)))
        if t is N.Logical:
            a, b = self.ev(e.a), self.ev(e.b)
            return _scalarise(np.logical_and(a, b) if e.op == "and" else np.logical_or(a, b))
        if t is N.Unary:
            a = self.ev(e.a)
            if e.op == "neg":
                return -a
            if e.op == "not":
                return _scalarise(np.logical_not(a))
            return ~a
        if t is N.Select:
            c = self.ev(e.cond)
            return _scalarise(np.where(c, self.ev(e.a), self.ev(e.b)))
        if t is N.Cast:
            v = self.ev(e.value)
            if e.dtype.startswith(("int", "uint")):
                return _scalarise(np.trunc(v).astype(np.int64)) if isinstance(v, np.ndarray) else int(v)
            if e.dtype == "bool":
                return _scalarise(np.asarray(v) != 0)
            return v
        if t is N.Call:
            args = [self.ev(a) for a in e.args]
            fn = getattr(np, {"abs": "abs", "fabs": "abs", "round": "rint"}.get(e.func, e.func), None)
            if fn is None:
                raise DataDependent(f"T.{e.func}(...) in an index", e.loc)
            with np.errstate(all="ignore"):
                return _scalarise(fn(*args))
        if t is N.Load:
            if e.buffer.scope == "var" or e.buffer.uid in self.var_exprs:
                src = self.var_exprs.get(e.buffer.uid)
                if src is None:
                    raise DataDependent(f"the run-time value of '{e.buffer.name}'", e.loc)
                return self.ev(src)
            arr = self.tensors.get(e.buffer.uid)
            if arr is None or e.buffer.scope != "global":
                raise DataDependent(f"data of '{e.buffer.name}'", e.loc)
            idx = [self.ev(i) for i in e.indices]
            shape = np.broadcast_shapes(*[np.shape(i) for i in idx])
            ok = np.ones(shape, dtype=bool)
            clipped = []
            for d, i in enumerate(idx):
                i = np.broadcast_to(np.asarray(i, dtype=np.int64), shape)
                ok &= (i >= 0) & (i < arr.shape[d])
                clipped.append(np.clip(i, 0, arr.shape[d] - 1))
            vals = arr[tuple(clipped)]
            return _scalarise(np.where(ok, vals, 0))
        if t is N.Reinterpret:
            raise DataDependent("a reinterpret in an index", e.loc)
        if t is N.WarpShuffle:
            raise DataDependent("a warp shuffle in an index", e.loc)
        raise DataDependent(f"a {t.__name__} in an index", getattr(e, "loc", None))


def free_vars(e, lets: dict, out: set | None = None, loads: list | None = None) -> set:
    """uids of the non-``Let`` variables ``e`` depends on (through ``Let`` definitions).

    Buffers read by ``Load`` nodes are appended to ``loads`` when it is given.
    """
    out = set() if out is None else out
    stack = [e]
    seen: set[int] = set()
    while stack:
        x = stack.pop()
        if isinstance(x, int | float | bool) or x is None:
            continue
        t = type(x)
        if t is N.Var:
            if x.uid in lets:
                if x.uid not in seen:
                    seen.add(x.uid)
                    stack.append(lets[x.uid])
            else:
                out.add(x.uid)
        elif t is N.Const:
            continue
        else:
            if t is N.Load and loads is not None:
                loads.append(x.buffer)
            stack.extend(expr_children(x))
    return out
