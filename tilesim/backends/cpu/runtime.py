"""Compiling and running a program on the CPU target.

Contract
--------
``CpuProgram(pf)`` generates one function per launch (:mod:`.codegen`) and compiles it with Numba on the
first call (Numba caches the machine code per argument types for the life of the process). If any part of
the program is outside what the target compiles (``codegen.Unsupported``) the program runs on the
interpreter instead, and says so once through the ``tilesim`` logger at debug level; ``fallback`` holds
the reason (``None`` when compiled). Interpreter-only checking options (``oob="error"``, ``races=True``)
also run on the interpreter.

``run(pf, arrays, scalars, options)`` has the interpreter's contract (``backends/interp/runtime.py``):
arrays of the declared dtypes, outputs written in place. A launch runs its blocks on Numba's thread pool
(``prange``) unless it has atomics (then in launch order, as the interpreter applies them). An integer
division by zero is a ``KernelRuntimeError`` located at the launch.
"""

from __future__ import annotations

import logging

import numpy as np

from ... import dtypes as dt
from ... import optional
from ...errors import KernelRuntimeError
from ...ir import nodes as N
from .. import Program
from ..interp import run as interp_run
from ..interp.exprs import ev
from ..interp.options import InterpOptions
from ..interp.state import Ctx
from . import codegen_rules as _rules  # noqa: F401 - fills the rule tables
from . import codegen_tiles as _tiles  # noqa: F401
from . import helpers, narrow
from .codegen import Unsupported, gen_launch

__all__ = ["CpuProgram"]

log = logging.getLogger("tilesim")
import os
_NOPAR = bool(os.environ.get("TS_NOPAR"))


class _Compiled:
    def __init__(self, launch: N.Launch, src):
        self.launch = launch
        self.src = src
        self.fn = None

    def function(self):
        if self.fn is None:
            numba = optional.require("numba", "the compiled CPU target (target='cpu')")
            ns = dict(helpers.namespace())
            ns["enc"] = narrow.make_codecs()[0]
            exec(compile(self.src.source, f"<tilesim.cpu launch at {self.launch.loc}>", "exec"), ns)
            self.fn = numba.njit(parallel=self.src.parallel and not _NOPAR, error_model="numpy", nogil=True)(ns["launch"])
        return self.fn


class CpuProgram(Program):
    """A program compiled for the CPU, or the interpreter's when it cannot be (``fallback``)."""

    def __init__(self, pf: N.PrimFunc, pass_configs=None, uninit: str = "nan", tf32: bool = False):
        self.pf = pf
        self.fallback: str | None = None
        self.launches: list = []
        self._key = (uninit, tf32)
        try:
            for s in pf.body:
                if not isinstance(s, N.Launch):
                    raise Unsupported(f"a top-level {type(s).__name__} outside T.Kernel", s.loc)
                self.launches.append(_Compiled(s, gen_launch(pf, s, uninit, tf32)))
        except Unsupported as e:
            self.fallback = str(e)
            self.launches = []
            log.debug("tilesim: %s runs on the interpreter, not the compiled CPU target: %s", pf.name, e)
        self.source = None if self.fallback else "\n".join(c.src.source for c in self.launches)

    def run(self, pf, arrays, scalars, options, progress=None):
        options = options or InterpOptions()
        if self.fallback or options.oob == "error" or options.races or (options.uninit, options.tf32) != self._key:
            if not self.fallback and (options.uninit, options.tf32) != self._key:
                return CpuProgram(pf, uninit=options.uninit, tf32=options.tf32).run(pf, arrays, scalars, options,
                                                                                   progress)
            return interp_run(pf, arrays, scalars, options, progress=progress)
        top = Ctx(1, options, dict(scalars), dict(arrays), np.zeros(1, dtype=np.int64))
        for i, c in enumerate(self.launches):
            grid = [int(ev(gx, top)) for gx in c.launch.grid]
            if any(x < 0 for x in grid):
                raise KernelRuntimeError(f"negative grid extent {tuple(grid)}", c.launch.loc)
            args = [_array_arg(arrays[b.uid], b.dtype) for b in c.src.buffers]
            for d in c.src.narrow:
                args += [narrow.decode_table(d), narrow.encode_args(d)[0]]
            args += [_scalar_arg(scalars[v.uid], v.dtype) for v in c.src.scalars]
            args += grid
            try:
                c.function()(*args)
            except ZeroDivisionError as e:
                raise KernelRuntimeError(str(e), c.launch.loc) from None
            if progress is not None:
                total = int(np.prod(grid)) if grid else 1
                progress(i, total, total)


def _array_arg(arr: np.ndarray, dtype: str) -> np.ndarray:
    if dtype in dt.NARROW_FLOATS:
        return narrow.storage_view(arr, dtype)
    return arr


def _scalar_arg(v, dtype: str):
    if dt.is_float(dtype):
        if dtype == "float64":
            return np.float64(v)
        return np.float32(dt.convert(np.asarray(v, dtype=np.float32), dtype).astype(np.float32))
    if dtype == "bool":
        return bool(v)
    return np.int64(v)
