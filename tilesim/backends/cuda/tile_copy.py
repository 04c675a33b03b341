"""Lowering of ``T.copy``, ``T.fill`` and ``T.atomic_*``: a mixin of :class:`~.lower.KernelGen`.

Contract: :class:`CopyLowering` emits tile copies between global / shared / register tiles (an
in-bounds, optionally vectorised fast path and a guarded element-wise path; fragment → fragment with
different layouts through shared scratch, ``relayout``), fills, and tile or scalar atomics. Its
region element helpers ``_read``/``_write`` are shared with the other tile ops. ``copy_internal_events``
reports the scratch barrier a relayout contains, for the barrier pass.
"""

from __future__ import annotations

import contextlib

from ... import dtypes as dt
from ...errors import InternalError, KernelTypeError
from ...ir import nodes as N
from . import rules as Rl
from .codestr import _add, _prod
from .emitter import ParCtx
from .layout import full_replicated


class CopyLowering:
    """``T.copy`` / ``T.fill`` / ``T.atomic_*`` (see the module docstring)."""

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
                keep = src.dtype == "float32" and self.pack_only(dst.buffer)

                def body(idx, slot):
                    v = Rl.from_register(f"{self.arr(src.buffer)}[{slot}]", src.dtype)
                    v = v if keep else Rl.convert(v, src.dtype, dst.dtype)
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

        nd, no = len(dom.extents), len(other.extents)
        # a shared tile copied from/to global memory: vector-width-first layout (16-byte accesses where the rows allow)
        gsz = (int(dt.itemsize(other.dtype) or 0) if self.where(dom.buffer) == "shared" and not broadcast
               and self.where(other.buffer) == "global" and pairing[no - 1] == nd - 1
               and other.dtype != "float4_e2m1fn" else 0)
        lay = self.domain_layout(dom, gsz)
        vec = (lay is not None and lay.vec[-1] > 1 and self.where(other.buffer) == "global"
               and pairing[no - 1] == nd - 1 and other.extents[-1] != 1
               and lay.vec[-1] * max(1, int(dt.itemsize(other.dtype))) in (4, 8, 16)
               and other.dtype != "float4_e2m1fn" and lay.vec[-1] in (2, 4, 8))

        def body(rel, slot, lanes=1, guarded=False):
            orel = [rel[p] if p is not None else "0" for p in pairing]
            if lanes > 1 and guarded:  # a vector's elements one by one, each store guarded (see below)
                for k in range(lanes):
                    r = rel[:-1] + [_add(rel[-1], k)]
                    body(r, _add(slot, k))
                return
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
            self.iterate(dom, body, side_effects=side, global_itemsize=gsz)
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
                self.iterate(dom, body, side_effects=side, vector_last=vec, global_itemsize=gsz)
            finally:
                self.unguarded = saved
        self.emit("else:")
        with self.indent():
            if vec and not dom_is_dst and (src.buffer.alias_of or src.buffer).uid in getattr(self, "wgmma_accs", ()):
                # a wgmma accumulator's edge tile: the fast path's loop nest with per-element guarded stores, so NVVM
                # unrolls it as it does the fast path (a third loop level over the lanes was left rolled for an fp8
                # GEMM's bf16 output: a run-time index put the whole accumulator in local memory, tile_wgmma.py)
                self.iterate(dom, lambda rel, slot, lanes=1: body(rel, slot, lanes, guarded=True), side_effects=side,
                             vector_last=True, global_itemsize=gsz)
            else:
                self.iterate(dom, body, side_effects=side, global_itemsize=gsz)

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
        if self.par is not None:
            self.store(dst.buffer, idx, None, v, s.value.dtype, atomic=s.kind)
            return
        # outside T.Parallel: in per-thread code every thread does its own atomic, at tile level thread 0
        per_thread = bool(self.launch.thread_vars)
        if not per_thread:
            self.emit("if _tid == 0:")
        with contextlib.nullcontext() if per_thread else self.indent():
            self.par = ParCtx(full_replicated((), self.nt), {}, [], [], None)
            try:
                self.store(dst.buffer, idx, None, v, s.value.dtype, atomic=s.kind)
            finally:
                self.par = None
