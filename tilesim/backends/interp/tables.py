"""The interpreter's rule tables, in a module of their own so every rule module can register into them.

Contract
--------
* :data:`EXPR_RULES` — ``rule(expr, ctx) -> value`` (an array over the chunk's blocks or a uniform
  scalar), one per class of :data:`tilesim.ir.groups.EXPRS`; filled by :mod:`.exprs`.
* :data:`STMT_RULES` — ``rule(stmt, ctx) -> None``, one per statement class except ``Launch`` (a
  launch is run by :mod:`.runtime`, which makes the block chunks); filled by :mod:`.rules` and the
  tile-op modules :mod:`.tile_copy`, :mod:`.tile_gemm`, :mod:`.tile_reduce` (``.rules`` imports them,
  so the table is complete once ``.rules`` is imported).
"""

from __future__ import annotations

from ...ir import groups as G
from ...ir import nodes as N
from ...ir.rules import RuleTable

EXPR_RULES = RuleTable("interpreter expressions", groups=G.EXPRS)
STMT_RULES = RuleTable("interpreter statements", groups=G.STMTS - {N.Launch})

__all__ = ["EXPR_RULES", "STMT_RULES"]
