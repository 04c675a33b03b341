"""``tilelang.tools.cuda``: CUDA-only tooling (:mod:`.iket`, refused with the reason)."""

from . import iket  # noqa: F401
