"""``@tilesim.autotune(configs=...)``: TileLang's autotune decorator over a ``@tilesim.jit`` factory.

Contract (the meaning is in :mod:`.tuner`'s docstring): ``autotune(func=None, *, configs, warmup, rep,
timeout, supply_type, ref_prog, supply_prog, rtol, atol, max_mismatched_ratio, skip_check,
manual_check_prog, cache_input_tensors, oracle, hw)`` wraps a lazy factory (calls return the best
``JITKernel``) or an eager kernel (calls return the best kernel's outputs on the call's tensors;
``.compile(...)`` returns the kernel). Explicitly passed tunable arguments skip the search. One tuning
per distinct call signature (tensor shapes/dtypes and scalar values) is cached on the wrapper.
"""

from __future__ import annotations

import functools
import inspect

from ..binding import is_tensor_like
from ..errors import KernelTypeError, user_facing
from ..jit import EagerJIT, LazyJIT, freeze_value
from .tuner import AutoTuner

__all__ = ["autotune", "AutoTuneImpl"]


class AutoTuneImpl:
    """The callable ``@autotune`` returns (see the module docstring)."""

    def __init__(self, jit_impl, configs, profile: dict):
        if not isinstance(jit_impl, (LazyJIT, EagerJIT)):
            raise KernelTypeError("@autotune must decorate a @tilesim.jit function",
                                  hint="stack the decorators: @tilelang.autotune(configs=...) above @tilelang.jit")
        self.jit_impl = jit_impl
        self.configs = configs
        self.profile = profile
        self._cache: dict = {}
        self._sig = inspect.signature(jit_impl.fn)
        functools.update_wrapper(self, jit_impl.fn)

    def _given(self, args, kwargs) -> set:
        """Names of the parameters the caller passed explicitly."""
        names = list(self._sig.parameters)
        return set(names[:len(args)]) | set(kwargs)

    def _search(self, args, kwargs):
        key = freeze_value((args, kwargs), tensors_by_signature=True)
        if key not in self._cache:
            self._cache[key] = self._tune(args, kwargs)
        return self._cache[key]

    def _tune(self, args, kwargs):
        """(best kernel, the config values the caller did not pass) for one call signature."""
        configs = list(self.configs(*args, **kwargs) if callable(self.configs) else self.configs or [])
        given = self._given(args, kwargs)
        eager = isinstance(self.jit_impl, EagerJIT)
        # an eager kernel compiled by name (`.compile(M=..., block_M=...)`, no tensors): T.const sizes and
        # scalars by name, as EagerJIT.compile; tuned on set_autotune_inputs / the profiler's inputs
        by_name = eager and not any(is_tensor_like(v) for v in (*args, *kwargs.values()))

        def build(**cfg):
            merged = {**kwargs, **{k: v for k, v in cfg.items() if k not in given}}
            if by_name:
                return self.jit_impl.compile(**dict(zip(self._sig.parameters, args)), **merged)
            return self.jit_impl.specialize(*args, **merged)[0] if eager else self.jit_impl(*args, **merged)

        tunable = set().union(*(set(c) for c in configs)) - {"pass_configs"} if configs else set()
        if tunable and tunable <= given:
            return build(), {}  # every tunable argument passed explicitly: no search (TileLang's rule)
        inputs = None
        if eager and configs and not by_name:
            first = {k: v for k, v in configs[0].items() if k not in given and k != "pass_configs"}
            inputs = self.jit_impl.specialize(*args, **{**kwargs, **first})[1]
        tuner = AutoTuner(build, configs, parameters=set(self._sig.parameters))
        tuner.set_profile_args(**self.profile)
        res = tuner.run(_call_inputs=inputs)
        return res.kernel, {k: v for k, v in res.config.items() if k not in given}

    @user_facing
    def __call__(self, *args, **kwargs):
        kernel, cfg = self._search(args, kwargs)
        if isinstance(self.jit_impl, LazyJIT):
            return kernel
        _, tensors = self.jit_impl.specialize(*args, **{**kwargs, **cfg})
        return kernel(*tensors)

    @user_facing
    def compile(self, *args, **kwargs):
        return self._search(args, kwargs)[0]


def autotune(func=None, *, configs=None, warmup=25, rep=100, timeout=100, supply_type=None, ref_prog=None,
             supply_prog=None, rtol=1e-2, atol=1e-2, max_mismatched_ratio=0.01, skip_check=False,
             manual_check_prog=None, cache_input_tensors=False, oracle="auto", hw=None, **_ignored):
    """Decorate a ``@tilesim.jit`` factory: calls tune over ``configs`` (see :mod:`.tuner`)."""
    profile = dict(warmup=warmup, rep=rep, timeout=timeout, supply_type=supply_type, ref_prog=ref_prog,
                   supply_prog=supply_prog, rtol=rtol, atol=atol, max_mismatched_ratio=max_mismatched_ratio,
                   skip_check=skip_check, manual_check_prog=manual_check_prog,
                   cache_input_tensors=cache_input_tensors, oracle=oracle, hw=hw)

    def wrap(impl):
        return AutoTuneImpl(impl, configs, profile)

    return wrap(func) if func is not None else wrap
