"""``@tilesim.jit``, ``tilesim.compile`` and ``@tilesim.autotune``.

Lazy style: the decorated factory takes compile-time parameters and returns a ``@T.prim_func``;
calling the decorated factory returns a cached :class:`~tilesim.kernel.JITKernel` per argument tuple.
Eager style (no nested prim_func): the decorated function annotates its tensor parameters in the body,
takes shape symbols from ``T.const`` and outputs from ``T.empty``; calling it with arrays compiles (cached
per shapes/dtypes/scalars) and runs. ``fn.compile(M=..., ...)`` returns the kernel without running.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np

from . import binding as B
from . import dtypes as dt
from .backends.interp import InterpOptions
from .errors import KernelRuntimeError, KernelTypeError, user_facing
from .frontend import discover_eager, is_eager_source, trace_eager
from .ir import nodes as N
from .kernel import JITKernel


@user_facing
def compile(prim_func, out_idx=None, target="auto", target_host=None, execution_backend=None,  # noqa: A001
            verbose=False, pass_configs=None, options: InterpOptions | None = None, **_ignored) -> JITKernel:
    """Compile a ``PrimFunc`` into a callable kernel."""
    if not isinstance(prim_func, N.PrimFunc):
        raise KernelTypeError(f"tilesim.compile expects a @T.prim_func, got {type(prim_func).__name__}")
    return JITKernel(prim_func, out_idx=out_idx, target=target, pass_configs=pass_configs, options=options)


def _freeze(v):
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    try:
        hash(v)
        return v
    except TypeError:
        return repr(v)


class LazyJIT:
    """A kernel factory: ``factory(*params)`` → cached ``JITKernel``."""

    def __init__(self, fn, out_idx, target, pass_configs, options):
        self.fn = fn
        self.out_idx = out_idx
        self.target = target
        self.pass_configs = pass_configs
        self.options = options
        self._cache: dict = {}
        functools.update_wrapper(self, fn)

    @user_facing
    def __call__(self, *args, **kwargs):
        key = (_freeze(args), _freeze(kwargs))
        k = self._cache.get(key)
        if k is None:
            pf = self.fn(*args, **kwargs)
            if isinstance(pf, JITKernel):
                k = pf
            elif not isinstance(pf, N.PrimFunc):
                raise KernelTypeError(f"the factory {self.fn.__name__} must return a @T.prim_func, got "
                                      f"{type(pf).__name__}", hint="end the factory with `return main`")
            else:
                k = JITKernel(pf, out_idx=self.out_idx, target=self.target, pass_configs=self.pass_configs,
                              options=self.options)
            self._cache[key] = k
        return k

    def get_tir(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


class EagerJIT:
    """An eager kernel: compiled per call's shapes, dtypes and scalar arguments."""

    def __init__(self, fn, target, pass_configs, options):
        self.fn = fn
        self.target = target
        self.pass_configs = pass_configs
        self.options = options
        self._cache: dict = {}
        self._sig = inspect.signature(fn)
        functools.update_wrapper(self, fn)

    def _split(self, args, kwargs):
        ba = self._sig.bind(*args, **kwargs)
        ba.apply_defaults()
        tensors, scalars = {}, {}
        for name, v in ba.arguments.items():
            if isinstance(v, (int, float, bool, str, type(None))) or isinstance(v, (np.integer, np.floating)):
                scalars[name] = v
            else:
                tensors[name] = v
        return tensors, scalars

    @user_facing
    def compile(self, **bindings) -> JITKernel:
        """Kernel for explicit ``T.const`` values and scalar parameters (no tensors needed)."""
        scalars = {k: p.default for k, p in self._sig.parameters.items() if p.default is not inspect.Parameter.empty}
        scalars.update({k: v for k, v in bindings.items() if k in self._sig.parameters})
        consts = {k: v for k, v in bindings.items() if k not in self._sig.parameters}
        return self._get(consts, scalars)

    def _get(self, consts, scalars):
        key = (_freeze(consts), _freeze(scalars))
        k = self._cache.get(key)
        if k is None:
            pf, outputs = trace_eager(self.fn, consts, scalars)
            k = JITKernel(pf, target=self.target, pass_configs=self.pass_configs, options=self.options,
                          outputs=outputs)
            self._cache[key] = k
        return k

    @user_facing
    def __call__(self, *args, **kwargs):
        tensors, scalars = self._split(args, kwargs)
        specs, const_vars = discover_eager(self.fn, scalars)
        consts: dict = {}
        for name, buf in specs.items():
            if name not in tensors:
                raise KernelRuntimeError(f"{self.fn.__name__}: tensor argument '{name}' is missing")
            shape = B.shape_of(tensors[name])
            if len(shape) != buf.ndim:
                raise B.rank_error(self.fn.__name__, name, buf.shape, shape, buf.loc)
            for d, (want, got) in enumerate(zip(buf.shape, shape)):
                if isinstance(want, N.Var) and want.kind == "const":
                    if want.name in consts and consts[want.name] != got:
                        raise B.conflict_error(self.fn.__name__, name, d, want.name, got, consts[want.name], buf.loc)
                    consts[want.name] = got
        k = self._get(consts, scalars)
        order = [p.name for p in k.input_params]
        return k(*[tensors[n] for n in order])


def jit(func=None, *, out_idx=None, target="auto", target_host=None, execution_backend=None, verbose=False,
        pass_configs=None, debug_root_path=None, compile_flags=None, options: InterpOptions | None = None):
    """Decorate a kernel factory (lazy style), an eager kernel, or a ``PrimFunc``."""

    def wrap(fn):
        if isinstance(fn, N.PrimFunc):
            return JITKernel(fn, out_idx=out_idx, target=target, pass_configs=pass_configs, options=options)
        if is_eager_source(fn):
            return EagerJIT(fn, target, pass_configs, options)
        return LazyJIT(fn, out_idx, target, pass_configs, options)

    return wrap(func) if func is not None else wrap


def autotune(configs=None, warmup=25, rep=100, timeout=None, supply_type=None, ref_prog=None, atol=1e-2,
             rtol=1e-2, skip_check=False, cache_input_tensors=False, oracle="interp", **sim_kwargs):
    """``@tilesim.autotune(configs=[...])`` over a ``@tilesim.jit`` factory: best kernel with ``.config``/``.latency``.

    ``oracle="interp"`` times the interpreter; ``oracle="sim"`` ranks by simulated time (``sim_kwargs``:
    ``hw=``, ``profile=``) so tuning works without a GPU.
    """

    def wrap(factory):
        @functools.wraps(getattr(factory, "fn", factory))
        def tuned(*args, **kwargs):
            cfgs = configs(*args, **kwargs) if callable(configs) else list(configs or [{}])
            best = None
            for cfg in cfgs:
                k = factory(*args, **{**kwargs, **cfg})
                if oracle == "sim":
                    lat = k.simulate(**sim_kwargs).time_s * 1e3
                else:
                    lat = k.get_profiler(supply_type).do_bench(warmup=1, rep=3)
                if best is None or lat < best[0]:
                    best = (lat, cfg, k)
            lat, cfg, k = best
            k.config, k.latency = cfg, lat
            return k

        return tuned

    return wrap


_ = dt  # dtypes are part of the surface re-exported by tilesim/__init__
