"""Loops: ``T.Parallel`` (and TIR's ``T.parallel``), ``T.Pipelined``, ``T.serial``, ``T.unroll``, ``T.vectorized``, ``T.grid``."""

from __future__ import annotations

from ._marker import marker


@marker()
def Parallel(*extents, coalesced_width=None, loop_layout=None, annotations=None):  # noqa: N802
    """``for i, j in T.Parallel(M, N):`` independent element iterations over a tile.

    The body holds element statements only (no tile operations). Extents must be constants.
    """


@marker()
def parallel(start, stop=None, annotations=None):
    """``for i in T.parallel(n):`` (TIR's parallel loop, one index from ``start`` to ``stop``): TileLang
    lowers it like ``T.Parallel``; nested ones are one ``T.Parallel`` over their extents. Constant bounds."""


@marker()
def Pipelined(start, stop=None, num_stages=0, order=None, stage=None, sync=None, group=None,  # noqa: N802
              annotations=None):
    """``for k in T.Pipelined(n, num_stages=3):`` a serial loop whose copies a compiler may overlap
    with the compute of earlier iterations (``num_stages`` deep). Observably a serial loop."""


@marker()
def serial(start, stop=None, step=None, annotations=None):
    """``for i in T.serial(n):`` an ordinary sequential loop (also what ``range`` gives)."""


@marker()
def unroll(start, stop=None, step=None, explicit=False, unroll_factor=None, annotations=None):
    """A sequential loop the compiler unrolls."""


@marker()
def vectorized(start, stop=None, step=None, annotations=None):
    """A sequential loop the compiler vectorises."""


@marker()
def grid(*extents):
    """``for i, j in T.grid(M, N):`` nested sequential loops."""


@marker()
def Persistent(domain, wave_size, index, group_size=8):  # noqa: N802
    """``for bx, by in T.Persistent([m, n], wave_size, index):`` block ``index`` of a persistent launch of
    ``wave_size`` blocks visits its share of the tiles of ``domain``, one per wave, the last extent in
    groups of ``group_size`` (TileLang's order; see ``tilesim/frontend/persistent.py``)."""
