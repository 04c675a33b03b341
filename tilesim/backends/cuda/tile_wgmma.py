"""``T.gemm`` on Hopper's ``wgmma.mma_async`` (sm_90a): planning and a mixin of :class:`~.lower.KernelGen`.

Contract
--------
:func:`wgmma_planner` returns the placement's accumulator callback when the switch is on (pass config
``tilesim.cuda_wgmma``, env ``TILESIM_CUDA_WGMMA``; default **off**): a gemm is put on ``wgmma`` when

* A, B are fp16 x fp16 or bf16 x bf16 (any majorness), or fp8 x fp8 (e4m3/e5m2, any pair) with A stored
  ``(M, K)`` and B stored ``(N, K)`` (``transpose_B=True``: the PTX ISA has no transpose for 8-bit wgmma);
  C is a float32 register fragment;
* the block is ``nWG >= 1`` whole warpgroups, ``M = 64 * MI * nWG``, ``N % 16 == 0``, ``N <= 256``,
  ``MI * N <= 256`` (accumulator registers per thread ``MI * N / 2 <= 128``), ``K % 16 == 0`` (fp8: 32);
* both operands are whole 2-D static shared buffers whose contiguous dimension is a multiple of 32 bytes
  (a swizzle width, :func:`~.wgmma_layout.swizzle_width`), each used by this gemm only, and every other use
  of them in the launch is a ``T.copy`` / ``T.fill`` / ``T.Parallel`` / element access (all lowered through
  :meth:`~.memory.MemoryAccess.slin`, the buffer's address map) — not a view, reduction, atomic, cumsum or
  another gemm, and the launch is not per-thread code;

otherwise the ``mma.sync`` plan (:func:`~.mma_layout.tensor_core_accumulator`) decides, as without the switch.
The accumulator is :func:`~.mma_layout.mma_layout` on the all-along-M grid (``WM`` = warps), which every
consumer already reads; A's rows are stored permuted (:func:`~.wgmma_layout.a_row_phys`) so that the
``wgmma`` D fragment lands on it. Every plan also satisfies the ``mma.sync`` conditions on that grid, so a
plan dropped after placement (:meth:`WgmmaLowering.finish_wgmma_plan`: an operand shared by two gemms) falls
back to ``mma.sync`` with the same layout.

Lowering (:meth:`WgmmaLowering.gemm_wgmma`): ``wgmma.fence``; per K step (unrolled; 32 bytes of K each) and
per slab ``mi`` one ``wgmma.mma_async.m64n<N>k<16|32>`` whose descriptors start at the slab's / step's offset
(:func:`~.wgmma_layout.kmajor_start` / :func:`~.wgmma_layout.mnmajor_start`; warpgroup ``wg = tid // 128``
takes slab ``mi * nWG + wg``); then ``commit_group`` and ``wait_group 0``, so the shared operands are free
when the gemm statement ends (the barriers and ``cp.async`` pipelining around it are unchanged). Every
``cuda.syncthreads()`` of a launch with a ``wgmma`` gemm is preceded by ``fence.proxy.async.shared::cta``
(:meth:`WgmmaLowering.fence_barriers`): shared memory written by ordinary stores or ``cp.async`` is then
visible to the ``wgmma`` reads after the barrier.
"""

from __future__ import annotations

from dataclasses import dataclass

from ... import dtypes as dt
from ...ir import nodes as N
from ...ir.queries import referenced_buffers
from ...ir.traverse import walk_stmts
from . import mma_layout as ML
from . import wgmma_layout as WL
from .mma_layout import Code
from .wgmma_intrinsics import wgmma_name

_KIND = {"float16": "f16", "bfloat16": "bf16", "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2"}
#: statements whose accesses to a shared buffer are element loads/stores (lowered through ``slin``)
_ELEMENT_OPS = (N.Copy, N.Fill, N.Parallel, N.Store, N.For, N.While, N.If, N.Let, N.Alloc, N.SyncThreads, N.Break,
                N.Continue)


