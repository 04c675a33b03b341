"""``kernel.get_profiler()``: TileLang's profiler surface over tilesim kernels.

``Profiler.assert_allclose(ref_prog, rtol, atol)`` makes inputs for every non-output parameter
(by ``tensor_supply_type``), runs the kernel and ``ref_prog`` on them, and compares every output.
``ref_prog`` receives NumPy arrays (or torch CPU tensors with ``tensor_type="torch"``).
``do_bench(func=None, warmup, rep)`` returns the median wall time in milliseconds of the kernel (or of
``func``) on those inputs — on the interpreter that is the interpreter's time, not a GPU time.
Symbolic dimensions need values: ``get_profiler(dynamic_shapes={"m": 256})``.

The profiler works on any kernel object with ``input_params``, ``prim_func`` and ``__call__`` (it does not
import :mod:`tilesim.kernel`; ``JITKernel.get_profiler`` builds it). Tensors are converted by
:mod:`tilesim.binding`.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from . import dtypes as dt
from .binding import numpy_to_torch
from .config import TensorSupplyType
from .errors import KernelRuntimeError
from .ir import nodes as N
from .optional import require
from .testing.compare import compare_arrays


class Profiler:
    def __init__(self, kernel, tensor_supply_type=None, dynamic_shapes=None, seed=0, tensor_type="numpy"):
        self.kernel = kernel
        self.supply = tensor_supply_type or TensorSupplyType.Auto
        self.dynamic_shapes = dict(dynamic_shapes or {})
        self.rng = np.random.default_rng(seed)
        self.tensor_type = tensor_type
        self._inputs = None

    def _shape(self, p: N.Buffer):
        out = []
        for d in p.shape:
            if isinstance(d, int):
                out.append(d)
            elif isinstance(d, N.Var) and d.name in self.dynamic_shapes:
                out.append(int(self.dynamic_shapes[d.name]))
            else:
                raise KernelRuntimeError(f"parameter '{p.name}' has a symbolic dimension",
                                         p.loc, hint="pass get_profiler(dynamic_shapes={'m': 256, ...})")
        return tuple(out)

    def _make(self, p):
        if isinstance(p, N.Var):
            return 1
        shape = self._shape(p)
        s = self.supply
        if s == TensorSupplyType.Zero:
            x = np.zeros(shape)
        elif s == TensorSupplyType.One:
            x = np.ones(shape)
        elif s == TensorSupplyType.Integer or (s == TensorSupplyType.Auto and dt.is_int(p.dtype)):
            x = self.rng.integers(-2, 3, size=shape)
        elif s == TensorSupplyType.Uniform:
            x = self.rng.uniform(-1, 1, size=shape)
        else:
            x = self.rng.standard_normal(shape)
        return dt.convert(x.astype(np.float32) if not dt.is_int(p.dtype) else x, p.dtype)

    def inputs(self):
        if self._inputs is None:
            self._inputs = [self._make(p) for p in self.kernel.input_params]
            if self.tensor_type == "torch":
                require("torch", "Profiler(tensor_type='torch')")
                self._inputs = [numpy_to_torch(x) if isinstance(x, np.ndarray) else x for x in self._inputs]
        return self._inputs

    def assert_allclose(self, reference_program, rtol=1e-2, atol=1e-2, max_mismatched_ratio=0.0):
        ins = self.inputs()
        outs = self.kernel(*ins)
        refs = reference_program(*ins)
        outs = outs if isinstance(outs, (list, tuple)) else [outs]
        refs = refs if isinstance(refs, (list, tuple)) else [refs]
        for i, (o, r) in enumerate(zip(outs, refs)):
            r = np.asarray(r.float().numpy() if hasattr(r, "float") and hasattr(r, "numpy") else r, dtype=np.float64)
            p = compare_arrays(o, r, rtol=rtol, atol=atol, name=f"output {i}")
            if p is not None:
                if max_mismatched_ratio > 0:
                    o64 = np.asarray(o, dtype=np.float64)
                    bad = np.abs(o64 - r) > atol + rtol * np.abs(r)
                    if bad.mean() <= max_mismatched_ratio:
                        continue
                raise AssertionError(f"{self.kernel.prim_func.name}: {p}")

    def run_once(self, func=None):
        return (func or self.kernel)(*self.inputs())

    def do_bench(self, func=None, warmup=1, rep=5, n_warmup=None, n_repeat=None, **_ignored):
        """Median wall time in ms (``warmup``/``rep`` are counts here, not milliseconds)."""
        fn = func or self.kernel
        ins = self.inputs()
        for _ in range(int(n_warmup or warmup)):
            fn(*ins)
        ts = []
        for _ in range(max(1, int(n_repeat or rep))):
            t0 = time.perf_counter()
            fn(*ins)
            ts.append(time.perf_counter() - t0)
        return statistics.median(ts) * 1e3
