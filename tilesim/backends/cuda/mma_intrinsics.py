"""numba-cuda intrinsics of the tensor-core gemm: inline PTX (llvmlite ``InlineAsm``), GPU only.

* ``_ldsm4(arr, i)`` / ``_ldsm4t(arr, i)``: ``ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16`` with this
  lane's row address ``&arr[i]`` (``arr`` a 1-D shared array of a 2-byte type, or of a 1-byte type — the raw
  fp8 bits, ``i`` then a byte index, non-transposed use only; the address must be 16-byte
  aligned — :mod:`.mma_layout` and the shared-memory layout guarantee it); returns the four ``uint32``
  registers (two b16 each). Marked as having side effects (it reads shared memory), so it is never
  moved across a barrier.
* ``_mma_f16(a0..a3, b0, b1, c0..c3)`` / ``_mma_bf16(...)``: ``mma.sync.aligned.m16n8k16.row.col.f32.
  {f16,bf16}.{f16,bf16}.f32``; returns the four fp32 accumulators ``(d0, d1, d2, d3)``.
* ``_mma_<a>_<b>(a0..a3, b0, b1, c0..c3)`` for ``a, b`` in ``e4m3, e5m2``: ``mma.sync.aligned.m16n8k32.row.col.
  f32.<a>.<b>.f32`` (four fp8 per register; sm_89 and later), the same registers and result.
* ``_pack_bf16x2(lo, hi)`` / ``_pack_f16x2(lo, hi)``: ``cvt.rn.{bf16x2,f16x2}.f32`` — two fp32 values rounded to
  nearest even and packed into one ``uint32``, ``lo`` in the low half (the b16 pair of an A fragment register
  built from register values: a gemm whose operand A is a register fragment, :mod:`.tile_mma`).

Fragment layouts are those of the PTX ISA (see :mod:`.mma_layout`). The simulator has no warp-level
matrix instructions: its build of the same names is :func:`.mma_sim.sim_mma_namespace`.
"""

from __future__ import annotations

from ...optional import require
from .caps import numba_types

_NS = None


def mma_namespace() -> dict:
    """The intrinsics above, by the names the generated source uses (built once)."""
    global _NS
    if _NS is not None:
        return dict(_NS)
    ir = require("llvmlite.ir", "the CUDA backend")
    types = numba_types()
    intrinsic = require("numba.cuda.extending", "the CUDA backend").intrinsic
    i32, i64, f32 = ir.IntType(32), ir.IntType(64), ir.FloatType()

    def _ldsm(trans: bool):
        op = "ldmatrix.sync.aligned.m8n8.x4" + (".trans" if trans else "") + ".shared.b16"
        text = ("{ .reg .u64 %sa; cvta.to.shared.u64 %sa, $4; " + op + " {$0, $1, $2, $3}, [%sa]; }")

        @intrinsic
        def ldsm(typingctx, arr, idx):
            if not isinstance(arr, types.Array) or not isinstance(idx, types.Integer):
                return None
            if getattr(arr.dtype, "bitwidth", 0) not in (8, 16):
                return None
            sig = types.UniTuple(types.uint32, 4)(arr, idx)

            def codegen(context, builder, sig, args):
                ary = context.make_array(sig.args[0])(context, builder, args[0])
                i = context.cast(builder, args[1], sig.args[1], types.intp)
                ptr = builder.gep(ary.data, [i], inbounds=True)
                fty = ir.FunctionType(ir.LiteralStructType([i32] * 4), [i64])
                asm = ir.InlineAsm(fty, text, "=r,=r,=r,=r,l,~{memory}", side_effect=True)
                res = builder.call(asm, [builder.ptrtoint(ptr, i64)])
                vals = [builder.extract_value(res, k) for k in range(4)]
                return context.make_tuple(builder, sig.return_type, vals)

            return sig, codegen

        return ldsm

    def _mma(kind: str, kind_b: str | None = None, shape: str = "m16n8k16"):
        text = (f"mma.sync.aligned.{shape}.row.col.f32.{kind}.{kind_b or kind}.f32 "
                "{$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};")

        @intrinsic
        def mma(typingctx, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
            ins = (a0, a1, a2, a3, b0, b1)
            if not all(isinstance(x, types.Integer) for x in ins):
                return None
            if not all(isinstance(x, types.Float) for x in (c0, c1, c2, c3)):
                return None
            sig = types.UniTuple(types.float32, 4)(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3)

            def codegen(context, builder, sig, args):
                regs = [context.cast(builder, v, t, types.uint32) for v, t in zip(args[:6], sig.args[:6])]
                accs = [context.cast(builder, v, t, types.float32) for v, t in zip(args[6:], sig.args[6:])]
                fty = ir.FunctionType(ir.LiteralStructType([f32] * 4), [i32] * 6 + [f32] * 4)
                asm = ir.InlineAsm(fty, text, "=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f")
                res = builder.call(asm, regs + accs)
                vals = [builder.extract_value(res, k) for k in range(4)]
                return context.make_tuple(builder, sig.return_type, vals)

            return sig, codegen

        return mma

    def _pack(kind: str):
        text = f"cvt.rn.{kind}x2.f32 $0, $2, $1;"  # PTX: the first source goes to the upper half

        @intrinsic
        def pack(typingctx, lo, hi):
            if not (isinstance(lo, types.Float) and isinstance(hi, types.Float)):
                return None
            sig = types.uint32(lo, hi)

            def codegen(context, builder, sig, args):
                vals = [context.cast(builder, v, t, types.float32) for v, t in zip(args, sig.args)]
                asm = ir.InlineAsm(ir.FunctionType(i32, [f32, f32]), text, "=r,f,f")
                return builder.call(asm, vals)

            return sig, codegen

        return pack

    _NS = {"_pack_bf16x2": _pack("bf16"), "_pack_f16x2": _pack("f16"),
           "_ldsm4": _ldsm(False), "_ldsm4t": _ldsm(True), "_mma_f16": _mma("f16"), "_mma_bf16": _mma("bf16")}
    for a in ("e4m3", "e5m2"):
        for b in ("e4m3", "e5m2"):
            _NS[f"_mma_{a}_{b}"] = _mma(a, b, "m16n8k32")
    return dict(_NS)
