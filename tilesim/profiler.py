"""TileLang's profiler surface: ``kernel.get_profiler()`` and ``tilelang.profiler.do_bench``.

Contract
--------
* ``Profiler(kernel, tensor_supply_type, tensor_type="auto", dynamic_shapes=None, seed=0)``. Inputs for every
  non-output parameter are made once per profiler by ``tensor_supply_type`` with TileLang's meanings
  (:mod:`tilesim.supply`), from a seeded generator. ``tensor_type``: ``"torch"`` (CPU torch tensors, as TileLang's reference programs
  expect), ``"numpy"``, or ``"auto"`` — torch when the calling program has imported torch, else NumPy.
  Symbolic dimensions need values: ``get_profiler(dynamic_shapes={"m": 256})``.
* ``assert_allclose(reference_program, input_tensors=None, atol=1e-2, rtol=1e-2, max_mismatched_ratio=0.01)``
  runs the kernel and ``reference_program`` on the same inputs and compares output ``i`` with reference
  output ``i``: an element mismatches when ``|out - ref| > atol + rtol*|ref|`` (NaNs equal); at most
  ``int(numel * max_mismatched_ratio)`` may (TileLang's default allowance is 1%). Raises ``AssertionError``
  naming the output, the count and the first mismatch.
* ``do_bench(func=None, warmup=25, rep=100, n_warmup=1, n_repeat=1, input_tensors=None, ...)`` and the
  module-level ``do_bench(fn, warmup=25, rep=100, _n_warmup=0, _n_repeat=0, quantiles=None,
  return_mode="mean", device=None, cache_size=256, early_stop_baseline=None)`` return milliseconds; ``fn`` is
  called with no arguments and any other keyword is a ``TypeError``, as in TileLang (a program that passes
  ``fn``'s own arguments to ``do_bench`` fails there too). As in TileLang, ``warmup``/``rep`` are time budgets in ms:
  one call is timed, then ``warmup/t`` warm-up calls and ``rep/t`` timed calls run (at least one each, at
  most ``MAX_CALLS``); explicit call counts (``n_warmup``/``n_repeat`` > 1 on the profiler,
  ``_n_warmup``/``_n_repeat`` > 0 on the function) override. On the interpreter the times are the
  interpreter's, not a GPU's. ``backend`` ("event", "cupti") is accepted and means wall-clock time here.
* ``profiler.func`` is the kernel (callable with the inputs); ``run_once(func=None)`` runs it once.
"""

from __future__ import annotations

import time

import numpy as np

from .binding import numpy_to_torch
from .config import TensorSupplyType
from .errors import KernelTypeError
from .optional import loaded, require
from .supply import make_input
from .utils.tensor import torch_assert_close

__all__ = ["Profiler", "do_bench", "MAX_CALLS"]

#: upper bound on warm-up and timed calls of one ``do_bench``
MAX_CALLS = 1000
_RETURN_MODES = ("mean", "median", "min", "max", "all")


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def do_bench(fn, warmup=25, rep=100, _n_warmup=0, _n_repeat=0, quantiles=None, fast_flush=True,
             backend="event", return_mode="mean", grad_to_none=None, device=None, cache_size=256,
             early_stop_baseline=None):
    """Time ``fn()`` in milliseconds (see the module docstring)."""
    if return_mode not in _RETURN_MODES:
        raise KernelTypeError(f"do_bench: return_mode must be one of {_RETURN_MODES}, got {return_mode!r}")
    estimate = max(_timed(fn), 1e-6)
    n_warm = int(_n_warmup) if _n_warmup > 0 else max(1, min(MAX_CALLS, int(warmup / estimate)))
    n_rep = int(_n_repeat) if _n_repeat > 0 else max(1, min(MAX_CALLS, int(rep / estimate)))
    for _ in range(n_warm):
        fn()
    times = np.array([_timed(fn) for _ in range(n_rep)])
    if quantiles is not None:
        q = [float(x) for x in np.quantile(times, quantiles)]
        return q[0] if len(q) == 1 else q
    if return_mode == "all":
        return times.tolist()
    return float(getattr(np, return_mode)(times))


class Profiler:
    """Inputs, a reference check and timing for one kernel (see the module docstring)."""

    def __init__(self, kernel, tensor_supply_type=None, dynamic_shapes=None, seed=0, tensor_type="auto"):
        if tensor_type not in ("auto", "torch", "numpy"):
            raise KernelTypeError(f"tensor_type must be 'auto', 'torch' or 'numpy', got {tensor_type!r}")
        self.kernel = kernel
        self.func = kernel
        self.supply = tensor_supply_type or TensorSupplyType.Auto
        self.dynamic_shapes = dict(dynamic_shapes or {})
        self.rng = np.random.default_rng(seed)
        self.tensor_type = tensor_type
        self._inputs = None

    def _make(self, p):
        return make_input(p, self.supply, self.rng, self.dynamic_shapes)

    def _use_torch(self) -> bool:
        if self.tensor_type == "auto":
            return loaded("torch") is not None
        return self.tensor_type == "torch"

    def inputs(self):
        if self._inputs is None:
            made = [self._make(p) for p in self.kernel.input_params]
            if self._use_torch():
                require("torch", "Profiler(tensor_type='torch')")
                made = [numpy_to_torch(x) if isinstance(x, np.ndarray) else x for x in made]
            self._inputs = made
        return self._inputs

    _get_inputs = inputs

    def assert_allclose(self, reference_program, input_tensors=None, atol=1e-2, rtol=1e-2,
                        max_mismatched_ratio=0.01):
        ins = list(input_tensors) if input_tensors is not None else self.inputs()
        outs = self.kernel(*ins)
        refs = reference_program(*ins)
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        refs = list(refs) if isinstance(refs, (list, tuple)) else [refs]
        name = self.kernel.prim_func.name
        if len(refs) > len(outs):
            raise AssertionError(f"{name}: the reference returned {len(refs)} outputs, the kernel {len(outs)}")
        for i, (o, r) in enumerate(zip(outs, refs)):
            try:
                torch_assert_close(o, r, rtol=rtol, atol=atol, max_mismatched_ratio=max_mismatched_ratio,
                                   check_dtype=False, base_name=f"{name} output {i}", ref_name="reference")
            except AssertionError as e:
                raise AssertionError(f"{name}: output {i}: {e}") from None

    def run_once(self, func=None):
        return (func or self.kernel)(*self.inputs())

    def do_bench(self, func=None, warmup=25, rep=100, n_warmup=1, n_repeat=1, input_tensors=None,
                 backend="event", quantiles=None, return_mode="mean", **_ignored):
        """Milliseconds per call of the kernel (or ``func``) on the profiler's inputs."""
        fn = func or self.kernel
        ins = list(input_tensors) if input_tensors is not None else self.inputs()
        return do_bench(lambda: fn(*ins), warmup=warmup, rep=rep,
                        _n_warmup=n_warmup if n_warmup > 1 else 0, _n_repeat=n_repeat if n_repeat > 1 else 0,
                        quantiles=quantiles, return_mode=return_mode)
