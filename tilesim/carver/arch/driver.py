"""``tilelang.carver.arch.driver``: facts about the GPU a kernel will run on.

With a CUDA GPU and numba-cuda, the answers are the device's. Without one, they are the hardware model's
that the simulator uses by default (``TILESIM_HW``, else the H200), so a persistent kernel sized by
``get_num_sms()`` is sized for the GPU it is simulated on; ``get_compute_version()`` reads the model's
``arch`` (``"sm_90"`` -> ``"9.0"``).
"""

from __future__ import annotations

import os

from ... import hw
from ...backends.cuda import caps

__all__ = ["get_num_sms", "get_max_dynamic_shared_size_bytes", "get_compute_version", "get_device_name",
           "model", "DEFAULT_HW"]

DEFAULT_HW = "h200_sxm_141gb"


def model():
    """The hardware model standing in for the GPU (``TILESIM_HW``, else the H200)."""
    return hw.resolve(os.environ.get("TILESIM_HW", DEFAULT_HW))


def get_num_sms(device_id: int = 0) -> int:
    """Streaming multiprocessors of the GPU (of the default hardware model without one)."""
    if caps.available():
        return int(caps.cuda_module().get_current_device().MULTIPROCESSOR_COUNT)
    return int(model().primary_core.count)


def get_max_dynamic_shared_size_bytes(device_id: int = 0) -> int:
    """Shared memory one block may use (the model's shared-memory buffer size without a GPU)."""
    if caps.available():
        return int(caps.cuda_module().get_current_device().MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
    return int(model().buffer_for_scope("shared").block_bytes)


def get_compute_version(device_id: int = 0) -> str:
    """The compute capability as ``"major.minor"`` (the model's ``arch``, e.g. ``sm_90`` -> ``"9.0"``).

    Raises ``RuntimeError`` for a model whose file states no NVIDIA ``arch`` (an NPU).
    """
    if caps.available():
        major, minor = caps.device_info()["compute_capability"]
        return f"{major}.{minor}"
    m = model()
    arch = getattr(m, "arch", "")
    if not arch.startswith("sm_") or not arch[3:].rstrip("af").isdigit():
        raise RuntimeError(f"hardware model {m.name!r} states no NVIDIA compute capability (arch={arch!r}); "
                           f"set TILESIM_HW to an NVIDIA GPU model")
    digits = arch[3:].rstrip("af")
    return f"{digits[:-1]}.{digits[-1]}"


def get_device_name(device_id: int = 0) -> str:
    """The GPU's name (the model's description without a GPU)."""
    if caps.available():
        return caps.device_info()["name"]
    m = model()
    return m.description or m.name
