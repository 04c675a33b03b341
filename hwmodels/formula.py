"""A tiny, safe evaluator for ``derived:`` formulas in hardware data files.

Contract
--------
* A formula is a Python-like arithmetic expression over numbers and **dotted keys** of the same
  file, e.g. ``core_kinds.sm.count * core_kinds.sm.units.tensor.flops_per_cycle.float16``.
  Array elements are addressed by their ``name`` (``core_kinds.sm``).
* Allowed: numbers, ``+ - * / **``, unary ``-``/``+``, parentheses, ``min(...)``, ``max(...)``,
  and a trailing ``# comment``. Anything else (attribute calls, subscripts, strings, names that are
  not keys) is rejected with :class:`FormulaError`.
* :func:`references` lists the dotted keys a formula reads; :func:`evaluate` computes it given a
  ``lookup(key) -> float`` callable. Nothing is ever passed to :func:`eval`.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable

__all__ = ["FormulaError", "references", "evaluate"]

_BINOPS: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
}
_UNOPS: dict[type, Callable[[float], float]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_FUNCS: dict[str, Callable[..., float]] = {"min": min, "max": max}


class FormulaError(ValueError):
    """A formula that cannot be parsed or evaluated; the message says why."""


def _parse(text: str) -> ast.expr:
    try:
        return ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise FormulaError(f"formula {text.strip()!r} is not valid arithmetic ({exc.msg})") from None


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _walk(node: ast.expr, lookup: Callable[[str], float] | None, refs: list[str]) -> float:
    """Evaluate ``node`` (or, with ``lookup=None``, only check it and collect its keys)."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left = _walk(node.left, lookup, refs)
        right = _walk(node.right, lookup, refs)
        if lookup is None:
            return 0.0
        try:
            return _BINOPS[type(node.op)](left, right)
        except (ZeroDivisionError, OverflowError) as exc:
            raise FormulaError(f"arithmetic error in '{ast.unparse(node)}': {exc}") from None
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNOPS:
        return _UNOPS[type(node.op)](_walk(node.operand, lookup, refs))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS:
        if node.keywords or not node.args:
            raise FormulaError(f"{node.func.id}() takes one or more positional arguments")
        args = [_walk(a, lookup, refs) for a in node.args]
        return 0.0 if lookup is None else _FUNCS[node.func.id](*args)
    key = _dotted(node)
    if key is not None and key not in _FUNCS:
        refs.append(key)
        return 0.0 if lookup is None else float(lookup(key))
    raise FormulaError(f"'{ast.unparse(node)}' is not allowed in a formula "
                       "(use numbers, dotted keys, + - * / **, min(), max())")


def references(text: str) -> list[str]:
    """The dotted keys ``text`` reads, in order of appearance (duplicates removed).

    Raises:
        FormulaError: ``text`` is not an allowed formula.
    """
    refs: list[str] = []
    _walk(_parse(text), None, refs)
    return list(dict.fromkeys(refs))


def evaluate(text: str, lookup: Callable[[str], float]) -> float:
    """Evaluate ``text``; ``lookup`` maps a dotted key to its number (it may raise).

    Raises:
        FormulaError: ``text`` is not an allowed formula, or its arithmetic fails.
    """
    return _walk(_parse(text), lookup, [])
