"""``tilelang.contrib``: the compiler-toolchain helpers TileLang programs call (``contrib.nvcc``)."""

from . import nvcc  # noqa: F401
