"""The compiled CPU target: tile IR → loops over tile elements → Numba (``target="cpu"``).

Importing this package registers the target ``"cpu"`` (alias ``numba-cpu``). It needs numba (and SciPy,
whose BLAS Numba's ``np.dot`` calls); without them the target is not available. Programs it does not
compile run on the interpreter (``CpuProgram.fallback`` says why). ``target="auto"`` does not pick it yet:
see docs/cpu-backend.md for what it covers.
"""

from __future__ import annotations

from ... import optional
from .. import Target, register
from .runtime import CpuProgram

__all__ = ["CpuProgram", "available"]


def available() -> bool:
    return optional.module("numba") is not None and optional.module("scipy") is not None


def _compile(pf, pass_configs) -> CpuProgram:
    return CpuProgram(pf, pass_configs)


register(Target("cpu", "compiled for the CPU with Numba", _compile, available=available, runs_here=available,
                missing="numba and scipy are not installed",
                hint='pip install -e ".[cpu]" (numba, scipy), or use target="interp"',
                auto_rank=-1, aliases=("numba-cpu", "numba_cpu")))
