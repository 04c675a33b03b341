"""``tilelang.cuda``: NVIDIA-specific helpers TileLang programs import (``cuda.intrinsics``: MMA macro emitters
and layouts). This is not the CUDA backend (:mod:`tilesim.backends.cuda`)."""

from . import intrinsics  # noqa: F401
