"""Block rasterization plans a roller hint carries (``tilelang.carver.roller.rasterization``).

A plan says in which order a kernel should walk its output tiles for L2 reuse: :class:`NoRasterization`
(row-major launch order), :class:`Rasterization2DRow` / :class:`Rasterization2DColumn` (panels of
``panel_width`` tiles, as ``T.use_swizzle(panel_width)`` does). Plans are values: equal when of the same
kind and width.
"""

from __future__ import annotations

__all__ = ["Rasterization", "NoRasterization", "Rasterization2DRow", "Rasterization2DColumn"]


class Rasterization:
    """A launch-order plan; ``panel_width`` is ``None`` for the plain row-major order."""

    panel_width_: int | None = None

    @property
    def panel_width(self) -> int | None:
        return self.panel_width_

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self.panel_width_ == other.panel_width_

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.panel_width_))


class NoRasterization(Rasterization):
    def __repr__(self) -> str:
        return "<NoRasterization>"


class Rasterization2DRow(Rasterization):
    def __init__(self, panel_width: int = 4) -> None:
        self.panel_width_ = int(panel_width)

    def __repr__(self) -> str:
        return f"<Rasterization2DRow({self.panel_width_})>"


class Rasterization2DColumn(Rasterization):
    def __init__(self, panel_width: int = 4) -> None:
        self.panel_width_ = int(panel_width)

    def __repr__(self) -> str:
        return f"<Rasterization2DColumn({self.panel_width_})>"
