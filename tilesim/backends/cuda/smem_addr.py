"""32-bit shared-memory addresses for ``ldmatrix`` and ``cp.async``: intrinsics for the GPU and the simulator.

Names the generated source uses (issue 14, the integer work of the ``mma.sync`` path; :mod:`.tile_mma`,
:mod:`.pipeline`):

* ``_sbase(arr)``: the shared-window byte address (``uint32``) of the first element of ``arr``, a 1-D shared
  array (or a slice of one). GPU: an LLVM ``addrspacecast`` of the array's generic data pointer to the shared
  address space and a ``ptrtoint`` to 32 bits — plain IR, so LLVM folds it to the shared symbol plus a constant
  and hoists it out of loops (``cvta.to.shared`` at most once per array).
* ``_ldsm4a(addr)`` / ``_ldsm4ta(addr)``: ``ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16`` at the 32-bit
  shared address ``addr`` (any integer; its low 32 bits are used): the same four ``uint32`` registers as
  :mod:`.mma_intrinsics`' ``_ldsm4``/``_ldsm4t``. A row address ``_sbase(a) + item * i`` is 32-bit integer
  arithmetic whose constant part ptxas folds into the instruction's immediate offset, instead of a 64-bit
  generic address (``IADD3 + IMAD.X + LEA + LEA.HI.X`` and a ``cvta`` per instruction before).
* ``_sreg(addr)``: ``addr`` (32 bits) through a register move LLVM cannot see into, so it does not fold the
  constant part of a shared symbol's address with later constant offsets (which would leave ptxas a register
  add per ``ldmatrix`` instead of an immediate offset).
* ``_cp_async16a(addr, src, si, nbytes)``: ``cp.async.cg.shared.global [addr], [&src[si]], 16, nbytes`` with the
  destination as a 32-bit shared address (otherwise as :mod:`.cp_async`'s ``_cp_async16``): on the GPU the same
  intrinsic as :mod:`.cp_async`'s ``_cp_async16u``.

Both builds have side effects and a memory clobber where the originals have them (the loads and copies are
never moved across a barrier). The caller keeps every address 16-byte aligned and inside the array (the
layouts of :mod:`.mma_layout` and :mod:`.pipeline` guarantee it).

Simulator build (:func:`sim_smem_addr_namespace`): ``_sbase`` returns a :class:`SharedAddr` (the array and a byte
offset; adding an integer moves the offset), and the instructions call the simulator's ``_ldsm4``/``_ldsm4t``/
``_cp_async16`` at the element the address names, so the generated source runs unchanged under numba's CUDA
simulator and a wrong byte offset shows up as wrong data or a ``ValueError``.
"""

from __future__ import annotations

import numpy as np

from ...optional import require
from .caps import numba_types

_NS = None


def smem_addr_namespace() -> dict:
    """The GPU intrinsics above, by the names the generated source uses (built once)."""
    global _NS
    if _NS is not None:
        return dict(_NS)
    ir = require("llvmlite.ir", "the CUDA backend")
    types = numba_types()
    intrinsic = require("numba.cuda.extending", "the CUDA backend").intrinsic
    i32, i64 = ir.IntType(32), ir.IntType(64)

    @intrinsic
    def sbase(typingctx, arr):
        if not isinstance(arr, types.Array):
            return None
        sig = types.uint32(arr)

        def codegen(context, builder, sig, args):
            ary = context.make_array(sig.args[0])(context, builder, args[0])
            p = ary.data
            ps = builder.addrspacecast(p, ir.PointerType(p.type.pointee, 3))
            return builder.trunc(builder.ptrtoint(ps, i64), i32)

        return sig, codegen

    def addr32(context, builder, val, ty):
        return builder.trunc(context.cast(builder, val, ty, types.int64), i32)

    def ldsm(trans: bool):
        op = "ldmatrix.sync.aligned.m8n8.x4" + (".trans" if trans else "") + ".shared.b16"

        @intrinsic
        def fn(typingctx, addr):
            if not isinstance(addr, types.Integer):
                return None
            sig = types.UniTuple(types.uint32, 4)(addr)

            def codegen(context, builder, sig, args):
                a = addr32(context, builder, args[0], sig.args[0])
                fty = ir.FunctionType(ir.LiteralStructType([i32] * 4), [i32])
                asm = ir.InlineAsm(fty, op + " {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,r,~{memory}", side_effect=True)
                res = builder.call(asm, [a])
                return context.make_tuple(builder, sig.return_type, [builder.extract_value(res, k) for k in range(4)])

            return sig, codegen

        return fn

    @intrinsic
    def opq(typingctx, addr):
        if not isinstance(addr, types.Integer):
            return None
        sig = types.uint32(addr)

        def codegen(context, builder, sig, args):
            a = addr32(context, builder, args[0], sig.args[0])
            return builder.call(ir.InlineAsm(ir.FunctionType(i32, [i32]), "mov.b32 $0, $1;", "=r,r"), [a])

        return sig, codegen

    # the copy with a 32-bit shared destination is the wgmma path's ``_cp_async16u`` (one intrinsic, two names:
    # their simulator builds differ — a SharedAddr here, a fake window address there)
    from .cp_async import cp_async_namespace

    _NS = {"_sbase": sbase, "_ldsm4a": ldsm(False), "_ldsm4ta": ldsm(True),
           "_cp_async16a": cp_async_namespace()["_cp_async16u"], "_sreg": opq}
    return dict(_NS)


class SharedAddr:
    """The simulator's 32-bit shared address: an array and a byte offset into it (``+ int`` moves the offset)."""

    __slots__ = ("arr", "off")

    def __init__(self, arr, off: int = 0):
        self.arr, self.off = arr, int(off)

    def __add__(self, o):
        return SharedAddr(self.arr, self.off + int(o))

    __radd__ = __add__

    def element(self) -> int:
        """The element index the address names; a byte offset inside an element raises ``ValueError``."""
        item = np.dtype(self.arr.dtype).itemsize
        if self.off % item:
            raise ValueError(f"shared address at byte {self.off} of a {self.arr.dtype} array is inside an element")
        return self.off // item


def sim_smem_addr_namespace(sim_ns: dict) -> dict:
    """The simulator build, on top of the simulator's ``_ldsm4``/``_ldsm4t``/``_cp_async16`` in ``sim_ns``."""
    ld, ldt, cp = sim_ns["_ldsm4"], sim_ns["_ldsm4t"], sim_ns["_cp_async16"]
    return {"_sbase": lambda arr: SharedAddr(arr), "_sreg": lambda a: a,
            "_ldsm4a": lambda a: ld(a.arr, a.element()),
            "_ldsm4ta": lambda a: ldt(a.arr, a.element()),
            "_cp_async16a": lambda a, src, si, nbytes: cp(a.arr, a.element(), src, si, nbytes)}
