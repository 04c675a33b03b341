"""What the CUDA backend can use on this machine.

* ``ensure_numpy_compat()`` restores ``numpy.row_stack`` (removed in NumPy 2.5) before ``numba.cuda``
  is imported: numba-cuda 0.30.4 still registers an overload for it and fails to compile any kernel
  without it. Every import of ``numba.cuda`` in tilesim goes through :func:`cuda_module` (and of
  ``numba.types`` through :func:`numba_types`); without numba-cuda they raise a ``KernelError`` saying
  how to install it.
* ``simulator()`` is true when ``NUMBA_ENABLE_CUDASIM=1`` (numba's CUDA simulator, set before the first
  import of ``numba.cuda``): kernels then run on the CPU, one Python thread per GPU thread.
* ``opt_in_dynamic_smem(kernel, nbytes)`` lets a compiled kernel launch with ``nbytes`` of dynamic shared
  memory (``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES``, needed past 48 KB), refusing with a
  ``KernelRuntimeError`` when the device's opt-in limit is lower.
* ``tensor_cores_default()``: whether ``T.gemm`` lowers to tensor cores when not asked explicitly: on, except
  under numba's CUDA simulator (it cannot run the inline PTX of ``mma.sync``/``ldmatrix``);
  ``TILESIM_CUDA_TENSOR_CORES=0`` turns it off, ``=1`` on.
* ``async_copy_default(tensor_cores)``: whether ``T.copy(global → shared)`` in ``T.Pipelined`` loops uses
  ``cp.async`` pipelining (:mod:`.pipeline`) when not asked explicitly: where tensor cores are on;
  ``TILESIM_CUDA_ASYNC_COPY=0`` turns it off, ``=1`` on.
* ``available()`` is true only with a real CUDA GPU and numba-cuda (the simulator does not count), so
  ``target="auto"`` picks the GPU only where one is present.
"""

from __future__ import annotations

import os

import numpy as np

from ...errors import KernelRuntimeError
from ...optional import module, require

_CUDA = None


def ensure_numpy_compat() -> None:
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
        _CUDA = require("numba.cuda", "the CUDA backend")
    return _CUDA


def numba_types():
    """``numba.types`` (numba imported after the compatibility fix, like :func:`cuda_module`)."""
    cuda_module()
    return require("numba", "the CUDA backend").types


def launch_api():
    """``(launch, make_config)``: the launch function numba-cuda's own ``_Kernel.launch`` calls (cuda.core's
    ``launch(stream, config, kernel, *kernel_args)``) and a factory ``make_config(grid, block, smem)`` of its
    ``LaunchConfig`` (non-cooperative), spelled for the installed cuda.core. Used by the call plans
    (:mod:`.plans`) to launch a compiled overload with an argument list prepared once. GPU only."""
    cuda_module()
    m = require("numba.cuda.dispatcher", "the CUDA backend")
    coop = "is_cooperative" if getattr(m, "CUDA_CORE_GE_1_0", True) else "cooperative_launch"

    def make_config(grid, block, smem):
        return m.LaunchConfig(grid=grid, block=block, shmem_size=smem, **{coop: False})

    return m.launch, make_config


def simulator() -> bool:
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        return True
    try:
        numba = module("numba")
        return bool(getattr(getattr(numba, "config", None), "ENABLE_CUDASIM", False))
    except Exception:  # noqa: BLE001
        return False


def tensor_cores_default(sim: bool | None = None) -> bool:
    """Whether ``T.gemm`` uses tensor cores when not asked explicitly.

    On since the H200 run of 2026-12-01 (every GPU test passed with it on), except for code compiled for the
    CUDA simulator (``sim``; ``None``: whether the simulator is on), which cannot run inline PTX.
    ``TILESIM_CUDA_TENSOR_CORES`` set to ``0``/``1`` decides instead."""
    env = os.environ.get("TILESIM_CUDA_TENSOR_CORES", "")
    if env != "":
        return env != "0"
    return not (simulator() if sim is None else sim)


def async_copy_default(tensor_cores: bool) -> bool:
    """Whether pipelined copies use ``cp.async`` when not asked explicitly: with tensor cores (so on by default,
    off under the simulator); ``TILESIM_CUDA_ASYNC_COPY`` set to ``0``/``1`` decides instead."""
    env = os.environ.get("TILESIM_CUDA_ASYNC_COPY", "")
    if env != "":
        return env != "0"
    return bool(tensor_cores)


def wgmma_default() -> bool:
    """Whether tensor-core ``T.gemm`` uses Hopper's ``wgmma`` (:mod:`.tile_wgmma`) when not asked explicitly.

    On since the twelfth session's H200 run (every registered library and test kernel passed against the
    interpreter with it, fp16/bf16 and fp8; GEMM 4096³ 0.69× torch against 0.43× on ``mma.sync``), where the code
    is for compute capability 9.x: the current GPU's, or :data:`DEFAULT_CC` without one (``wgmma`` is sm_90a
    only: an A100 or a Blackwell GPU keeps ``mma.sync``). ``TILESIM_CUDA_WGMMA`` set to ``0``/``1`` decides
    instead; :func:`tilesim.analysis.profiles.wgmma_switch_on` mirrors this for the ``numba_tc`` profile."""
    env = os.environ.get("TILESIM_CUDA_WGMMA", "")
    if env != "":
        return env != "0"
    return target_cc()[0] == 9


def target_cc() -> tuple:
    """The compute capability code is generated for: the current GPU's, or :data:`DEFAULT_CC` without one."""
    if not available():
        return DEFAULT_CC
    return tuple(cuda_module().get_current_device().compute_capability)


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


def opt_in_dynamic_smem(dispatcher, nbytes: int, what: str) -> None:
    """Allow every compiled overload of ``dispatcher`` to launch with ``nbytes`` of dynamic shared memory."""
    cuda = cuda_module()
    dev = cuda.get_current_device()
    limit = int(dev.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
    if nbytes > limit:
        raise KernelRuntimeError(f"{what} needs {nbytes} bytes of shared memory per block; this GPU allows "
                                 f"{limit} B", hint="use smaller tiles or fewer pipeline stages")
    drv = cuda.cudadrv.driver
    attr = drv.binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    for kern in dispatcher.overloads.values():
        cufunc = kern._codelibrary.get_cufunc()  # a library kernel: set per device, as numba's carveout is
        drv.driver.cuKernelSetAttribute(attr, int(nbytes), cufunc.handle, dev.id)


#: Static shared memory a block may declare (``cuda.shared.array``): 48 KB on every NVIDIA GPU.
STATIC_SMEM_LIMIT = 48 * 1024
#: Dynamic shared memory a block may opt into on sm_90 (H100/H200: 227 KB). Lowering refuses beyond it;
#: at launch the device's own ``MAX_SHARED_MEMORY_PER_BLOCK_OPTIN`` is checked too.
DYNAMIC_SMEM_LIMIT = 227 * 1024
#: Compute capability generated code is checked against without a GPU (the H200).
DEFAULT_CC = (9, 0)
