"""``wgmma`` with operand A in registers (issue 14, brief AU): flash attention's ``O += P @ V`` on Hopper's
warpgroup MMA while ``P`` stays where the softmax left it. Behind a switch, **off by default**.

Contract
--------
:func:`reg_a_planner` wraps the ``wgmma`` accumulator callback of :func:`~.tile_wgmma.wgmma_planner`. While
:func:`reg_a_enabled` (:data:`REG_A`, env ``TILESIM_CUDA_WGMMA_REG_A=1``) it takes the gemms whose operand A
the placement keeps in registers (``reg_a=True``: a whole 2-D fp16/bf16 fragment read by this gemm only, not
transposed, accumulating fp32 into a register fragment — :mod:`.layout`) and, when operand B meets
:func:`~.tile_wgmma.plan_wgmma`'s conditions for a shared operand and the shape those of
:func:`~.tile_wgmma.plan_shapes` (``M = 64 * MI * nWG``, ``N % 16 == 0``, ``MI * N <= 256``, ``K % 16 == 0``),
records a :class:`~.tile_wgmma.WgmmaPlan` with ``reg_a=True`` and returns the all-along-M
:func:`~.mma_layout.mma_layout` — the layout the ``mma.sync`` register-A path uses too. Anything else goes to the
wrapped callback (``mma.sync`` register A, as without the switch). A plan whose A was demoted to shared memory
after all is dropped (:meth:`~.tile_wgmma.WgmmaLowering.finish_wgmma_plan`): the gemm then runs on ``mma.sync``.

Why ``P`` can feed ``wgmma`` unchanged (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate",
the register fragments of ``wgmma .m64nNk16``): warp ``w`` of the warpgroup holds rows ``16w .. 16w + 15`` of
the 64-row slab, lane ``4g + t`` in both fragments —

* D (accumulator), register ``4j + e``: row ``16w + g + 8 * (e // 2)``, column ``8j + 2t + e % 2``
  (:func:`~.wgmma_layout.acc_coord`);
* A (16-bit, four ``.b32`` registers of two values each): ``a0 a1`` row ``16w + g``, columns ``2t, 2t + 1``;
  ``a2 a3`` row ``16w + g + 8``, the same columns; ``a4 a5`` row ``16w + g``, columns ``2t + 8, 2t + 9``;
  ``a6 a7`` row ``16w + g + 8``, columns ``2t + 8, 2t + 9`` — per warp the A fragment of ``mma.m16n8k16``.

So the D registers of n8 column blocks ``2s`` and ``2s + 1`` of the softmax's accumulator are, packed two by two
(``cvt.rn.bf16x2.f32``), the A registers of k16 step ``s``: the same packing as the ``mma.sync`` register-A path
(:meth:`~.tile_mma.MmaLowering._gemm_mma_reg_a`, ``c_slots(mi, 2s)`` and ``c_slots(mi, 2s + 1)``). Rows stay
with their thread: every thread of a quad ``(w, g)`` holds the same rows of ``P`` (the accumulator layout's rows
depend on ``w, g`` only), so the product row the hardware forms at the quad's A position is that logical row of
``P``, and its D registers land on the same thread's slots of ``O`` for that row — whatever row order the layout
uses (no permutation, unlike a shared operand A: :func:`~.wgmma_layout.a_row_phys`).

Lowering (:meth:`RegALowering.gemm_wgmma_reg_a`): the packs of every k16 step and slab first; then one
``wgmma.fence`` whose asm takes and returns every packed register (``_wg_fence_regs``: tied operands, so NVVM
cannot move a pack below the fence nor a ``wgmma`` above it); then per k16 step and slab one
``wgmma.mma_async.m64n<N>k16.f32.<t>.<t>`` with A from the four registers and B from its shared descriptor
(:func:`~.wgmma_intrinsics.wgmma_ra_name`); ``commit_group``; ``wait_group 0``.

Race-freedom (the PTX ISA's rules for ``wgmma.fence`` and ``wgmma.wait_group``):

* *A registers written by ordinary instructions.* The ISA requires a ``wgmma.fence`` between a register access
  and a ``wgmma.mma_async`` that reads the same registers as A. Every A register is written by a pack before the
  fence, in program order, and the fence's asm consumes and redefines each of them, so the ``wgmma`` instructions
  read the values the fence released — the compiler cannot reorder a pack across it (data dependence) and the
  ``wgmma`` instructions use the fence's outputs.
* *The accumulator.* ``O`` is rescaled by ordinary multiplications (``acc_o *= r_scale``) before the gemm: the
  same fence orders them (it is issued after them; the accumulator slots are loaded into the asm's tied operands
  after it). Successive ``wgmma`` of the same shape on the same accumulator need no fence between them.
* *Reading the result and reusing the operands.* ``wait_group 0`` ends the statement: the softmax of the next
  iteration, the rescale and the epilogue read ``O`` only after every group of the warpgroup completed, the
  packed A registers are dead after it, and ``V``'s stage is free for the next ``cp.async`` refill (which comes
  after the pipeline's barrier, as for a shared-operand ``wgmma``). Shared memory written by ``cp.async`` or
  stores is made visible to the async proxy by the ``fence.proxy.async`` before every barrier
  (:meth:`~.tile_wgmma.WgmmaLowering.fence_barriers`).

The simulator (:mod:`.wgmma_sim`) executes a register-A ``wgmma`` when it is retired, after all 128 threads of
the warpgroup have issued theirs, from the A registers every thread passed (the fragment above) and B read from
the shared-memory image; tests compare whole kernels with the interpreter.
"""

