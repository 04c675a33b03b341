"""``tilelang.carver.arch.driver``: facts about the GPU a kernel will run on.

With a CUDA GPU and numba-cuda, the answers are the device's. Without one, they are the hardware model's
that the simulator uses by default (``TILESIM_HW``, else the H200), so a persistent kernel sized by
``get_num_sms()`` is sized for the GPU it is simulated on.
"""

from __future__ import annotations

import os

from ... import hw
from ...backends.cuda import caps

__all__ = ["get_num_sms", "get_max_dynamic_shared_size_bytes", "DEFAULT_HW"]

DEFAULT_HW = "h200_sxm_141gb"


def _model():
    return hw.resolve(os.environ.get("TILESIM_HW", DEFAULT_HW))


def get_num_sms(device_id: int = 0) -> int:
    """Streaming multiprocessors of the GPU (of the default hardware model without one)."""
    if caps.available():
        return int(caps.cuda_module().get_current_device().MULTIPROCESSOR_COUNT)
    return int(_model().primary_core.count)


def get_max_dynamic_shared_size_bytes(device_id: int = 0) -> int:
    """Shared memory one block may use (the model's shared-memory buffer size without a GPU)."""
    if caps.available():
        return int(caps.cuda_module().get_current_device().MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
    return int(_model().buffer_for_scope("shared").block_bytes)
