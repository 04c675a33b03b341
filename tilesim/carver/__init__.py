"""``tilelang.carver`` as TileLang programs use it: device facts (``carver.arch.driver``).

TileLang's carver also holds a roller that proposes tile configurations from hardware facts; tilesim's
answer to that is the simulator-driven tuner (``tilesim tune``, ``@autotune(oracle="sim")``), so the roller
and its templates are not provided.
"""

from . import arch  # noqa: F401
