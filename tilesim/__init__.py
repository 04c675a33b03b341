"""tilesim: a TileLang-compatible tile language with a NumPy interpreter, a Numba CUDA backend and a
cycle-approximate simulator.

``import tilesim as tilelang; import tilesim.language as T`` runs TileLang kernels unchanged.
"""

from __future__ import annotations

from . import language as language  # noqa: F401
from .backends import cuda as _cuda_target  # noqa: F401  (registers the target "cuda")
from .backends.interp import InterpOptions  # noqa: F401  (the package registers the target "interp")
from .config import PassConfigKey, TensorSupplyType  # noqa: F401
from .errors import (  # noqa: F401
                     HardwareModelError,
                     InternalError,
                     KernelError,
                     KernelRuntimeError,
                     KernelSyntaxError,
                     KernelTypeError,
                     TilesimError,
)
from .jit import autotune, compile, jit  # noqa: F401
from .kernel import JITKernel  # noqa: F401

__version__ = "0.1.0"
__all__ = ["language", "jit", "compile", "autotune", "JITKernel", "PassConfigKey", "TensorSupplyType",
           "InterpOptions", "KernelError", "KernelSyntaxError", "KernelTypeError", "KernelRuntimeError",
           "InternalError", "HardwareModelError", "TilesimError"]
