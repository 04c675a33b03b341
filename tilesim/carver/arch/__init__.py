"""``tilelang.carver.arch``: ``driver`` answers device queries (see :mod:`.driver`)."""

from . import driver  # noqa: F401