from __future__ import annotations

import dataclasses
import os

from ...errors import InternalError
from ...ir import nodes as N
from . import mma_layout as ML
from . import wgmma_layout as WL
from .layout import a_register_layout
from .tile_wgmma import WgmmaPlan, _usable_buffers, plan_shapes
from .wgmma_intrinsics import wgmma_ra_name

#: register-A ``wgmma`` (module docstring); None reads ``TILESIM_CUDA_WGMMA_REG_A`` (``1`` on; default off)
REG_A: bool | None = None


def reg_a_enabled() -> bool:
    """:data:`REG_A`, or ``TILESIM_CUDA_WGMMA_REG_A`` (``1`` on; default off)."""
    if REG_A is not None:
        return bool(REG_A)
    return os.environ.get("TILESIM_CUDA_WGMMA_REG_A", "0") == "1"


def plan_reg_a(g: N.Gemm, M: int, Nn: int, nthreads: int, bad: set, gemm_uses: dict) -> WgmmaPlan | str:
    """The register-A plan of gemm ``g`` (C tile ``M x Nn``), or the reason there is none."""
    a, b, c = g.a.buffer, g.b.buffer, g.c.buffer
    if c.dtype != "float32" or c.scope not in ("fragment", "local"):
        return "accumulator is not a float32 fragment"
    if a.dtype not in ("float16", "bfloat16") or a.scope not in ("fragment", "local") or g.trans_a:
        return "operand A is not a 16-bit (M, K) register fragment"
    shape = b.static_shape()
    if b.scope not in ("shared", "shared.dyn") or b.alias_of is not None or shape is None or len(shape) != 2:
        return f"{b.name} is not a 2-D static shared buffer"
    if any(not (isinstance(s, N.Const) and int(s.value) == 0) for s in g.b.starts) or tuple(g.b.extents) != tuple(shape):
        return f"{b.name}: the gemm reads part of it"
    if b.uid in bad or gemm_uses.get(b.uid, 0) != 1:
        return f"{b.name} has other uses than element accesses and this gemm"
    K = int(g.a.extents[-1])
    plan = plan_shapes(a.dtype, b.dtype, (M, K), tuple(shape), False, bool(g.trans_b), M, Nn, K, nthreads)
    if isinstance(plan, str):
        return plan
    return dataclasses.replace(plan, reg_a=True)


