"""Code-string helpers of the CUDA lowering (no state, no IR).

Contract: pure functions on ints and Python-source strings. ``_add``/``_mul`` fold ``0``/``1`` and
int constants and parenthesise anything else; ``_IDENT`` matches a code string that is already a
plain name or integer literal (so it needs no hoisting); ``_san`` turns an IR name into an identifier.
"""

from __future__ import annotations

import re

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*$|^-?\d+$")


def _san(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if not s or s[0].isdigit():
        s = "v_" + s
    return s


def _pow2(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


def _prod(xs):
    n = 1
    for x in xs:
        n *= x
    return n


def _c(x) -> str:
    """An int or code string, as code."""
    return str(x)


def _add(a, b) -> str:
    if a == "0" or a == 0:
        return _c(b)
    if b == "0" or b == 0:
        return _c(a)
    if isinstance(a, int) and isinstance(b, int):
        return str(a + b)
    return f"({a} + {b})"


def _mul(a, b) -> str:
    if a == "0" or b == "0" or a == 0 or b == 0:
        return "0"
    if a == "1" or a == 1:
        return _c(b)
    if b == "1" or b == 1:
        return _c(a)
    if isinstance(a, int) and isinstance(b, int):
        return str(a * b)
    return f"({a} * {b})"
