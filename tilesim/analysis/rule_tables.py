"""The cost analysis' dispatch tables and the decorator that fills them.

Contract
--------
* :data:`COST_RULES` maps a statement class of :mod:`tilesim.ir.nodes` to
  ``rule(analyzer, stmt) -> list[Op | Loop]``; :data:`EXPR_RULES` maps an expression class to
  ``rule(analyzer, expr, acc) -> None``, which adds one element's cost to ``acc``.
* :data:`ELEMENT_RULES` maps a statement class allowed inside ``T.Parallel`` to
  ``rule(analyzer, stmt, acc, f) -> None``, which adds the statement's per-element cost times ``f``
  (the taken fraction / trip count of the enclosing element-level branches and loops) to ``acc``.
* All three are :class:`tilesim.ir.rules.RuleTable` objects (register with ``@COST_RULES.register(N.X)``;
  a missing rule is an ``InternalError`` naming the node and its location).
* This module holds only the (initially empty) tables; the rule modules (``control_rules``,
  ``tile_rules``, ``parallel_rules``, ``expr_rules``) fill them when imported, which
  :mod:`tilesim.analysis.cost` (and so ``import tilesim.analysis``) does. It imports only the IR
  package, so every other module of the analysis can import it without a cycle.
"""

from __future__ import annotations

from ..ir import groups as G
from ..ir import nodes as N
from ..ir.rules import RuleTable

__all__ = ["COST_RULES", "ELEMENT_RULES", "EXPR_RULES", "rule"]


COST_RULES = RuleTable("cost analysis statements", groups=G.STMTS)
EXPR_RULES = RuleTable("cost analysis expressions", groups=G.EXPRS)
ELEMENT_RULES = RuleTable("cost analysis element statements (inside T.Parallel)",
                          groups={N.Store, N.Let, N.If, N.For, N.Atomic, N.Break, N.Continue, N.Alloc, N.Parallel})


def rule(table: RuleTable, *classes):
    """``@rule(TABLE, N.X, ...)`` is ``@TABLE.register(N.X, ...)`` (kept for existing callers)."""
    return table.register(*classes)
