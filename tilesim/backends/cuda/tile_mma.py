"""Lowering of ``T.gemm`` on tensor cores: a mixin of :class:`~.lower.KernelGen`.

Contract: :meth:`MmaLowering.gemm_mma` emits ``C += A @ B`` for a gemm the placement recorded in
``Placement.mma`` (its register accumulator has :func:`~.mma_layout.mma_layout` on some warp grid
``WM x WN``, read back with :func:`~.mma_layout.grid_of`). Per k16 step each warp loads its m16 tiles of A
and its n8 tiles of B with ``ldmatrix.x4`` (``.trans`` where the operand is
contiguous along M/N) into ``uint32`` registers and issues one ``mma.sync.m16n8k16`` per (m16, n8)
tile pair on the accumulator slots :func:`~.mma_layout.c_slots` names. fp8 operands step K by 32 instead
and issue one ``mma.sync.m16n8k32.{e4m3,e5m2}.{e4m3,e5m2}`` per tile pair: a K-contiguous fp8 operand is loaded
with the same ``ldmatrix.x4`` (on the raw ``uint8`` shared array, k offsets doubled); an M- or N-contiguous one
(``ldmatrix.trans`` cannot transpose bytes) is gathered with four byte loads per fragment register
(:func:`~.mma_layout.a_frag8_coord` / :func:`~.mma_layout.b_frag8_coord`) packed into a ``uint32``. Lane addresses come from
:mod:`.mma_layout` (the functions the NumPy emulation test checks), called with code strings; their
lane-dependent parts are computed once before the K loop. Everything is unrolled in the source except
the K loop.
"""

from __future__ import annotations

from ... import dtypes as dt
from ...errors import InternalError
from . import emitter as E
from . import mma_layout as ML
from .layout import a_register_layout
from .mma_layout import Code


def _c(x):
    """An int for a literal, else a :class:`Code`."""
    x = str(x)
    return int(x) if x.lstrip("-").isdigit() else Code(x)


