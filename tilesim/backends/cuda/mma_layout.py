"""Warp-level index math of ``T.gemm`` on tensor cores (``mma.sync.m16n8k16`` fp16/bf16 -> fp32,
``mma.sync.m16n8k32`` fp8 e4m3/e5m2 -> fp32).

Pure Python: every function here takes plain ``int`` values (the NumPy emulation in
``tests/backends/test_mma_emulation.py``) or :class:`Code` values (the code generator,
:mod:`.tile_mma`), so the generated kernel and the emulation compute the same addresses.

Warp grid (:func:`warp_grid`): the block's ``nw`` warps form a ``WM x WN`` grid over the C tile, picked
as TileLang's ``GemmWarpPolicy`` picks it (:func:`tilesim.warp_partition.warp_partition`: ``Square``, the
default, the most square per-warp tile — 2 x 2 for 4 warps on 128 x 128; ``FullRow`` all warps along M;
``FullCol`` along N). Warp ``w = tid // 32`` is at grid row ``wm = w % WM`` and column ``wn = w // WM``.
The grid changes speed (operand reuse), never results. Where TileLang's grid does not fit this lowering
(each warp needs a multiple of 16 columns: ``ldmatrix.x4`` loads B's n8 tiles in pairs) ``FullRow`` is
used; :data:`FORCE_POLICY` (``None`` normally) overrides every policy (the A/B timing of the grids).

Accumulator layout (:func:`mma_layout`, an ordinary :class:`~.layout.Layout`, used unchanged by every
other lowering of the fragment: copies, ``T.Parallel`` epilogues, reductions). Rows: ``tcount = 8*WM``
groups at thread stride 4 (group ``(tid // 4) % (8*WM) = 8*wm + lane//4``: the warp's row bits are next
to the lane's, as ``w % WM`` is the low part of ``w``). Columns: ``tcount = 4*WN`` groups with ``vec = 2``,
group ``lane % 4 + 4*wn`` — split over two thread factors (``split = (4, 32*WM)``) when ``WN > 1``. Warp
``(wm, wn)`` thus owns the m16 tiles ``WM*i + wm`` and the n8 tiles ``WN*q + wn`` (interleaved). Row slot
``2*mi`` / ``2*mi + 1`` of a thread are the rows ``g`` / ``g + 8`` of its warp's ``mi``-th m16 tile,
column slots ``2*q`` / ``2*q + 1`` the columns ``2t`` / ``2t + 1`` of its ``q``-th n8 tile — exactly
the C fragment of ``mma.m16n8k16`` (:func:`c_slots`). With ``WN = 1`` (FullRow) this is the layout of
every earlier run.

Operands come from shared memory through ``ldmatrix.x4`` (four 8x8 b16 matrices; lane ``L`` supplies
the row address of matrix ``L // 8``, row ``L % 8``): :func:`a_ldsm_coord` / :func:`b_ldsm_coord` give the
(M or N index, K index) of the first element of the 16-byte row lane ``L`` points at, for the plain
(contiguous K) and the ``.trans`` (contiguous M / N) forms.

fp8 (``m16n8k32``, sm_89+): the 8-bit fragments are the 16-bit ones with every b16 element read as a pair
of consecutive fp8 elements along K (A register ``i``: row ``g + 8*(i%2)``, k ``4t + 16*(i//2) + {0..3}``;
B register ``i``: column ``g``, k ``4t + 16*i + {0..3}``; C as for k16). So a k32 step of fp8 loads exactly
what a k16 step of b16 loads, byte for byte: the same ``ldmatrix.x4`` (non-transposed) row addresses with
the k coordinate doubled (:func:`elems_per_b16`), for a K-contiguous operand (A ``(M, K)`` row-major, B given as
``(N, K)``: ``transpose_B=True``, TileLang's usual fp8 form). ``ldmatrix.trans`` moves whole b16 elements, so it
cannot transpose 8-bit ones: an M- or N-contiguous fp8 operand is gathered with four byte loads per fragment
register instead (:func:`fp8_byte_loads`, :func:`a_frag8_coord`, :func:`b_frag8_coord`: the fragment tables
above, per byte). Mixed e4m3 x e5m2 is allowed.

Eligibility (:func:`tensor_core_accumulator`, :func:`mma_shape_ok`): A, B fp16 or bf16 (the same), or fp8
(e4m3/e5m2, any pair), C float32, ``M % (16*WM) == 0``, ``N % (16*WN) == 0``, ``K % 16 == 0``
(fp8: ``K % 32``), the block a whole number of warps; both operands whole shared-memory buffers (or
regions of them: leading dimensions of extent 1) whose rows are a multiple of 16 bytes and whose region
starts at a multiple of 16 bytes along the row, so every ``ldmatrix`` row address is 16-byte aligned
(operand rows get 16 bytes of padding, 8 elements for 2-byte types, instead of the usual 1 word, see
``lower._smem_layout``). Anything else uses the CUDA-core lowering.
"""

