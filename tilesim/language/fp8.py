"""``tilelang.language.fp8``: which FP8 dtypes the platform uses.

tilesim follows NVIDIA GPUs (OCP FP8): ``e4m3`` is ``float8_e4m3fn`` and ``e5m2`` is ``float8_e5m2``. The FNUZ
variants AMD's MI300 uses are not modelled.
"""

from __future__ import annotations

from .. import optional
from ..errors import KernelTypeError

__all__ = ["determine_fp8_type", "determine_torch_fp8_type"]

_FORMATS = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}


def determine_fp8_type(fp8_format: str = "e4m3") -> str:
    """The dtype name of FP8 format ``"e4m3"`` or ``"e5m2"``."""
    if fp8_format not in _FORMATS:
        raise KernelTypeError(f"unsupported FP8 format {fp8_format!r}", hint="use 'e4m3' or 'e5m2'")
    return _FORMATS[fp8_format]


def determine_torch_fp8_type(fp8_format: str = "e4m3"):
    """The ``torch.dtype`` of FP8 format ``fp8_format`` (needs torch)."""
    torch = optional.require("torch", "determine_torch_fp8_type")
    return getattr(torch, determine_fp8_type(fp8_format))
