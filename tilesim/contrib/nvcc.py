"""``tilelang.contrib.nvcc`` as programs use it: facts about the CUDA compilation target.

``get_target_compute_version(target=None) -> str`` is ``"major.minor"``: from ``target`` when it names an
architecture (a string or object with ``-arch=sm_XY`` / ``arch`` attribute ``sm_XY``), else from the GPU
(:func:`tilesim.carver.arch.driver.get_compute_version`: the device, or without one the hardware model the
simulator uses). ``parse_compute_version("9.0") -> (9, 0)``. Compiling CUDA source with nvcc has no meaning
in tilesim; those functions are not provided (``AttributeError``).
"""

from __future__ import annotations

import re

from ..carver.arch import driver

__all__ = ["get_target_compute_version", "parse_compute_version"]

_ARCH = re.compile(r"sm_(\d+)[af]?\b")


def _arch_of(target) -> str | None:
    attrs = getattr(target, "attrs", None)
    text = str(attrs.get("arch", "")) if isinstance(attrs, dict) else str(target)
    m = _ARCH.search(text)
    return m.group(1) if m else None


def get_target_compute_version(target=None) -> str:
    """Compute capability of ``target`` (or of the GPU), e.g. ``"9.0"``."""
    digits = _arch_of(target) if target is not None else None
    if digits is None:
        return driver.get_compute_version()
    return f"{digits[:-1]}.{digits[-1]}"


def parse_compute_version(compute_version: str) -> tuple[int, int]:
    """``"8.6"`` -> ``(8, 6)``; a malformed string is a ``ValueError``."""
    parts = str(compute_version).split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        raise ValueError(f"compute version {compute_version!r} is not of the form 'major.minor'")
    return int(parts[0]), int(parts[1])
