"""Dtypes, tensor annotations and shape symbols: ``T.float16``, ``T.Tensor``, ``T.dynamic``, ``T.const``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import dtypes as _dt
from ..errors import KernelTypeError
from ..ir import nodes as N
from ._marker import marker


class DType(str):
    """A dtype name usable as ``T.float16``; ``T.float32(x)`` inside a kernel casts ``x``."""

    @property
    def tilesim_dtype(self) -> str:
        return str(self)

    def __call__(self, value=0):
        # Outside a kernel: a NumPy scalar of this dtype. Inside, the frontend turns it into a cast.
        return np.asarray(value).astype(_dt.np_dtype(str(self)))[()]


def _mk(name: str) -> DType:
    return DType(_dt.canon(name))


float16 = half = _mk("float16")
float32 = float = _mk("float32")  # noqa: A001 - TileLang spells it T.float
float64 = double = _mk("float64")
bfloat16 = _mk("bfloat16")
float8_e4m3fn = float8_e4m3 = _mk("float8_e4m3fn")
float8_e5m2 = _mk("float8_e5m2")
float4_e2m1fn = _mk("float4_e2m1fn")
int8, int16, int32, int64 = (_mk(n) for n in ("int8", "int16", "int32", "int64"))
uint8, uint16, uint32, uint64 = (_mk(n) for n in ("uint8", "uint16", "uint32", "uint64"))
bool = _mk("bool")  # noqa: A001
boolean = bool


@dataclass(frozen=True)
class TensorSpec:
    """A parameter annotation ``T.Tensor(shape, dtype)``; ``strides`` only for ``T.StridedTensor``."""

    shape: tuple
    dtype: str
    strides: tuple | None = None
    scope: str = "global"


def _shape_tuple(shape) -> tuple:
    if isinstance(shape, (list, tuple)):
        return tuple(shape)
    return (shape,)


class _TensorMeta(type):
    def __getitem__(cls, item):
        if not isinstance(item, tuple) or len(item) != 2:
            raise KernelTypeError("T.Tensor[...] takes (shape, dtype)",
                                  hint="write T.Tensor[(M, K), 'float16'] or T.Tensor((M, K), 'float16')")
        return cls(item[0], item[1])


class Tensor(metaclass=_TensorMeta):
    """``T.Tensor(shape, dtype)`` / ``T.Tensor[shape, dtype]``: a global tensor parameter.

    Args:
        shape: tuple of ints, ``T.dynamic`` symbols or ``T.const`` symbols.
        dtype: a dtype name or ``T.*`` dtype.

    Example::

        @T.prim_func
        def main(A: T.Tensor((M, K), "float16"), C: T.Tensor((M, N), "float32")): ...
    """

    def __new__(cls, shape, dtype="float32", data=None, strides=None, scope="global", **_ignored):
        return TensorSpec(_shape_tuple(shape), _dt.canon(dtype), tuple(strides) if strides else None)


Buffer = Tensor
FragmentBuffer = Tensor
SharedBuffer = Tensor


def StridedTensor(shape, strides, dtype="float32"):  # noqa: N802 - TileLang's name
    """``T.StridedTensor(shape, strides, dtype)``: a global tensor with explicit element strides."""
    return TensorSpec(_shape_tuple(shape), _dt.canon(dtype), tuple(strides))


def dynamic(name: str, dtype: str = "int32") -> N.Var:
    """``T.dynamic("m")``: a symbolic dimension bound from the actual tensors' shapes at call time."""
    return N.Var(str(name), _dt.canon(dtype), kind="dynamic")


symbolic = dynamic
dyn = dynamic


@marker("const")
def const(names: str, dtype: str = "int32"):
    """``M, N = T.const("M, N")`` (eager style): shape symbols specialised per call's shapes."""


@marker("empty")
def empty(shape, dtype="float32"):
    """``C = T.empty((M, N), dtype)`` (eager style): an output the runtime allocates, uninitialised."""
