"""``tilelang.utils``: host-side helpers (tensor comparison and supply); see :mod:`.tensor`."""

from . import tensor
from .tensor import TensorSupplyType, torch_assert_close

__all__ = ["tensor", "TensorSupplyType", "torch_assert_close"]
