"""``T.make_tensor(ptr, shape, dtype)`` in the interpreter: a global buffer viewing the memory at an address.

Contract
--------
* ``PtrTensor(buffer, addr)``: ``addr`` is evaluated (an ``int64`` device address: on this machine a host
  address, such as torch's ``tensor.data_ptr()`` of a CPU tensor); ``buffer``'s storage becomes a writable NumPy
  array over the ``prod(shape) * itemsize`` bytes there, row-major. Loads, stores and tile operations then
  read and write that memory in place (the tensor it belongs to sees the writes).
* **Trust.** Nothing on this machine records which addresses are valid or how large the memory behind an
  address is: the bounds are only those of ``shape``, as on a GPU. An address that is not a live allocation
  of at least that size (a freed tensor, a device pointer from another process, a wrong table entry) reads or
  writes foreign memory and may crash the process. Address 0 and negative addresses are refused
  (``KernelRuntimeError``). Alignment: the address must be a multiple of the element size, as CUDA requires.
* A launch containing ``PtrTensor`` runs its blocks one at a time (``chunks.plan``): the address may differ
  per block (a pointer table indexed by the block), and a chunk's global storage is shared by its blocks.
  Under a per-thread launch the address must be the same for every thread of the block (else
  ``KernelRuntimeError``).
"""

from __future__ import annotations

import ctypes

import numpy as np

from ... import dtypes as dt
from ...errors import KernelRuntimeError
from ...ir import nodes as N
from .exprs import ev
from .state import Ctx
from .tables import STMT_RULES

__all__ = ["view_address"]


def view_address(addr: int, shape: tuple, dtype: str) -> np.ndarray:
    """A writable array of ``shape`` and ``dtype`` over the memory at host address ``addr`` (trusted)."""
    np_dt = dt.np_dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    raw = (ctypes.c_char * (n * np_dt.itemsize)).from_address(addr)
    return np.frombuffer(raw, dtype=np_dt, count=n).reshape(shape)


@STMT_RULES.register(N.PtrTensor)
def _ptr_tensor(s: N.PtrTensor, ctx: Ctx):
    b = s.buffer
    v = np.asarray(ev(s.addr, ctx))
    if v.size == 0:
        return
    addrs = np.unique(v.astype(np.int64).reshape(-1))
    if len(addrs) != 1:
        raise KernelRuntimeError(f"T.make_tensor({b.name}): the address differs between the threads of a block "
                                 f"({len(addrs)} values)", s.loc,
                                 hint="index the pointer table with block indices only")
    addr = int(addrs[0])
    itemsize = dt.np_dtype(b.dtype).itemsize
    if addr <= 0:
        raise KernelRuntimeError(f"T.make_tensor({b.name}): address {addr} is not a valid pointer", s.loc,
                                 hint="the pointer table holds tensor.data_ptr() values of live tensors")
    if addr % itemsize:
        raise KernelRuntimeError(f"T.make_tensor({b.name}): address {addr:#x} is not aligned to its "
                                 f"{b.dtype} elements ({itemsize} bytes)", s.loc)
    shape = tuple(int(ev(d, ctx)) if not isinstance(d, int) else d for d in b.shape)
    ctx.storage[b.uid] = view_address(addr, shape, b.dtype)
