"""``tvm.tirx`` as TileLang programs use it in kernel helpers (see :mod:`tilesim.tvm`).

* ``tirx.const(value, dtype)`` is ``T.cast(value, dtype)`` (a typed constant; ``dtype`` is required here,
  where TVM would default to int32/float32).
* ``tirx.reinterpret(dtype, value)`` is ``T.reinterpret``.
* ``PrimExpr``, ``Var``, ``Buffer`` are names for annotations only.
"""

from __future__ import annotations

from ..language._marker import marker

__all__ = ["Buffer", "PrimExpr", "Var", "const", "reinterpret"]


@marker("cast")
def const(value, dtype):
    """A constant of ``dtype`` (``T.cast(value, dtype)``)."""


@marker("reinterpret")
def reinterpret(a, b):
    """Bit-cast between same-width types (``T.reinterpret``)."""


class PrimExpr:
    """An expression type, for annotations of helper functions."""


class Var(PrimExpr):
    """A variable type, for annotations."""


class Buffer:
    """A buffer type, for annotations."""
