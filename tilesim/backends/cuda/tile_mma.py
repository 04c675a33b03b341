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

from . import mma_layout as ML
from .mma_layout import Code


def _c(x):
    """An int for a literal, else a :class:`Code`."""
    x = str(x)
    return int(x) if x.lstrip("-").isdigit() else Code(x)


class MmaLowering:
    """``T.gemm`` on tensor cores (see the module docstring)."""

    def gemm_mma(self, s, lay, C: str):
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
            b_off = []
            for q2 in range(NT // 2):
                n, k = ML.b_ldsm_coord(lane, q2, not s.trans_b, wcol, wgn)
                b_off.append(self.hoist(str(_c(bbase) + n * _c(b_cs) + k * epb * _c(b_ks))))
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
                    self.emit(f"{', '.join(fa[mi])} = {lda}({a_arr}, {a_off[mi]} + {_c(a_ks) * Code(kk)})")
            if b_bytes:  # B stored (K, N): lane (g, t) gathers B[4t + 16i + h, n] of 4 k-rows per register
                bt = self.fresh("_bk")
                self.emit(f"{bt} = {b_off} + {_c(b_ks) * Code(kk)}")
                for q in range(NT):
                    for i in range(2):
                        offs = [ML.b_frag8_coord(0, q, 0, wgn, i, h) for h in range(4)]
                        self.emit(f"{fb[q][i]} = {packed(b_arr, bt, [n * b_cs + k * b_ks for n, k in offs])}")
            else:
                ldb = "_ldsm4" if s.trans_b else "_ldsm4t"
                for q2 in range(NT // 2):
                    regs = fb[2 * q2] + fb[2 * q2 + 1]
                    self.emit(f"{', '.join(regs)} = {ldb}({b_arr}, {b_off[q2]} + {_c(b_ks) * Code(kk)})")
            for mi in range(MT):
                for q in range(NT):
                    cs = ", ".join(f"{C}[{i}]" for i in ML.c_slots(mi, q, S1))
                    self.emit(f"{cs} = {mma}({', '.join(fa[mi] + fb[q])}, {cs})")
