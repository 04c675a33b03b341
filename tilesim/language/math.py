"""Element expressions: math intrinsics, selects, casts and limits."""

from __future__ import annotations

from ._marker import marker

_UNARY = ("exp", "exp2", "exp10", "log", "log2", "log10", "log1p", "expm1", "sqrt", "rsqrt", "tanh",
          "sigmoid", "abs", "sin", "cos", "tan", "erf", "floor", "ceil", "round", "trunc", "isnan",
          "isinf", "isfinite", "fabs", "atan", "asin", "acos", "sinh", "cosh")


def _unary(name):
    def fn(x):
        pass

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``T.{name}(x)``: elementwise {name} (narrow floats computed in float32)."
    return marker(name)(fn)


globals().update({n: _unary(n) for n in _UNARY})


@marker()
def pow(x, y):  # noqa: A001
    """``x ** y`` elementwise."""


@marker()
def fmod(x, y):
    """C ``fmod``: remainder with the sign of ``x``."""


@marker()
def max(a, b):  # noqa: A001
    """Elementwise maximum of two values."""


@marker()
def min(a, b):  # noqa: A001
    """Elementwise minimum of two values."""


@marker()
def clamp(x, lo, hi):
    """``min(max(x, lo), hi)``."""


@marker()
def if_then_else(cond, then_value, else_value):
    """Select ``then_value`` where ``cond`` holds, else ``else_value``; only the taken branch runs."""


Select = if_then_else


@marker()
def cast(value, dtype):
    """Convert ``value`` to ``dtype`` (fp8 saturates, float→int truncates)."""


@marker()
def Cast(dtype, value):  # noqa: N802
    """``T.Cast(dtype, value)``: :func:`cast` with the arguments the other way round."""


@marker()
def reinterpret(a, b):
    """Bit-cast between same-width types: ``T.reinterpret(dtype, value)`` or ``T.reinterpret(value, dtype)``."""


@marker()
def infinity(dtype):
    """``+inf`` of ``dtype``."""


@marker()
def max_value(dtype):
    """Largest finite value of ``dtype``."""


@marker()
def min_value(dtype):
    """Smallest (most negative) finite value of ``dtype``."""


@marker()
def floordiv(a, b):
    """Floor division (Python ``//``)."""


@marker()
def floormod(a, b):
    """Floor modulo (Python ``%``)."""


@marker()
def truncdiv(a, b):
    """Division rounding toward zero (C ``/`` on integers)."""


@marker()
def truncmod(a, b):
    """Remainder with the sign of the dividend (C ``%``)."""


def ceildiv(a, b):
    """``ceil(a / b)`` for integers; works on Python ints outside kernels too."""
    return -(-a // b)


ceildiv.__tilesim_prim__ = "ceildiv"


@marker("And")
def And(a, b):  # noqa: N802
    """Logical and."""


@marker("Or")
def Or(a, b):  # noqa: N802
    """Logical or."""


@marker("Not")
def Not(a):  # noqa: N802
    """Logical not."""


@marker()
def shift_left(a, b):
    """``a << b`` (integers)."""


@marker()
def shift_right(a, b):
    """``a >> b`` (integers; arithmetic for signed types)."""


@marker()
def bitwise_and(a, b):
    """``a & b``."""


@marker()
def bitwise_or(a, b):
    """``a | b``."""


@marker()
def bitwise_xor(a, b):
    """``a ^ b``."""


@marker()
def bitwise_not(a):
    """``~a`` (integers)."""
