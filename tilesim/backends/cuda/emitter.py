"""Kernel-generator state and source emission: the base of :class:`~.lower.KernelGen`.

Contract: :class:`Emitter` owns the per-launch state (output lines and indentation, fresh names,
variable bindings, per-thread coordinates, scratch and local-array requests) and the generic
emission machinery every tile-op lowering uses: ``emit``/``indent``/``hoist``, ``expr``/``body``
(dispatch through :mod:`.rules`, with planned barriers), variable names, layout index code,
``slot_loops`` over a layout's slots, ``T.Parallel`` loops (:class:`ParCtx`) and region iteration
(``pair``/``domain_layout``/``iterate``). Buffer placement and access (``where``, ``layout``, ``load``,
``store`` ...) come from :class:`~.memory.MemoryAccess`, mixed into the same class.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from ...errors import InternalError, KernelError, KernelTypeError
from ...ir import nodes as N
from ...ir.traverse import loads_in, regions, stmt_exprs, walk_stmts
from . import affine_mask as AM
from . import rules as Rl
from .codestr import _IDENT, _add, _c, _mul, _prod, _san
from .layout import Layout, Placement, copy_layout, default_layout, place_buffers
from .mma_layout import tensor_core_accumulator
from .tile_wgmma import wgmma_planner
from .wgmma_reg_a import reg_a_planner

#: the cheaper integer forms of the ``mma.sync`` path (issue 14, brief AQ): 32-bit shared addresses for ``ldmatrix``
#: and ``cp.async`` (:mod:`.smem_addr`), per-thread chunk bases of the whole-tile ``cp.async`` copies
#: (:mod:`.pipeline`), the strength-reduced affine masks of ``T.Parallel`` (:mod:`.affine_mask`). ``False``: the
#: forms before them (``benchmarks/gpu_run.py --only tc`` times both in one process)
INT_FORMS = True


@dataclass
class ParCtx:
    """The element context of a ``T.Parallel`` loop being generated."""

    layout: Layout
    dims: dict  # var uid -> loop dim
    idx: list  # code of each loop dim's index
    slot: list  # code of each loop dim's slot number
    primary: str | None  # condition for side effects when the loop layout is replicated
    parts: list | None = None  # per loop dim (thread part, slot part) of idx: idx = thread part + slot part


class Emitter:
    """Per-launch state and the generic emission helpers (see the module docstring)."""

    def __init__(self, pf: N.PrimFunc, launch: N.Launch, index: int, outer_scalars: dict, sim: bool,
                 tensor_cores: bool = False, async_copy: bool = False, wgmma: bool = False):
        self.pf = pf
        self.launch = launch
        self.nt = launch.num_threads
        self.sim = sim
        self.async_copy = async_copy  # cp.async pipelines for T.Pipelined loops (pipeline.py)
        self.name = f"{_san(pf.name)}_k{index}"
        self.lines: list[str] = []
        self.ind = 1
        self._fresh = 0
        self.names: dict[int, str] = {}
        self.par: ParCtx | None = None
        self.coords: dict[tuple, str] = {}
        self.scratch: dict[str, int] = {}
        self.outer_scalars = outer_scalars  # uid -> Var defined outside the launch (params, dyn, lets)
        self.arg_arrays: list[N.Buffer] = []
        self.arg_scalars: list[N.Var] = []
        self.allocs: list[N.Buffer] = []
        # tensor cores (mma.sync): in simulator builds the warp-level instructions are modelled (mma_sim.py)
        # wgmma (tile_wgmma.py, sm_90a): plans recorded per gemm by the accumulator callback
        wg_records: dict = {}
        acc = ((reg_a_planner(wgmma_planner(launch, wg_records), launch, wg_records) if wgmma
                else tensor_core_accumulator) if tensor_cores else None)
        self.placement: Placement = place_buffers(launch, accumulator=acc)
        self.sstride: dict[int, tuple] = {}
        self.smem_bytes = 0
        self.gprolog: list[str] = []
        self._gdims: dict[int, tuple] = {}
        self.barrier_before: set[int] = set()
        self.notes: list[str] = list(self.placement.notes)
        self.unguarded: set[int] = set()
        self.finish_wgmma_plan(wg_records)

    # ----------------------------------------------------------------------------------- emission
    def emit(self, line: str):
        self.lines.append("    " * self.ind + line)

    @contextlib.contextmanager
    def indent(self):
        self.ind += 1
        try:
            yield
        finally:
            self.ind -= 1

    def push_indent(self):
        self.ind += 1

    def pop_indent(self):
        self.ind -= 1

    def nlines(self) -> int:
        return len(self.lines)

    def fresh(self, prefix: str) -> str:
        self._fresh += 1
        return f"{prefix}{self._fresh}"

    def hoist(self, code: str) -> str:
        if _IDENT.match(code):
            return code
        t = self.fresh("_h")
        self.emit(f"{t} = {code}")
        return t

    def expr(self, e) -> str:
        return Rl.EXPR_RULES(e)(self, e)

    def body(self, stmts):
        for s in stmts:
            if self.par is None and id(s) in self.barrier_before:
                self.emit("cuda.syncthreads()")
            fn = Rl.STMT_RULES(s)
            try:
                fn(self, s)
            except KernelError as err:
                raise err.with_loc(getattr(s, "loc", None)) from None

    # ----------------------------------------------------------------------------------- names
    def var_ref(self, v: N.Var) -> str:
        if self.par is not None and v.uid in self.par.dims:
            return self.par.idx[self.par.dims[v.uid]]
        n = self.names.get(v.uid)
        if n is not None:
            return n
        if v.uid in self.outer_scalars:
            return self._scalar_arg(v)
        raise InternalError(f"variable {v.name} is used before it is bound in the CUDA lowering")

    def _scalar_arg(self, v: N.Var) -> str:
        n = self.names.get(v.uid)
        if n is None:
            n = f"{_san(v.name)}_{v.uid}"
            self.names[v.uid] = n
            self.arg_scalars.append(v)
        return n

    def bind_let(self, v: N.Var) -> str:
        n = self.names.get(v.uid) or f"{_san(v.name)}_{v.uid}"
        self.names[v.uid] = n
        return n

    bind_loop = bind_let

    def coord(self, p: int, stride: int) -> str:
        if p <= 1:
            return "0"
        key = (p, stride)
        n = self.coords.get(key)
        if n is None:
            n = f"_t{p}_{stride}"
            self.coords[key] = n
        return n

    def group(self, lay: Layout, d: int) -> str:
        """The thread's group along dim ``d`` of ``lay`` (code; a split dimension combines two factors)."""
        pcs = lay.pieces(d)
        if len(pcs) <= 1:
            return self.coord(lay.tcount[d], lay.tstride[d])
        (lo, s0), (hi, s1) = pcs
        return _add(self.coord(lo, s0), _mul(self.coord(hi, s1), lo))

    def index_code(self, lay: Layout, d: int, sv: str) -> str:
        """Index along dim ``d`` of the thread's slot ``sv`` (code) in layout ``lay``."""
        P, V = lay.tcount[d], lay.vec[d]
        t = self.group(lay, d)
        if V == 1:
            return _add(t, _mul(sv, P))
        return f"({_mul(t, V)} + ({sv} // {V}) * {P * V} + {sv} % {V})"

    def primary_cond(self, lay: Layout) -> str | None:
        if not lay.replicated:
            return None
        terms = [_mul(self.coord(p, s), s) for d in range(lay.ndim) for p, s in lay.pieces(d)]
        base = " + ".join(terms) if terms else "0"
        return f"(_tid == {base})"

    # ----------------------------------------------------------------------------------- expressions
    def _outer_expr(self, e) -> str:
        saved_par, self.par = self.par, None
        try:
            return self.expr(e)
        finally:
            self.par = saved_par

    def pack_only(self, buf: N.Buffer) -> bool:
        """Whether register fragment ``buf`` (fp16/bf16) is read only as the register operand A of tensor-core gemms,
        which round each value to its dtype when packing it (``cvt.rn.{bf16,f16}x2.f32``): its writers may then
        keep the float32 value (``pack(round(x)) == pack(x)``: the rounding is idempotent), with
        :data:`INT_FORMS`."""
        if not INT_FORMS or self.where(buf) != "reg" or buf.dtype not in ("bfloat16", "float16"):
            return False
        got = self.__dict__.setdefault("_pack_only", {})
        if buf.uid not in got:
            ok = False
            for s in walk_stmts(self.launch.body):
                reads = list(regions(s)[0]) + [e for x in stmt_exprs(s) for e in loads_in(x)]
                for r in reads:
                    b = r.buffer if isinstance(r, (N.Region, N.Load)) else r
                    if (b.alias_of or b).uid != buf.uid:
                        continue
                    if not (type(s) is N.Gemm and r is s.a and s.a.buffer.uid == buf.uid):
                        got[buf.uid] = False
                        return False
                    ok = True
            got[buf.uid] = ok
        return got[buf.uid]

    # ----------------------------------------------------------------------------------- scratch / locals
    def need_scratch(self, kind: str, n: int):
        self.scratch[kind] = max(self.scratch.get(kind, 0), n)
        return f"_scr_{kind}"

    def local_decl(self, name: str, n: int, np_type: str):
        self.local_arrays.append((name, max(1, n), np_type))

    # ----------------------------------------------------------------------------------- loops over layouts
    def slot_loops(self, lay: Layout, body_fn, guard=True, extra_guard=None, vector_last=False):
        """Emit loops over a layout's slots; ``body_fn(idx_codes, slot_code, slot_vars)`` emits the body.

        With ``vector_last`` and a vector width V > 1 on the last dimension, the body is called once per V
        consecutive elements (``idx``/``slot`` of the first) with the extra argument ``lanes=V``.
        """
        slots = lay.slots
        idx, slot_vars = [], []
        self.slot_parts = parts = []  # (thread part, slot part) per dim, for affine_mask
        opened = 0
        lanes = 1
        for d in range(lay.ndim):
            S, P, V = slots[d], lay.tcount[d], lay.vec[d]
            t = self.group(lay, d)
            parts.append((_mul(t, V), "0"))
            if V > 1 and vector_last and d == lay.ndim - 1:
                cv = self.fresh("_c")
                if S // V > 1:
                    self.emit(f"for {cv} in range({S // V}):")
                    self.push_indent()
                    opened += 1
                else:
                    cv = "0"
                sv = _mul(cv, V)
                code = _add(_mul(t, V), _mul(cv, P * V))
                parts[d] = (_mul(t, V), _mul(cv, P * V))
                lanes = V
            elif V > 1:
                # S // V rounds of V consecutive indices
                cv, vv = self.fresh("_c"), self.fresh("_v")
                if S // V > 1:
                    self.emit(f"for {cv} in range({S // V}):")
                    self.push_indent()
                    opened += 1
                else:
                    cv = "0"
                self.emit(f"for {vv} in range({V}):")
                self.push_indent()
                opened += 1
                sv = _add(_mul(cv, V), vv)
                code = _add(_add(_mul(t, V), _mul(cv, P * V)), vv)
                parts[d] = (_mul(t, V), _add(_mul(cv, P * V), vv))
            elif S > 1:
                sv = self.fresh("_s")
                self.emit(f"for {sv} in range({S}):")
                self.push_indent()
                opened += 1
                code = _add(t, _mul(sv, P))
                parts[d] = (t, _mul(sv, P))
            else:
                sv = "0"
                code = t
            if not _IDENT.match(sv):
                svn = self.fresh("_sl")
                self.emit(f"{svn} = {sv}")
                sv = svn
            slot_vars.append(sv)
            if not _IDENT.match(code):
                iv = self.fresh("_i")
                self.emit(f"{iv} = {code}")
                code = iv
            idx.append(code)
            if guard and lay.needs_guard(d):
                self.emit(f"if {code} < {lay.shape[d]}:")
                self.push_indent()
                opened += 1
        if extra_guard is not None:
            self.emit(f"if {extra_guard}:")
            self.push_indent()
            opened += 1
        slot = "0"
        for d in range(lay.ndim):
            slot = _add(slot, _mul(slot_vars[d], _prod(slots[d + 1:])))
        n0 = self.nlines()
        if lanes > 1:
            body_fn(idx, slot, slot_vars, lanes=lanes)
        else:
            body_fn(idx, slot, slot_vars)
        if self.nlines() == n0:
            self.emit("pass")
        for _ in range(opened):
            self.pop_indent()

    def parallel(self, s: N.Parallel, lay: Layout):
        if lay.shape != tuple(s.extents):
            raise InternalError("T.Parallel layout does not match its extents")

        def body(idx, slot, slot_vars):
            self.par = ParCtx(lay, {v.uid: d for d, v in enumerate(s.vars)}, idx, slot_vars,
                              self.primary_cond(lay), list(self.slot_parts))
            try:
                self.body(s.body)
            finally:
                self.par = None

        if INT_FORMS and AM.emit_parallel(self, s, lay, body):
            return
        self.slot_loops(lay, body)

    # ----------------------------------------------------------------------------------- regions
    def region_starts(self, r: N.Region) -> list:
        return [self.hoist(self.expr(x)) for x in r.starts]

    def abs_index(self, starts, rel):
        return [_add(s, i) for s, i in zip(starts, rel)]

    def pair(self, dom: N.Region, other: N.Region, dom_is_dst: bool):
        """For each dim of ``other``: the dim of ``dom`` whose relative index it takes, or None (unit)."""
        de = list(dom.extents)
        oe = list(other.extents)
        dnu = [d for d, e in enumerate(de) if e != 1]
        onu = [d for d, e in enumerate(oe) if e != 1]
        out = [None] * len(oe)
        if [de[d] for d in dnu] == [oe[d] for d in onu]:
            for a, b in zip(onu, dnu):
                out[a] = b
            return out
        if not dom_is_dst:
            raise InternalError("T.copy broadcast with the source as the iteration domain")
        # right-aligned broadcast of the source's non-unit extents over the destination's
        for k in range(1, len(onu) + 1):
            a, b = onu[-k], dnu[-k]
            if oe[a] != de[b]:
                raise KernelTypeError("T.copy operands do not pair", dom.loc)
            out[a] = b
        return out

    def domain_layout(self, r: N.Region, global_itemsize: int = 0) -> Layout | None:
        """Thread layout of a copy's iteration domain: a fragment's own; for a static shared/global tile the
        default coalesced layout, or with ``global_itemsize`` (a shared tile copied from/to global memory of
        that element size) ``layout.copy_layout``'s vector-width-first one."""
        if self.where(r.buffer) == "reg":
            return self.layout(r.buffer)
        ext = r.extents
        if all(isinstance(e, int) for e in ext):
            if global_itemsize:
                return copy_layout(tuple(ext), self.nt, global_itemsize)
            return default_layout(tuple(ext), self.nt)
        return None

    def iterate(self, dom: N.Region, body_fn, side_effects=True, vector_last=False, global_itemsize: int = 0):
        """Run ``body_fn(rel_codes, slot_code)`` for each element of ``dom`` this thread handles."""
        lay = self.domain_layout(dom, global_itemsize)
        if lay is None:
            # a global tile with symbolic extents: a flat block-stride loop
            ext = [self.hoist(_c(e) if isinstance(e, int) else self._outer_expr(e)) for e in dom.extents]
            total = self.hoist(" * ".join(ext) if ext else "1")
            e = self.fresh("_e")
            self.emit(f"for {e} in range(_tid, {total}, {self.nt}):")
            with self.indent():
                rem = e
                rel = [None] * len(ext)
                for d in reversed(range(len(ext))):
                    if d == 0:
                        rel[d] = rem
                    else:
                        q = self.fresh("_r")
                        self.emit(f"{q} = {rem} % {ext[d]}")
                        rel[d] = q
                        nr = self.fresh("_q")
                        self.emit(f"{nr} = {rem} // {ext[d]}")
                        rem = nr
                body_fn(rel, None)
            return
        prim = self.primary_cond(lay) if side_effects else None
        self.slot_loops(lay, lambda idx, slot, sv, lanes=1: body_fn(idx, slot) if lanes == 1
                        else body_fn(idx, slot, lanes=lanes), extra_guard=prim, vector_last=vector_last)
