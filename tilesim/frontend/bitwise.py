"""Builders of TileLang's named bitwise primitives: ``T.shift_left(a, b)`` (``a << b``), ``T.shift_right``
(``a >> b``, arithmetic for signed types), ``T.bitwise_and/or/xor`` and ``T.bitwise_not``. They mean exactly
the Python operators on kernel values (same typing rules and errors: integer or bool operands only)."""

from __future__ import annotations

from . import exprs as X
from .builders import builder

_OPS = {"shift_left": "shl", "shift_right": "shr", "bitwise_and": "bitand", "bitwise_or": "bitor",
        "bitwise_xor": "bitxor"}


def _binary(name):
    def build(tr, loc, a, b):
        return X.binop(_OPS[name], a, b, loc)

    return build


for _name in _OPS:
    builder(_name)(_binary(_name))


@builder("bitwise_not")
def _b_bitwise_not(tr, loc, a):
    return X.binop("bitxor", a, -1, loc)
