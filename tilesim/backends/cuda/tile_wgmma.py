"""``T.gemm`` on Hopper's ``wgmma.mma_async`` (sm_90a): planning and a mixin of :class:`~.lower.KernelGen`.

Contract
--------
:func:`wgmma_planner` returns the placement's accumulator callback when the switch is on (pass config
``tilesim.cuda_wgmma``, env ``TILESIM_CUDA_WGMMA``; default **on** for compute capability 9.x,
:func:`~.caps.wgmma_default`): a gemm is put on ``wgmma`` when

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
A gemm whose operand A the placement keeps in registers (flash attention's ``P``) is planned by
:mod:`.wgmma_reg_a` (its own switch, off by default: ``WgmmaPlan.reg_a``; lowered there, race-freedom argued there).
fp8 gemms only while :func:`fp8_enabled` (``TILESIM_CUDA_WGMMA_FP8``, default on).
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

One group in flight (:meth:`WgmmaLowering.inflight_gemm`, issue 14, brief AP)
------------------------------------------------------------------------------
In a ``cp.async`` pipeline (:mod:`.pipeline`) of ``n >= 3`` stages whose body holds exactly one ``wgmma`` gemm
``g``, directly in the body, with ``clear_accum`` off, both operands stage buffers of the pipeline's asynchronous
copies, and its accumulator named by no other statement of the body, ``g`` ends with ``commit_group`` +
``wait_group 1`` instead of ``wait_group 0``: the group of iteration ``it`` keeps the tensor cores busy while
the warps wait, synchronise and issue the copies and the ``wgmma`` of iteration ``it + 1``. The pipeline then
loads ``d = n - 2`` iterations ahead (not ``n - 1``) and refills stage ``(it + d) % n = (it - 2) % n`` in
iteration ``it``, and ``wait_group 0`` follows the loop. Switch: :data:`INFLIGHT` (None reads
``TILESIM_CUDA_WGMMA_INFLIGHT``, default on; ``0`` gives the ``wait_group 0`` placement of every gemm, with the
same copy addressing as the in-flight form); anything not meeting the conditions keeps ``wait_group 0``.

Why this is race-free, with one or two warpgroups (every thread runs the same iterations; ``wait_group`` is per
warpgroup and orders only that warpgroup's groups, which is why every claim below goes through the barrier):

* *Stage reuse (write after read).* Iteration ``it`` refills stage ``s = (it - 2) % n``. Its last readers are
  the ``wgmma`` group of iteration ``it - 2`` (each warpgroup's own) and plain element reads of iteration ``it -
  2``'s body. Every warpgroup executed ``wait_group 1`` at the end of iteration ``it - 1``, after committing
  group ``it - 1``: that retires group ``it - 2``, whose shared-memory reads are then complete. Every thread
  passes that wait before it reaches the barrier at the top of iteration ``it``, and the refill is issued after
  that barrier, so no warpgroup's pending group reads ``s`` when any thread writes it. The groups still pending
  at the refill are those of iteration ``it - 1`` only, reading stage ``(it - 1) % n``; with ``n >= 3`` the
  three stages ``(it - 2) % n`` (written), ``(it - 1) % n`` (read by the pending group) and ``it % n`` (read next)
  are distinct. With ``n = 2`` the refill would hit the pending group's stage: not done.
* *Operands visible (read after write).* Stage ``it % n`` was filled by iteration ``it - d``'s copies (group
  committed ``d`` groups before): ``cp.async.wait_group d - 1`` at the top of iteration ``it`` completes this
  thread's copies of it, ``fence.proxy.async.shared::cta`` makes them visible to the async proxy, and the barrier
  makes every thread's visible before any warpgroup issues ``wgmma`` on them — as in the ``wait_group 0`` form.
  A misaligned tile copied with ordinary stores into its stage is covered by the same fence and barrier.
* *Accumulator registers.* The pending group and the next one both write ``C``; the PTX ISA orders
  ``wgmma.mma_async`` instructions of the same shape on the same accumulator without a fence, and no other
  statement of the body touches ``C`` (condition above), so no thread reads or writes those registers while a
  group is pending. ``wait_group 0`` after the loop retires the last group before anything after the loop reads
  ``C`` (the epilogue, a reduction, the next pass of an outer loop's ``T.clear``) or refills a stage (an outer
  loop runs the pipeline again only after the loop's trailing barrier).
* *Counts.* ``wgmma.wait_group`` counts committed groups of the executing warpgroup; each iteration commits
  exactly one (the gemm is unconditional in the body), so "1 pending" means exactly "iteration ``it``'s".

The simulator (:mod:`.wgmma_sim`) executes a group at the ``wait_group`` that retires it and checks, at that
moment and when a ``cp.async`` is issued into shared memory, that no pending group's operand bytes were or are
being written: an unsafe placement (the refill one stage back) raises there
(``tests/backends/test_wgmma.py::test_inflight_unsafe_refill_fails_in_the_simulator``).
"""

from __future__ import annotations

import os
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


#: keep one wgmma group in flight across pipeline iterations (module docstring); None reads the environment
INFLIGHT: bool | None = None

