"""Intrinsics of ``cp.async`` software pipelining: inline PTX for the GPU, and a model for the simulator.

Names the generated source uses (see :mod:`.pipeline`):

* ``_cp_async16(dst, di, src, si, nbytes)``: ``cp.async.cg.shared.global [&dst[di]], [&src[si]], 16,
  nbytes;`` — copies ``nbytes`` (0..16) bytes from global ``&src[si]`` to shared ``&dst[di]`` and writes
  zeros to the rest of the 16 bytes. Both addresses must be 16-byte aligned (the lowering checks the
  global one at run time and lays shared rows out so the shared one is). ``dst`` is a 1-D shared array,
  ``src`` a 1-D global array of the same element size; with ``nbytes == 0`` nothing is read.
* ``_cp_async16u(daddr, src, si, nbytes)``: the same with the destination given as a 32-bit shared-window
  address (``uint32``, e.g. from ``_smem_u32``): the swizzled ``wgmma`` operand chunks (:mod:`.pipeline`
  ``_chunks_u32``), whose per-chunk address is then a 32-bit add of a literal. GPU build only here; the simulator's
  is :func:`~.wgmma_sim.sim_wgmma_namespace`'s (it maps its fake shared addresses back to arrays).
* ``_cp_commit()``: ``cp.async.commit_group`` — the copies issued since the last commit form a group.
* ``_cp_wait<N>()`` for ``N`` in ``0..MAX_WAIT``: ``cp.async.wait_group N`` — this thread waits until at most
  the ``N`` most recent groups are pending. Other threads' copies are visible only after a barrier.

GPU build (:func:`cp_async_namespace`): llvmlite ``InlineAsm``, side-effecting with a memory clobber (as
:mod:`.mma_intrinsics`), so no load or store is moved across them.

Simulator build (:func:`sim_cp_async_namespace`): the copy reads its source when issued and **writes its
destination only when a ``_cp_wait<N>`` retires its group** (per simulated thread, newest ``N`` groups left
pending), the latest moment the PTX ISA allows; so a missing or too weak wait in the generated code shows
up as stale data in the simulator, not only on the GPU. It raises ``ValueError`` on a misaligned address or
a byte count outside ``0..16``.
"""

from __future__ import annotations

import threading

import numpy as np

from ...optional import require
from .caps import numba_types

#: deepest ``cp.async.wait_group`` immediate generated (num_stages up to MAX_WAIT + 2)
MAX_WAIT = 8

_NS = None


