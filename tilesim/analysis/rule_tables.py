"""The cost analysis' dispatch tables and the decorator that fills them.

Contract
--------
* :data:`COST_RULES` maps a statement class of :mod:`tilesim.ir.nodes` to
  ``rule(analyzer, stmt) -> list[Op | Loop]``; :data:`EXPR_RULES` maps an expression class to
  ``rule(analyzer, expr, acc) -> None``, which adds one element's cost to ``acc``.
* This module holds only the (initially empty) tables; the rule modules (``control_rules``,
  ``tile_rules``, ``parallel_rules``, ``expr_rules``) fill them when imported, which
  :mod:`tilesim.analysis.cost` (and so ``import tilesim.analysis``) does. It imports nothing, so
  every other module of the analysis can import it without a cycle.
"""

from __future__ import annotations

__all__ = ["COST_RULES", "EXPR_RULES", "rule"]


COST_RULES: dict = {}
EXPR_RULES: dict = {}


def rule(table, *classes):
    def deco(fn):
        for c in classes:
            table[c] = fn
        return fn
    return deco
