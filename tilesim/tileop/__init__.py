"""``tilelang.tileop``: the tile-operator classes' public names (``tileop.base.GemmWarpPolicy``)."""

from . import base  # noqa: F401
