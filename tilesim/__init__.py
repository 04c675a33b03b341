"""tilesim: a TileLang-compatible tile language with a NumPy interpreter, a Numba CUDA backend and a
cycle-approximate simulator.

``import tilesim as tilelang; import tilesim.language as T`` runs TileLang kernels unchanged.
"""

from __future__ import annotations

import logging

# isort: off
# The language comes first: tilesim.language and tilesim.frontend import each other through their package
# __init__ files, which works only when the language package starts the chain.
from . import language as language  # noqa: F401
# isort: on
from . import (  # noqa: F401
    autotuner,
    carver,
    contrib,
    engine,
    env,
    layout,
    math,
    profiler,
    testing,
    tileop,
    tools,
    transform,
    tvm,
    utils,
)
from .autotuner import autotune  # noqa: F401
from .backends import cpu as _cpu_target  # noqa: F401  (registers the target "cpu")
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
    TargetFallbackWarning,
    TilesimError,
)
from .jit import compile, jit  # noqa: F401
from .kernel import JITKernel  # noqa: F401
from .math import cdiv, next_power_of_2  # noqa: F401
from .tvm import DataType  # noqa: F401


def set_log_level(level) -> None:
    """Set the level of tilesim's logger (``logging`` names or numbers), as ``tilelang.set_log_level``."""
    logging.getLogger("tilesim").setLevel(level)


def disable_cache() -> None:
    """TileLang's switch for its on-disk kernel cache; tilesim caches compiled kernels per process only."""


def enable_cache() -> None:
    """See :func:`disable_cache`."""

__version__ = "0.1.0"
__all__ = ["language", "jit", "compile", "autotune", "autotuner", "cdiv", "next_power_of_2", "math", "profiler",
           "testing", "utils", "JITKernel", "PassConfigKey", "TensorSupplyType",
           "InterpOptions", "KernelError", "KernelSyntaxError", "KernelTypeError", "KernelRuntimeError",
           "InternalError", "HardwareModelError", "TilesimError", "TargetFallbackWarning"]
