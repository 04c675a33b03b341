"""numba-cuda intrinsics of Hopper's warpgroup MMA (``wgmma``, sm_90a): inline PTX through llvmlite ``InlineAsm``.

Names (the generated source and ``benchmarks/gpu_wgmma_probe.py`` use them):

* ``_wg_fence()`` / ``_wg_commit()`` / ``_wg_wait<N>()`` (``N`` in ``0..MAX_WAIT``): ``wgmma.fence.sync.aligned``,
  ``wgmma.commit_group.sync.aligned``, ``wgmma.wait_group.sync.aligned N``.
* ``_fence_async_smem()``: ``fence.proxy.async.shared::cta`` — shared memory written by ordinary stores (or
  ``cp.async``) becomes visible to the async proxy that ``wgmma`` reads it through; each writing thread issues
  it before the barrier that precedes the ``wgmma``.
* ``_smem_u32(arr, i)``: the 32-bit shared-window address of ``&arr[i]`` (``cvta.to.shared``), as ``uint32``.
* ``_wgmma(kind, N, trans_a, trans_b)`` builds ``wgmma.mma_async.sync.aligned.m64n<N>k<16|32>.f32.<a>.<b>``
  with both operands from shared-memory descriptors (``uint64``), ``scale-d`` = 1 (``D += A @ B``), unit
  scales; called as ``f(desc_a, desc_b, acc, o0)`` with ``acc`` a ``float32`` local array holding this
  thread's accumulator registers at slots ``o0 + reg_slot(i, N)`` (:func:`reg_slot`: the
  :func:`~.mma_layout.c_slots` order), updated in place. ``kind`` is ``"f16"``,
  ``"bf16"`` (k16; ``trans_*`` select M-/N-major operands) or ``"e4m3"``/``"e5m2"`` pairs ``"e4m3.e4m3"``
  (k32, K-major only: the PTX ISA has no transpose for 8-bit types). Named in the namespace
  ``_wgmma_<a>_<b>_n<N>_<ta><tb>`` (:func:`wgmma_name`), built on first use (:func:`wgmma_namespace`).

* ``_wgmma_ra_<t>_n<N>_<tb>`` (:func:`wgmma_ra_name`; ``t`` ``f16``/``bf16``): the register-A form
  ``wgmma.mma_async.sync.aligned.m64n<N>k16.f32.<t>.<t> d, {a0, a1, a2, a3}, desc_b, scale-d, 1, 1, tb`` — A's
  fragment from four ``uint32`` registers (two 16-bit values each, :mod:`.wgmma_reg_a`), no transpose of A;
  called as ``f(a0, a1, a2, a3, desc_b, acc, o0)``.
* ``_wg_fence_regs(t)``: ``wgmma.fence.sync.aligned`` whose asm takes and returns every ``uint32`` of the tuple
  ``t`` (tied operands): writes of those registers stay before it, their readers after it.

Descriptors are built by the caller (:func:`.wgmma_layout.descriptor`); this module only issues instructions.
The accumulator slots are loaded, bound to the instruction's registers with tied constraints (``+f``) and stored
back; with constant slot indices NVVM keeps the local array in registers (checked with ``ptxas -v``).
"""

from __future__ import annotations

import os

from ...optional import require
from .caps import numba_types
from .cp_async import bare_asm

#: deepest ``wgmma.wait_group`` immediate generated
MAX_WAIT = 4

#: N values of ``m64nNk*`` the lowering and the probe use (the ISA allows every multiple of 8 up to 256)
N_VALUES = (8, 16, 32, 64, 96, 128, 192, 256)

_NS: dict | None = None


def wgmma_name(a: str, b: str, n: int, trans_a: bool = False, trans_b: bool = False) -> str:
    """Namespace name of the ``wgmma`` intrinsic for PTX operand types ``a``, ``b`` (``bf16``, ``f16``, ``e4m3``,
    ``e5m2``), width ``n`` and operand majorness (``trans_a``: A M-major; ``trans_b``: B N-major)."""
    return f"_wgmma_{a}_{b}_n{n}_{int(trans_a)}{int(trans_b)}"


def wgmma_ra_name(a: str, n: int, trans_b: bool = False) -> str:
    """Namespace name of the register-A ``wgmma`` for 16-bit type ``a`` (``bf16``, ``f16``), width ``n``, B N-major
    when ``trans_b``."""
    return f"_wgmma_ra_{a}_n{n}_{int(trans_b)}"


def parse_ra(name: str):
    """(a, n, trans_b) of a ``_wgmma_ra_*`` name."""
    _, _, _, a, n, tb = name.split("_")
    return a, int(n[1:]), tb == "1"


