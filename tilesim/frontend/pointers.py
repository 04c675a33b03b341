"""Builder of ``T.make_tensor(ptr, shape, dtype)``: a global tensor at a device address (``T.ptr`` tables).

Contract
--------
``T.make_tensor(ptr, shape, dtype="float32", strides=None)`` inside ``with T.Kernel(...)`` returns a new
global buffer of ``shape`` and ``dtype`` (row-major) bound to the memory at ``ptr`` where the statement runs:
``ptr`` is a 64-bit integer expression, typically an element of a ``T.Tensor([n], T.ptr)`` parameter holding
``tensor.data_ptr()`` values (``T.ptr`` is int64). It emits ``N.PtrTensor``; the interpreter binds the address
(``tilesim/backends/interp/pointers.py``, which states the trust: bounds come from ``shape`` only), the CUDA
backend refuses it and the compiled CPU target leaves such kernels to the interpreter.

Errors (``KernelTypeError``/``KernelSyntaxError`` at the call): ``strides`` (not supported), a pointer that is
not a 64-bit integer (an int32 index, a float), a call outside a kernel launch.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import KernelSyntaxError, KernelTypeError
from ..ir import nodes as N
from . import exprs as X
from .builders import builder
from .prims import _dim

__all__: list = []


@builder("make_tensor")
def _b_make_tensor(tr, loc, ptr, shape, dtype="float32", strides=None):
    if not tr.in_launch():
        raise KernelSyntaxError("T.make_tensor outside `with T.Kernel(...)`", loc,
                                hint="make the tensor inside the launch, where its address is read")
    if strides is not None:
        raise KernelTypeError("T.make_tensor with strides is not supported by tilesim (row-major only)", loc,
                              hint="omit strides for a contiguous tensor")
    addr = X.to_expr(ptr, loc, like="int64")
    if isinstance(addr, N.Const) and isinstance(addr.value, int) and not isinstance(addr.value, bool):
        addr = N.Const(addr.value, "int64", loc)
    if addr.dtype not in ("int64", "uint64"):
        raise KernelTypeError(f"T.make_tensor takes a 64-bit pointer, got a {addr.dtype} value", loc,
                              hint="read it from a T.Tensor([n], T.ptr) table (tensor.data_ptr() values)")
    shp = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    buf = N.Buffer(tr.assign_name or "ptr_tensor", tuple(_dim(s, loc) for s in shp), dt.canon(dtype), "global",
                   loc=loc)
    tr.emit(N.PtrTensor(buf, addr, loc))
    return buf
