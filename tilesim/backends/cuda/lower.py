"""Lowering driver: a ``PrimFunc`` → one generated ``numba.cuda.jit`` kernel per launch, plus a host plan.

Generated kernels (one Python function per ``T.Kernel``) take every global tensor as a flat 1-D device
array (row-major; bf16/fp8 as raw uint16/uint8 bits) followed by the scalar parameters, symbolic
dimensions and host-computed values they use. Inside a kernel:

* ``_tid = threadIdx.x`` (blocks are 1-D: ``threads=(a, b)`` is flattened), ``blockIdx.x/y/z`` are the
  ``T.Kernel`` block variables in order (x fastest, as in the interpreter);
* per-thread layout coordinates ``_t<P>_<stride> = (_tid // stride) % P`` are computed once;
* register fragments are ``cuda.local.array(slots)``; shared buffers (and demoted fragments) are
  1-D ``cuda.shared.array`` with padded row strides; ``T.alloc_var`` scalars are locals;
* every access is a flat index through ``_ldx``/``_stx`` (no wrap-around checks); global accesses are
  guarded per dimension (reads out of range give 0, writes are skipped);
* ``cuda.syncthreads()`` is placed before a block-level statement that reads shared/global memory
  another statement of the block wrote since the last barrier, or writes memory read or written
  since then (loops are analysed to a fixpoint, so the barrier closing a pipelined loop's iteration
  is found too).

Sources are cached per (PrimFunc, fastmath, mode) in :mod:`runtime`.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field

from ... import dtypes as dt
from ...errors import InternalError, KernelError, KernelTypeError
from ...ir import nodes as N
from . import rules as Rl
from .caps import STATIC_SMEM_LIMIT
from .layout import Layout, Placement, default_layout, full_replicated, place_buffers, sub_bodies

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*$|^-?\d+$")


def _san(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if not s or s[0].isdigit():
        s = "v_" + s
    return s


def _pow2(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


def _prod(xs):
    n = 1
    for x in xs:
        n *= x
    return n


def _c(x) -> str:
    """An int or code string, as code."""
    return str(x)


def _add(a, b) -> str:
    if a == "0" or a == 0:
        return _c(b)
    if b == "0" or b == 0:
        return _c(a)
    if isinstance(a, int) and isinstance(b, int):
        return str(a + b)
    return f"({a} + {b})"


def _mul(a, b) -> str:
    if a == "0" or b == "0" or a == 0 or b == 0:
        return "0"
    if a == "1" or a == 1:
        return _c(b)
    if b == "1" or b == 1:
        return _c(a)
    if isinstance(a, int) and isinstance(b, int):
        return str(a * b)
    return f"({a} * {b})"


@dataclass
class ParCtx:
    """The element context of a ``T.Parallel`` loop being generated."""

    layout: Layout
    dims: dict  # var uid -> loop dim
    idx: list  # code of each loop dim's index
    slot: list  # code of each loop dim's slot number
    primary: str | None  # condition for side effects when the loop layout is replicated


@dataclass
class KernelSource:
    name: str
    source: str
    args: list  # ("array", Buffer) | ("scalar", Var)
    launch: N.Launch
    threads: int
    smem_bytes: int
    notes: list = field(default_factory=list)


class KernelGen:
    """Generates the source of one launch (see the module docstring)."""

    def __init__(self, pf: N.PrimFunc, launch: N.Launch, index: int, outer_scalars: dict, sim: bool):
        self.pf = pf
        self.launch = launch
        self.nt = launch.num_threads
        self.sim = sim
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
        self.placement: Placement = place_buffers(launch)
        self.sstride: dict[int, tuple] = {}
        self.smem_bytes = 0
        self.gprolog: list[str] = []
        self._gdims: dict[int, tuple] = {}
        self.barrier_before: set[int] = set()
        self.notes: list[str] = []
        self.unguarded: set[int] = set()

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
        try:
            fn = Rl.EXPR_RULES[type(e)]
        except KeyError:
            raise InternalError(f"no CUDA lowering rule for expression {type(e).__name__}") from None
        return fn(self, e)

    def body(self, stmts):
        for s in stmts:
            if self.par is None and id(s) in self.barrier_before:
                self.emit("cuda.syncthreads()")
            try:
                fn = Rl.STMT_RULES[type(s)]
            except KeyError:
                raise InternalError(f"no CUDA lowering rule for statement {type(s).__name__}") from None
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

    def index_code(self, lay: Layout, d: int, sv: str) -> str:
        """Index along dim ``d`` of the thread's slot ``sv`` (code) in layout ``lay``."""
        P, V = lay.tcount[d], lay.vec[d]
        t = self.coord(P, lay.tstride[d])
        if V == 1:
            return _add(t, _mul(sv, P))
        return f"({_mul(t, V)} + ({sv} // {V}) * {P * V} + {sv} % {V})"

    def primary_cond(self, lay: Layout) -> str | None:
        if not lay.replicated:
            return None
        terms = [_mul(self.coord(p, s), s) for p, s in zip(lay.tcount, lay.tstride) if p > 1]
        base = " + ".join(terms) if terms else "0"
        return f"(_tid == {base})"

    # ----------------------------------------------------------------------------------- memory
    def where(self, buf: N.Buffer) -> str:
        root = buf.alias_of or buf
        if root.scope == "global":
            return "global"
        return self.placement.where(buf if buf.alias_of is None else root)

    def resource(self, buf: N.Buffer):
        w = self.where(buf)
        if w in ("global", "shared"):
            return (buf.alias_of or buf).uid
        return None

    def layout(self, buf: N.Buffer) -> Layout:
        lay = self.placement.reg.get(buf.uid)
        if lay is None:
            raise InternalError(f"fragment {buf.name} has no layout")
        return lay

    def arr(self, buf: N.Buffer) -> str:
        w = self.where(buf)
        if w == "global":
            if buf not in self.arg_arrays:
                self.arg_arrays.append(buf)
            return f"{_san(buf.name)}_{buf.uid}"
        root = buf.alias_of or buf
        return f"{_san(root.name)}_{root.uid}"

    def gdims(self, buf: N.Buffer) -> tuple:
        """Dimensions (code) of a global buffer."""
        got = self._gdims.get(buf.uid)
        if got is not None:
            return got
        self.arr(buf)
        dims = []
        for d, x in enumerate(buf.shape):
            if isinstance(x, int):
                dims.append(str(x))
            else:
                code = self._outer_expr(x)
                n = f"_d{buf.uid}_{d}"
                self.gprolog.append(f"{n} = {code}")
                dims.append(n)
        strides = []
        acc = "1"
        for d in reversed(range(len(dims))):
            strides.append(acc)
            nxt = _mul(acc, dims[d])
            if not _IDENT.match(nxt):
                n = f"_s{buf.uid}_{d}"
                self.gprolog.append(f"{n} = {nxt}")
                nxt = n
            acc = nxt
        got = (tuple(dims), tuple(reversed(strides)))
        self._gdims[buf.uid] = got
        return got

    def _outer_expr(self, e) -> str:
        saved_par, self.par = self.par, None
        try:
            return self.expr(e)
        finally:
            self.par = saved_par

    def sstrides(self, buf: N.Buffer) -> tuple:
        root = buf.alias_of or buf
        if buf.alias_of is not None:
            return tuple(_prod(buf.shape[d + 1:]) for d in range(buf.ndim))
        return self.sstride[root.uid]

    def lin(self, strides, idx) -> str:
        code = "0"
        for s, i in zip(strides, idx):
            code = _add(code, _mul(i, s))
        return code

    def reg_index(self, buf: N.Buffer, idx_codes, idx_nodes) -> str:
        """Local-array index of a register fragment element."""
        lay = self.layout(buf)
        if self.par is not None and idx_nodes is not None and len(idx_nodes) == buf.ndim and buf.ndim > 0:
            dims = []
            for i, n in zip(idx_nodes, buf.shape):
                if type(i) is N.Var and i.uid in self.par.dims and self.par.layout.shape[self.par.dims[i.uid]] == n:
                    dims.append(self.par.dims[i.uid])
                else:
                    dims = None
                    break
            if dims is not None and len(set(dims)) == len(dims) and self.par.layout.restrict(dims) == lay:
                slots = lay.slots
                code = "0"
                for k, d in enumerate(dims):
                    code = _add(code, _mul(self.par.slot[d], _prod(slots[k + 1:])))
                return code
        if lay.full_replicated:
            strides = tuple(_prod(buf.shape[d + 1:]) for d in range(buf.ndim))
            return self.lin(strides, idx_codes)
        raise InternalError(f"fragment {buf.name} ({lay.describe()}) accessed outside its layout")

    def load(self, buf: N.Buffer, idx_codes, idx_nodes=None) -> str:
        w = self.where(buf)
        if w == "var":
            return Rl.from_register(self.var_name(buf), buf.dtype)
        if w == "reg":
            return Rl.from_register(f"{self.arr(buf)}[{self.reg_index(buf, idx_codes, idx_nodes)}]", buf.dtype)
        if w == "shared":
            return Rl.from_storage(f"_ldx({self.arr(buf)}, {self.lin(self.sstrides(buf), idx_codes)})", buf.dtype)
        dims, strides = self.gdims(buf)
        if (buf.alias_of or buf).uid in self.unguarded:  # inside a copy whose whole tile is in bounds
            return Rl.from_storage(f"_ldx({self.arr(buf)}, {self.lin(strides, idx_codes)})", buf.dtype)
        idx = [self.hoist(c) for c in idx_codes]
        cond = " and ".join(f"{i} >= 0 and {i} < {d}" for i, d in zip(idx, dims)) or "True"
        val = Rl.from_storage(f"_ldx({self.arr(buf)}, {self.lin(strides, idx)})", buf.dtype)
        return f"({val} if ({cond}) else {Rl.zero(buf.dtype)})"

    def var_name(self, buf: N.Buffer) -> str:
        n = self.names.get(buf.uid)
        if n is None:
            n = f"{_san(buf.name)}_{buf.uid}"
            self.names[buf.uid] = n
        return n

    def store(self, buf: N.Buffer, idx_codes, idx_nodes, val_code: str, val_dtype: str, atomic=None):
        """Emit a store of ``val_code`` (compute repr of ``val_dtype``) into ``buf[idx]``."""
        v = Rl.convert(val_code, val_dtype, buf.dtype)
        w = self.where(buf)
        if w == "var":
            self.emit(f"{self.var_name(buf)} = {Rl.to_register(v, buf.dtype)}")
            return
        if w == "reg":
            self.emit(f"{self.arr(buf)}[{self.reg_index(buf, idx_codes, idx_nodes)}] = {Rl.to_register(v, buf.dtype)}")
            return
        guard = []
        if self.par is None:
            guard.append("_tid == 0")
        elif self.par.primary is not None:
            guard.append(self.par.primary)
        if w == "shared":
            lin = self.lin(self.sstrides(buf), idx_codes)
        elif (buf.alias_of or buf).uid in self.unguarded:
            dims, strides = self.gdims(buf)
            lin = self.lin(strides, idx_codes)
        else:
            dims, strides = self.gdims(buf)
            idx = [self.hoist(c) for c in idx_codes]
            guard += [f"{i} >= 0 and {i} < {d}" for i, d in zip(idx, dims)]
            lin = self.lin(strides, idx)
        vv = self.hoist(v)
        stmt = self._store_stmt(buf, lin, vv, atomic)
        if guard:
            self.emit(f"if {' and '.join(guard)}:")
            self.emit(f"    {stmt}")
        else:
            self.emit(stmt)

    def _store_stmt(self, buf, lin, v, atomic):
        a = self.arr(buf)
        if atomic is None:
            return f"_stx({a}, {lin}, {Rl.to_storage(v, buf.dtype)})"
        if buf.dtype in dt.NARROW_FLOATS and buf.dtype != "float16":
            raise KernelTypeError(f"T.atomic_{atomic} on a {buf.dtype} buffer is not supported by the CUDA backend",
                                  hint="accumulate in a float32 buffer")
        if buf.dtype == "float16" and atomic != "add":
            raise KernelTypeError(f"T.atomic_{atomic} on float16 is not supported by the CUDA backend")
        return f"cuda.atomic.{atomic}({a}, {lin}, {Rl.to_storage(v, buf.dtype)})"

    # ----------------------------------------------------------------------------------- allocation
    def alloc(self, s: N.Alloc):
        b = s.buffer
        if b.scope == "var":
            init = Rl.zero(b.dtype) if s.init is None else Rl.convert(self.expr(s.init), s.init.dtype, b.dtype)
            self.emit(f"{self.var_name(b)} = {Rl.to_register(init, b.dtype)}")
            return
        if b.scope == "global":
            if b.alias_of is None:
                raise KernelTypeError(f"T.alloc_global({b.name}) inside a kernel launch", s.loc,
                                      hint="allocate workspaces at the top level of the prim_func")
            return
        if s.init is not None:
            raise KernelTypeError("an initialised on-chip buffer is not supported by the CUDA backend", s.loc)
        # on-chip buffers are declared in the prologue

    # ----------------------------------------------------------------------------------- loops over layouts
    def slot_loops(self, lay: Layout, body_fn, guard=True, extra_guard=None, vector_last=False):
        """Emit loops over a layout's slots; ``body_fn(idx_codes, slot_code, slot_vars)`` emits the body.

        With ``vector_last`` and a vector width V > 1 on the last dimension, the body is called once per V
        consecutive elements (``idx``/``slot`` of the first) with the extra argument ``lanes=V``.
        """
        slots = lay.slots
        idx, slot_vars = [], []
        opened = 0
        lanes = 1
        for d in range(lay.ndim):
            S, P, V = slots[d], lay.tcount[d], lay.vec[d]
            t = self.coord(P, lay.tstride[d])
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
            elif S > 1:
                sv = self.fresh("_s")
                self.emit(f"for {sv} in range({S}):")
                self.push_indent()
                opened += 1
                code = _add(t, _mul(sv, P))
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
                              self.primary_cond(lay))
            try:
                self.body(s.body)
            finally:
                self.par = None

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

    def domain_layout(self, r: N.Region) -> Layout | None:
        if self.where(r.buffer) == "reg":
            return self.layout(r.buffer)
        ext = r.extents
        if all(isinstance(e, int) for e in ext):
            return default_layout(tuple(ext), self.nt)
        return None

    def iterate(self, dom: N.Region, body_fn, side_effects=True, vector_last=False):
        """Run ``body_fn(rel_codes, slot_code)`` for each element of ``dom`` this thread handles."""
        lay = self.domain_layout(dom)
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

    # ----------------------------------------------------------------------------------- tile ops
    def copy_internal_events(self, s: N.Copy):
        if self.where(s.src.buffer) == "reg" and self.where(s.dst.buffer) == "reg":
            if self.layout(s.src.buffer) != self.layout(s.dst.buffer):
                return [("W", "_scratch"), ("SYNC",), ("R", "_scratch")]
        return []

    def tile_copy(self, s: N.Copy):
        src, dst = s.src, s.dst
        ws, wd = self.where(src.buffer), self.where(dst.buffer)
        if ws == "reg" and wd == "reg":
            ls, ld = self.layout(src.buffer), self.layout(dst.buffer)
            if ls == ld:
                def body(idx, slot):
                    v = Rl.from_register(f"{self.arr(src.buffer)}[{slot}]", src.dtype)
                    v = Rl.convert(v, src.dtype, dst.dtype)
                    self.emit(f"{self.arr(dst.buffer)}[{slot}] = {Rl.to_register(v, dst.dtype)}")
                self.slot_loops(ls, lambda idx, slot, sv: body(idx, slot), guard=False)
                return
            self.relayout(src, dst)
            return
        rank = {"global": 0, "shared": 1, "reg": 2, "var": 2}
        broadcast = tuple(e for e in src.extents if e != 1) != tuple(e for e in dst.extents if e != 1)
        dom_is_dst = broadcast or rank[wd] >= rank[ws]
        dom, other = (dst, src) if dom_is_dst else (src, dst)
        pairing = self.pair(dom, other, dom_is_dst)
        dstarts = self.region_starts(dom)
        ostarts = self.region_starts(other)

        lay = self.domain_layout(dom)
        nd, no = len(dom.extents), len(other.extents)
        vec = (lay is not None and lay.vec[-1] > 1 and self.where(other.buffer) == "global"
               and pairing[no - 1] == nd - 1 and other.extents[-1] != 1
               and lay.vec[-1] * max(1, int(dt.itemsize(other.dtype))) in (4, 8, 16)
               and other.dtype != "float4_e2m1fn" and lay.vec[-1] in (2, 4, 8))

        def body(rel, slot, lanes=1):
            orel = [rel[p] if p is not None else "0" for p in pairing]
            if lanes > 1:
                self._copy_lanes(src, dst, dom_is_dst, dstarts, ostarts, rel, orel, slot, lanes)
                return
            if dom_is_dst:
                val = self._read(src, ostarts, orel, None)
                self._write(dst, dstarts, rel, slot, val, src.dtype)
            else:
                val = self._read(src, dstarts, rel, slot)
                self._write(dst, ostarts, orel, None, val, src.dtype)

        side = self.where(dst.buffer) in ("global", "shared")
        globs = [(r, st) for r, st in ((src, ostarts if dom_is_dst else dstarts),
                                       (dst, dstarts if dom_is_dst else ostarts)) if self.where(r.buffer) == "global"]
        if lay is None or not globs:
            self.iterate(dom, body, side_effects=side)
            return
        # fast path: the whole tile is inside its global tensor(s) (and aligned for vector accesses):
        # no per-element guards; otherwise the guarded element-wise path (TileLang's edge semantics)
        conds = []
        for r, st in globs:
            conds += self._tile_in_bounds(r, st)
        if vec:
            conds += self._tile_aligned(other, ostarts, lay.vec[-1])
        self.emit(f"if {' and '.join(conds) if conds else 'True'}:")
        with self.indent():
            saved = self.unguarded
            self.unguarded = saved | {(r.buffer.alias_of or r.buffer).uid for r, _ in globs}
            try:
                self.iterate(dom, body, side_effects=side, vector_last=vec)
            finally:
                self.unguarded = saved
        self.emit("else:")
        with self.indent():
            self.iterate(dom, body, side_effects=side)

    def _tile_in_bounds(self, r: N.Region, starts) -> list:
        dims, _ = self.gdims(r.buffer)
        out = []
        for st, e, d in zip(starts, r.extents, dims):
            ext = str(e) if isinstance(e, int) else self.hoist(self._outer_expr(e))
            out.append(f"{st} >= 0 and {st} + {ext} <= {d}")
        return out

    def _tile_aligned(self, r: N.Region, starts, lanes) -> list:
        """Conditions for ``lanes``-wide accesses along the last dim of global region ``r`` to be aligned."""
        dims, strides = self.gdims(r.buffer)
        nbytes = lanes * max(1, int(dt.itemsize(r.buffer.dtype)))
        out = [f"_aligned({self.arr(r.buffer)}, {self.lin(strides, starts)}, {nbytes})"]
        for st, e in zip(strides[:-1], r.extents[:-1]):
            if e == 1:
                continue
            if st.lstrip("-").isdigit():
                if int(st) % lanes:
                    out.append("False")
            else:
                out.append(f"{st} % {lanes} == 0")
        return out

    def _copy_lanes(self, src, dst, dom_is_dst, dstarts, ostarts, rel, orel, slot, lanes):
        """One vector of ``lanes`` consecutive elements (fast path: in bounds and aligned)."""
        if dom_is_dst:  # global source, vector load
            _, strides = self.gdims(src.buffer)
            lin = self.lin(strides, self.abs_index(ostarts, orel))
            raw = [self.fresh("_w") for _ in range(lanes)]
            self.emit(f"{', '.join(raw)} = _ldv{lanes}({self.arr(src.buffer)}, {lin})")
            for k, w in enumerate(raw):
                r = rel[:-1] + [_add(rel[-1], k)]
                self._write(dst, dstarts, r, _add(slot, k), Rl.from_storage(w, src.dtype), src.dtype)
            return
        # register/shared source, vector store to global
        xs = [self.fresh("_x") for _ in range(lanes)]
        for k, x in enumerate(xs):
            r = rel[:-1] + [_add(rel[-1], k)]
            v = self._read(src, dstarts, r, _add(slot, k))
            self.emit(f"{x} = {Rl.convert(v, src.dtype, dst.dtype)}")
        _, strides = self.gdims(dst.buffer)
        lin = self.lin(strides, self.abs_index(ostarts, orel))
        vals = ", ".join(Rl.to_storage(x, dst.dtype) for x in xs)
        self.emit(f"_stv{lanes}({self.arr(dst.buffer)}, {lin}, ({vals},))")

    def _read(self, r: N.Region, starts, rel, slot) -> str:
        buf = r.buffer
        if self.where(buf) == "reg":
            if slot is None:
                raise InternalError(f"fragment {buf.name} read outside its layout in a copy")
            return Rl.from_register(f"{self.arr(buf)}[{slot}]", buf.dtype)
        return self.load(buf, self.abs_index(starts, rel))

    def _write(self, r: N.Region, starts, rel, slot, val, vdtype, atomic=None):
        buf = r.buffer
        w = self.where(buf)
        if w == "reg":
            if slot is None:
                raise InternalError(f"fragment {buf.name} written outside its layout in a copy")
            v = Rl.convert(val, vdtype, buf.dtype)
            self.emit(f"{self.arr(buf)}[{slot}] = {Rl.to_register(v, buf.dtype)}")
            return
        saved = self.par
        self.par = ParCtx(full_replicated((), self.nt), {}, [], [], None)  # side-effect guard handled by caller
        try:
            self.store(buf, self.abs_index(starts, rel), None, val, vdtype, atomic=atomic)
        finally:
            self.par = saved

    def need_scratch(self, kind: str, n: int):
        self.scratch[kind] = max(self.scratch.get(kind, 0), n)
        return f"_scr_{kind}"

    def relayout(self, src: N.Region, dst: N.Region):
        """Register fragment → register fragment with another layout, through shared scratch."""
        ls, ld = self.layout(src.buffer), self.layout(dst.buffer)
        kind = {"f32": "f32", "f64": "f64", "int": "i64", "bool": "i64"}[Rl.ctype(src.dtype)]
        n = _prod(src.buffer.shape)
        scr = self.need_scratch(kind, n)
        sshape = src.buffer.shape
        sstr = tuple(_prod(sshape[d + 1:]) for d in range(len(sshape)))
        pairing = self.pair(dst, src, True)

        def wr(idx, slot, sv):
            v = Rl.from_register(f"{self.arr(src.buffer)}[{slot}]", src.dtype)
            self.emit(f"_stx({scr}, {self.lin(sstr, idx)}, {v})")

        self.slot_loops(ls, wr, extra_guard=self.primary_cond(ls))
        self.emit("cuda.syncthreads()")

        def rd(idx, slot, sv):
            sidx = [idx[p] if p is not None else "0" for p in pairing]
            v = f"_ldx({scr}, {self.lin(sstr, sidx)})"
            if Rl.ctype(src.dtype) == "bool":
                v = f"({v} != 0)"
            v = Rl.convert(v, src.dtype, dst.dtype)
            self.emit(f"{self.arr(dst.buffer)}[{slot}] = {Rl.to_register(v, dst.dtype)}")

        self.slot_loops(ld, rd)

    # gemm ------------------------------------------------------------------------------------
    def tile_gemm(self, s: N.Gemm):
        c = s.c.buffer
        M, Nn = self._mat(s.c)
        if self.where(c) == "reg":
            lay = self.layout(c)
            if lay.ndim != 2:
                raise InternalError("gemm accumulator layout is not 2-D")
            C = self.arr(c)
            if s.clear_accum:
                self.emit(f"for _g in range({lay.nslots}):")
                self.emit(f"    {C}[_g] = {Rl.zero(c.dtype)}")
            self._gemm_core(s, lay, C)
            if c.dtype in dt.NARROW_FLOATS:
                self.emit(f"for _g in range({lay.nslots}):")
                self.emit(f"    {C}[_g] = {Rl.convert(f'{C}[_g]', 'float32', c.dtype)}")
            return
        # C in shared memory (a demoted fragment): a temporary register accumulator in the gemm layout
        from .layout import gemm_layout

        lay = gemm_layout(M, Nn, self.nt)
        acc_np = {"f32": "float32", "f64": "float64", "int": "int64", "bool": "int64"}[Rl.ctype(c.dtype)]
        C = self.fresh("_cacc")
        self.local_decl(C, lay.nslots, acc_np)
        cstarts = self.region_starts(s.c)
        nd = len(s.c.extents)

        def rel_of(idx):
            rel = ["0"] * nd
            rel[nd - 2], rel[nd - 1] = idx[0], idx[1]
            return rel

        def ld(idx, slot, sv):
            v = Rl.zero(c.dtype) if s.clear_accum else self.load(c, self.abs_index(cstarts, rel_of(idx)))
            self.emit(f"{C}[{slot}] = {v}")

        self.slot_loops(lay, ld, guard=True)
        self._gemm_core(s, lay, C)

        def st(idx, slot, sv):
            saved = self.par
            self.par = ParCtx(full_replicated((), self.nt), {}, [], [], None)
            try:
                self.store(c, self.abs_index(cstarts, rel_of(idx)), None, f"{C}[{slot}]", c.dtype)
            finally:
                self.par = saved

        self.slot_loops(lay, st, guard=True, extra_guard=self.primary_cond(lay))

    def _gemm_core(self, s: N.Gemm, lay: Layout, C: str):
        """``C[slots] += A @ B`` for the thread's rows/columns of layout ``lay`` (accumulator array ``C``)."""
        c = s.c.buffer
        M, Nn = lay.shape
        acc_t = Rl.ctype(c.dtype)
        acc_np = {"f32": "float32", "f64": "float64", "int": "int64", "bool": "int64"}[acc_t]
        acc_d = {"f32": "float32", "f64": "float64", "int": "int64", "bool": "int64"}[acc_t]
        K = self._mat(s.a)[1 if not s.trans_a else 0]
        a_ref = self._operand(s.a, s.trans_a, rows=True)
        b_ref = self._operand(s.b, s.trans_b, rows=False)
        S0, S1 = lay.slots
        P0, P1 = lay.tcount
        if lay.vec != (1, 1):
            raise InternalError("gemm accumulator layout with vector slots")
        t0 = self.coord(P0, lay.tstride[0])
        t1 = self.coord(P1, lay.tstride[1])
        ra, rb = self.fresh("_ra"), self.fresh("_rb")
        self.local_decl(ra, S0, acc_np)
        self.local_decl(rb, S1, acc_np)
        # per-thread bases; rows past M (padding of the layout) read a clamped row
        abase, a_rs, a_ks, a_arr, a_dt = a_ref
        bbase, b_cs, b_ks, b_arr, b_dt = b_ref
        clamp_a = P0 * S0 > M
        clamp_b = P1 * S1 > Nn
        ab = self.hoist(_add(abase, _mul(t0, a_rs)))
        bb = self.hoist(_add(bbase, _mul(t1, b_cs)))

        def conv(x, d):
            return Rl.convert(Rl.from_storage(x, d), d, acc_d)

        kk = self.fresh("_k")
        unroll = 2 if K % 2 == 0 and K >= 4 else 1
        self.emit(f"for {kk} in range(0, {K}, {unroll}):")
        with self.indent():
            for u in range(unroll):
                ku = kk if u == 0 else f"({kk} + {u})"
                self.emit(f"for _a in range({S0}):")
                if clamp_a:
                    row = f"min({t0} + _a * {P0}, {M - 1})"
                    self.emit(f"    {ra}[_a] = {conv(f'_ldx({a_arr}, {abase} + {row} * {a_rs} + {ku} * {a_ks})', a_dt)}")
                else:
                    self.emit(f"    {ra}[_a] = {conv(f'_ldx({a_arr}, {ab} + _a * {_mul(P0, a_rs)} + {ku} * {a_ks})', a_dt)}")
                self.emit(f"for _b in range({S1}):")
                if clamp_b:
                    col = f"min({t1} + _b * {P1}, {Nn - 1})"
                    self.emit(f"    {rb}[_b] = {conv(f'_ldx({b_arr}, {bbase} + {col} * {b_cs} + {ku} * {b_ks})', b_dt)}")
                else:
                    self.emit(f"    {rb}[_b] = {conv(f'_ldx({b_arr}, {bb} + _b * {_mul(P1, b_cs)} + {ku} * {b_ks})', b_dt)}")
                self.emit(f"for _a in range({S0}):")
                self.emit(f"    for _b in range({S1}):")
                self.emit(f"        {C}[_a * {S1} + _b] += {ra}[_a] * {rb}[_b]")

    def _mat(self, r: N.Region):
        ext = [e for e in r.extents]
        while len(ext) > 2 and ext[0] == 1:
            ext.pop(0)
        return int(ext[-2]), int(ext[-1])

    def _operand(self, r: N.Region, trans: bool, rows: bool):
        """(base code, stride of the M/N index, stride of the K index, array, dtype) of a gemm operand."""
        buf = r.buffer
        if self.where(buf) != "shared":
            raise KernelTypeError(f"T.gemm operand {buf.name} must be in shared memory for the CUDA backend", r.loc)
        strides = self.sstrides(buf)
        starts = self.region_starts(r)
        base = self.lin(strides, starts)
        base = self.hoist(base)
        nd = len(r.extents)
        s_row, s_col = strides[nd - 2], strides[nd - 1]
        # A (M, K) [trans: (K, M)]; B (K, N) [trans: (N, K)]
        if rows:
            mn, k = (s_col, s_row) if trans else (s_row, s_col)
        else:
            mn, k = (s_row, s_col) if trans else (s_col, s_row)
        return base, mn, k, self.arr(buf), buf.dtype

    def local_decl(self, name: str, n: int, np_type: str):
        self.local_arrays.append((name, max(1, n), np_type))

    # reduce ------------------------------------------------------------------------------------
    def _reduce_plan(self, s: N.Reduce):
        src, dst = s.src.buffer, s.dst.buffer
        if self.where(src) != "reg":
            return "mem", None
        lay = self.layout(src)
        P = lay.tcount[s.dim]
        if P <= 1:
            cross = "none"
        elif self._shuffle_ok(lay, s.dim):
            cross = "shfl" if P * lay.tstride[s.dim] <= 32 else "mixed"
        else:
            cross = "scratch"
        keep = dst.ndim == src.ndim
        proj = lay.drop(s.dim, keep)
        direct = self.where(dst) == "reg" and self.layout(dst) == proj
        return cross, direct

    def _shuffle_ok(self, lay, d):
        if self.sim:
            return False
        P, st = lay.tcount[d], lay.tstride[d]
        if not (_pow2(P) and _pow2(st) and st < 32):
            return False
        return self.nt % 32 == 0 or P * st <= self.nt

    def reduce_internal_events(self, s: N.Reduce):
        cross, direct = self._reduce_plan(s)
        ev = []
        if cross in ("scratch", "mixed"):
            ev += [("W", "_scratch"), ("SYNC",), ("R", "_scratch")]
        if cross != "mem" and not direct and self.where(s.dst.buffer) == "reg":
            ev += ([("SYNC",)] if cross in ("scratch", "mixed") else []) + [("W", "_scratch"), ("SYNC",),
                                                                            ("R", "_scratch")]
        return ev

    def _red_ops(self, kind, cd):
        ident = {"sum": "0", "abssum": "0", "absmax": "0",
                 "max": "-_INF", "min": "_INF"}[kind]
        if cd in ("f32", "f64"):
            t = "float32" if cd == "f32" else "float64"
            ident = f"{t}({ident})"
        else:
            ident = {"0": "int64(0)", "-_INF": "int64(-9223372036854775807)", "_INF": "int64(9223372036854775807)"}[
                ident]
        comb = {"sum": "({a} + {b})", "abssum": "({a} + {b})", "absmax": "max({a}, {b})", "max": "max({a}, {b})",
                "min": "min({a}, {b})"}[kind]
        pre = "abs({x})" if kind in ("abssum", "absmax") else "{x}"
        return ident, comb, pre

    def tile_reduce(self, s: N.Reduce):
        src, dst = s.src.buffer, s.dst.buffer
        acc_d = "float64" if "float64" in (src.dtype, dst.dtype) and s.kind in ("sum", "abssum") else (
            src.dtype if dt.is_float(src.dtype) else ("float32" if dt.is_float(dst.dtype) else "int64"))
        cd = Rl.ctype(acc_d)
        ident, comb, pre = self._red_ops(s.kind, cd)
        cross, direct = self._reduce_plan(s)
        if cross == "mem":
            self._reduce_from_memory(s, acc_d, ident, comb, pre)
            return
        lay = self.layout(src)
        r = s.dim
        other = [d for d in range(lay.ndim) if d != r]
        olay = lay.restrict(other)
        nout = olay.nslots
        red = self.fresh("_red")
        acc_np = {"f32": "float32", "f64": "float64", "int": "int64", "bool": "int64"}[cd]
        self.local_decl(red, nout, acc_np)
        slots = lay.slots
        # 1. per-thread partials
        ov = []
        opened = 0
        for d in other:
            if slots[d] > 1:
                v = self.fresh("_o")
                self.emit(f"for {v} in range({slots[d]}):")
                self.push_indent()
                opened += 1
            else:
                v = "0"
            ov.append(v)
        oslot = "0"
        for k in range(len(other)):
            oslot = _add(oslot, _mul(ov[k], _prod([slots[x] for x in other[k + 1:]])))
        acc = self.fresh("_acc")
        self.emit(f"{acc} = {ident}")
        rv = self.fresh("_rs") if slots[r] > 1 else "0"
        if slots[r] > 1:
            self.emit(f"for {rv} in range({slots[r]}):")
            self.push_indent()
        full = {}
        for k, d in enumerate(other):
            full[d] = ov[k]
        full[r] = rv
        sl = "0"
        for d in range(lay.ndim):
            sl = _add(sl, _mul(full[d], _prod(slots[d + 1:])))
        x = Rl.convert(Rl.from_register(f"{self.arr(src)}[{sl}]", src.dtype), src.dtype, acc_d)
        x = pre.format(x=x)
        if lay.needs_guard(r):
            ri = self.index_code(lay, r, rv)
            self.emit(f"if {ri} < {lay.shape[r]}:")
            self.emit(f"    {acc} = {comb.format(a=acc, b=x)}")
        else:
            self.emit(f"{acc} = {comb.format(a=acc, b=x)}")
        if slots[r] > 1:
            self.pop_indent()
        self.emit(f"{red}[{oslot}] = {acc}")
        for _ in range(opened):
            self.pop_indent()
        # 2. across the threads of the reduced dimension
        P, st = lay.tcount[r], lay.tstride[r]
        groups, gstride = P, st  # what is left for the shared-memory round
        if cross in ("shfl", "mixed"):
            # butterfly over the group's lanes inside each warp
            pw = min(P, 32 // st)
            mask = "0xffffffff" if self.nt >= 32 else hex((1 << self.nt) - 1)
            self.emit(f"for _q in range({nout}):")
            with self.indent():
                self.emit(f"_v = {red}[_q]")
                off = st
                while off < pw * st:
                    self.emit(f"_v = {comb.format(a='_v', b=f'cuda.shfl_xor_sync({mask}, _v, {off})')}")
                    off *= 2
                self.emit(f"{red}[_q] = _v")
            groups, gstride = P // pw, st * pw
        if cross in ("scratch", "mixed") and groups > 1:
            # one value per (warp) group through shared memory
            kind = {"f32": "f32", "f64": "f64", "int": "i64", "bool": "i64"}[cd]
            scr = self.need_scratch(kind, nout * self.nt)
            self.emit(f"for _q in range({nout}):")
            self.emit(f"    _stx({scr}, _q * {self.nt} + _tid, {red}[_q])")
            self.emit("cuda.syncthreads()")
            base = self.hoist(f"_tid - {_mul(self.coord(P, st), st)}")
            self.emit(f"for _q in range({nout}):")
            with self.indent():
                self.emit(f"_v = {ident}")
                self.emit(f"for _p in range({groups}):")
                self.emit(f"    _v = {comb.format(a='_v', b=f'_ldx({scr}, _q * {self.nt} + {base} + _p * {gstride})')}")
                self.emit(f"{red}[_q] = _v")
        # 3. into the destination
        if direct:
            dlay = self.layout(dst)

            def put(idx, slot, sv):
                v = f"{red}[{slot}]"
                if not s.clear:
                    old = Rl.convert(Rl.from_register(f"{self.arr(dst)}[{slot}]", dst.dtype), dst.dtype, acc_d)
                    v = comb.format(a=old, b=v)
                v = Rl.convert(v, acc_d, dst.dtype)
                self.emit(f"{self.arr(dst)}[{slot}] = {Rl.to_register(v, dst.dtype)}")

            self.slot_loops(dlay, put, guard=False)
            return
        # through memory: the destination itself (shared/global) or scratch then the register layout
        keep = dst.ndim == src.ndim
        dstarts = self.region_starts(s.dst)

        if self.where(dst) != "reg":
            def put_mem(idx, slot, sv):
                rel = list(idx)
                if keep:
                    rel.insert(r, "0")
                absi = self.abs_index(dstarts, rel)
                v = f"{red}[{slot}]"
                if not s.clear:
                    v = comb.format(a=Rl.convert(self.load(dst, absi), dst.dtype, acc_d), b=v)
                saved = self.par
                self.par = ParCtx(full_replicated((), self.nt), {}, [], [], None)
                try:
                    self.store(dst, absi, None, v, acc_d)
                finally:
                    self.par = saved

            self.slot_loops(olay, put_mem, extra_guard=self.primary_cond(olay))
            return
        kind = {"f32": "f32", "f64": "f64", "int": "i64", "bool": "i64"}[cd]
        oshape = olay.shape
        ostr = tuple(_prod(oshape[d + 1:]) for d in range(len(oshape)))
        scr = self.need_scratch(kind, max(1, _prod(oshape)))
        if cross in ("scratch", "mixed"):
            self.emit("cuda.syncthreads()")  # the partials above are read from the same scratch

        def wr(idx, slot, sv):
            self.emit(f"_stx({scr}, {self.lin(ostr, idx)}, {red}[{slot}])")

        self.slot_loops(olay, wr, extra_guard=self.primary_cond(olay))
        self.emit("cuda.syncthreads()")
        dlay = self.layout(dst)

        def rd(idx, slot, sv):
            oi = [i for d, i in enumerate(idx) if not (keep and d == r)]
            v = f"_ldx({scr}, {self.lin(ostr, oi)})"
            if not s.clear:
                old = Rl.convert(Rl.from_register(f"{self.arr(dst)}[{slot}]", dst.dtype), dst.dtype, acc_d)
                v = comb.format(a=old, b=v)
            v = Rl.convert(v, acc_d, dst.dtype)
            self.emit(f"{self.arr(dst)}[{slot}] = {Rl.to_register(v, dst.dtype)}")

        self.slot_loops(dlay, rd)

    def _reduce_from_memory(self, s, acc_d, ident, comb, pre):
        """Source in shared/global memory: each owner of a destination element walks its line."""
        src, dst = s.src, s.dst
        r = s.dim
        sext = list(src.extents)
        if not isinstance(sext[r], int):
            raise KernelTypeError("T.reduce over a symbolic extent is not supported by the CUDA backend", s.loc)
        keep = dst.buffer.ndim == src.buffer.ndim and len(dst.extents) == len(sext)
        sstarts = self.region_starts(src)
        dstarts = self.region_starts(dst)
        if self.where(dst.buffer) == "reg":
            lay = self.layout(dst.buffer)
            prim = None
        else:
            lay = default_layout(tuple(dst.extents), self.nt)
            prim = self.primary_cond(lay)

        def body(idx, slot, sv):
            didx = list(idx)
            other_idx = [i for d, i in enumerate(didx) if not (keep and d == r)]
            acc = self.fresh("_acc")
            self.emit(f"{acc} = {ident}")
            k = self.fresh("_k")
            self.emit(f"for {k} in range({sext[r]}):")
            with self.indent():
                rel = list(other_idx)
                rel.insert(r, k)
                x = Rl.convert(self.load(src.buffer, self.abs_index(sstarts, rel)), src.dtype, acc_d)
                self.emit(f"{acc} = {comb.format(a=acc, b=pre.format(x=x))}")
            v = acc
            if self.where(dst.buffer) == "reg":
                if not s.clear:
                    old = Rl.convert(Rl.from_register(f"{self.arr(dst.buffer)}[{slot}]", dst.dtype), dst.dtype, acc_d)
                    v = comb.format(a=old, b=v)
                v = Rl.convert(v, acc_d, dst.dtype)
                self.emit(f"{self.arr(dst.buffer)}[{slot}] = {Rl.to_register(v, dst.dtype)}")
            else:
                absi = self.abs_index(dstarts, didx)
                if not s.clear:
                    v = comb.format(a=Rl.convert(self.load(dst.buffer, absi), dst.dtype, acc_d), b=v)
                saved = self.par
                self.par = ParCtx(full_replicated((), self.nt), {}, [], [], None)
                try:
                    self.store(dst.buffer, absi, None, v, acc_d)
                finally:
                    self.par = saved

        self.slot_loops(lay, body, extra_guard=prim)

    # fill / atomic / cumsum ------------------------------------------------------------------------
    def tile_fill(self, s: N.Fill):
        buf = s.dst.buffer
        v = self.hoist(Rl.convert(self.expr(s.value), s.value.dtype, buf.dtype))
        if self.where(buf) == "reg":
            n = self.layout(buf).nslots
            self.emit(f"for _g in range({n}):")
            self.emit(f"    {self.arr(buf)}[_g] = {Rl.to_register(v, buf.dtype)}")
            return
        starts = self.region_starts(s.dst)

        def body(rel, slot):
            self._write(s.dst, starts, rel, None, v, buf.dtype)

        self.iterate(s.dst, body, side_effects=True)

    def tile_atomic(self, s: N.Atomic):
        dst = s.dst
        if isinstance(s.value, N.Region):
            val = s.value
            pairing = self.pair(val, dst, False) if tuple(e for e in val.extents if e != 1) == tuple(
                e for e in dst.extents if e != 1) else None
            if pairing is None:
                raise KernelTypeError("T.atomic_* value and destination tiles do not pair", s.loc)
            vstarts = self.region_starts(val)
            dstarts = self.region_starts(dst)

            def body(rel, slot):
                v = self._read(val, vstarts, rel, slot)
                drel = [rel[p] if p is not None else "0" for p in pairing]
                self._write(dst, dstarts, drel, None, v, val.dtype, atomic=s.kind)

            self.iterate(val, body, side_effects=True)
            return
        idx = [self.expr(x) for x in dst.starts]
        v = self.expr(s.value)
        if self.par is None:
            self.emit("if _tid == 0:")
            with self.indent():
                saved = self.par
                self.par = ParCtx(full_replicated((), self.nt), {}, [], [], None)
                try:
                    self.store(dst.buffer, idx, None, v, s.value.dtype, atomic=s.kind)
                finally:
                    self.par = saved
            return
        self.store(dst.buffer, idx, None, v, s.value.dtype, atomic=s.kind)

    def tile_cumsum(self, s: N.Cumsum):
        src, dst = s.src, s.dst
        r = s.dim
        ext = list(src.extents)
        if not all(isinstance(e, int) for e in ext):
            raise KernelTypeError("T.cumsum over a symbolic extent is not supported by the CUDA backend", s.loc)
        other = [d for d in range(len(ext)) if d != r]
        lay = default_layout(tuple(ext[d] for d in other), self.nt)
        sstarts = self.region_starts(src)
        dstarts = self.region_starts(dst)
        acc_d = "float32" if dt.is_float(src.dtype) and src.dtype != "float64" else (
            "float64" if src.dtype == "float64" else "int64")
        pairing = self.pair(dst, src, True)

        def body(idx, slot, sv):
            acc = self.fresh("_acc")
            self.emit(f"{acc} = {Rl.zero(acc_d)}")
            k = self.fresh("_k")
            rng = f"range({ext[r] - 1}, -1, -1)" if s.reverse else f"range({ext[r]})"
            self.emit(f"for {k} in {rng}:")
            with self.indent():
                rel = list(idx)
                rel.insert(r, k)
                x = Rl.convert(self.load(src.buffer, self.abs_index(sstarts, rel)), src.dtype, acc_d)
                self.emit(f"{acc} = {acc} + {x}")
                drel = [rel[p] if p is not None else "0" for p in pairing]
                saved = self.par
                self.par = ParCtx(full_replicated((), self.nt), {}, [], [], None)
                try:
                    self.store(dst.buffer, self.abs_index(dstarts, drel), None, acc, acc_d)
                finally:
                    self.par = saved

        self.slot_loops(lay, body, extra_guard=self.primary_cond(lay))

    # ----------------------------------------------------------------------------------- barriers
    def plan_barriers(self):
        EV = Rl.EVENT_RULES

        def events(s):
            try:
                return EV[type(s)](self, s)
            except KeyError:
                raise InternalError(f"no barrier rule for {type(s).__name__}") from None

        def step(s, written, read):
            ev = events(s)
            pre = []
            for e in ev:
                if e[0] == "SYNC":
                    break
                pre.append(e)
            conflict = any((k == "R" and r in written) or (k == "W" and (r in written or r in read))
                           for k, r in pre)
            if conflict:
                self.barrier_before.add(id(s))
                written, read = set(), set()
            for e in ev:
                if e[0] == "SYNC":
                    written, read = set(), set()
                elif e[0] == "R":
                    read.add(e[1])
                else:
                    written.add(e[1])
            return written, read

        def run(body, written, read):
            written, read = set(written), set(read)
            for s in body:
                if isinstance(s, (N.If, N.For, N.While)):
                    written, read = step(s, written, read)  # the condition / bounds
                    if isinstance(s, N.If):
                        w1, r1 = run(s.then, written, read)
                        w2, r2 = run(s.orelse, written, read)
                        written, read = w1 | w2, r1 | r2
                    else:
                        ew, er = set(written), set(read)
                        for _ in range(4):
                            w1, r1 = run(s.body, ew, er)
                            nw, nr = ew | w1, er | r1
                            if nw == ew and nr == er:
                                break
                            ew, er = nw, nr
                        w1, r1 = run(s.body, ew, er)
                        written, read = ew | w1, er | r1
                else:
                    written, read = step(s, written, read)
            return written, read

        run(self.launch.body, set(), set())

    # ----------------------------------------------------------------------------------- driver
    def generate(self, pad: bool = True) -> KernelSource:
        L = self.launch
        self.local_arrays: list = []
        self._declare_onchip()
        self.pad = pad
        items, _ = self._smem_layout(pad)
        self.sstride = {b.uid: st for b, st, _, _ in items}
        for v in L.block_vars:
            self.names[v.uid] = f"{_san(v.name)}_{v.uid}"
        self.plan_barriers()
        self.body(L.body)
        return self._assemble()

    def _declare_onchip(self):
        def walk(body):
            for s in body:
                if isinstance(s, N.Alloc) and s.buffer.scope not in ("global", "var"):
                    self.allocs.append(s.buffer)
                for b in sub_bodies(s):
                    walk(b)

        walk(self.launch.body)
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

    def _smem_layout(self, pad: bool):
        total = 0
        items = []
        for b in self._shared:
            shape = b.shape
            strides = [_prod(shape[d + 1:]) for d in range(len(shape))]
            if pad and len(shape) >= 2 and shape[-1] > 1 and b.uid not in self._aliased:
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
            nbytes = n * max(1, int(dt.itemsize(b.dtype)))
            items.append((b, tuple(strides), n, nbytes))
            total += -(-nbytes // 16) * 16
        return items, total

    def _assemble(self) -> KernelSource:
        scratch_bytes = sum(n * (4 if k == "f32" else 8) for k, n in self.scratch.items())
        items, total = self._smem_layout(pad=self.pad)
        if total + scratch_bytes > STATIC_SMEM_LIMIT:
            parts = [f"{b.name} {tuple(b.shape)} {b.dtype}: {nb} B"
                     + (" (a fragment placed in shared memory: " + self.placement.demoted[b.uid] + ")"
                        if b.uid in self.placement.demoted else "") for b, _, _, nb in items]
            if scratch_bytes:
                parts.append(f"reduction/relayout scratch: {scratch_bytes} B")
            raise _SmemOverflow(KernelTypeError(
                f"kernel {self.pf.name} needs {total + scratch_bytes} bytes of shared memory per block, over the "
                f"{STATIC_SMEM_LIMIT} B static limit of the CUDA backend: " + "; ".join(parts), self.launch.loc,
                hint="use smaller tiles (block_M/block_N/block_K), fewer pipeline stages or fewer shared buffers"))
        if not self.pad:
            self.notes.append("shared rows not padded (48 KB limit)")
        self.smem_bytes = total + scratch_bytes
        # argument list
        args = [f"{self.arr(b)}" for b in self.arg_arrays]
        args += [self.names[v.uid] for v in self.arg_scalars]
        out = [f"def {self.name}({', '.join(args)}):"]
        ind = "    "
        out.append(ind + "_tid = int64(cuda.threadIdx.x)")
        axes = "xyz"
        for d, v in enumerate(self.launch.block_vars):
            out.append(ind + f"{self.names[v.uid]} = int64(cuda.blockIdx.{axes[d]})")
        for (p, st), n in sorted(self.coords.items(), key=lambda kv: kv[1]):
            q = "_tid" if st == 1 else f"(_tid // {st})"
            out.append(ind + f"{n} = {q} % {p}" if p * st < self.nt or st > 1 else ind + f"{n} = {q}")
        out.extend(ind + line for line in self.gprolog)
        for b, _st, n, _ in items:
            out.append(ind + f"{self.arr(b)} = cuda.shared.array({n}, {Rl.storage_np(b.dtype)})")
        for kind, n in sorted(self.scratch.items()):
            t = {"f32": "float32", "f64": "float64", "i64": "int64"}[kind]
            out.append(ind + f"_scr_{kind} = cuda.shared.array({n}, {t})")
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
                            self.notes)


class _SmemOverflow(Exception):
    def __init__(self, err):
        super().__init__(str(err))
        self.err = err


def generate_launch(pf: N.PrimFunc, launch: N.Launch, index: int, outer_scalars: dict, sim: bool) -> KernelSource:
    """Source of one launch: with padded shared rows, or unpadded when padding would pass 48 KB."""
    for pad in (True, False):
        g = KernelGen(pf, launch, index, outer_scalars, sim)
        try:
            return g.generate(pad)
        except _SmemOverflow as e:
            if not pad:
                raise e.err from None
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


def lower_program(pf: N.PrimFunc, sim: bool = False) -> Program:
    outer = {}
    for p in pf.params:
        if isinstance(p, N.Var):
            outer[p.uid] = p
    for v in pf.dyn_vars:
        outer[v.uid] = v
    # symbolic dims of parameters that are not listed as dyn vars (eager T.const symbols)
    for p in pf.params:
        if isinstance(p, N.Buffer):
            for d in p.shape:
                if isinstance(d, N.Expr):
                    _collect_vars(d, outer)
    steps, kernels = [], []
    for s in pf.body:
        if isinstance(s, N.Launch):
            k = generate_launch(pf, s, len(kernels), outer, sim)
            kernels.append(k)
            steps.append(("launch", k))
        elif isinstance(s, N.Alloc):
            if s.buffer.scope != "global":
                raise KernelTypeError(f"a {s.buffer.scope} buffer outside a kernel launch", s.loc)
            for d in s.buffer.shape:
                if isinstance(d, N.Expr):
                    _collect_vars(d, outer)
            steps.append(("alloc", s.buffer))
        elif isinstance(s, N.Let):
            outer[s.var.uid] = s.var
            steps.append(("let", s))
        else:
            raise KernelTypeError(f"{type(s).__name__} at the top level of a prim_func is not supported by the CUDA "
                                  f"backend", getattr(s, "loc", None),
                                  hint="put statements inside `with T.Kernel(...)`")
    return Program(pf, steps, kernels, sim)


def _collect_vars(e, out):
    if isinstance(e, N.Var):
        out.setdefault(e.uid, e)
        return
    for f in getattr(type(e), "__dataclass_fields__", {}):
        v = getattr(e, f)
        if isinstance(v, N.Expr):
            _collect_vars(v, out)
        elif isinstance(v, tuple):
            for x in v:
                if isinstance(x, N.Expr):
                    _collect_vars(x, out)
