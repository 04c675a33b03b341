"""``tilelang.tools.cuda``: CUDA-only tooling (:mod:`.iket`: IKET instrumentation events and its session/registry API)."""

from . import iket  # noqa: F401