def cp_async_namespace() -> dict:
    """The GPU intrinsics above, by the names the generated source uses (built once)."""
    global _NS
    if _NS is not None:
        return dict(_NS)
    ir = require("llvmlite.ir", "the CUDA backend")
    types = numba_types()
    intrinsic = require("numba.cuda.extending", "the CUDA backend").intrinsic
    i32, i64 = ir.IntType(32), ir.IntType(64)
    text = ("{ .reg .u64 %cpd, %cps; cvta.to.shared.u64 %cpd, $0; cvta.to.global.u64 %cps, $1; "
            "cp.async.cg.shared.global [%cpd], [%cps], 16, $2; }")

    @intrinsic
    def cp16(typingctx, dst, di, src, si, nbytes):
        if not (isinstance(dst, types.Array) and isinstance(src, types.Array)):
            return None
        if not all(isinstance(x, types.Integer) for x in (di, si, nbytes)):
            return None
        sig = types.void(dst, di, src, si, nbytes)

        def codegen(context, builder, sig, args):
            d = context.make_array(sig.args[0])(context, builder, args[0])
            s = context.make_array(sig.args[2])(context, builder, args[2])
            dp = builder.gep(d.data, [context.cast(builder, args[1], sig.args[1], types.intp)], inbounds=True)
            sp = builder.gep(s.data, [context.cast(builder, args[3], sig.args[3], types.intp)], inbounds=True)
            n = context.cast(builder, args[4], sig.args[4], types.uint32)
            asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), [i64, i64, i32]), text, "l,l,r,~{memory}",
                               side_effect=True)
            builder.call(asm, [builder.ptrtoint(dp, i64), builder.ptrtoint(sp, i64), n])
            return context.get_dummy_value()

        return sig, codegen

    text_u = "{ .reg .u64 %cps; cvta.to.global.u64 %cps, $1; cp.async.cg.shared.global [$0], [%cps], 16, $2; }"

    @intrinsic
    def cp16u(typingctx, daddr, src, si, nbytes):
        if not (isinstance(src, types.Array) and all(isinstance(x, types.Integer) for x in (daddr, si, nbytes))):
            return None
        sig = types.void(daddr, src, si, nbytes)

        def codegen(context, builder, sig, args):
            d = context.cast(builder, args[0], sig.args[0], types.uint32)
            s = context.make_array(sig.args[1])(context, builder, args[1])
            sp = builder.gep(s.data, [context.cast(builder, args[2], sig.args[2], types.intp)], inbounds=True)
            n = context.cast(builder, args[3], sig.args[3], types.uint32)
            asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), [i32, i64, i32]), text_u, "r,l,r,~{memory}",
                               side_effect=True)
            builder.call(asm, [d, builder.ptrtoint(sp, i64), n])
            return context.get_dummy_value()

        return sig, codegen

    ns = {"_cp_async16": cp16, "_cp_async16u": cp16u, "_cp_commit": bare_asm("cp.async.commit_group;")}
    for n in range(MAX_WAIT + 1):
        ns[f"_cp_wait{n}"] = bare_asm(f"cp.async.wait_group {n};")
    _NS = ns
    return dict(ns)


def bare_asm(op: str):
    """A numba-cuda intrinsic ``f()`` emitting the operand-less PTX statement ``op`` (side-effecting, with a memory
    clobber, so no load or store moves across it): the waits, commits and fences."""
    ir = require("llvmlite.ir", "the CUDA backend")
    types = numba_types()
    intrinsic = require("numba.cuda.extending", "the CUDA backend").intrinsic

    @intrinsic
    def fn(typingctx):
        sig = types.void()

        def codegen(context, builder, sig, args):
            asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), []), op, "~{memory}", side_effect=True)
            builder.call(asm, [])
            return context.get_dummy_value()

        return sig, codegen

    return fn


def sim_cp_async_namespace() -> dict:
    """The simulator build (see the module docstring): deferred writes, retired by ``_cp_wait<N>``."""
    state = threading.local()  # every simulated GPU thread is a Python thread

    def groups() -> list:
        g = getattr(state, "groups", None)
        if g is None:
            g = state.groups = [[]]  # committed groups, then the open one (last)
        return g

    def cp16(dst, di, src, si, nbytes):
        item = np.dtype(dst.dtype).itemsize
        di, si, nbytes = int(di), int(si), int(nbytes)
        if np.dtype(src.dtype).itemsize != item or not 0 <= nbytes <= 16 or nbytes % item:
            raise ValueError(f"cp.async: {nbytes} bytes of {src.dtype} into {dst.dtype}")
        if (di * item) % 16 or (nbytes and (si * item) % 16):
            raise ValueError(f"cp.async: misaligned address (shared element {di}, global element {si})")
        vals = np.zeros(16 // item, dtype=dst.dtype)
        n = nbytes // item
        if n:
            vals[:n] = np.asarray(src[si:si + n]).view(dst.dtype)
        groups()[-1].append((dst, di, vals))

    def commit():
        groups().append([])

    def wait(keep: int):
        def fn():
            g = groups()
            done = len(g) - 1 - keep  # committed groups beyond the newest ``keep`` are retired
            for grp in g[:max(0, done)]:
                for dst, di, vals in grp:
                    dst[di:di + len(vals)] = vals
            if done > 0:
                del g[:done]
        return fn

    ns = {"_cp_async16": cp16, "_cp_commit": commit}
    for n in range(MAX_WAIT + 1):
        ns[f"_cp_wait{n}"] = wait(n)
    return ns
