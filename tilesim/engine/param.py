"""``tilelang.engine.param.KernelParam``: a kernel parameter as user callbacks see it.

Contract
--------
``KernelParam.of(p)`` describes one parameter of a kernel's ``PrimFunc`` (a tensor ``Buffer`` or a scalar
``Var``) the way TileLang hands parameters to user code — the autotuner's ``supply_prog(params)`` receives a
list of these:

* ``name``; ``dtype``: a ``T.dtype`` (``.as_torch()``, ``.bits``, ...); ``shape``: a list of ``int`` for static
  dimensions, the symbolic dimension itself (a ``T.dynamic`` variable or expression) otherwise; ``[]`` for a
  scalar;
* ``is_scalar()``, ``is_unsigned()``, ``is_float8()``, ``is_float4()``, ``is_boolean()``, ``torch_dtype()``
  (``dtype.as_torch()``; needs torch), ``tilelang_dtype()``.

It is a description: changing it changes nothing in the kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import nodes as N
from ..language.types import dtype as _dtype

__all__ = ["KernelParam"]


@dataclass(frozen=True)
class KernelParam:
    name: str
    dtype: _dtype
    shape: list = field(default_factory=list)

    @classmethod
    def of(cls, p) -> KernelParam:
        if isinstance(p, N.Buffer):
            shape = [d.value if isinstance(d, N.Const) else d for d in p.shape]
            return cls(p.name, _dtype(p.dtype), shape)
        return cls(p.name, _dtype(p.dtype), [])

    def is_scalar(self) -> bool:
        return len(self.shape) == 0

    def is_unsigned(self) -> bool:
        return str(self.dtype).startswith("uint")

    def is_float8(self) -> bool:
        return str(self.dtype).startswith("float8")

    def is_float4(self) -> bool:
        return str(self.dtype).startswith("float4")

    def is_boolean(self) -> bool:
        return str(self.dtype) == "bool"

    def torch_dtype(self):
        return self.dtype.as_torch()

    def tilelang_dtype(self) -> _dtype:
        return self.dtype
