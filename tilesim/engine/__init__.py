"""``tilelang.engine``: compilation hooks (:mod:`.callback`)."""

from . import callback  # noqa: F401
