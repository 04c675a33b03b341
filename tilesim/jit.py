"""``@tilesim.jit`` and ``tilesim.compile`` (``@tilesim.autotune`` is :mod:`tilesim.autotuner`).

Lazy style: the decorated factory takes compile-time parameters and returns a ``@T.prim_func``;
calling the decorated factory returns a cached :class:`~tilesim.kernel.JITKernel` per argument tuple.
Eager style (no nested prim_func): the decorated function annotates its tensor parameters in the body,
takes shape symbols from ``T.const`` and outputs from ``T.empty``; calling it with arrays compiles (cached
per shapes/dtypes/scalars) and runs. ``fn.compile(M=..., ...)`` returns the kernel without running. The
discovery trace of an eager kernel runs once per scalar arguments, and a call whose tensors have the shapes and
dtypes, and whose scalars the values, of an earlier call (same positions and keywords) goes straight to that
call's kernel, which still checks its arguments.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np

from . import binding as B
from .backends.interp import InterpOptions
from .errors import KernelRuntimeError, KernelTypeError, Loc, user_facing
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


def freeze_value(v, tensors_by_signature: bool = False):
    """A hashable key for a call argument: lists/dicts recursively; with ``tensors_by_signature`` an array
    or tensor becomes ``("tensor", shape, dtype)`` (what a compiled kernel depends on), else its repr."""
    if isinstance(v, (list, tuple)):
        return tuple(freeze_value(x, tensors_by_signature) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, freeze_value(x, tensors_by_signature)) for k, x in v.items()))
    if tensors_by_signature and B.is_tensor_like(v):
        return ("tensor", tuple(B.shape_of(v)), str(getattr(v, "dtype", "")))
    try:
        hash(v)
        return v
    except TypeError:
        return repr(v)


_freeze = freeze_value


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
                code = self.fn.__code__
                raise KernelTypeError(f"the factory {self.fn.__name__} must return a @T.prim_func, got "
                                      f"{type(pf).__name__}", Loc(code.co_filename, code.co_firstlineno),
                                      hint="end the factory with `return main`")
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
        self._discovered: dict = {}  # frozen scalar arguments -> discover_eager's (specs, const symbols)
        self._calls: dict = {}  # _call_key -> (kernel, where each input tensor is: position or keyword)
        self._sig = inspect.signature(fn)
        #: no *args/**kwargs parameter: each positional argument is the parameter at its position
        self._plain = all(p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in self._sig.parameters.values())
        functools.update_wrapper(self, fn)

    def _split(self, args, kwargs):
        try:
            ba = self._sig.bind(*args, **kwargs)
        except TypeError as e:  # a call that does not fit the signature: a user error at the definition
            code = self.fn.__code__
            raise KernelTypeError(f"{self.fn.__name__}(): {e}", Loc(code.co_filename, code.co_firstlineno),
                                  hint=f"signature: {self.fn.__name__}{self._sig}; to compile without tensors, "
                                       f"give the T.const sizes by name: {self.fn.__name__}.compile(M=..., ...)"
                                  ) from None
        ba.apply_defaults()
        tensors, scalars = {}, {}
        for name, v in ba.arguments.items():
            if _is_scalar(v):
                scalars[name] = v
            else:
                tensors[name] = v
        return tensors, scalars

    @user_facing
    def get_tir(self, *args, **bindings):
        """The kernel's ``PrimFunc`` for these arguments/bindings (TileLang's ``get_tir``): ``compile(...).prim_func``."""
        return self.compile(*args, **bindings).prim_func

    def compile(self, *args, **bindings) -> JITKernel:
        """Kernel for explicit ``T.const`` values and scalar parameters (no tensors needed); with positional
        arguments, the kernel a call with these arguments would run (TileLang's ``f.compile(*call_args)``)."""
        if args:
            return self.specialize(*args, **bindings)[0]
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

    def specialize(self, *args, **kwargs):
        """The kernel for this call's shapes, dtypes and scalars, and its tensor arguments in parameter order."""
        tensors, scalars = self._split(args, kwargs)
        dkey = _freeze(scalars)
        found = self._discovered.get(dkey)
        if found is None:  # the discovery trace depends on the scalar arguments only
            found = self._discovered[dkey] = discover_eager(self.fn, scalars)
        specs, const_vars = found
        consts: dict = {}
        for name, buf in specs.items():
            if name not in tensors:
                raise KernelRuntimeError(f"{self.fn.__name__}: tensor argument '{name}' is missing", buf.loc)
            shape = B.shape_of(tensors[name])
            if len(shape) != buf.ndim:
                raise B.rank_error(self.fn.__name__, name, buf.shape, shape, buf.loc)
            for d, (want, got) in enumerate(zip(buf.shape, shape)):
                if isinstance(want, N.Var) and want.kind == "const":
                    if want.name in consts and consts[want.name] != got:
                        raise B.conflict_error(self.fn.__name__, name, d, want.name, got, consts[want.name], buf.loc)
                    consts[want.name] = got
        k = self._get(consts, scalars)
        return k, [tensors[p.name] for p in k.input_params]

    @user_facing
    def __call__(self, *args, **kwargs):
        key = _call_key(args, kwargs)
        hit = self._calls.get(key) if key is not None else None
        if hit is not None:  # a call like an earlier one: same kernel, tensors from the same places
            k, where = hit
            return k(*[args[w] if isinstance(w, int) else kwargs[w] for w in where])
        k, tensors = self.specialize(*args, **kwargs)
        if key is not None and self._plain:
            ba = self._sig.bind(*args, **kwargs)
            pos = {name: i for i, name in enumerate(list(ba.arguments)[:len(args)])}
            where = [pos.get(p.name, p.name) for p in k.input_params]
            if all(isinstance(w, int) or w in kwargs for w in where):
                if len(self._calls) > 256:
                    self._calls.clear()
                self._calls[key] = (k, where)
        return k(*tensors)

    @user_facing
    def get_kernel_source(self, *args, **kwargs) -> str:
        """The source of the kernel this call would run (TileLang's ``kernel.get_kernel_source(*args)``).

        Without tensors, the ``T.const`` sizes and scalar parameters are given by name, as for ``compile``."""
        if any(B.is_tensor_like(v) for v in (*args, *kwargs.values())):
            return self.specialize(*args, **kwargs)[0].get_kernel_source()
        return self.compile(**dict(zip(self._sig.parameters, args)), **kwargs).get_kernel_source()


def _call_key(args, kwargs):
    """What an eager call's kernel depends on: per argument its shape and dtype (NumPy arrays, torch tensors) or
    its frozen value (compile-time scalars); ``None`` for any other argument (then the call is specialised)."""
    parts = []
    for name, v in (*enumerate(args), *sorted(kwargs.items())):
        t = type(v)
        if t is np.ndarray or t.__module__ == "torch" and t.__name__ == "Tensor":
            parts.append((name, t, tuple(v.shape), v.dtype))
        elif _is_scalar(v) and not hasattr(v, "shape"):
            parts.append((name, t, _freeze(v)))
        else:
            return None
    return tuple(parts)


def _is_scalar(v) -> bool:
    """Compile-time values of an eager call: numbers, strings, None, dtypes, and tuples/lists of them."""
    if isinstance(v, (int, float, bool, str, type(None), np.integer, np.floating, np.dtype)):
        return True
    if isinstance(v, (list, tuple)):
        return all(_is_scalar(x) for x in v)
    return not B.is_tensor_like(v) and not hasattr(v, "shape")


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