from __future__ import annotations

from ... import dtypes as dt
from ...ir import nodes as N
from ...warp_partition import mma_sync_grid
from .layout import Layout

#: ``None``, or a policy name that replaces every gemm's ``GemmWarpPolicy`` (``"FullRow"``: the 4 x 1 grid
#: of the runs before issue 14's warp grid; ``benchmarks/gpu_run.py --only tc`` times both)
FORCE_POLICY: str | None = None

#: (M, N, K) of one 16-bit mma instruction (fp8: K = ``MMA_K * elems_per_b16``)
MMA_M, MMA_N, MMA_K = 16, 8, 16

#: PTX type names of the fp8 operands of ``mma.sync.m16n8k32``
FP8_KIND = {"float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2"}


def elems_per_b16(dtype: str) -> int:
    """Operand elements per 16-bit ``ldmatrix`` element: 2 for fp8, else 1."""
    return 2 if dtype in FP8_KIND else 1


def mma_k(a_dtype: str) -> int:
    """K of one mma instruction for operands of ``a_dtype``: 16 (fp16/bf16), 32 (fp8)."""
    return MMA_K * elems_per_b16(a_dtype)


def mma_intrinsic(a_dtype: str, b_dtype: str) -> str:
    """Name of the mma intrinsic (:mod:`.mma_intrinsics`) for the operand types."""
    if a_dtype in FP8_KIND:
        return f"_mma_{FP8_KIND[a_dtype]}_{FP8_KIND[b_dtype]}"
    return "_mma_bf16" if a_dtype == "bfloat16" else "_mma_f16"


def fp8_byte_loads(a_dtype: str, trans_a: bool, trans_b: bool) -> tuple[bool, bool]:
    """Whether A / B are gathered with byte loads (:func:`a_frag8_coord`, :func:`b_frag8_coord`): fp8
    operands that are not K-contiguous (A stored ``(K, M)``, B stored ``(K, N)``)."""
    fp8 = a_dtype in FP8_KIND
    return fp8 and trans_a, fp8 and not trans_b


