"""``tvm.testing`` as TileLang programs use it: ``requires_package`` (see :mod:`tilesim.testing.requires`)."""

from __future__ import annotations

from ..testing.requires import requires_package

__all__ = ["requires_package"]