def reg_a_planner(inner, launch: N.Launch, records: dict):
    """``inner`` (the ``wgmma`` accumulator callback) extended with register-A plans while :func:`reg_a_enabled`."""
    if not reg_a_enabled() or launch.thread_vars:
        return inner
    bad, gemm_uses = _usable_buffers(launch)

    def accumulator(g, M, Nn, nthreads, in_shared, full_row=False, reg_a=False):
        if reg_a:
            plan = plan_reg_a(g, M, Nn, nthreads, bad, gemm_uses)
            lay = ML.tensor_core_accumulator(g, M, Nn, nthreads, in_shared, full_row, reg_a=True)
            if isinstance(plan, WgmmaPlan) and lay is not None:
                records[id(g)] = plan
                return lay
        return inner(g, M, Nn, nthreads, in_shared, full_row=full_row, reg_a=reg_a)

    return accumulator


def reg_a_steps(p: WgmmaPlan, slots_per_row: int, a_slots_per_row: int) -> tuple[int, list]:
    """(B descriptor high bits, [(accumulator slot ``o0``, the eight A slots of the four registers, byte offset of
    B's operand)]) of register-A plan ``p``: per k16 step ``s`` and slab ``mi``."""
    e = p.b.itemsize
    b_lbo, b_sbo = WL.kmajor_lbo_sbo(p.b.W) if p.kmajor_b else WL.mnmajor_lbo_sbo(p.b.R, p.b.W)
    steps = []
    for s in range(p.K // 16):
        k0 = 16 * s
        ob = WL.kmajor_start(0, k0, p.b.R, e, p.b.W) if p.kmajor_b else WL.mnmajor_start(k0, 0, p.b.R, e, p.b.W)
        for mi in range(p.M // (64 * p.nwg)):
            lo, hi = ML.c_slots(mi, 2 * s, a_slots_per_row), ML.c_slots(mi, 2 * s + 1, a_slots_per_row)
            steps.append((2 * mi * slots_per_row, (lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]), ob))
    return WL.desc_hi(b_lbo, b_sbo, WL.SWIZZLE_MODE[p.b.W]), steps


class RegALowering:
    """The lowering of a register-A ``wgmma`` gemm (a mixin of :class:`~.lower.KernelGen`)."""

    def reg_a_layout_ok(self, s: N.Gemm) -> bool:
        """A is still a register fragment in the layout the plan assumes (else the plan is dropped)."""
        if self.where(s.a.buffer) != "reg" or self.where(s.c.buffer) != "reg":
            return False
        return self.layout(s.a.buffer) == a_register_layout(self.layout(s.c.buffer), int(s.a.extents[-1]))

    def gemm_wgmma_reg_a(self, s: N.Gemm, lay, C: str):
        p: WgmmaPlan = self.wgmma[id(s)]
        a = s.a.buffer
        if not self.reg_a_layout_ok(s):
            raise InternalError(f"register operand {a.name} of a wgmma gemm: layout {self.layout(a).describe()}")
        hi_b, steps = reg_a_steps(p, lay.slots[1], self.layout(a).slots[1])
        A = self.arr(a)
        pack = "_pack_bf16x2" if a.dtype == "bfloat16" else "_pack_f16x2"
        name = wgmma_ra_name(p.a_kind, p.N, not p.kmajor_b)
        db = self.fresh("_db")
        self.emit(f"{db} = ((uint64(_smem_u32({self.arr(s.b.buffer)}, 0)) >> uint64(4)) & uint64(0x3FFF)) "
                  f"| uint64({hi_b})")
        regs = []
        for _o0, sl, _ob in steps:
            for k in range(4):
                r = self.fresh("_ra")
                self.emit(f"{r} = {pack}({A}[{sl[2 * k]}], {A}[{sl[2 * k + 1]}])")
                regs.append(r)
        pa = self.fresh("_pa")
        self.emit(f"{pa} = _wg_fence_regs(({', '.join(regs)},))")  # wgmma.fence, A registers tied (docstring)
        for i, (o0, _sl, ob) in enumerate(steps):
            args = ", ".join(f"{pa}[{4 * i + k}]" for k in range(4))
            self.emit(f"{name}({args}, {db} + uint64({ob >> 4}), {C}, {o0})")
        self.emit("_wg_commit()")
        self.emit("_wg_wait0()")
