"""Compile-time configuration surface: ``PassConfigKey`` and ``TensorSupplyType``.

Pass configs are accepted with TileLang's keys. Those with a meaning for tilesim are honoured (listed
in ``HONOURED``); the rest are recorded on the kernel and ignored, with one warning per key.
"""

from __future__ import annotations

import enum
import warnings

from .errors import KernelTypeError


class PassConfigKey(str, enum.Enum):
    """TileLang's pass-config keys (values are the raw strings TileLang accepts)."""

    TL_SIMPLIFY = "tl.Simplify"
    TL_DYNAMIC_ALIGNMENT = "tl.dynamic_alignment"
    TL_DISABLE_DYNAMIC_TAIL_SPLIT = "tl.disable_dynamic_tail_split"
    TL_DISABLE_WARP_SPECIALIZED = "tl.disable_warp_specialized"
    TL_DISABLE_TMA_LOWER = "tl.disable_tma_lower"
    TL_ENABLE_FAST_MATH = "tl.enable_fast_math"
    TL_DISABLE_FAST_MATH = "tl.disable_fast_math"
    TL_PTXAS_REGISTER_USAGE_LEVEL = "tl.ptxas_register_usage_level"
    TL_ENABLE_PTXAS_VERBOSE_OUTPUT = "tl.enable_ptxas_verbose_output"
    TL_CONFIG_INDEX_BITWIDTH = "tl.config_index_bitwidth"
    TL_DISABLE_SAFE_MEMORY_ACCESS = "tl.disable_safe_memory_legalize"
    TL_DISABLE_VECTORIZE_256 = "tl.disable_vectorize_256"
    TL_DISABLE_THREAD_STORAGE_SYNC = "tl.disable_thread_storage_sync"
    TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE = "tl.enable_aggressive_shared_memory_merge"
    TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS = "tl.debug_merge_shared_memory_allocations"
    TL_DISABLE_SHUFFLE_ELECT = "tl.disable_shuffle_elect"
    TL_FORCE_LET_INLINE = "tl.force_let_inline"
    TL_AST_PRINT_ENABLE = "tl.ast_print_enable"
    TL_LAYOUT_VISUALIZATION_ENABLE = "tl.layout_visualization_enable"
    TL_STORAGE_REWRITE_DETECT_INPLACE = "tl.storage_rewrite_detect_inplace"
    TIR_DISABLE_VECTORIZE = "tir.disable_vectorize"
    TIR_DISABLE_CSE = "tir.disable_cse_tir"
    TIR_ENABLE_DEBUG = "tir.enable_debug"
    TIR_MERGE_STATIC_SMEM = "tir.merge_static_smem"
    TIR_USE_ASYNC_COPY = "tir.use_async_copy"
    CUDA_KERNELS_OUTPUT_DIR = "cuda.kernels_output_dir"


#: Keys with an effect in tilesim, and what it is.
HONOURED = {
    "tilesim.lint": "False turns off the compile-time TileLang-compatibility warnings (tilesim.lint)",
    "tl.enable_fast_math": "the CUDA backend compiles with fastmath",
    "tl.disable_fast_math": "the CUDA backend compiles without fastmath (the default)",
    "tilesim.cuda_tensor_cores": "False keeps fp16/bf16 T.gemm on the CUDA cores in the CUDA backend (the default, "
                                 "True, lowers it to mma.sync tensor-core code; off under the CUDA simulator)",
    "tilesim.cuda_async_copy": "False keeps T.copy(global → shared) in T.Pipelined loops synchronous in the CUDA "
                               "backend (the default, True where tensor cores are on, issues cp.async with "
                               "num_stages shared copies)",
    "tilesim.cuda_wgmma": "True lowers eligible tensor-core T.gemm to Hopper's wgmma.mma_async (sm_90a) in the CUDA "
                          "backend (default True where the code is for compute capability 9.x — the H200 run of the twelfth session; "
                          "False or env TILESIM_CUDA_WGMMA=0 keeps mma.sync)",
    "tl.disable_safe_memory_legalize": "the interpreter reports out-of-range global accesses as errors",
}

_warned: set[str] = set()


def normalise_pass_configs(configs) -> dict[str, object]:
    """Map keys (enum members or raw strings) to raw strings; warn once about ignored keys."""
    if configs is not None and not hasattr(configs, "items"):
        raise KernelTypeError(f"pass_configs must be a dict of config keys to values, got {type(configs).__name__}",
                              hint='e.g. pass_configs={"tl.disable_tma_lower": True}')
    out: dict[str, object] = {}
    for k, v in (configs or {}).items():
        key = k.value if isinstance(k, PassConfigKey) else str(k)
        out[key] = v
        if key not in HONOURED and key not in _warned:
            _warned.add(key)
            warnings.warn(f"tilesim: pass config {key!r} has no effect in tilesim; recorded and ignored",
                          stacklevel=3)
    return out


class TensorSupplyType(enum.Enum):
    """How ``Profiler`` fills kernel inputs."""

    Integer = 1
    Uniform = 2
    Normal = 3
    Randn = 4
    Zero = 5
    One = 6
    Auto = 7
