"""Dtypes, tensor annotations and shape symbols: ``T.float16``, ``T.Tensor``, ``T.dynamic``, ``T.const``."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass

import numpy as np

from .. import dtypes as _dt
from ..errors import KernelTypeError, Loc
from ..ir import nodes as N
from ..optional import require
from ._marker import marker


class dtype(str):  # noqa: N801 - TileLang's name (``T.dtype``)
    """A dtype: ``T.float16`` is one, ``T.dtype("float16")`` / ``T.dtype(torch.float16)`` make one.

    A ``str`` subclass holding the canonical name, so ``T.float16 == "float16"`` and every place that takes a
    dtype string takes it. ``T.float32(x)`` inside a kernel casts ``x``; outside, it is a NumPy scalar.
    TileLang's methods: ``bits`` (TVM's: ``bool`` is 1), ``bytes``/``itemsize`` (storage bytes, at least
    1), ``as_torch()``, ``lanes``.
    """

    def __new__(cls, value="float32"):
        if isinstance(value, dtype):
            return value
        return str.__new__(cls, _dt.canon(value))

    @property
    def tilesim_dtype(self) -> str:
        return str(self)

    @property
    def bits(self) -> int:
        return 1 if str(self) == "bool" else _dt.bits(str(self))

    @property
    def bytes(self) -> int:
        return max(1, (_dt.bits(str(self)) + 7) // 8)

    itemsize = bytes

    @property
    def lanes(self) -> int:
        return 1

    def as_torch(self):
        """The torch dtype of tensors of this dtype (``float4_e2m1fn``: ``float4_e2m1fn_x2`` storage, or int8)."""
        torch = require("torch", f"T.dtype({str(self)!r}).as_torch()")
        name = str(self)
        if name == "float4_e2m1fn":
            return getattr(torch, "float4_e2m1fn_x2", torch.int8)
        if name == "int4":
            return torch.int8  # packed two per byte
        t = getattr(torch, name, None)
        if not isinstance(t, torch.dtype):
            raise KernelTypeError(f"torch {torch.__version__} has no dtype for {name}",
                                  hint="upgrade torch (fp8 dtypes need torch >= 2.1)")
        return t

    def __call__(self, value=0):
        # Outside a kernel: a NumPy scalar of this dtype. Inside, the frontend turns it into a cast.
        return np.asarray(value).astype(_dt.np_dtype(str(self)))[()]

    def __repr__(self):
        return f"dtype({str(self)!r})"


#: The former name of :class:`dtype`.
DType = dtype


def _program_loc() -> Loc | None:
    """The position in the user's program (the innermost frame outside tilesim) of the current call, so an
    error raised while Python evaluates an annotation (``T.Tensor(shape, T.ptr)``) points at it."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_PACKAGE):
        f = f.f_back
    if f is None:
        return None
    try:
        line, _, col, end = list(f.f_code.co_positions())[f.f_lasti // 2]
    except (IndexError, ValueError):
        line, col, end = f.f_lineno, 0, None
    return Loc(f.f_code.co_filename, line or f.f_lineno, col or 0, end)


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class _UnsupportedDType(dtype):
    """A TileLang dtype name tilesim cannot compute with: using it raises ``KernelTypeError`` naming it."""

    def __new__(cls, name: str, reason: str):
        obj = str.__new__(cls, name)
        obj.reason = reason
        return obj

    @property
    def tilesim_dtype(self) -> str:
        raise KernelTypeError(f"T.{str(self)} is not supported by tilesim: {self.reason}", _program_loc(),
                              hint="see docs/language.md for the dtypes tilesim computes with")

    bits = bytes = itemsize = tilesim_dtype

    def as_torch(self):
        return self.tilesim_dtype


def _mk(name: str) -> dtype:
    return dtype(_dt.canon(name))


float16 = half = _mk("float16")
float32 = float = _mk("float32")  # noqa: A001 - TileLang spells it T.float
float64 = double = _mk("float64")
bfloat16 = _mk("bfloat16")
float8_e4m3fn = float8_e4m3 = _mk("float8_e4m3fn")
float8_e5m2 = _mk("float8_e5m2")
float4_e2m1fn = _mk("float4_e2m1fn")
int8, int16, int32, int64 = (_mk(n) for n in ("int8", "int16", "int32", "int64"))
uint8, uint16, uint32, uint64 = (_mk(n) for n in ("uint8", "uint16", "uint32", "uint64"))
int = int32  # noqa: A001 - TileLang's T.int / T.uint name the 32-bit types
uint = uint32
bool = _mk("bool")  # noqa: A001
boolean = bool
int4 = _mk("int4")  # tensors are passed packed two per byte (torch.int8 of half the last dim)
#: TF32 is float32 storage whose tensor-core products use a 10-bit mantissa. TileLang runs every float32
#: T.gemm as TF32 on tensor cores, so a tfloat32 operand means what a float32 one does: float32 values,
#: rounded to TF32 inside gemms under InterpOptions(tf32=True) (exact float32 products otherwise).
class _StorageAlias(dtype):
    """A TileLang dtype name stored as another dtype (``T.tfloat32``: float32): the name compares equal to
    itself (``T.tfloat32 == "tfloat32"``) and computes as ``storage``."""

    def __new__(cls, name: str, storage: str):
        obj = str.__new__(cls, name)
        obj.storage = storage
        return obj

    @property
    def tilesim_dtype(self) -> str:
        return self.storage

    @property
    def bits(self) -> int:
        return _dt.bits(self.storage)

    @property
    def bytes(self) -> int:
        return max(1, (_dt.bits(self.storage) + 7) // 8)

    itemsize = bytes

    def as_torch(self):
        return dtype(self.storage).as_torch()


tfloat32 = _StorageAlias("tfloat32", "float32")
#: a device address (TileLang's ``handle``): 64-bit, held as int64 (torch's ``tensor.data_ptr()`` values in an
#: int64 tensor); ``T.make_tensor(ptr, shape, dtype)`` views the memory there (docs/language.md)
ptr = _StorageAlias("ptr", "int64")
#: the fp4 operand layout of Blackwell block-scaled tcgen05 gemms in shared memory (one e2m1 value per byte; a
#: TMA load unpacks a packed float4_e2m1fn tile into it): at tile level its values are float4_e2m1fn's
float4_e2m1_unpacked = _StorageAlias("float4_e2m1_unpacked", "float4_e2m1fn")


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

    #: the tracer calls it at trace time even on a kernel value: ``T.Tensor((n), dtype)`` is ``T.Tensor(n, ...)``
    __tilesim_trace_time__ = True

    def __new__(cls, shape, dtype="float32", data=None, strides=None, scope="global", **_ignored):
        try:
            return TensorSpec(_shape_tuple(shape), _dt.canon(dtype), tuple(strides) if strides else None)
        except KernelTypeError as e:  # evaluated by Python in a signature: point at the caller's line
            raise e.with_loc(_caller_loc()) from None


def _caller_loc():
    """The source position of the first frame outside tilesim (a ``T.Tensor`` in a signature)."""
    f = sys._getframe(1)
    while f is not None and f.f_globals.get("__name__", "").startswith("tilesim"):
        f = f.f_back
    return Loc(f.f_code.co_filename, f.f_lineno) if f is not None else None


Buffer = Tensor
FragmentBuffer = Tensor
SharedBuffer = Tensor


def StridedTensor(shape, strides, dtype="float32"):  # noqa: N802 - TileLang's name
    """``T.StridedTensor(shape, strides, dtype)``: a global tensor with explicit element strides."""
    return TensorSpec(_shape_tuple(shape), _dt.canon(dtype), tuple(strides))


def symbol_names(names, what: str) -> list:
    """The identifiers in ``names`` (``"m"``, ``"m, n"`` or ``"m n"``); anything else → ``KernelTypeError``."""
    if not isinstance(names, str):
        raise KernelTypeError(f"{what} takes symbol names as a string, got {type(names).__name__} {names!r:.40}",
                              hint=f'e.g. M, N = {what}("M, N")')
    out = [n for n in re.split(r"[\s,]+", names.strip()) if n]
    bad = [n for n in out if not n.isidentifier()]
    if bad or not out:
        raise KernelTypeError(f"{what}: {bad[0]!r} is not a valid symbol name" if bad else f"{what}: no symbol name given",
                              hint=f'names are Python identifiers, e.g. {what}("M, N")')
    return out


def dynamic(name: str, dtype: str = "int32"):
    """``T.dynamic("m")``: a symbolic dimension bound from the actual tensors' shapes at call time.

    Several names (``"m, n"`` or ``"m n"``) give a tuple of symbols, as in TileLang. A name that is not
    a string of identifiers (``T.dynamic(3)``) → ``KernelTypeError``."""
    names = symbol_names(name, "T.dynamic")
    if len(names) > 1 or "," in name:
        return tuple(N.Var(n, _dt.canon(dtype), kind="dynamic") for n in names)
    return N.Var(name, _dt.canon(dtype), kind="dynamic")


symbolic = dynamic
dyn = dynamic


@marker("const")
def const(names: str, dtype: str = "int32"):
    """``M, N = T.const("M, N")`` (eager style): shape symbols specialised per call's shapes."""


@marker("empty")
def empty(shape, dtype="float32"):
    """``C = T.empty((M, N), dtype)`` (eager style): an output the runtime allocates, uninitialised."""
