"""Lowering of ``T.gemm``: a mixin of :class:`~.lower.KernelGen`.

Contract: :class:`GemmLowering` emits ``C (+)= A @ B`` with both operands in shared memory as a
per-thread register micro-tile over the accumulator's layout (``_gemm_core``); a register
accumulator is updated in place, a shared one (a demoted fragment) through a temporary register
accumulator in :func:`~.layout.gemm_layout`. Gemms the placement put on tensor cores go to
:meth:`~.tile_mma.MmaLowering.gemm_mma`.
"""

from __future__ import annotations

from ... import dtypes as dt
from ...errors import InternalError, KernelTypeError
from ...ir import nodes as N
from . import rules as Rl
from .codestr import _add, _mul
from .emitter import ParCtx
from .layout import Layout, full_replicated, gemm_layout


class GemmLowering:
    """``T.gemm`` (see the module docstring)."""

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
            if id(s) in self.wgmma:
                self.gemm_wgmma(s, lay, C)  # Hopper warpgroup MMA (tile_wgmma.py)
                return
            if id(s) in self.placement.mma:
                self.gemm_mma(s, lay, C)  # tensor cores (tile_mma.py)
                return
            self._gemm_core(s, lay, C)
            if c.dtype in dt.NARROW_FLOATS:
                self.emit(f"for _g in range({lay.nslots}):")
                self.emit(f"    {C}[_g] = {Rl.convert(f'{C}[_g]', 'float32', c.dtype)}")
            return
        # C in shared memory (a demoted fragment): a temporary register accumulator in the gemm layout
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