class MmaLowering:
    """``T.gemm`` on tensor cores (see the module docstring)."""

    def gemm_mma(self, s, lay, C: str):
        if self.where(s.a.buffer) == "reg":
            self._gemm_mma_reg_a(s, lay, C)
            return
        M, Nn = lay.shape
        wgm, wgn = ML.grid_of(lay)
        MT, NT = ML.tiles(M, Nn, (wgm, wgn))
        S1 = lay.slots[1]
        K = int(s.a.extents[-2] if s.trans_a else s.a.extents[-1])
        abase, a_rs, a_ks, a_arr, a_dt = self._operand(s.a, s.trans_a, rows=True)
        bbase, b_cs, b_ks, b_arr, b_dt = self._operand(s.b, s.trans_b, rows=False)
        epb = ML.elems_per_b16(a_dt)  # fp8: a b16 ldmatrix element is two operand elements along K
        a_bytes, b_bytes = ML.fp8_byte_loads(a_dt, s.trans_a, s.trans_b)  # fp8 M-/N-contiguous: byte loads
        lane = Code(self.coord(32, 1))
        w = self.coord(wgm, 32)  # the warp's grid row: w % WM (module docstring of mma_layout)
        warp = 0 if w == "0" else Code(w)
        w = self.coord(wgn, 32 * wgm)  # its grid column: w // WM
        wcol = 0 if w == "0" else Code(w)
        mma = ML.mma_intrinsic(a_dt, b_dt)
        # per-lane row addresses at k = 0 (ldmatrix), or the lane's byte-load base, hoisted out of the K loop
        if a_bytes:
            m, k = ML.a_frag8_coord(lane, warp, 0, wgm, 0, 0)
            a_off = self.hoist(str(_c(abase) + m * _c(a_rs) + k * _c(a_ks)))
        else:
            a_off = []
            for mi in range(MT):
                m, k = ML.a_ldsm_coord(lane, warp, mi, wgm, s.trans_a)
                a_off.append(self.hoist(str(_c(abase) + m * _c(a_rs) + k * epb * _c(a_ks))))
        if b_bytes:
            n, k = ML.b_frag8_coord(lane, 0, wcol, wgn, 0, 0)
            b_off = self.hoist(str(_c(bbase) + n * _c(b_cs) + k * _c(b_ks)))
        else:
            b_off = self._b_ldsm_offsets(lane, NT, s.trans_b, (bbase, b_cs, b_ks), epb, wcol, wgn)
        if not a_bytes:
            self._smem_base(a_arr, s.a.buffer, a_off)
        if not b_bytes:
            self._smem_base(b_arr, s.b.buffer, b_off)
        kk = self.fresh("_k")
        fa = [[self.fresh(f"_fa{mi}_") for _ in range(4)] for mi in range(MT)]
        fb = [[self.fresh(f"_fb{q}_") for _ in range(2)] for q in range(NT)]

        def packed(arr, at, offsets):
            """Four bytes ``arr[at + o]`` as one ``uint32``, the first lowest (the fp8 fragment order)."""
            parts = [f"uint32(_ldx({arr}, {at} + {o}))" + (f" << {8 * h}" if h else "") for h, o in enumerate(offsets)]
            return "(" + " | ".join(f"({x})" for x in parts) + ")"

        self.emit(f"for {kk} in range(0, {K}, {ML.mma_k(a_dt)}):")
        with self.indent():
            if a_bytes:  # A stored (K, M): lane (g, t) gathers A[m, 4t + 16(i//2) + h] of 4 k-rows per register
                at = self.fresh("_ak")
                self.emit(f"{at} = {a_off} + {_c(a_ks) * Code(kk)}")
                for mi in range(MT):
                    for i in range(4):
                        offs = [ML.a_frag8_coord(0, 0, mi, wgm, i, h) for h in range(4)]
                        self.emit(f"{fa[mi][i]} = {packed(a_arr, at, [m * a_rs + k * a_ks for m, k in offs])}")
            else:
                lda = "_ldsm4t" if s.trans_a else "_ldsm4"
                for mi in range(MT):
                    self.emit(f"{', '.join(fa[mi])} = {self._ldsm_call(lda, s.a.buffer, a_arr, a_off[mi], _c(a_ks) * Code(kk))}")
            if b_bytes:  # B stored (K, N): lane (g, t) gathers B[4t + 16i + h, n] of 4 k-rows per register
                bt = self.fresh("_bk")
                self.emit(f"{bt} = {b_off} + {_c(b_ks) * Code(kk)}")
                for q in range(NT):
                    for i in range(2):
                        offs = [ML.b_frag8_coord(0, q, 0, wgn, i, h) for h in range(4)]
                        self.emit(f"{fb[q][i]} = {packed(b_arr, bt, [n * b_cs + k * b_ks for n, k in offs])}")
            else:
                self._mma_b_ldsm(s.trans_b, s.b.buffer, b_arr, b_off, _c(b_ks) * Code(kk), fb)
            self._mma_issue(mma, fa, fb, C, S1)

    def _b_ldsm_offsets(self, lane, NT: int, trans_b: bool, operand, epb: int, wcol, wgn: int) -> list:
        """Hoisted per-lane ``ldmatrix`` row offsets into B at k = 0, one per pair of the warp's n8 tiles
        (``operand`` = (base, N stride, K stride) from :meth:`~.tile_gemm.GemmLowering._operand`)."""
        base, cs, ks = operand
        out = []
        for q2 in range(NT // 2):
            n, k = ML.b_ldsm_coord(lane, q2, not trans_b, wcol, wgn)
            out.append(self.hoist(str(_c(base) + n * _c(cs) + k * epb * _c(ks))))
        return out

    def _mma_b_ldsm(self, trans_b: bool, buf, b_arr: str, b_off: list, k_off, fb: list):
        """``ldmatrix.x4`` of the warp's n8 tiles of B, two per instruction, at K offset ``k_off``."""
        ldb = "_ldsm4" if trans_b else "_ldsm4t"
        for q2 in range(len(fb) // 2):
            regs = fb[2 * q2] + fb[2 * q2 + 1]
            self.emit(f"{', '.join(regs)} = {self._ldsm_call(ldb, buf, b_arr, b_off[q2], k_off)}")

    def _ldsm_call(self, fn: str, buf, arr: str, off: str, k_off) -> str:
        """The call of ``ldmatrix`` ``fn`` (``_ldsm4``/``_ldsm4t``) at element ``off + k_off`` of ``arr``: with
        :data:`~.emitter.INT_FORMS`, at the 32-bit shared address ``(_sbase(arr) + item * off) + item * k_off``
        (:mod:`.smem_addr`; the bracket hoisted by :meth:`_smem_base` before the gemm's K loop)."""
        if not E.INT_FORMS:
            return f"{fn}({arr}, {off} + {k_off})"
        return f"{fn}a({self._sbases[(arr, off)]} + {int(dt.itemsize(buf.dtype))} * {k_off})"

    def _smem_base(self, arr: str, buf, offs):
        """Hoist, here (before a gemm's K loop), the 32-bit shared address of each lane row offset ``offs`` of
        ``arr`` for :meth:`_ldsm_call`: ``_sbase(arr) + item * off`` — for a pipeline stage view, from the stage
        array and the stage number (:meth:`~.pipeline.PipelineLowering.stage_view`), so the view's slice is not
        needed. The K offsets added later are constants: the instruction's immediate offset."""
        if not E.INT_FORMS:
            return
        item = int(dt.itemsize(buf.dtype))
        view = self.stage_view(arr) if hasattr(self, "stage_view") else None
        base = self.hoist(f"_sbase({arr})" if view is None else f"_sbase({view[0]}) + {item} * ({view[1]})")
        names = self.__dict__.setdefault("_sbases", {})
        for off in ([offs] if isinstance(offs, str) else offs):
            names[(arr, off)] = self.hoist(f"_sreg({base} + {item} * {off})")

    def _mma_issue(self, mma: str, fa: list, fb: list, C: str, S1: int):
        """One ``mma.sync`` per (m16, n8) tile pair of the warp, on the accumulator slots of :func:`~.mma_layout.c_slots`."""
        for mi in range(len(fa)):
            for q in range(len(fb)):
                cs = ", ".join(f"{C}[{i}]" for i in ML.c_slots(mi, q, S1))
                self.emit(f"{cs} = {mma}({', '.join(fa[mi] + fb[q])}, {cs})")

    def _gemm_mma_reg_a(self, s, lay, C: str):
        """``C += A @ B`` with A a register fragment (the placement keeps it there only on a warp grid all
        along M, with :func:`~.layout.a_register_layout`): A's C-fragment slots of n8 tiles ``2j``, ``2j + 1``
        are, packed two values per register (``cvt.rn.{bf16,f16}x2``), the A fragment of k16 step ``j`` — no
        shared-memory round trip, no barrier. The K loop is unrolled (slot numbers are constants, so the
        fragment stays in registers); B is read with ``ldmatrix`` as in :meth:`gemm_mma`."""
        M, Nn = lay.shape
        wgm, wgn = ML.grid_of(lay)
        a = s.a.buffer
        K = int(s.a.extents[-1])
        alay = self.layout(a)
        if wgn != 1 or alay != a_register_layout(lay, K) or K % 16:
            raise InternalError(f"register operand {a.name} of a tensor-core gemm: layout {alay.describe()}")
        MT, NT = ML.tiles(M, Nn, (wgm, 1))
        S1, S1a, A = lay.slots[1], alay.slots[1], self.arr(a)
        bbase, b_cs, b_ks, b_arr, b_dt = self._operand(s.b, s.trans_b, rows=False)
        lane = Code(self.coord(32, 1))
        b_off = self._b_ldsm_offsets(lane, NT, s.trans_b, (bbase, b_cs, b_ks), 1, 0, 1)
        self._smem_base(b_arr, s.b.buffer, b_off)
        pack = "_pack_bf16x2" if a.dtype == "bfloat16" else "_pack_f16x2"
        mma = ML.mma_intrinsic(a.dtype, b_dt)
        for j in range(K // ML.MMA_K):
            fa = [[self.fresh(f"_fa{mi}_") for _ in range(4)] for mi in range(MT)]
            fb = [[self.fresh(f"_fb{q}_") for _ in range(2)] for q in range(NT)]
            for mi in range(MT):
                lo, hi = ML.c_slots(mi, 2 * j, S1a), ML.c_slots(mi, 2 * j + 1, S1a)
                for reg, (x, y) in zip(fa[mi], ((lo[0], lo[1]), (lo[2], lo[3]), (hi[0], hi[1]), (hi[2], hi[3]))):
                    self.emit(f"{reg} = {pack}({A}[{x}], {A}[{y}])")
            self._mma_b_ldsm(s.trans_b, s.b.buffer, b_arr, b_off, _c(b_ks) * (ML.MMA_K * j), fb)
            self._mma_issue(mma, fa, fb, C, S1)
