"""The Numba CUDA backend: tile IR → thread-level Python source → ``numba.cuda.jit`` kernels.

``available()`` — a real CUDA GPU and numba-cuda are usable (``target="auto"`` then picks ``cuda``).
``compile_cuda(pf, fastmath=False)`` — lower a ``PrimFunc`` (no GPU needed); the result's ``.source``
is the generated Python source (``JITKernel.get_kernel_source()``), ``.compile_ptx(cc)`` compiles it
for a compute capability without a GPU, ``.run``/``.call`` launch it. ``tensor_cores=True`` (or the pass
config ``"tilesim.cuda_tensor_cores": True``, or ``TILESIM_CUDA_TENSOR_CORES=1``) lowers eligible fp16/bf16
``T.gemm`` to ``mma.sync`` + ``ldmatrix`` — on by default (run on the H200 2026-12-01), off under the CUDA
simulator, which cannot run inline PTX; ``tensor_cores=False`` or ``TILESIM_CUDA_TENSOR_CORES=0`` keeps the
CUDA-core FMA loop. ``async_copy`` (pass config ``"tilesim.cuda_async_copy"``, env ``TILESIM_CUDA_ASYNC_COPY``;
default: on where tensor cores are on) lowers ``T.copy(global → shared)`` in ``T.Pipelined(num_stages >= 2)``
loops to a ``cp.async`` software pipeline (see :mod:`.pipeline`).

Importing this package registers the target ``"cuda"`` (see :mod:`tilesim.backends`): chosen by
``target="auto"`` where ``available()``; it runs where ``available()`` or under numba's CUDA simulator.
Importing it does not import numba: that happens on first compilation or launch.

NumPy >= 2.5 removed ``numpy.row_stack``, which numba-cuda 0.30.4 still registers: the backend's import
path (:func:`caps.cuda_module`) restores it before importing ``numba.cuda``. See docs/cuda-backend.md.
"""

from __future__ import annotations

from .. import Target, register
from .caps import (  # noqa: F401
    async_copy_default,
    available,
    ensure_numpy_compat,
    simulator,
    tensor_cores_default,
    wgmma_default,
)
from .runtime import CudaProgram, reject_unsupported


def compile_cuda(pf, fastmath: bool = False, sim: bool | None = None, tensor_cores: bool | None = None,
                 async_copy: bool | None = None, wgmma: bool | None = None) -> CudaProgram:
    """``tensor_cores=None`` reads :func:`caps.tensor_cores_default` (on; off under the CUDA simulator);
    ``async_copy=None`` reads :func:`caps.async_copy_default` (on where tensor cores are); ``wgmma=None`` reads
    :func:`caps.wgmma_default` (on for compute capability 9.x; ``TILESIM_CUDA_WGMMA=0`` turns it off), used only where tensor cores are on."""
    reject_unsupported(pf)
    tc = tensor_cores_default(sim) if tensor_cores is None else bool(tensor_cores)
    ac = async_copy_default(tc) if async_copy is None else bool(async_copy)
    wg = wgmma_default() if wgmma is None else bool(wgmma)
    return CudaProgram(pf, fastmath=fastmath, sim=sim, tensor_cores=tc, async_copy=ac, wgmma=wg and tc)


def _compile_target(pf, pass_configs) -> CudaProgram:
    tc = pass_configs.get("tilesim.cuda_tensor_cores")
    ac = pass_configs.get("tilesim.cuda_async_copy")
    wg = pass_configs.get("tilesim.cuda_wgmma")
    return compile_cuda(pf, fastmath=bool(pass_configs.get("tl.enable_fast_math")),
                        tensor_cores=None if tc is None else bool(tc), async_copy=None if ac is None else bool(ac),
                        wgmma=None if wg is None else bool(wg))


def _runs_here() -> bool:
    return available() or simulator()


register(Target("cuda", "the Numba CUDA backend", _compile_target, available=available, runs_here=_runs_here,
                missing="this machine has no usable CUDA GPU",
                hint="run it with target='interp' (or 'auto'), or on a machine with an NVIDIA GPU; "
                     "get_kernel_source() still shows the generated CUDA code",
                auto_rank=10))

__all__ = ["available", "compile_cuda", "simulator", "ensure_numpy_compat"]
