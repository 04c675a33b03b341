"""The NumPy interpreter: the reference meaning of every tile-IR node.

``run(pf, arrays, scalars, options)`` executes a program (see ``runtime``); ``InterpOptions`` holds the
checking options. Rule tables: ``exprs.EXPR_RULES``, ``rules.STMT_RULES`` (which includes the tile-op tables of
``tile_copy``, ``tile_gemm``, ``tile_reduce``). Importing this package registers the target ``"interp"``
(aliases ``numpy``, ``cpu``, ``interpreter``): always available, the ``target="auto"`` fallback.
"""

from .. import Program, Target, register
from .options import InterpOptions
from .runtime import run

__all__ = ["InterpOptions", "InterpProgram", "run"]


class InterpProgram(Program):
    """The interpreter runs the tile IR itself: nothing to compile."""

    def __init__(self, pf, pass_configs=None):
        self.pf = pf

    def run(self, pf, arrays, scalars, options, progress=None):
        run(pf, arrays, scalars, options, progress=progress)


register(Target("interp", "the NumPy interpreter", InterpProgram, auto_rank=0,
                aliases=("numpy", "interpreter")))
