"""What the CUDA backend can use on this machine.

* ``ensure_numpy_compat()`` restores ``numpy.row_stack`` (removed in NumPy 2.5) before ``numba.cuda``
  is imported: numba-cuda 0.30.4 still registers an overload for it and fails to compile any kernel
  without it. Every import of ``numba.cuda`` in tilesim goes through :func:`cuda_module`.
* ``simulator()`` is true when ``NUMBA_ENABLE_CUDASIM=1`` (numba's CUDA simulator, set before the first
  import of ``numba.cuda``): kernels then run on the CPU, one Python thread per GPU thread.
* ``available()`` is true only with a real CUDA GPU and numba-cuda (the simulator does not count), so
  ``target="auto"`` picks the GPU only where one is present.
"""

from __future__ import annotations

import os

_CUDA = None


def ensure_numpy_compat() -> None:
    import numpy as np

    if "row_stack" not in np.__dict__:
        try:
            np.row_stack = np.vstack  # numba-cuda 0.30.4 registers an overload for it (NumPy >= 2.5 lacks it)
        except Exception:  # noqa: BLE001
            pass


def cuda_module():
    """``numba.cuda``, imported once with the NumPy compatibility fix applied first."""
    global _CUDA
    if _CUDA is None:
        ensure_numpy_compat()
        from numba import cuda

        _CUDA = cuda
    return _CUDA


def simulator() -> bool:
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        return True
    try:
        from numba import config

        return bool(getattr(config, "ENABLE_CUDASIM", False))
    except Exception:  # noqa: BLE001
        return False


def available() -> bool:
    """A usable CUDA GPU and numba-cuda (the CUDA simulator does not count)."""
    if simulator():
        return False
    try:
        cuda = cuda_module()
        return bool(cuda.is_available()) and len(cuda.gpus) > 0
    except Exception:  # noqa: BLE001
        return False


def device_info() -> dict:
    """Name, compute capability and driver of the current GPU (empty without one)."""
    if not available():
        return {}
    cuda = cuda_module()
    dev = cuda.get_current_device()
    info = {"name": dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name),
            "compute_capability": list(dev.compute_capability),
            "multiprocessors": int(dev.MULTIPROCESSOR_COUNT)}
    try:
        info["driver"] = ".".join(str(x) for x in cuda.cudadrv.driver.driver.get_version())
    except Exception:  # noqa: BLE001
        pass
    return info


#: Static shared memory a block may declare (``cuda.shared.array``): 48 KB on every NVIDIA GPU.
STATIC_SMEM_LIMIT = 48 * 1024
#: Compute capability generated code is checked against without a GPU (the H200).
DEFAULT_CC = (9, 0)
