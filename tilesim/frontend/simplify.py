"""Integer expressions as linear forms ``sum(coeff * atom) + const``: how slice extents are simplified.

Contract
--------
* :func:`linear` maps an integer trace-time value (a Python int, an integer IR expression, a ``var``
  buffer or an element access) to ``({atom: coeff}, const)``; it returns ``None`` for anything else
  (floats, booleans, regions). ``+``, ``-``, unary ``-``, multiplication by a constant and integer
  widening casts are expanded, and so is ``f // d`` for a positive constant ``d`` that divides every
  coefficient of ``f`` (``(d * L + c) // d == L + c // d``); every other sub-expression (a variable, ``a * b`` of two non-constants,
  ``a // 4``, a load of ``T.alloc_var`` or of a tensor element, ``T.min``) is an **atom**, compared
  structurally (IR nodes are frozen dataclasses whose equality ignores source locations).
* Atoms are evaluated at one program point (the two bounds of one slice), so equal atoms have equal
  values there; a difference of two forms whose atoms cancel is therefore exactly the constant left.
  This is what makes ``X[lo:lo + c]`` a region of extent ``c`` for any ``lo``.
* ``lets`` (optional, ``{Var: value}``) are the tracer's ``Let`` bindings whose value reads no memory
  (no ``Load``): such a name is replaced by its value before the form is taken, so ``lo = bx * 64``,
  ``hi = lo + 64``, ``X[lo:hi]`` has extent 64. A ``Let`` of a value that loads (``bos = Offsets[b]``)
  stays an atom: the name is immutable, so it cancels against itself, and memory written between the
  binding and the slice cannot make its expansion disagree with a direct load.
* :func:`difference` is ``b - a`` as an int when the atoms cancel, else as a simplified IR expression
  (``None`` if either side is not linear). :func:`same` says whether two extents are provably equal.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..ir import nodes as N
from ..ir import traverse as T
from . import exprs as X

Form = tuple  # (dict[atom, int], int)


def linear(v, lets=None) -> Form | None:
    """``v`` as a linear form over atoms, or ``None`` if it is not an integer value."""
    if isinstance(v, (bool, np.bool_)):
        return None
    if isinstance(v, (int, np.integer)):
        return {}, int(v)
    if isinstance(v, (N.Buffer, X.Access)):
        try:
            v = X.to_expr(v)
        except Exception:  # noqa: BLE001 - a region or a non-scalar buffer is not a number
            return None
    if not isinstance(v, N.Expr) or not dt.is_int(v.dtype):
        return None
    return _lin(v, lets or {})


def _lin(e: N.Expr, lets) -> Form:
    if isinstance(e, N.Var) and e in lets:
        return _lin(lets[e], lets)
    if isinstance(e, N.Const):
        return {}, int(e.value)
    if isinstance(e, N.Cast) and dt.is_int(e.value.dtype) and dt.bits(e.dtype) >= dt.bits(e.value.dtype):
        return _lin(e.value, lets)
    if isinstance(e, N.Unary) and e.op == "neg":
        return _scale(_lin(e.a, lets), -1)
    if isinstance(e, N.Binary) and e.op in ("add", "sub"):
        return _add(_lin(e.a, lets), _lin(e.b, lets), 1 if e.op == "add" else -1)
    if isinstance(e, N.Binary) and e.op == "mul":
        la, lb = _lin(e.a, lets), _lin(e.b, lets)
        if not lb[0]:
            return _scale(la, lb[1])
        if not la[0]:
            return _scale(lb, la[1])
    if isinstance(e, N.Binary) and e.op == "floordiv" and isinstance(e.b, N.Const) and int(e.b.value) > 0:
        d, la = int(e.b.value), _lin(e.a, lets)
        if all(c % d == 0 for c in la[0].values()):  # (d * L + c) // d == L + c // d for an integer form L
            return {a: c // d for a, c in la[0].items()}, la[1] // d
    return {e: 1}, 0


def _scale(f: Form, k: int) -> Form:
    return ({a: c * k for a, c in f[0].items() if c * k}, f[1] * k)


def _add(f: Form, g: Form, sign: int) -> Form:
    coeffs = dict(f[0])
    for a, c in g[0].items():
        coeffs[a] = coeffs.get(a, 0) + sign * c
    return ({a: c for a, c in coeffs.items() if c}, f[1] + sign * g[1])


def to_expr(f: Form, loc=None):
    """A form back as an int (no atoms) or a small IR expression (atoms in first-seen order)."""
    coeffs, const = f
    if not coeffs:
        return const
    out = None
    for atom, c in coeffs.items():
        term = atom if c in (1, -1) else X.binop("mul", atom, abs(c), loc)
        if out is None:
            out = term if c > 0 else X.unary("neg", term, loc)
        else:
            out = X.binop("add" if c > 0 else "sub", out, term, loc)
    if const:
        out = X.binop("add" if const > 0 else "sub", out, abs(const), loc)
    return out


def difference(a, b, loc=None, lets=None):
    """``b - a`` simplified: an int if the atoms cancel, an IR expression otherwise; ``None`` if not linear."""
    la, lb = linear(a, lets), linear(b, lets)
    if la is None or lb is None:
        return None
    return to_expr(_add(lb, la, -1), loc)


def pure(value) -> bool:
    """True if ``value`` reads no memory (no ``Load``): a ``Let`` of it may be expanded (``lets``)."""
    return next(T.loads_in(value), None) is None


def same(a, b) -> bool:
    """True if ``a`` and ``b`` are provably equal integers (equal linear forms)."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    la, lb = linear(a), linear(b)
    return la is not None and la == lb
