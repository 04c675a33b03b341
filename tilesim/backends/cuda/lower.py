"""Lowering driver: a ``PrimFunc`` → one generated ``numba.cuda.jit`` kernel per launch, plus a host plan.

Generated kernels (one Python function per ``T.Kernel``) take every global tensor as a flat 1-D device
array (row-major; bf16/fp8 as raw uint16/uint8 bits) followed by the scalar parameters, symbolic
dimensions and host-computed values they use. Inside a kernel:

* ``_tid = threadIdx.x`` (blocks are 1-D: ``threads=(a, b)`` is flattened), ``blockIdx.x/y/z`` are the
  ``T.Kernel`` block variables in order (x fastest, as in the interpreter);
* per-thread layout coordinates ``_t<P>_<stride> = (_tid // stride) % P`` are computed once;
* register fragments are ``cuda.local.array(slots)``; shared buffers (and demoted fragments) are
  1-D ``cuda.shared.array`` with padded row strides — static up to 48 KB per block, past that slices of
  one dynamic allocation (``KernelSource.dyn_smem`` bytes, passed at launch; :func:`_carve_dynamic`) up to
  :data:`~.caps.DYNAMIC_SMEM_LIMIT`; ``T.alloc_var`` scalars are locals;
* every access is a flat index through ``_ldx``/``_stx`` (no wrap-around checks); global accesses are
  guarded per dimension (reads out of range give 0, writes are skipped);
* ``cuda.syncthreads()`` is placed before a block-level statement that reads shared/global memory
  another statement of the block wrote since the last barrier, or writes memory read or written
  since then (loops are analysed to a fixpoint, so the barrier closing a pipelined loop's iteration
  is found too).

Module map: :mod:`.emitter` (generator state, emission, slot loops), :mod:`.memory` (placement
queries, loads/stores), :mod:`.tile_copy` (copy/fill/atomics), :mod:`.tile_gemm`, :mod:`.tile_mma` (tensor cores), :mod:`.tile_reduce`
(reductions, cumsum), :mod:`.barriers` (barrier pass), :mod:`.simt` (per-thread code: thread indices,
``T.sync_threads``, atomics returning a value), :mod:`.codestr` (code-string helpers); this
module assembles :class:`KernelGen` from them, generates each launch and the host :class:`Program`.

Sources are cached per (PrimFunc, fastmath, mode) in :mod:`runtime`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ... import dtypes as dt
from ...errors import InternalError, KernelTypeError
from ...ir import nodes as N
from ...ir.queries import referenced_vars
from ...ir.traverse import walk_stmts
from . import blackwell, simt, ws
from . import rules as Rl
from .barriers import BarrierPlanner
from .caps import DYNAMIC_SMEM_LIMIT, STATIC_SMEM_LIMIT
from .codestr import _prod, _san
from .emitter import Emitter, ParCtx
from .memory import MemoryAccess
from .pipeline import PipelineLowering
from .tile_copy import CopyLowering
from .tile_gemm import GemmLowering
from .tile_mma import MmaLowering
from .tile_reduce import ReduceLowering
from .tile_wgmma import WgmmaLowering
from .wgmma_reg_a import RegALowering

__all__ = ["KernelGen", "KernelSource", "ParCtx", "Program", "generate_launch", "lower_program"]


@dataclass
class KernelSource:
    name: str
    source: str
    args: list  # ("array", Buffer) | ("scalar", Var)
    launch: N.Launch
    threads: int
    smem_bytes: int
    notes: list = field(default_factory=list)
    #: bytes of dynamic shared memory the launch passes (0: every shared buffer is a static array)
    dyn_smem: int = 0


class KernelGen(CopyLowering, GemmLowering, MmaLowering, WgmmaLowering, RegALowering, ReduceLowering, PipelineLowering,
                BarrierPlanner, MemoryAccess, Emitter):
    """Generates the source of one launch (see the module docstring)."""

    # ----------------------------------------------------------------------------------- driver
    def generate(self, pad: bool = True, dynamic: bool = False) -> KernelSource:
        L = self.launch
        self.dynamic = dynamic
        blackwell.refuse(self)
        self.local_arrays: list = []
        self._declare_onchip()
        self.plan_pipelines()
        self.pad = pad
        items, _ = self._smem_layout(pad)
        self.sstride = {b.uid: st for b, st, _, _ in items}
        for v in L.block_vars:
            self.names[v.uid] = f"{_san(v.name)}_{v.uid}"
        ws.refuse(self)
        simt.prepare(self)
        self.plan_deferred()
        self.plan_scratch_alternation()
        self.plan_barriers()
        simt.top_level_barriers(self)
        self.body(L.body)
        self.fence_barriers()
        return self._assemble()

    def _declare_onchip(self):
        for s in walk_stmts(self.launch.body):
            if isinstance(s, N.Alloc) and s.buffer.scope not in ("global", "var"):
                self.allocs.append(s.buffer)
        aliased = {b.alias_of.uid for b in self.allocs if b.alias_of is not None}
        shared = [b for b in self.allocs if b.alias_of is None and self.where(b) == "shared"]
        for b in self.allocs:
            if b.alias_of is not None and self.where(b) == "shared":
                root = b.alias_of
                if root.dtype != b.dtype:
                    raise KernelTypeError(
                        f"T.view of the on-chip buffer {root.name} as {b.dtype} is not supported by the CUDA backend",
                        b.loc, hint="views that keep the dtype (T.reshape) are supported")
        self._shared = shared
        self._aliased = aliased
        # operands of tensor-core gemms: ldmatrix reads 16-byte rows (aligned, padded by 16 bytes)
        self.mma_operands = set()
        for s in walk_stmts(self.launch.body):
            if isinstance(s, N.Gemm) and id(s) in self.placement.mma:
                self.mma_operands |= {s.a.buffer.uid, s.b.buffer.uid}

    def _smem_layout(self, pad: bool):
        total = 0
        items = []
        self.stage_elems = {}
        for b in self._shared:
            shape = b.shape
            strides = [_prod(shape[d + 1:]) for d in range(len(shape))]
            if b.uid in self.smap:  # wgmma operand: its own address map (tile_wgmma.OperandMap), no padding
                pass
            elif b.uid in self.mma_operands or b.uid in self.staged:
                # rows of 16-byte multiples; when 8 rows would share banks (row bytes % 32 == 0), pad by 8
                # elements (2-byte types: 16 B), at least 16 B (fp8: 16 elements) so rows stay 16-byte aligned
                if pad and (shape[-1] * dt.itemsize(b.dtype)) % 32 == 0:
                    strides = [0] * len(shape)
                    strides[-1], strides[-2] = 1, shape[-1] + max(8, 16 // max(1, int(dt.itemsize(b.dtype))))
                    for d in range(len(shape) - 3, -1, -1):
                        strides[d] = strides[d + 1] * shape[d + 1]
            elif pad and len(shape) >= 2 and shape[-1] > 1 and b.uid not in self._aliased:
                item = max(1, int(dt.itemsize(b.dtype)))
                row = shape[-1]
                per_word = max(1, 4 // item)
                words = -(-row // per_word)
                if row % per_word == 0 and words % 2 == 0:
                    row_p = row + per_word
                    strides = [0] * len(shape)
                    strides[-1] = 1
                    strides[-2] = row_p
                    for d in range(len(shape) - 3, -1, -1):
                        strides[d] = strides[d + 1] * shape[d + 1]
            n = strides[0] * shape[0] if shape else 1
            if b.uid in self.smap:  # every stage of a wgmma operand starts 1024-byte aligned
                per = 1024 // max(1, int(dt.itemsize(b.dtype)))
                n = -(-n // per) * per
            if b.uid in self.staged:  # cp.async pipeline stages, each starting 16-byte aligned
                self.stage_elems[b.uid] = n
                n *= self.staged[b.uid]
            nbytes = n * max(1, int(dt.itemsize(b.dtype)))
            items.append((b, tuple(strides), n, nbytes))
            total += -(-nbytes // 16) * 16 + (1024 if b.uid in self.smap else 0)  # worst-case alignment gap
        return items, total

    def _scratch_items(self):
        """``[(array name, element count, numpy type)]`` of the reduction/relayout scratch arrays."""
        out = []
        for kind, n in sorted(self.scratch.items()):
            out.append((f"_scr_{kind}", n, {"f32": "float32", "f64": "float64", "i64": "int64"}[kind[:3]]))
        return out

    def _assemble(self) -> KernelSource:
        scratch = self._scratch_items()
        scratch_bytes = sum(-(-n * _NP_BYTES[t] // 16) * 16 for _, n, t in scratch)
        items, total = self._smem_layout(pad=self.pad)
        limit = DYNAMIC_SMEM_LIMIT if self.dynamic else STATIC_SMEM_LIMIT
        if total + scratch_bytes > limit:
            parts = [f"{b.name} {tuple(b.shape)} {b.dtype}: {nb} B"
                     + (f" ({self.staged[b.uid]} pipeline stages)" if b.uid in self.staged else "")
                     + (" (a fragment placed in shared memory: " + self.placement.demoted[b.uid] + ")"
                        if b.uid in self.placement.demoted else "") for b, _, _, nb in items]
            if scratch_bytes:
                parts.append(f"reduction/relayout scratch: {scratch_bytes} B")
            kind = ("dynamic shared-memory limit of sm_90 (opt-in)" if self.dynamic
                    else "static limit of the CUDA backend")
            raise _SmemOverflow(KernelTypeError(
                f"kernel {self.pf.name} needs {total + scratch_bytes} bytes of shared memory per block, over the "
                f"{limit} B {kind}: " + "; ".join(parts), self.launch.loc,
                hint="use smaller tiles (block_M/block_N/block_K), fewer pipeline stages or fewer shared buffers"))
        if not self.pad:
            self.notes.append("shared rows not padded (shared-memory limit)")
        self.smem_bytes = total + scratch_bytes
        dyn = self.smem_bytes if self.dynamic else 0
        if self.dynamic:
            self.notes.append(f"{dyn} B of dynamic shared memory")
        # argument list
        args = [f"{self.arr(b)}" for b in self.arg_arrays]
        args += [self.names[v.uid] for v in self.arg_scalars]
        out = [f"def {self.name}({', '.join(args)}):"]
        ind = "    "
        out.append(ind + "_tid = int64(cuda.threadIdx.x)")
        axes = "xyz"
        for d, v in enumerate(self.launch.block_vars):
            out.append(ind + f"{self.names[v.uid]} = int64(cuda.blockIdx.{axes[d]})")
        out.extend(ind + line for line in simt.thread_prologue(self))
        for (p, st), n in sorted(self.coords.items(), key=lambda kv: kv[1]):
            q = "_tid" if st == 1 else f"(_tid // {st})"
            out.append(ind + f"{n} = {q} % {p}" if p * st < self.nt or st > 1 else ind + f"{n} = {q}")
        out.extend(ind + line for line in self.gprolog)
        arrays = [(self.stage_name(b) if b.uid in self.staged else self.arr(b), n, Rl.storage_np(b.dtype))
                  for b, _st, n, _ in items] + scratch
        # (the simulator refuses the alignment argument; its model checks alignment by element index)
        aligned = set() if self.sim else {self.arr(b) for b, _st, _n, _ in items if b.uid in self.mma_operands}
        aligned |= set() if self.sim else {self.stage_name(b) for b, _st, _n, _ in items if b.uid in self.staged}
        # wgmma operands (and their stages): 1024-byte aligned (the swizzle XORs address bits 4-9)
        big = {self.stage_name(b) if b.uid in self.staged else self.arr(b) for b, _st, _n, _ in items
               if b.uid in self.smap}
        if self.dynamic:
            out.extend(ind + line for line in _carve_dynamic(arrays, self.sim, big))
        else:
            for name, n, t in arrays:
                al = ", alignment=1024" if name in big and not self.sim else (
                    ", alignment=16" if name in aligned else "")
                out.append(ind + f"{name} = cuda.shared.array({n}, {t}{al})")
        for b in self.allocs:
            if b.alias_of is None and self.where(b) == "reg":
                lay = self.layout(b)
                n = lay.nslots
                out.append(ind + f"{self.arr(b)} = cuda.local.array({max(1, n)}, {Rl.register_np(b.dtype)})")
        for name, n, t in self.local_arrays:
            out.append(ind + f"{name} = cuda.local.array({n}, {t})")
        out.extend(self.lines)
        if len(out) == 1:
            out.append(ind + "pass")
        kargs = [("array", b) for b in self.arg_arrays] + [("scalar", v) for v in self.arg_scalars]
        return KernelSource(self.name, "\n".join(out) + "\n", kargs, self.launch, self.nt, self.smem_bytes,
                            self.notes, dyn)


_NP_BYTES = {"float16": 2, "float32": 4, "float64": 8, "int8": 1, "int16": 2, "int32": 4, "int64": 8,
             "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "bool_": 1}


def _carve_dynamic(arrays, sim: bool, big=frozenset()) -> list:
    """Lines declaring one dynamic shared array per storage type (they all alias one allocation) and
    carving ``arrays`` (name, element count, numpy type) out of it at 16-byte aligned byte offsets (1024-byte
    aligned for the names in ``big``: wgmma operands; the allocation is then declared 1024-byte aligned)."""
    lines, declared, off = [], set(), 0
    al = 1024 if big else 16
    for name, n, t in arrays:
        size = _NP_BYTES[t]
        if name in big:
            off = -(-off // 1024) * 1024
        if t not in declared:
            declared.add(t)
            # the simulator refuses the alignment argument and needs a dtype instance for size 0
            ty = f"np.dtype({t})" if sim else f"{t}, alignment={al}"
            lines.append(f"_dsm_{t} = cuda.shared.array(0, {ty})")
        lines.append(f"{name} = _dsm_{t}[{off // size}:{off // size + n}]")
        off += -(-n * size // 16) * 16
    return lines


class _SmemOverflow(Exception):
    def __init__(self, err):
        super().__init__(str(err))
        self.err = err


def generate_launch(pf: N.PrimFunc, launch: N.Launch, index: int, outer_scalars: dict, sim: bool,
                    tensor_cores: bool = False, async_copy: bool = False, wgmma: bool = False) -> KernelSource:
    """Source of one launch. Padded rows first: static shared arrays when they fit in 48 KB, else one dynamic
    allocation carved into the buffers, up to :data:`~.caps.DYNAMIC_SMEM_LIMIT`; only when padded rows do not
    fit there, unpadded rows (static, else dynamic); beyond that the error names every buffer. (Unpadded
    static before padded dynamic made a flash attention whose tiles just fit 48 KB unpadded 2.4x slower on
    the H200: its ``ldmatrix`` rows all started in one bank.) With ``async_copy`` the ``cp.async`` pipelines
    (:mod:`.pipeline`) are tried first; when their stage copies do not fit, the launch is generated without
    them (noted in the source header)."""
    modes = ((True, False), (True, True), (False, False), (False, True))
    staged_overflow = False
    if async_copy:  # staged operands keep their padded rows (ldmatrix without bank conflicts), dynamic if need be
        for pad, dynamic in ((True, False), (True, True), (False, False), (False, True)):
            g = KernelGen(pf, launch, index, outer_scalars, sim, tensor_cores, True, wgmma)
            try:
                ks = g.generate(pad, dynamic)
            except _SmemOverflow:
                staged_overflow = True
                continue
            if not g.staged:
                staged_overflow = False
                break  # no pipeline in this launch: the ordinary lowering below
            return ks
    for i, (pad, dynamic) in enumerate(modes):
        g = KernelGen(pf, launch, index, outer_scalars, sim, tensor_cores, False, wgmma)
        try:
            ks = g.generate(pad, dynamic)
        except _SmemOverflow as e:
            if i == len(modes) - 1:
                raise e.err from None
            continue
        if staged_overflow:
            ks.notes.append("cp.async pipelining off: the stage copies exceed shared memory")
        return ks
    raise InternalError("unreachable")


# ---------------------------------------------------------------------------------------------- program
@dataclass
class Program:
    """Lowered program: host steps in order, and the generated kernels."""

    pf: N.PrimFunc
    steps: list  # ("alloc", Buffer) | ("let", Let) | ("launch", KernelSource)
    kernels: list
    sim: bool

    @property
    def source(self) -> str:
        head = (f"# tilesim CUDA backend: {self.pf.name} — {len(self.kernels)} kernel(s), numba.cuda.jit\n"
                "# arrays are flat (row-major); bf16/fp8 are raw uint16/uint8 bits\n")
        parts = [head]
        for k in self.kernels:
            parts.append(f"# launch {k.launch.grid and len(k.launch.grid)}-D grid, {k.threads} threads, "
                         f"{k.smem_bytes} B shared" + (f"; {'; '.join(k.notes)}" if k.notes else ""))
            parts.append(k.source)
        return "\n".join(parts)


def lower_program(pf: N.PrimFunc, sim: bool = False, tensor_cores: bool = False, async_copy: bool = False,
                  wgmma: bool = False) -> Program:
    outer = {}
    for p in pf.params:
        if isinstance(p, N.Buffer) and p.dtype == "int4":
            raise KernelTypeError(f"int4 tensor {p.name}: packed 4-bit integers are not supported by the CUDA "
                                  "backend", p.loc, hint="run the kernel on the interpreter (target='interp')")
        if isinstance(p, N.Var):
            outer[p.uid] = p
    for v in pf.dyn_vars:
        outer[v.uid] = v
    # symbolic dims of parameters that are not listed as dyn vars (eager T.const symbols)
    for p in pf.params:
        if isinstance(p, N.Buffer):
            for d in p.shape:
                if isinstance(d, N.Expr):
                    referenced_vars(d, outer)
    steps, kernels = [], []
    for s in pf.body:
        if isinstance(s, N.Launch):
            k = generate_launch(pf, s, len(kernels), outer, sim, tensor_cores, async_copy, wgmma)
            kernels.append(k)
            steps.append(("launch", k))
        elif isinstance(s, N.Alloc):
            if s.buffer.scope != "global":
                raise KernelTypeError(f"a {s.buffer.scope} buffer outside a kernel launch", s.loc)
            for d in s.buffer.shape:
                if isinstance(d, N.Expr):
                    referenced_vars(d, outer)
            steps.append(("alloc", s.buffer))
        elif isinstance(s, N.Let):
            outer[s.var.uid] = s.var
            steps.append(("let", s))
        else:
            raise KernelTypeError(f"{type(s).__name__} at the top level of a prim_func is not supported by the CUDA "
                                  f"backend", getattr(s, "loc", None),
                                  hint="put statements inside `with T.Kernel(...)`")
    return Program(pf, steps, kernels, sim)
