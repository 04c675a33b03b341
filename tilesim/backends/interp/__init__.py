"""The NumPy interpreter: the reference meaning of every tile-IR node.

``run(pf, arrays, scalars, options)`` executes a program (see ``runtime``); ``InterpOptions`` holds the
checking options. Rule tables: ``exprs.EXPR_RULES``, ``rules.STMT_RULES`` (which includes the tile-op tables of
``tile_copy``, ``tile_gemm``, ``tile_reduce``).
"""

from .options import InterpOptions
from .runtime import run

__all__ = ["InterpOptions", "run"]
