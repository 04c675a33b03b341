"""``tilelang.carver.arch``: ``driver`` answers device queries (see :mod:`.driver`); ``CUDA``/``CDNA`` describe
a device for the roller (see :mod:`.device`)."""

from . import driver  # noqa: F401
from .device import CDNA, CUDA, TileDevice, is_ampere_arch, is_cuda_arch, is_hopper_arch  # noqa: F401