@dataclass(frozen=True)
class OperandMap:
    """The shared address map of a ``wgmma`` operand buffer of shape ``(R, C)`` (C contiguous): swizzle width
    ``W``; ``perm_dim`` (0 / 1 / None) is the dimension holding A's M index, stored permuted for ``nwarps``."""

    R: int
    C: int
    itemsize: int
    W: int
    perm_dim: int | None = None
    nwarps: int = 0

    def offset(self, i0, i1):
        """Element offset of ``(i0, i1)`` (ints or :class:`Code`)."""
        if self.perm_dim == 0:
            i0 = WL.a_row_phys(i0, self.R, self.nwarps)
        elif self.perm_dim == 1:
            i1 = WL.a_row_phys(i1, self.C, self.nwarps)
        return WL.tile_offset(i0, i1, self.R, self.itemsize, self.W)

    @property
    def elems(self) -> int:
        return self.R * self.C


@dataclass(frozen=True)
class WgmmaPlan:
    """A gemm on ``wgmma``: operand maps, majorness and instruction shape."""

    a: OperandMap
    b: OperandMap
    a_kind: str
    b_kind: str
    trans_a: bool  # A stored (K, M): M-major
    kmajor_b: bool  # B stored (N, K)
    M: int
    N: int
    K: int
    nwg: int


def _usable_buffers(launch: N.Launch) -> tuple[set, dict]:
    """(uids of shared buffers with a use other than element accesses / one gemm operand, gemm count per uid)."""
    bad: set = set()
    gemm_uses: dict = {}
    for s in walk_stmts(launch.body):
        if isinstance(s, N.Alloc) and s.buffer.alias_of is not None:
            bad.add(s.buffer.alias_of.uid)
            bad.add(s.buffer.uid)
        if isinstance(s, N.Gemm):
            for r in (s.a, s.b):
                gemm_uses[r.buffer.uid] = gemm_uses.get(r.buffer.uid, 0) + 1
            if s.c.buffer.scope in ("shared", "shared.dyn"):
                bad.add(s.c.buffer.uid)
            continue
        if not isinstance(s, _ELEMENT_OPS):  # conservative: every buffer it names, bodies included
            bad |= set(referenced_buffers(s))
    return bad, gemm_uses


def plan_wgmma(g: N.Gemm, M: int, Nn: int, nthreads: int, bad: set, gemm_uses: dict) -> WgmmaPlan | str:
    """The plan of gemm ``g`` (C tile ``M x Nn``) on ``wgmma``, or the reason it is not one (module docstring)."""
    a, b, c = g.a.buffer, g.b.buffer, g.c.buffer
    if c.dtype != "float32" or c.scope not in ("fragment", "local"):
        return "accumulator is not a float32 fragment"
    for r in (g.a, g.b):
        buf = r.buffer
        shape = buf.static_shape()
        if buf.scope not in ("shared", "shared.dyn") or buf.alias_of is not None or shape is None or len(shape) != 2:
            return f"{buf.name} is not a 2-D static shared buffer"
        if any(not (isinstance(s, N.Const) and int(s.value) == 0) for s in r.starts) or tuple(r.extents) != tuple(shape):
            return f"{buf.name}: the gemm reads part of it"
        if buf.uid in bad or gemm_uses.get(buf.uid, 0) != 1 or a.uid == b.uid:
            return f"{buf.name} has other uses than element accesses and this gemm"
    K = int(g.a.extents[-2] if g.trans_a else g.a.extents[-1])
    return plan_shapes(a.dtype, b.dtype, tuple(a.static_shape()), tuple(b.static_shape()), bool(g.trans_a),
                       bool(g.trans_b), M, Nn, K, nthreads)


