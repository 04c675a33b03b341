"""``tilelang.tileop.base.GemmWarpPolicy``: the same enum as ``T.GemmWarpPolicy``."""

from ..language.gemm import GemmWarpPolicy

__all__ = ["GemmWarpPolicy"]