def reg_slot(i: int, n: int) -> int:
    """Offset, from the call's first slot ``o0``, of the local-array slot that holds accumulator register ``i``
    of an ``m64n<n>`` instruction: register ``4*q + e`` is column pair ``q``, row half ``e // 2`` — the slots
    :func:`~.mma_layout.c_slots` gives an m16 tile ``x`` n8 tile ``q`` with ``n // 4`` slots per row
    (``o0 = 2*mi*(n // 4)`` for the ``mi``-th slab)."""
    q, e = divmod(i, 4)
    return (e // 2) * (n // 4) + 2 * q + e % 2


def _parse(name: str):
    """(a, b, n, trans_a, trans_b, imm) of a ``_wgmma_*`` name (``_imm``: scale-d written as an immediate, the
    probe's variant)."""
    parts = name.split("_")
    _, _, a, b, n, t = parts[:6]
    return a, b, int(n[1:]), t[0] == "1", t[1] == "1", parts[6:] == ["imm"]



def _asm_on_accumulator(context, builder, sig, args, acc_arg, operands, operand_types, text, cons, offsets):
    """The codegen both ``wgmma`` intrinsics share: load the accumulator's registers (``acc_arg``: the float32 array,
    then its base offset) at ``offsets``, run the inline asm ``text`` on ``operands`` + them (tied in and out), and
    store the results back."""
    ir = require("llvmlite.ir", "the CUDA backend")
    types = numba_types()
    f32 = ir.FloatType()
    ary = context.make_array(sig.args[acc_arg])(context, builder, args[acc_arg])
    base = context.cast(builder, args[acc_arg + 1], sig.args[acc_arg + 1], types.intp)
    ptrs = [builder.gep(ary.data, [builder.add(base, ir.Constant(base.type, off))], inbounds=True) for off in offsets]
    accs = [builder.load(p) for p in ptrs]
    fty = ir.FunctionType(ir.LiteralStructType([f32] * len(ptrs)), list(operand_types) + [f32] * len(ptrs))
    res = builder.call(ir.InlineAsm(fty, text, cons + ",~{memory}", side_effect=True), list(operands) + accs)
    for i, p in enumerate(ptrs):
        builder.store(builder.extract_value(res, i), p)
    return context.get_dummy_value()

def _make_wgmma(a: str, b: str, n: int, ta: bool, tb: bool, imm: bool = False):
    ir = require("llvmlite.ir", "the CUDA backend")
    types = numba_types()
    intrinsic = require("numba.cuda.extending", "the CUDA backend").intrinsic
    fp8 = a in ("e4m3", "e5m2")
    if fp8 != (b in ("e4m3", "e5m2")) or (not fp8 and a != b) or a not in ("f16", "bf16", "e4m3", "e5m2"):
        raise ValueError(f"wgmma operand types {a} x {b}")
    if fp8 and (ta or tb):
        raise ValueError("wgmma with 8-bit operands reads K-major operands only (no transpose)")
    if n % 8 or not 8 <= n <= 256:
        raise ValueError(f"wgmma N = {n} (a multiple of 8 up to 256)")
    nr = n // 2
    k = 32 if fp8 else 16
    regs = ", ".join(f"${i}" for i in range(nr))
    # scale-d: a predicate set from a register (as CUTLASS writes it) or, with TILESIM_WGMMA_SCALE_D=imm (or a
    # ``_imm`` name, the probe's variant), the immediate 1
    sd = "1" if imm or os.environ.get("TILESIM_WGMMA_SCALE_D", "") == "imm" else "p"
    tail = f"{sd}, 1, 1;" if fp8 else f"{sd}, 1, 1, {int(ta)}, {int(tb)};"
    text = ("{ .reg .pred p; setp.ne.b32 p, $" + str(nr + 2) + ", 0; "
            f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{a}.{b} {{{regs}}}, ${nr}, ${nr + 1}, {tail} }}")
    cons = ",".join(["=f"] * nr + ["l", "l", "r"] + [str(i) for i in range(nr)])
    i32, i64 = ir.IntType(32), ir.IntType(64)
    offsets = [reg_slot(i, n) for i in range(nr)]

    @intrinsic
    def wgmma(typingctx, da, db, acc, o0):
        if not (isinstance(da, types.Integer) and isinstance(db, types.Integer) and isinstance(o0, types.Integer)):
            return None
        if not (isinstance(acc, types.Array) and acc.dtype == types.float32):
            return None
        sig = types.void(da, db, acc, o0)

        def codegen(context, builder, sig, args):
            ops = [context.cast(builder, args[k], sig.args[k], types.uint64) for k in range(2)]
            return _asm_on_accumulator(context, builder, sig, args, 2, ops + [ir.Constant(i32, 1)],
                                       [i64, i64, i32], text, cons, offsets)

        return sig, codegen

    return wgmma


