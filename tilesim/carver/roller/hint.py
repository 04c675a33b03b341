"""A roller's recommendation for one kernel (``tilelang.carver.roller.Hint``).

Fields as TileLang names them: ``block`` (output tile per block, ``[block_M, block_N]``), ``warp`` (output
tile per warp), ``rstep`` (reduction step per pipeline stage, ``[block_K]``), ``pipeline_stage`` (software
pipeline depth, 1 = none), ``rasterization_plan`` (:mod:`.rasterization`), ``use_tc`` (tensor cores),
``thread`` (threads per block along the block's axes) and ``block_reduction_depth`` (``None``). tilesim
adds the estimate the hint was ranked by: ``estimate`` (a dict of seconds and occupancy figures).
"""

from __future__ import annotations

from .rasterization import NoRasterization

__all__ = ["Hint"]


class Hint:
    """One candidate configuration (see the module docstring)."""

    def __init__(self) -> None:
        self.arch = None
        self.use_tc = True
        self.block: list[int] = []
        self.warp: list[int] = []
        self.thread: list[int] = []
        self.rstep: list[int] = []
        self.reduce_thread: list[int] = []
        self.rasterization_plan = NoRasterization()
        self.pipeline_stage = 1
        self.block_reduction_depth = None
        self.estimate: dict = {}

    @property
    def num_threads(self) -> int:
        return 32 * (self.block[0] // self.warp[0]) * (self.block[1] // self.warp[1])

    def __repr__(self) -> str:
        return (f"Hint(block={self.block}, warp={self.warp}, rstep={self.rstep}, "
                f"pipeline_stage={self.pipeline_stage}, rasterization={self.rasterization_plan!r})")
