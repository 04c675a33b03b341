"""Lowering of ``T.reduce_*`` and ``T.cumsum``: a mixin of :class:`~.lower.KernelGen`.

Contract: :class:`ReduceLowering` emits reductions of a register fragment (per-thread partials, then
warp shuffles and/or a shared scratch round across the reduced thread group, then into the
destination, replicated over its layout) or of a shared/global tile (one owner thread per output
line), and cumulative sums (one thread per line). ``reduce_internal_events`` reports the scratch
barriers a reduction contains, for the barrier pass.
"""

from __future__ import annotations

from ... import dtypes as dt
from ...errors import InternalError, KernelTypeError
from ...ir import nodes as N
from ...ir.queries import deferrable_loop_reduce
from ...ir.traverse import walk_stmts
from . import rules as Rl
from .codestr import _add, _mul, _pow2, _prod
from .emitter import ParCtx
from .layout import default_layout, full_replicated

#: defer the cross-thread part of `clear=False` reductions in loops to after the loop (see plan_deferred).
#: On since run 5 (docs/cuda-backend.md): an A/B in one H200 run, alternating off/on twice, timed the
#: chunked RMSNorm (8192², bf16, 1024-column chunks, 512 threads) at 185.0/185.3 us off and 93.0/92.9 us on.
DEFER_LOOP_REDUCTIONS = True


def _not_parallel(s) -> bool:
    """Block-level walks do not enter T.Parallel bodies (element code has no tile reductions)."""
    return not isinstance(s, N.Parallel)


class ReduceLowering:
    """``T.reduce_*`` / ``T.cumsum`` (see the module docstring)."""

    def _reduce_plan(self, s: N.Reduce):
        src, dst = s.src.buffer, s.dst.buffer
        if self.where(src) != "reg":
            return "mem", None
        lay = self.layout(src)
        if lay.is_split(s.dim):  # place_buffers re-places such launches with FullRow warp grids
            raise InternalError(f"reduction of {src.name} along a split layout dimension {lay.describe()}")
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
        if id(s) in self.deferred:
            return []  # register-only inside the loop; the cross-thread part runs after it, fenced
        cross, direct = self._reduce_plan(s)
        ev = []
        if cross in ("scratch", "mixed"):
            part = "_scratch_b" if self.scr_alt.get(id(s)) else "_scratch"
            ev += [("W", part), ("SYNC",), ("R", part)]
        if cross != "mem" and not direct and self.where(s.dst.buffer) == "reg":
            ev += ([("SYNC",)] if cross in ("scratch", "mixed") else []) + [("W", "_scratch"), ("SYNC",),
                                                                            ("R", "_scratch")]
        return ev

    # ---- deferred cross-thread reductions: `for c: ...; T.reduce_*(x, acc, clear=False)` keeps one
    # per-thread partial per output across the iterations and reduces across threads once, after the loop
    # (no shuffles, shared round or barriers per iteration: the next chunk's loads are not held back)
    def plan_scratch_alternation(self):
        """Consecutive block reductions put their per-warp partials in two scratch arrays by turns, so
        the second need not wait (a barrier) until every thread has read the first's partials."""
        self.scr_alt = {}
        flip = 0

        for st in walk_stmts(self.launch.body, enter=_not_parallel):
            if isinstance(st, N.Reduce) and id(st) not in self.deferred:
                cross, _ = self._reduce_plan(st)
                if cross in ("scratch", "mixed"):
                    self.scr_alt[id(st)] = flip
                    flip ^= 1

    def plan_deferred(self):
        self.deferred = {}
        self.deferred_by_loop = {}
        if not DEFER_LOOP_REDUCTIONS:
            return

        for st in walk_stmts(self.launch.body, enter=_not_parallel):
            if isinstance(st, N.For):
                for r in st.body:
                    if deferrable_loop_reduce(st.body, r) and self._deferrable(r):
                        lay = self.layout(r.src.buffer)
                        nout = lay.restrict([d for d in range(lay.ndim) if d != r.dim]).nslots
                        self.deferred[id(r)] = (self.fresh("_dpart"), nout)
                        self.deferred_by_loop.setdefault(id(st), []).append(r)

    def _deferrable(self, r) -> bool:
        if self.where(r.src.buffer) != "reg" or self.where(r.dst.buffer) != "reg":
            return False
        cross, direct = self._reduce_plan(r)
        return bool(direct) and cross in ("shfl", "mixed", "scratch")

    def _defer_acc(self, r):
        src, dst = r.src.buffer, r.dst.buffer
        acc_d = "float64" if "float64" in (src.dtype, dst.dtype) and r.kind in ("sum", "abssum") else (
            src.dtype if dt.is_float(src.dtype) else ("float32" if dt.is_float(dst.dtype) else "int64"))
        return acc_d, Rl.ctype(acc_d)

    def defer_begin(self, loop):
        for r in self.deferred_by_loop.get(id(loop), ()):
            name, nout = self.deferred[id(r)]
            acc_d, cd = self._defer_acc(r)
            ident, _, _ = self._red_ops(r.kind, cd)
            self.local_decl(name, nout, {"f32": "float32", "f64": "float64", "int": "int64", "bool": "int64"}[cd])
            self.emit(f"for _q in range({nout}):")
            self.emit(f"    {name}[_q] = {ident}")

    def defer_end(self, loop):
        for r in self.deferred_by_loop.get(id(loop), ()):
            name, _ = self.deferred[id(r)]
            cross, _ = self._reduce_plan(r)
            fence = cross in ("scratch", "mixed")
            if fence:
                self.emit("cuda.syncthreads()")
            self.tile_reduce(r, finish_from=name)
            if fence:
                self.emit("cuda.syncthreads()")

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

    def tile_reduce(self, s: N.Reduce, finish_from: str | None = None):
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
        if finish_from is not None:  # after a loop: the partials accumulated by the deferred reduction
            red = finish_from
        else:
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
            dp = self.deferred.get(id(s))
            if dp is not None:  # inside the loop: only fold this thread's partials (see plan_deferred)
                self.emit(f"for _q in range({nout}):")
                self.emit(f"    {dp[0]}[_q] = {comb.format(a=f'{dp[0]}[_q]', b=f'{red}[_q]')}")
                return
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
            alt = finish_from is None and self.scr_alt.get(id(s))
            scr = self.need_scratch(kind + ("b" if alt else ""), nout * self.nt)
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