def _make_wgmma_ra(a: str, n: int, tb: bool):
    ir = require("llvmlite.ir", "the CUDA backend")
    types = numba_types()
    intrinsic = require("numba.cuda.extending", "the CUDA backend").intrinsic
    if a not in ("f16", "bf16"):
        raise ValueError(f"register-A wgmma of {a} (16-bit types only)")
    if n % 8 or not 8 <= n <= 256:
        raise ValueError(f"wgmma N = {n} (a multiple of 8 up to 256)")
    nr = n // 2
    regs = ", ".join(f"${i}" for i in range(nr))
    text = ("{ .reg .pred p; setp.ne.b32 p, $" + str(nr + 5) + ", 0; "
            f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{a}.{a} {{{regs}}}, "
            f"{{${nr}, ${nr + 1}, ${nr + 2}, ${nr + 3}}}, ${nr + 4}, p, 1, 1, {int(tb)}; }}")
    cons = ",".join(["=f"] * nr + ["r"] * 4 + ["l", "r"] + [str(i) for i in range(nr)])
    i32, i64 = ir.IntType(32), ir.IntType(64)
    offsets = [reg_slot(i, n) for i in range(nr)]

    @intrinsic
    def wgmma_ra(typingctx, a0, a1, a2, a3, db, acc, o0):
        if not all(isinstance(x, types.Integer) for x in (a0, a1, a2, a3, db, o0)):
            return None
        if not (isinstance(acc, types.Array) and acc.dtype == types.float32):
            return None
        sig = types.void(a0, a1, a2, a3, db, acc, o0)

        def codegen(context, builder, sig, args):
            ar = [context.cast(builder, args[k], sig.args[k], types.uint32) for k in range(4)]
            d_b = context.cast(builder, args[4], sig.args[4], types.uint64)
            return _asm_on_accumulator(context, builder, sig, args, 5, ar + [d_b, ir.Constant(i32, 1)],
                                       [i32] * 4 + [i64, i32], text, cons, offsets)

        return sig, codegen

    return wgmma_ra


def _fence_regs():
    ir = require("llvmlite.ir", "the CUDA backend")
    types = numba_types()
    intrinsic = require("numba.cuda.extending", "the CUDA backend").intrinsic
    i32 = ir.IntType(32)

    @intrinsic
    def fence_regs(typingctx, t):
        if not (isinstance(t, types.UniTuple) and t.dtype == types.uint32):
            return None
        n = t.count
        sig = t(t)

        def codegen(context, builder, sig, args):
            vals = [builder.extract_value(args[0], k) for k in range(n)]
            cons = ",".join(["=r"] * n + [str(k) for k in range(n)]) + ",~{memory}"
            fty = ir.FunctionType(ir.LiteralStructType([i32] * n), [i32] * n)
            res = builder.call(ir.InlineAsm(fty, "wgmma.fence.sync.aligned;", cons, side_effect=True), vals)
            out = [builder.extract_value(res, k) for k in range(n)]
            return context.make_tuple(builder, sig.return_type, out)

        return sig, codegen

    return fence_regs


def _smem_u32():
    ir = require("llvmlite.ir", "the CUDA backend")
    types = numba_types()
    intrinsic = require("numba.cuda.extending", "the CUDA backend").intrinsic
    i32, i64 = ir.IntType(32), ir.IntType(64)
    text = "{ .reg .u64 %sa; cvta.to.shared.u64 %sa, $1; cvt.u32.u64 $0, %sa; }"

    @intrinsic
    def smem_u32(typingctx, arr, idx):
        if not isinstance(arr, types.Array) or not isinstance(idx, types.Integer):
            return None
        sig = types.uint32(arr, idx)

        def codegen(context, builder, sig, args):
            ary = context.make_array(sig.args[0])(context, builder, args[0])
            i = context.cast(builder, args[1], sig.args[1], types.intp)
            ptr = builder.gep(ary.data, [i], inbounds=True)
            asm = ir.InlineAsm(ir.FunctionType(i32, [i64]), text, "=r,l")
            return builder.call(asm, [builder.ptrtoint(ptr, i64)])

        return sig, codegen

    return smem_u32


class _LazyNS(dict):
    """A dict that builds ``_wgmma_*`` intrinsics the first time a name is looked up (exec'd source's globals)."""

    def __missing__(self, key):
        if isinstance(key, str) and key.startswith("_wgmma_ra_"):
            fn = _make_wgmma_ra(*parse_ra(key))
            self[key] = fn
            return fn
        if isinstance(key, str) and key.startswith("_wgmma_"):
            fn = _make_wgmma(*_parse(key))
            self[key] = fn
            return fn
        raise KeyError(key)


def wgmma_namespace(names=()) -> dict:
    """The intrinsics above; ``names`` lists the ``_wgmma_*`` instructions to build now (a plain dict is returned,
    so the generated source's globals need them listed: :func:`wgmma_name`)."""
    global _NS
    if _NS is None:
        ns = _LazyNS()
        ns["_wg_fence"] = bare_asm("wgmma.fence.sync.aligned;")
        ns["_wg_commit"] = bare_asm("wgmma.commit_group.sync.aligned;")
        for n in range(MAX_WAIT + 1):
            ns[f"_wg_wait{n}"] = bare_asm(f"wgmma.wait_group.sync.aligned {n};")
        ns["_fence_async_smem"] = bare_asm("fence.proxy.async.shared::cta;")
        ns["_smem_u32"] = _smem_u32()
        ns["_wg_fence_regs"] = _fence_regs()
        _NS = ns
    for n in names:
        _NS[n]  # noqa: B018 - builds it
    return dict(_NS)