def plan_shapes(a_dtype: str, b_dtype: str, a_shape: tuple, b_shape: tuple, trans_a: bool, trans_b: bool, M: int,
                Nn: int, K: int, nthreads: int) -> WgmmaPlan | str:
    """The dtype / shape part of :func:`plan_wgmma` (A stored ``a_shape``: ``(M, K)``, or ``(K, M)`` with
    ``trans_a``; B stored ``(K, N)``, or ``(N, K)`` with ``trans_b``)."""
    ka, kb = _KIND.get(a_dtype), _KIND.get(b_dtype)
    fp8 = ka in ("e4m3", "e5m2") and kb in ("e4m3", "e5m2")
    if not (fp8 or (ka in ("f16", "bf16") and ka == kb)):
        return f"operands {a_dtype} x {b_dtype}"
    if fp8 and (trans_a or not trans_b):
        return "fp8 wgmma reads K-major operands only (A (M, K), B (N, K) with transpose_B=True)"
    if nthreads % 128:
        return f"{nthreads} threads is not a whole number of warpgroups"
    nwg, nw = nthreads // 128, nthreads // 32
    if M % (64 * nwg) or Nn % 16 or Nn > 256 or (M // (64 * nwg)) * Nn > 256 or K % (32 if fp8 else 16):
        return f"{M}x{Nn}x{K} on {nwg} warpgroup(s)"
    maps = []
    for shape, dtype, perm in ((a_shape, a_dtype, 1 if trans_a else 0), (b_shape, b_dtype, None)):
        e = int(dt.itemsize(dtype))
        W = WL.swizzle_width(shape[1], e)
        if W is None or (shape[0] * W) % WL.ALIGN:
            return f"{shape} {dtype}: rows of {shape[1] * e} bytes (a multiple of 32 bytes, 1024-byte regions needed)"
        maps.append(OperandMap(shape[0], shape[1], e, W, perm, nw if perm is not None else 0))
    return WgmmaPlan(maps[0], maps[1], ka, kb, trans_a, trans_b, M, Nn, K, nwg)


def wgmma_planner(launch: N.Launch, records: dict):
    """The accumulator callback of :func:`~.layout.place_buffers` with ``wgmma`` on: records ``id(gemm) ->
    WgmmaPlan`` in ``records`` and returns the all-along-M :func:`~.mma_layout.mma_layout`; else the
    ``mma.sync`` decision."""
    bad, gemm_uses = _usable_buffers(launch)
    if launch.thread_vars:
        bad = None

    def accumulator(g, M, Nn, nthreads, in_shared, full_row=False, reg_a=False):
        if reg_a:  # operand A kept in registers (mma.sync only): not a wgmma candidate
            records.pop(id(g), None)
            return ML.tensor_core_accumulator(g, M, Nn, nthreads, in_shared, full_row, reg_a=True)
        plan = plan_wgmma(g, M, Nn, nthreads, bad, gemm_uses) if bad is not None else "per-thread code"
        if isinstance(plan, WgmmaPlan) and ML.mma_shape_ok(M, Nn, plan.K, nthreads, g.a.buffer.dtype,
                                                            g.b.buffer.dtype, "float32", (nthreads // 32, 1)) is None \
                and ML.operand_problem(g.a, in_shared) is None and ML.operand_problem(g.b, in_shared) is None:
            records[id(g)] = plan
            return ML.mma_layout(M, Nn, nthreads, (nthreads // 32, 1))
        records.pop(id(g), None)
        return ML.tensor_core_accumulator(g, M, Nn, nthreads, in_shared, full_row)

    return accumulator


class WgmmaLowering:
    """``T.gemm`` on ``wgmma`` (see the module docstring)."""

    def finish_wgmma_plan(self, records: dict):
        """Keep the plans whose gemm is on tensor cores with a register accumulator; give their operand buffers
        their address maps (``self.smap``: root uid -> :class:`OperandMap`)."""
        self.wgmma: dict = {}
        self.smap: dict = {}
        for s in walk_stmts(self.launch.body):
            if isinstance(s, N.Gemm) and id(s) in records and id(s) in self.placement.mma \
                    and self.where(s.c.buffer) == "reg":
                p = records[id(s)]
                self.wgmma[id(s)] = p
                self.smap[s.a.buffer.uid] = p.a
                self.smap[s.b.buffer.uid] = p.b
        if self.wgmma:
            self.notes.append(f"{len(self.wgmma)} gemm(s) on wgmma (sm_90a)")

    def slin(self, buf: N.Buffer, idx_codes) -> str:
        """Flat element index of ``buf[idx]`` in a shared buffer: its address map, or the row-major strides."""
        m = self.smap.get((buf.alias_of or buf).uid) if getattr(self, "smap", None) else None
        if m is None:
            return self.lin(self.sstrides(buf), idx_codes)
        i0, i1 = (int(x) if str(x).lstrip("-").isdigit() else Code(f"({x})") for x in idx_codes)
        return str(m.offset(i0, i1))

    def fence_barriers(self):
        """``fence.proxy.async.shared::cta`` before every barrier of the launch (see the module docstring)."""
        if not getattr(self, "wgmma", None):
            return
        out = []
        for line in self.lines:
            if line.strip() == "cuda.syncthreads()":
                out.append(line[:len(line) - len(line.lstrip())] + "_fence_async_smem()")
            out.append(line)
        self.lines = out

    def gemm_wgmma(self, s: N.Gemm, lay, C: str):
        p: WgmmaPlan = self.wgmma[id(s)]
        ins = instructions(p, lay.slots[1])
        name = wgmma_name(p.a_kind, p.b_kind, p.N, p.trans_a, not p.kmajor_b)
        wg = self.coord(p.nwg, 128)
        da, db = self.fresh("_da"), self.fresh("_db")
        wa = f"uint64(_smem_u32({self.arr(s.a.buffer)}, 0))"
        if wg != "0":
            wa = f"({wa} + uint64({wg}) * uint64({ins.slab_bytes}))"
        self.emit(f"{da} = (({wa} >> uint64(4)) & uint64(0x3FFF)) | uint64({ins.hi_a})")
        self.emit(f"{db} = ((uint64(_smem_u32({self.arr(s.b.buffer)}, 0)) >> uint64(4)) & uint64(0x3FFF)) "
                  f"| uint64({ins.hi_b})")
        self.emit("_wg_fence()")
        for o0, oa, ob in ins.steps:
            self.emit(f"{name}({da} + uint64({oa >> 4}), {db} + uint64({ob >> 4}), {C}, {o0})")
        self.emit("_wg_commit()")
        self.emit("_wg_wait0()")


@dataclass(frozen=True)
class Instructions:
    """What :meth:`WgmmaLowering.gemm_wgmma` issues: descriptor high bits of A and B, the bytes between A's slabs
    (warpgroup ``wg`` adds ``wg * slab_bytes``), and per instruction (accumulator slot ``o0``, byte offset of A's
    operand, byte offset of B's operand) from the buffers' starts."""

    hi_a: int
    hi_b: int
    slab_bytes: int
    steps: tuple


def instructions(p: WgmmaPlan, slots_per_row: int) -> Instructions:
    """The instruction list of plan ``p`` for an accumulator with ``slots_per_row`` column slots (pure ints: the
    lowering and the NumPy emulation in ``tests/backends/test_wgmma.py`` use it alike)."""
    e = p.a.itemsize
    kstep = 32 // e  # elements of K per instruction (32 bytes)
    mi_n = p.M // (64 * p.nwg)
    a_lbo, a_sbo = WL.mnmajor_lbo_sbo(p.a.R, p.a.W) if p.trans_a else WL.kmajor_lbo_sbo(p.a.W)
    b_lbo, b_sbo = WL.kmajor_lbo_sbo(p.b.W) if p.kmajor_b else WL.mnmajor_lbo_sbo(p.b.R, p.b.W)
    slab = WL.mnmajor_start(0, 64, p.a.R, e, p.a.W) if p.trans_a else WL.kmajor_start(64, 0, p.a.R, e, p.a.W)
    steps = []
    for ks in range(p.K // kstep):
        k0 = ks * kstep
        ob = WL.kmajor_start(0, k0, p.b.R, e, p.b.W) if p.kmajor_b else WL.mnmajor_start(k0, 0, p.b.R, e, p.b.W)
        for mi in range(mi_n):
            s0 = mi * p.nwg
            oa = (WL.mnmajor_start(k0, 64 * s0, p.a.R, e, p.a.W) if p.trans_a
                  else WL.kmajor_start(64 * s0, k0, p.a.R, e, p.a.W))
            steps.append((2 * mi * slots_per_row, oa, ob))
    return Instructions(WL.desc_hi(a_lbo, a_sbo, WL.SWIZZLE_MODE[p.a.W]),
                        WL.desc_hi(b_lbo, b_sbo, WL.SWIZZLE_MODE[p.b.W]), slab, tuple(steps))