#: ``fence.proxy.async.shared::cta`` before the barriers (module docstring). **Diagnostic only**: False drops it,
#: which the PTX memory model does not allow for operands written by generic stores or ``cp.async``; it exists so
#: that one device run can time what the fence costs (in SASS it is ``MEMBAR.ALL.CTA`` + ``FENCE.VIEW.ASYNC.S``)
PROXY_FENCE = True


#: fp8 gemms on wgmma (None reads ``TILESIM_CUDA_WGMMA_FP8``, default on; ``0`` keeps them on ``mma.sync`` while the
#: 16-bit ones use wgmma): lets the default be flipped for 16-bit types alone
FP8: bool | None = None


def fp8_enabled() -> bool:
    """:data:`FP8`, or ``TILESIM_CUDA_WGMMA_FP8`` (``0`` off; default on)."""
    if FP8 is not None:
        return bool(FP8)
    return os.environ.get("TILESIM_CUDA_WGMMA_FP8", "1") != "0"


def inflight_enabled() -> bool:
    """:data:`INFLIGHT`, or ``TILESIM_CUDA_WGMMA_INFLIGHT`` (``0`` off; default on)."""
    if INFLIGHT is not None:
        return bool(INFLIGHT)
    return os.environ.get("TILESIM_CUDA_WGMMA_INFLIGHT", "1") != "0"


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
    reg_a: bool = False  # A from registers (:mod:`.wgmma_reg_a`); ``a`` then describes no buffer


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
    if fp8 and not fp8_enabled():
        return "fp8 on wgmma switched off (TILESIM_CUDA_WGMMA_FP8=0)"
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
        self.wgmma_accs: set = set()  # accumulators' root uids (their edge copies out: tile_copy.py)
        for s in walk_stmts(self.launch.body):
            if isinstance(s, N.Gemm) and id(s) in records and id(s) in self.placement.mma \
                    and self.where(s.c.buffer) == "reg":
                p = records[id(s)]
                if p.reg_a and not self.reg_a_layout_ok(s):
                    continue  # A demoted to shared memory after all: mma.sync (wgmma_reg_a.py)
                self.wgmma[id(s)] = p
                if not p.reg_a:
                    self.smap[s.a.buffer.uid] = p.a
                self.smap[s.b.buffer.uid] = p.b
                self.wgmma_accs.add((s.c.buffer.alias_of or s.c.buffer).uid)
        if self.wgmma:
            self.notes.append(f"{len(self.wgmma)} gemm(s) on wgmma (sm_90a)")

    def inflight_gemm(self, loop: N.For, stages: int, staged: set) -> N.Gemm | None:
        """The ``wgmma`` gemm of pipeline ``loop`` (``stages`` stages, asynchronous-copy destinations ``staged``,
        root uids) to keep in flight across iterations, or None (conditions: the module docstring)."""
        if not getattr(self, "wgmma", None) or stages < 3 or not inflight_enabled():
            return None
        gs = [x for x in walk_stmts(loop.body) if isinstance(x, N.Gemm) and id(x) in self.wgmma]
        if len(gs) != 1:
            return None
        g = gs[0]
        if g.clear_accum or not any(x is g for x in loop.body):
            return None
        if any((r.buffer.alias_of or r.buffer).uid not in staged for r in (g.a, g.b)):
            return None
        c = (g.c.buffer.alias_of or g.c.buffer).uid
        if any(c in referenced_buffers(x) for x in loop.body if x is not g):
            return None
        if not hasattr(self, "inflight"):
            self.inflight = set()
        self.inflight.add(id(g))
        return g

    def slin(self, buf: N.Buffer, idx_codes) -> str:
        """Flat element index of ``buf[idx]`` in a shared buffer: its address map, or the row-major strides."""
        m = self.smap.get((buf.alias_of or buf).uid) if getattr(self, "smap", None) else None
        if m is None:
            return self.lin(self.sstrides(buf), idx_codes)
        i0, i1 = (int(x) if str(x).lstrip("-").isdigit() else Code(f"({x})") for x in idx_codes)
        return str(m.offset(i0, i1))

    def fence_barriers(self):
        """``fence.proxy.async.shared::cta`` before every barrier of the launch (see the module docstring)."""
        if not getattr(self, "wgmma", None) or not PROXY_FENCE:
            return
        out = []
        for line in self.lines:
            if line.strip() == "cuda.syncthreads()":
                out.append(line[:len(line) - len(line.lstrip())] + "_fence_async_smem()")
            out.append(line)
        self.lines = out

    def gemm_wgmma(self, s: N.Gemm, lay, C: str):
        p: WgmmaPlan = self.wgmma[id(s)]
        if p.reg_a:
            self.gemm_wgmma_reg_a(s, lay, C)  # A from registers (wgmma_reg_a.py)
            return
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
        # kept in flight: the group of the previous iteration is retired here, this one at the next gemm or after
        # the loop (the module docstring); otherwise the operands are free when the statement ends
        self.emit("_wg_wait1()" if id(s) in getattr(self, "inflight", ()) else "_wg_wait0()")


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
