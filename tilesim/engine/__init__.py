"""``tilelang.engine``: compilation hooks (:mod:`.callback`) and ``param.KernelParam`` (:mod:`.param`)."""

from . import callback, param  # noqa: F401
