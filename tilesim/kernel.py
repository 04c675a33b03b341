"""Compiled kernel objects: ``JITKernel``.

Contract
--------
``JITKernel(prim_func, out_idx, target, pass_configs, options)`` is what ``tilesim.compile`` and the
``@tilesim.jit`` decorators return. Calling it takes every parameter that is not an output, in order or
by name (tensors as NumPy arrays, torch tensors, or anything with ``__array__``/``__dlpack__``; scalars
as Python numbers), allocates the outputs (uninitialised, like ``torch.empty``), runs the program and
returns the outputs: one bare, several as a list, in the caller's array type (torch in → torch out).
Wrong counts, dtypes or shapes raise ``KernelRuntimeError`` naming the parameter. The argument rules
are :mod:`tilesim.binding`'s.

Targets are looked up in the registry of :mod:`tilesim.backends`: ``"interp"`` (the NumPy
interpreter), ``"cpu"`` (compiled for the CPU), ``"cuda"`` (the Numba CUDA backend, where present),
``"auto"`` (the available target of highest rank: ``cuda`` when a CUDA GPU and the backend are usable,
else ``tiered`` — the interpreter, compiling long-running kernels for the CPU in the background — when
numba and scipy are installed, else ``interp``). An unknown name is
a ``KernelTypeError`` listing the registered targets. A TileLang GPU target this machine cannot run
(``"cuda"`` without a usable GPU, ``"hip -mcpu=gfx950"``, ...: ``tilesim.backends.gpu_fallback``) runs on
the interpreter with one ``TargetFallbackWarning`` naming it (``TILESIM_TARGET_WARN=0``: none);
``self.target`` is then ``"interp"``, ``self.requested_target`` the requested text, and where the
requested backend is registered and lowers the kernel, ``get_kernel_source()`` still shows its source (a
construct that backend refuses is named in the warning). ``fallback=False`` (keyword; what
``tilesim.backends.cuda.check.cuda_twin`` uses) keeps the requested backend instead: its refusals raise, and
running where it cannot run raises ``KernelRuntimeError``, as for any registered target this machine cannot
run (``"cpu"`` without numba).
"""

from __future__ import annotations

import time
from dataclasses import replace

from . import binding as B
from .backends import get_target, gpu_fallback, registered, target_text, warn_fallback
from .backends.interp import InterpOptions
from .backends.interp.runtime import new_array
from .binding_plan import HostPlans
from .config import normalise_pass_configs
from .errors import KernelError, KernelRuntimeError, KernelTypeError, user_facing
from .ir import nodes as N
from .ir.printer import format_ir
from .lint import lint, warn_on_compile
from .profiler import Profiler
from .sim import simulate_kernel

#: calls of every kernel in this process and their wall time in seconds (argument binding included): how
#: much of a program's time tilesim's kernels take (``benchmarks/tilelang_examples.py`` reports it)
RUN_STATS = {"calls": 0, "seconds": 0.0}