def a_frag8_coord(lane, warp, mi, WM: int, i: int, h: int):
    """(m, k) inside the k32 step of byte ``h`` of fp8 A fragment register ``i`` of lane ``lane``, for the
    ``mi``-th m16 tile of the warp at grid row ``warp`` of ``WM`` (rows as :func:`a_ldsm_coord`'s)."""
    g, t = lane // 4, lane % 4
    return (mi * 2 + i % 2) * (8 * WM) + warp * 8 + g, 4 * t + 16 * (i // 2) + h


def b_frag8_coord(lane, q, wn, WN: int, i: int, h: int):
    """(n, k) inside the k32 step of byte ``h`` of fp8 B fragment register ``i`` of lane ``lane``, for the
    warp's local n8 tile ``q`` (the tile's n8 tile ``WN*q + wn``, as :func:`b_ldsm_coord`'s)."""
    g, t = lane // 4, lane % 4
    return (q * WN + wn) * 8 + g, 4 * t + 16 * i + h


class Code:
    """An integer-valued code string: ``+ - * // % ^ & >> <<`` with ints or other ``Code`` build the expression."""

    __slots__ = ("s",)

    def __init__(self, s: str):
        self.s = s

    def __str__(self):
        return self.s

    def __repr__(self):
        return f"Code({self.s!r})"

    @staticmethod
    def _bin(a, op, b):
        if isinstance(a, int) and isinstance(b, int):
            return {"+": a + b, "-": a - b, "*": a * b, "//": a // b, "%": a % b,
                    "^": a ^ b, "&": a & b, ">>": a >> b, "<<": a << b}[op]
        if op == "*" and (a == 0 or b == 0):
            return 0
        if op == "*" and a == 1:
            return b
        if op in ("*", "//") and b == 1:
            return a
        if op in ("+", "-", "^", ">>", "<<") and b == 0:
            return a
        if op == "+" and a == 0:
            return b
        return Code(f"({a} {op} {b})")

    def __add__(self, o):
        return Code._bin(self, "+", o)

    def __radd__(self, o):
        return Code._bin(o, "+", self)

    def __sub__(self, o):
        return Code._bin(self, "-", o)

    def __mul__(self, o):
        return Code._bin(self, "*", o)

    def __rmul__(self, o):
        return Code._bin(o, "*", self)

    def __floordiv__(self, o):
        return Code._bin(self, "//", o)

    def __mod__(self, o):
        return Code._bin(self, "%", o)

    def __xor__(self, o):
        return Code._bin(self, "^", o)

    def __rxor__(self, o):
        return Code._bin(o, "^", self)

    def __and__(self, o):
        return Code._bin(self, "&", o)

    def __rshift__(self, o):
        return Code._bin(self, ">>", o)

    def __lshift__(self, o):
        return Code._bin(self, "<<", o)


def mma_layout(M: int, N: int, nthreads: int, grid: tuple[int, int] | None = None) -> Layout:
    """The accumulator layout of a tensor-core gemm on warp grid ``grid = (WM, WN)`` (default: all warps
    along M) — see the module docstring."""
    wm, wn = grid if grid is not None else (nthreads // 32, 1)
    return Layout((M, N), (8 * wm, 4 * wn), (4, 1), nthreads, (1, 2), ((8 * wm, 0), (4, 32 * wm)))


def grid_of(lay: Layout) -> tuple[int, int]:
    """``(WM, WN)`` of an accumulator layout made by :func:`mma_layout`."""
    return lay.tcount[0] // 8, lay.tcount[1] // 4


def is_mma_layout(lay: Layout) -> bool:
    if lay.ndim != 2 or lay.nthreads % 32 or lay.tcount[0] % 8 or lay.tcount[1] % 4:
        return False
    wm, wn = grid_of(lay)
    return wm * wn * 32 == lay.nthreads and lay == mma_layout(lay.shape[0], lay.shape[1], lay.nthreads, (wm, wn))


def warp_grid(M: int, N: int, nthreads: int, policy="Square") -> tuple[int, int]:
    """``(WM, WN)`` for a C tile ``M x N`` (see the module docstring): TileLang's pick for ``policy`` (or
    :data:`FORCE_POLICY`) when this lowering can run it, else all warps along M."""
    return mma_sync_grid(M, N, max(1, nthreads // 32), FORCE_POLICY or policy)


def mma_shape_ok(M: int, N: int, K: int, nthreads: int, a_dtype: str, b_dtype: str, c_dtype: str,
                 grid: tuple[int, int] | None = None) -> str | None:
    """``None`` when the gemm can run on tensor cores on warp grid ``grid`` (default: all warps along M),
    else the reason it cannot."""
    fp8 = a_dtype in FP8_KIND and b_dtype in FP8_KIND
    if not fp8 and (a_dtype != b_dtype or a_dtype not in ("float16", "bfloat16")):
        return (f"operands {a_dtype} x {b_dtype} (tensor cores here: fp16 x fp16, bf16 x bf16 or "
                "fp8 (e4m3/e5m2) x fp8)")
    if c_dtype != "float32":
        return f"accumulator {c_dtype} (tensor cores here: float32)"
    if nthreads % 32:
        return f"{nthreads} threads is not a whole number of warps"
    wm, wn = grid if grid is not None else (nthreads // 32, 1)
    mk = mma_k(a_dtype)
    if M % (MMA_M * wm) or N % (2 * MMA_N * wn) or K % mk:
        return (f"{M}x{N}x{K} is not a multiple of {MMA_M * wm}x{2 * MMA_N * wn}x{mk} "
                f"({wm} x {wn} warps along M x N)")
    return None


def tiles(M: int, N: int, grid: tuple[int, int]) -> tuple[int, int]:
    """(m16 tiles per warp, n8 tiles per warp) on warp grid ``grid = (WM, WN)``."""
    wm, wn = grid
    return M // (MMA_M * wm), N // (MMA_N * wn)


def a_ldsm_coord(lane, warp, mi, nw: int, trans: bool):
    """(m, k) inside the k16 step of the first element of the row lane ``lane`` gives ``ldmatrix.x4`` for
    A's ``mi``-th m16 tile, for the warp at grid row ``warp`` of ``nw`` (``WM``; all warps for FullRow). Matrix ``j = lane // 8`` is A fragment register ``j``:
    rows ``g`` (j even) or ``g + 8`` (j odd) of the tile, k ``0-7`` (j < 2) or ``8-15``.
    Plain: the lane points at row ``m`` (8 contiguous k). ``trans`` (A stored K x M): at k-row ``k``
    (8 contiguous m), ``ldmatrix.trans`` hands each lane the transposed pairs."""
    j, r = lane // 8, lane % 8
    group, khalf = j % 2, j // 2
    row0 = (mi * 2 + group) * (8 * nw) + warp * 8  # first row of this 8-row group (accumulator layout)
    if trans:
        return row0, khalf * 8 + r
    return row0 + r, khalf * 8


def b_ldsm_coord(lane, q2, trans: bool, wn=0, WN: int = 1):
    """(n, k) inside the k16 step of the row lane ``lane`` gives ``ldmatrix.x4`` for the n8 tiles
    ``2*q2`` and ``2*q2 + 1`` of the warp at grid column ``wn`` of ``WN`` (the tile's n8 tiles
    ``WN*(2*q2) + wn`` and ``WN*(2*q2 + 1) + wn``). Matrix ``j``: local n tile ``2*q2 + j // 2``, k ``0-7``
    (j even) or ``8-15`` — registers 0, 1 are tile ``2*q2``'s B fragment, 2, 3 tile ``2*q2 + 1``'s.
    Plain (B stored N x K): the lane points at column ``n`` (8 contiguous k). ``trans`` (B stored K x N,
    the usual): at k-row ``k`` (8 contiguous n)."""
    j, r = lane // 8, lane % 8
    n0 = ((q2 * 2 + j // 2) * WN + wn) * 8
    k0 = (j % 2) * 8
    if trans:
        return n0, k0 + r
    return n0 + r, k0


def c_slots(mi, q, slots_per_row: int):
    """Local-array slots of the accumulator holding ``c0..c3`` of m16 tile ``mi`` x n8 tile ``q``."""
    r0, r1 = mi * 2, mi * 2 + 1
    c0, c1 = q * 2, q * 2 + 1
    return (r0 * slots_per_row + c0, r0 * slots_per_row + c1, r1 * slots_per_row + c0, r1 * slots_per_row + c1)


def operand_problem(r: N.Region, in_shared) -> str | None:
    """``None`` when ``ldmatrix`` can read the gemm operand region ``r`` (see the module docstring)."""
    b = r.buffer
    if b.alias_of is not None or not in_shared(b):
        return f"{b.name} is not a shared-memory buffer"
    shape = b.static_shape()
    if shape is None or len(shape) < 2 or any(e != 1 for e in r.extents[:-2]):
        return f"{b.name}: not a 2-D tile of a static buffer"
    per16 = 16 // max(1, int(dt.itemsize(b.dtype)))  # elements per 16 bytes
    if shape[-1] % per16:
        return f"{b.name}: rows of {shape[-1]} elements (a multiple of {per16} is needed for 16-byte rows)"
    st = r.starts[-1]
    if not (isinstance(st, N.Const) and int(st.value) % per16 == 0):
        return f"{b.name}: the tile does not start at a multiple of {per16} along its rows"
    return None


def tensor_core_accumulator(g: N.Gemm, M: int, N_: int, nthreads: int, in_shared,
                            full_row: bool = False, reg_a: bool = False) -> Layout | None:
    """The accumulator layout when gemm ``g`` (C tile ``M x N_``) can run on tensor cores, else None: on
    the grid of the gemm's warp policy, or all warps along M with ``full_row`` (the placement asks for it
    when a consumer of the accumulator needs whole rows in one warp). ``reg_a``: operand A is a register
    fragment (the placement's candidate): every warp then needs whole rows of A, so the warps go all along M
    and A's K must be a multiple of 16 (its k16 steps are pairs of n8 tiles of its own C-fragment layout)."""
    ka = g.a.extents[-2] if g.trans_a else g.a.extents[-1]
    grid = (max(1, nthreads // 32), 1) if (full_row or reg_a) else warp_grid(M, N_, nthreads, g.policy)
    why = mma_shape_ok(M, N_, int(ka), nthreads, g.a.buffer.dtype, g.b.buffer.dtype, g.c.buffer.dtype, grid)
    if reg_a:
        why = why or (None if int(ka) % (2 * MMA_N) == 0 and g.a.buffer.dtype in ("float16", "bfloat16")
                      else "a register operand A needs 16-bit values and K a multiple of 16")
    else:
        why = why or operand_problem(g.a, in_shared)
    why = why or operand_problem(g.b, in_shared)
    if why is not None:
        return None
    return mma_layout(M, N_, nthreads, grid)
