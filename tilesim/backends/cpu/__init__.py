"""The compiled CPU target: tile IR → loops over tile elements → Numba (``target="cpu"``).

Importing this package registers the target ``"cpu"`` (alias ``numba-cpu``). It needs numba (and SciPy,
whose BLAS Numba's ``np.dot`` calls); without them the target is not available. Programs it does not
compile run on the interpreter (``CpuProgram.fallback`` says why).

It also registers ``"tiered"`` (:mod:`.tiered`), what ``target="auto"`` picks on a machine without a GPU
when numba and scipy are installed: the interpreter, compiling a program for this target in the
background once one of its calls has run long. See docs/cpu-backend.md.
"""

from __future__ import annotations

from ... import optional
from .. import Target, register
from .runtime import CpuProgram
from .tiered import TieredProgram

__all__ = ["CpuProgram", "TieredProgram", "available"]


def available() -> bool:
    return optional.module("numba") is not None and optional.module("scipy") is not None


def _compile(pf, pass_configs) -> CpuProgram:
    return CpuProgram(pf, pass_configs)


def _cpu_program(pf, uninit: str, tf32: bool) -> CpuProgram:
    return CpuProgram(pf, uninit=uninit, tf32=tf32)


def _tiered(pf, pass_configs) -> TieredProgram:
    return TieredProgram(pf, pass_configs, compile_program=_cpu_program)


register(Target("cpu", "compiled for the CPU with Numba", _compile, available=available, runs_here=available,
                missing="numba and scipy are not installed",
                hint='pip install -e ".[cpu]" (numba, scipy), or use target="interp"',
                auto_rank=-1, aliases=("numba-cpu", "numba_cpu")))
register(Target("tiered", "the NumPy interpreter, compiling long-running kernels for the CPU in the background",
                _tiered, available=available, auto_rank=1, aliases=("interp+cpu",)))
