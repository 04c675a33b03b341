"""``tilelang.carver`` as TileLang programs use it: device facts (``carver.arch``), the roller
(``carver.roller``: tile configurations ranked on the hardware model's figures) and templates
(``carver.template.MatmulTemplate``). Device figures come from the GPU when there is one, else from the
simulator's hardware model through :mod:`tilesim.hw`; the simulator-driven tuner (``tilesim tune``,
``@autotune(oracle="sim")``) ranks whole kernels instead.
"""

from . import arch, roller, template  # noqa: F401
