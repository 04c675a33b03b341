"""Per-signature plans of :func:`tilesim.binding.bind_host`: a repeated call with arguments of the same kind
binds without redoing its checks.

Contract. ``HostPlans.bind(pf, out_idx, values, allocate)`` returns what ``bind_host`` returns for the same
arguments (a :class:`~tilesim.binding.HostBinding` with the same arrays, scalars and outputs), and raises what it
raises. A call is planned only when every tensor argument is a plain ``numpy.ndarray`` that ``bind_host`` bound
as itself (no copy, no conversion, no packed int4/fp4) and no output is returned as torch. Its plan is keyed by
each argument's type, dtype, shape, strides and writeability and each scalar argument's value — everything
``bind_host``'s checks and its derived values (symbolic dimensions, output shapes) depend on — so a hit binds the
caller's arrays in place, copies the recorded scalars and allocates the outputs (``allocate(shape, dtype)``,
called as ``bind_host`` calls it). Any other call (torch tensors, lists, strided or read-only arrays that
``bind_host`` copies) takes ``bind_host`` itself, every time.

Why: ``bind_host``'s checks cost ~8 µs of a compiled-CPU call's ~23 µs fixed cost (a four-argument attention);
a user who iterates on a kernel calls it hundreds of times with one signature.

Bounds: at most ``MAX_PLANS`` signatures per kernel (the oldest is dropped); not thread-safe beyond what a dict
gives (a racing miss binds fully and records the same plan twice).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import binding as B
from .ir import nodes as N

__all__ = ["HostPlans", "MAX_PLANS"]

MAX_PLANS = 16


@dataclass(frozen=True)
class _Plan:
    inputs: tuple  # (index in values, buffer uid) of the tensor inputs, bound as the caller's arrays
    scalars: tuple  # (var uid, value) of scalar params and symbolic dims
    outputs: tuple  # (buffer uid, shape, dtype) allocated per call


def _key(pf: N.PrimFunc, out_idx: tuple, values: list):
    """The call's signature, or None when it cannot be planned (an argument that is not a plain ndarray or a
    Python/NumPy scalar)."""
    parts = []
    for i, (p, v) in enumerate(zip(pf.params, values)):
        if i in out_idx:
            continue
        if isinstance(p, N.Buffer):
            if type(v) is not np.ndarray:
                return None
            parts.append((v.dtype, v.shape, v.strides, v.flags.writeable))
        elif isinstance(v, (bool, int, float, np.generic)):
            parts.append((type(v), v))
        else:
            return None
    return tuple(parts)


class HostPlans:
    """The plans of one kernel (see the module docstring)."""

    def __init__(self):
        self._plans: dict = {}

    def bind(self, pf: N.PrimFunc, out_idx: tuple, values: list, allocate) -> B.HostBinding:
        key = _key(pf, out_idx, values)
        plan = self._plans.get(key) if key is not None else None
        if plan is not None:
            b = B.HostBinding(pf, out_idx)
            for i, uid in plan.inputs:
                b.arrays[uid] = values[i]
            b.scalars.update(plan.scalars)
            for uid, shape, dtype in plan.outputs:
                b.arrays[uid] = allocate(shape, dtype)
            return b
        b = B.bind_host(pf, out_idx, values, allocate)
        if key is not None:
            self._record(pf, out_idx, values, key, b)
        return b

    def _record(self, pf, out_idx, values, key, b: B.HostBinding) -> None:
        if b.torch_out or b.int4:
            return
        inputs = []
        for i, (p, v) in enumerate(zip(pf.params, values)):
            if i in out_idx or not isinstance(p, N.Buffer):
                continue
            if b.arrays.get(p.uid) is not v:  # bound as a copy or a conversion: not planned
                return
            inputs.append((i, p.uid))
        if any(c.copy_back for c in b.converted):
            return
        outputs = tuple((pf.params[i].uid, b.arrays[pf.params[i].uid].shape, pf.params[i].dtype) for i in out_idx)
        if len(self._plans) >= MAX_PLANS:
            self._plans.pop(next(iter(self._plans)))
        self._plans[key] = _Plan(tuple(inputs), tuple(b.scalars.items()), outputs)
