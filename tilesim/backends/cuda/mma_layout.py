"""Warp-level index math of ``T.gemm`` on tensor cores (``mma.sync.m16n8k16``, fp16/bf16 -> fp32).

Pure Python: every function here takes plain ``int`` values (the NumPy emulation in
``tests/backends/test_mma_emulation.py``) or :class:`Code` values (the code generator,
:mod:`.tile_mma`), so the generated kernel and the emulation compute the same addresses.

Accumulator layout (:func:`mma_layout`, an ordinary :class:`~.layout.Layout`, used unchanged by every
other lowering of the fragment: copies, ``T.Parallel`` epilogues, reductions). With ``nw`` warps all
stacked along ``M`` (TileLang's ``GemmWarpPolicy.FullRow``; the policy only changes speed, not results):
rows ``tcount = 8*nw`` groups at thread stride 4 (group ``(tid // 4) % (8*nw) = 8*warp + lane//4``),
columns ``tcount = 4`` at stride 1 with ``vec = 2`` (``2*(lane%4) + {0, 1}`` in every 8-column block).
Row slot ``2*mi`` / ``2*mi + 1`` of a thread are the rows ``g`` / ``g + 8`` of its warp's ``mi``-th m16
tile, column slots ``2*q`` / ``2*q + 1`` the columns ``2t`` / ``2t + 1`` of n8 tile ``q`` — exactly the
C fragment of ``mma.m16n8k16`` (:func:`c_slots`).

Operands come from shared memory through ``ldmatrix.x4`` (four 8x8 b16 matrices; lane ``L`` supplies
the row address of matrix ``L // 8``, row ``L % 8``): :func:`a_ldsm_coord` / :func:`b_ldsm_coord` give the
(M or N index, K index) of the first element of the 16-byte row lane ``L`` points at, for the plain
(contiguous K) and the ``.trans`` (contiguous M / N) forms.

Eligibility (:func:`tensor_core_accumulator`, :func:`mma_shape_ok`): A, B fp16 or bf16 (the same), C float32, ``M % (16*nw) == 0``,
``N % 16 == 0``, ``K % 16 == 0``, the block a whole number of warps; both operands whole
shared-memory buffers (or regions of them: leading dimensions of extent 1) whose rows are a multiple of
8 elements and whose region starts at a multiple of 8 along the row, so every ``ldmatrix`` row address
is 16-byte aligned (operand rows get 8 elements of padding instead of the usual 1 word, see
``lower._smem_layout``). Anything else uses the CUDA-core lowering.
"""

from __future__ import annotations

from ...ir import nodes as N
from .layout import Layout

#: (M, N, K) of one mma instruction
MMA_M, MMA_N, MMA_K = 16, 8, 16


class Code:
    """An integer-valued code string: ``+ - * // %`` with ints or other ``Code`` build the expression."""

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
            return {"+": a + b, "-": a - b, "*": a * b, "//": a // b, "%": a % b}[op]
        if op == "*" and (a == 0 or b == 0):
            return 0
        if op == "*" and a == 1:
            return b
        if op in ("*", "//") and b == 1:
            return a
        if op in ("+", "-") and b == 0:
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


def mma_layout(M: int, N: int, nthreads: int) -> Layout:
    """The accumulator layout of a tensor-core gemm (see the module docstring)."""
    nw = nthreads // 32
    return Layout((M, N), (8 * nw, 4), (4, 1), nthreads, (1, 2))


def is_mma_layout(lay: Layout) -> bool:
    return (lay.ndim == 2 and lay.nthreads % 32 == 0 and lay == mma_layout(lay.shape[0], lay.shape[1], lay.nthreads))


def mma_shape_ok(M: int, N: int, K: int, nthreads: int, a_dtype: str, b_dtype: str, c_dtype: str) -> str | None:
    """``None`` when the gemm can run on tensor cores, else the reason it cannot."""
    if a_dtype != b_dtype or a_dtype not in ("float16", "bfloat16"):
        return f"operands {a_dtype} x {b_dtype} (tensor cores here: fp16 x fp16 or bf16 x bf16)"
    if c_dtype != "float32":
        return f"accumulator {c_dtype} (tensor cores here: float32)"
    if nthreads % 32:
        return f"{nthreads} threads is not a whole number of warps"
    nw = nthreads // 32
    if M % (MMA_M * nw) or N % (2 * MMA_N) or K % MMA_K:
        return f"{M}x{N}x{K} is not a multiple of {MMA_M * nw}x{2 * MMA_N}x{MMA_K} ({nw} warps along M)"
    return None


def tiles(M: int, N: int, nthreads: int) -> tuple[int, int]:
    """(m16 tiles per warp, n8 tiles per warp)."""
    nw = nthreads // 32
    return M // (MMA_M * nw), N // MMA_N


def a_ldsm_coord(lane, warp, mi, nw: int, trans: bool):
    """(m, k) inside the warp's k16 step of the first element of the row lane ``lane`` gives
    ``ldmatrix.x4`` for A's ``mi``-th m16 tile. Matrix ``j = lane // 8`` is A fragment register ``j``:
    rows ``g`` (j even) or ``g + 8`` (j odd) of the tile, k ``0-7`` (j < 2) or ``8-15``.
    Plain: the lane points at row ``m`` (8 contiguous k). ``trans`` (A stored K x M): at k-row ``k``
    (8 contiguous m), ``ldmatrix.trans`` hands each lane the transposed pairs."""
    j, r = lane // 8, lane % 8
    group, khalf = j % 2, j // 2
    row0 = (mi * 2 + group) * (8 * nw) + warp * 8  # first row of this 8-row group (accumulator layout)
    if trans:
        return row0, khalf * 8 + r
    return row0 + r, khalf * 8


def b_ldsm_coord(lane, q2, trans: bool):
    """(n, k) inside the k16 step of the row lane ``lane`` gives ``ldmatrix.x4`` for B's n8 tiles
    ``2*q2`` and ``2*q2 + 1``. Matrix ``j``: n tile ``2*q2 + j // 2``, k ``0-7`` (j even) or ``8-15`` —
    registers 0, 1 are tile ``2*q2``'s B fragment, 2, 3 tile ``2*q2 + 1``'s.
    Plain (B stored N x K): the lane points at column ``n`` (8 contiguous k). ``trans`` (B stored K x N,
    the usual): at k-row ``k`` (8 contiguous n)."""
    j, r = lane // 8, lane % 8
    n0 = (q2 * 2 + j // 2) * 8
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
    if shape[-1] % 8:
        return f"{b.name}: rows of {shape[-1]} elements (a multiple of 8 is needed for 16-byte rows)"
    st = r.starts[-1]
    if not (isinstance(st, N.Const) and int(st.value) % 8 == 0):
        return f"{b.name}: the tile does not start at a multiple of 8 along its rows"
    return None


def tensor_core_accumulator(g: N.Gemm, M: int, N_: int, nthreads: int, in_shared) -> Layout | None:
    """The accumulator layout when gemm ``g`` (C tile ``M x N_``) can run on tensor cores, else None."""
    ka = g.a.extents[-2] if g.trans_a else g.a.extents[-1]
    why = mma_shape_ok(M, N_, int(ka), nthreads, g.a.buffer.dtype, g.b.buffer.dtype, g.c.buffer.dtype)
    why = why or operand_problem(g.a, in_shared) or operand_problem(g.b, in_shared)
    if why is not None:
        return None
    return mma_layout(M, N_, nthreads)
