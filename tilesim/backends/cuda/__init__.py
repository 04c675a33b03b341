"""The Numba CUDA backend: tile IR → thread-level Python source → ``numba.cuda.jit`` kernels.

``available()`` — a real CUDA GPU and numba-cuda are usable (``target="auto"`` then picks ``cuda``).
``compile_cuda(pf, fastmath=False)`` — lower a ``PrimFunc`` (no GPU needed); the result's ``.source``
is the generated Python source (``JITKernel.get_kernel_source()``), ``.compile_ptx(cc)`` compiles it
for a compute capability without a GPU, ``.run``/``.call`` launch it.

NumPy >= 2.5 removed ``numpy.row_stack``, which numba-cuda 0.30.4 still registers: the backend's import
path (:func:`caps.cuda_module`) restores it before importing ``numba.cuda``. See docs/cuda-backend.md.
"""

from __future__ import annotations

from .caps import available, ensure_numpy_compat, simulator  # noqa: F401


def compile_cuda(pf, fastmath: bool = False, sim: bool | None = None):
    from .runtime import CudaProgram, reject_unsupported

    reject_unsupported(pf)
    return CudaProgram(pf, fastmath=fastmath, sim=sim)


__all__ = ["available", "compile_cuda", "simulator", "ensure_numpy_compat"]