class JITKernel:
    """A compiled tilesim program. See the module docstring for the calling convention."""

    def __init__(self, prim_func: N.PrimFunc, out_idx=None, target="auto", pass_configs=None,
                 options: InterpOptions | None = None, outputs=None, *, fallback: bool = True):
        self.prim_func = pf = prim_func
        try:
            self.pass_configs = normalise_pass_configs(pass_configs)
        except KernelTypeError as e:
            raise e.with_loc(pf.loc) from None
        if outputs is not None:
            self.out_idx = tuple(pf.params.index(b) for b in outputs)
        else:
            try:
                self.out_idx = B.normalise_out_idx(out_idx, len(pf.params))
            except KernelTypeError as e:
                raise e.with_loc(pf.loc) from None
        for i in self.out_idx:
            if not isinstance(pf.params[i], N.Buffer):
                raise KernelTypeError(f"out_idx {i} names the scalar parameter '{pf.params[i].name}'", pf.loc)
        if options is not None and not isinstance(options, InterpOptions):
            raise KernelTypeError(f"options must be a tilesim.InterpOptions, got {type(options).__name__}", pf.loc)
        warn_on_compile(pf, self.pass_configs)  # what real TileLang would refuse (TileLangCompatWarning)
        self.requested_target = target_text(target)
        why = gpu_fallback(target) if fallback else None
        self._source_program = None
        if why is not None:  # a GPU target this machine cannot run: the interpreter runs it (warned)
            if self.requested_target.split()[0].lower() in registered():
                try:  # the requested backend is registered: its lowering still serves get_kernel_source()
                    self._source_program = get_target(target).compile(pf, self.pass_configs)
                except KernelError as e:
                    why += f"; its backend refuses this kernel: {e.message}"
            warn_fallback(target, why, pf.name, pf.loc)
            target = "interp"
        self._target = get_target(target)
        self.target = self._target.name
        opts = options or InterpOptions()
        if self.pass_configs.get("tl.disable_safe_memory_legalize"):
            opts = replace(opts, oob="error")
        self.options = opts
        self.program = self._target.compile(pf, self.pass_configs)
        self.config = None
        self.latency = None
        self._host_plans = HostPlans()  # repeated calls of one signature skip bind_host's checks
        self._runs_here = False  # True once the target said it runs here (a GPU does not go away)

    def _check_runs_here(self) -> bool:
        self._runs_here = bool(self._target.runs_here())
        return self._runs_here

    @property
    def _cuda(self):
        """The compiled CUDA program for ``target="cuda"`` (``benchmarks/gpu_run.py`` uses it), else None."""
        return self.program if self.target == "cuda" else None

    # -- introspection ---------------------------------------------------------------------------
    @property
    def params(self):
        return self.prim_func.params

    @property
    def input_params(self):
        return [p for i, p in enumerate(self.prim_func.params) if i not in self.out_idx]

    def get_kernel_source(self) -> str:
        """The interpreter's input (tile IR text), or the generated Python/CUDA source for ``cuda`` (also when
        the interpreter runs a ``cuda`` kernel on a machine without a GPU: see the module docstring)."""
        if self._source_program is not None and self._source_program.source is not None:
            return self._source_program.source
        if self.program.source is not None:
            return self.program.source
        return format_ir(self.prim_func)

    def get_ir(self) -> str:
        return format_ir(self.prim_func)

    def __repr__(self):
        return f"<tilesim.JITKernel {self.prim_func.name} target={self.target}>"

    # -- running ---------------------------------------------------------------------------------
    @user_facing
    def __call__(self, *args, **kwargs):
        return self.run(*args, **kwargs)

    @user_facing
    def run(self, *args, options: InterpOptions | None = None, progress=None, **kwargs):
        """Run on ``args`` (inputs by position, or by parameter name in ``kwargs``); return the outputs."""
        t0 = time.perf_counter()
        try:
            return self._run(args, kwargs, options, progress)
        finally:
            RUN_STATS["calls"] += 1
            RUN_STATS["seconds"] += time.perf_counter() - t0

    def _run(self, args, kwargs, options, progress):
        pf = self.prim_func
        values = B.split_call(pf, self.out_idx, args, kwargs)
        if not self._runs_here and not self._check_runs_here():
            raise KernelRuntimeError(f"kernel {pf.name} was compiled for target='{self.target}' but "
                                     f"{self._target.missing}", pf.loc, hint=self._target.hint or None)
        res = self.program.call(pf, self.out_idx, values)
        if res is not NotImplemented:
            return res
        opts = options or self.options
        if opts.uninit == "check":  # the outputs allocated here start uninitialised in the shadow mask
            opts = replace(opts, fresh=frozenset(pf.params[i].uid for i in self.out_idx))
        bound = self._host_plans.bind(pf, self.out_idx, values, lambda shape, dtype: new_array(shape, dtype, opts.uninit))
        self.program.run(pf, bound.arrays, bound.scalars, opts, progress=progress)
        return bound.finish()

    def lint(self):
        """TileLang-compatibility findings (``tilesim.lint``): constructs real TileLang rejects."""
        return lint(self.prim_func)

    def get_profiler(self, tensor_supply_type=None, tensor_type="auto", dynamic_shapes=None):
        """TileLang's profiler (``tilesim.profiler``): inputs, ``assert_allclose``, ``do_bench``."""
        return Profiler(self, tensor_supply_type, dynamic_shapes=dynamic_shapes, tensor_type=tensor_type)

    @user_facing
    def simulate(self, hw="h200_sxm_141gb", profile=None, **shapes):
        """Cycle-approximate simulation of this kernel (see ``tilesim.sim``)."""
        return simulate_kernel(self, hw=hw, profile=profile, **shapes)
