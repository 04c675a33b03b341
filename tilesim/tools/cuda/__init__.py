"""``tilelang.tools.cuda``: CUDA-only tooling (:mod:`.iket`: IKET instrumentation events, its registry, session and
path helpers)."""

from . import iket  # noqa: F401
