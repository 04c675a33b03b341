"""Input tensors for a kernel's parameters, by ``TensorSupplyType`` (the profiler's and the autotuner's inputs).

Contract: ``make_input(param, supply_type, rng, dynamic_shapes=None) -> numpy.ndarray`` (a scalar ``1`` for a
scalar parameter) with TileLang's meanings: ``Auto`` — floats uniform in [-1, 1), integers in [-2, 3)
(unsigned/bool from 0), fp8 from integers in [-128, 128); ``Integer`` — integers in [-2, 3) (fp8 as in
``Auto``); ``Uniform``; ``Normal`` (mean -1, std 1, as TileLang); ``Randn``; ``Zero``; ``One``. Values are
converted to the parameter's dtype (fp8 saturating). A symbolic dimension needs a value in
``dynamic_shapes`` (by name), else ``KernelRuntimeError`` naming the parameter.
"""

from __future__ import annotations

import numpy as np

from . import dtypes as dt
from .config import TensorSupplyType
from .errors import KernelRuntimeError
from .ir import nodes as N

__all__ = ["make_input", "param_shape"]


def param_shape(p: N.Buffer, dynamic_shapes: dict | None = None) -> tuple:
    out = []
    for d in p.shape:
        if isinstance(d, int):
            out.append(d)
        elif isinstance(d, N.Var) and d.name in (dynamic_shapes or {}):
            out.append(int(dynamic_shapes[d.name]))
        else:
            raise KernelRuntimeError(f"parameter '{p.name}' has a symbolic dimension",
                                     p.loc, hint="pass get_profiler(dynamic_shapes={'m': 256, ...})")
    return tuple(out)


def make_input(p, supply_type, rng: np.random.Generator, dynamic_shapes: dict | None = None):
    if isinstance(p, N.Var):
        return 1
    shape, s = param_shape(p, dynamic_shapes), supply_type or TensorSupplyType.Auto
    integer = dt.is_int(p.dtype) or p.dtype == "bool"
    if s == TensorSupplyType.Zero:
        x = np.zeros(shape)
    elif s == TensorSupplyType.One:
        x = np.ones(shape)
    elif p.dtype.startswith("float8") and s in (TensorSupplyType.Auto, TensorSupplyType.Integer):
        x = rng.integers(-128, 128, size=shape)
    elif s == TensorSupplyType.Integer or (s == TensorSupplyType.Auto and integer):
        lo = 0 if p.dtype.startswith("uint") or p.dtype == "bool" else -2
        x = rng.integers(lo, 3 if p.dtype != "bool" else 2, size=shape)
    elif s in (TensorSupplyType.Uniform, TensorSupplyType.Auto):
        x = rng.uniform(-1, 1, size=shape)
    elif s == TensorSupplyType.Normal:
        x = rng.normal(-1.0, 1.0, size=shape)
    else:
        x = rng.standard_normal(shape)
    return dt.convert(x.astype(np.float32) if not integer else x, p.dtype)
