"""``tilelang.carver.roller``: tile configurations proposed from a device description.

:class:`Hint` is one proposal, :mod:`.rasterization` its launch-order plans, :func:`matmul_hints` the
search for matrix products (ranked by a roofline estimate on the hardware model's figures).
"""

from . import rasterization  # noqa: F401
from .hint import Hint  # noqa: F401
from .matmul import matmul_hints  # noqa: F401
from .rasterization import NoRasterization, Rasterization2DColumn, Rasterization2DRow  # noqa: F401
