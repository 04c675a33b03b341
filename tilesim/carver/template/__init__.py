"""``tilelang.carver.template``: computations described once for the roller (:class:`MatmulTemplate`)."""

from .matmul import MatmulTemplate  # noqa: F401
