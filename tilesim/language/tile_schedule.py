"""``T.PersistentTileScheduler``: the tile order of a persistent kernel (TileLang's ``tile_schedule``).

The frontend builds it at trace time (:mod:`tilesim.frontend.tile_schedule` has the contract).
"""

from __future__ import annotations

from ._marker import marker


@marker()
def PersistentTileScheduler(num_m_tiles, num_n_tiles, num_workers=None, swizzle_size=1, column_major=True,  # noqa: N802
                            cluster_size=1, stateful=True, name=None):
    """A persistent, grid-strided tile scheduler: ``sched.init(worker)``, ``while sched.valid(): ...
    sched.next_tile()``, reading ``sched.m_idx`` / ``sched.n_idx`` / ``sched.current_iter``; or, with
    ``stateful=False``, ``sched.coord(tile_id) -> (m, n)``. ``num_workers`` defaults to the device's SM count
    over ``cluster_size``."""
