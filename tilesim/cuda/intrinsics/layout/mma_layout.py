"""Where each element of a warp-level MMA operand lives: ``(lane, local index) -> (row, col)``.

Contract
--------
The maps follow the PTX ISA's fragment layouts of ``mma.sync.aligned.m16n8k*`` (``g = lane // 4``, the
group, and ``t = lane % 4``, the thread in the group; ``e = 32 // bits`` elements per 32-bit register):

* A (16 x K, ``K = 8 * e``): local ``j`` is register ``r = j // e``, element ``w = j % e``;
  ``row = g + 8 * (r % 2)``, ``col = t * e + w + 4 * e * (r // 2)``.
* B (K x 8 per ``n8`` tile): ``k = t * e + w + 4 * e * r``, ``n = g``; a 16-wide B fragment is two ``n8``
  tiles, the second in locals ``8 * e / 2 ..``.
* C (16 x 8 per tile, 4 locals): ``row = g + 8 * (j // 2)``, ``col = 2 * t + j % 2``; a 16 x 16 C fragment
  is two tiles, the second in locals 4..7 (``col + 8``) — TileLang's ``mma_store_32x8_to_shared_16x16``.

The functions take Python ints or kernel values (they use ``//``, ``%``, ``*``, ``+`` only) and return
``(row, col)``. ``get_swizzle_layout`` / ``make_mma_swizzle_layout`` are the 16-byte-chunk XOR swizzle
TileLang uses for MMA operands in shared memory; a layout has no effect on results in tilesim
(:mod:`tilesim.layout`).
"""

from __future__ import annotations

from ....errors import KernelTypeError
from ....language.types import DType
from ....layout import Layout

__all__ = ["elems_per_reg", "mma_a_layout", "mma_b_layout", "mma_c_layout", "mma_store_32x8_to_shared_16x16_layout",
           "get_swizzle_layout", "make_mma_swizzle_layout"]


def elems_per_reg(dtype) -> int:
    """Operand elements in one 32-bit register (2 for 16-bit types, 4 for 8-bit, 1 for 32-bit)."""
    bits = DType(str(dtype)).bits
    if bits not in (8, 16, 32):
        raise KernelTypeError(f"warp-level MMA operands of {dtype} ({bits}-bit) are not supported",
                              hint="use 8-, 16- or 32-bit operand types (int4 operands are refused)")
    return 32 // bits


def mma_a_layout(lane, j, e: int):
    r, w = j // e, j % e
    return lane // 4 + 8 * (r % 2), (lane % 4) * e + w + 4 * e * (r // 2)


def mma_b_layout(lane, j, e: int, n_dim: int = 16):
    """``(n, k)`` of local ``j`` of a ``K x n_dim`` B fragment (``n`` first, as B is stored ``[N, K]``)."""
    per_tile = 2 * e
    tile, jj = j // per_tile, j % per_tile
    r, w = jj // e, jj % e
    return lane // 4 + 8 * tile, (lane % 4) * e + w + 4 * e * r


def mma_c_layout(lane, j):
    tile, jj = j // 4, j % 4
    return lane // 4 + 8 * (jj // 2), 2 * (lane % 4) + jj % 2 + 8 * tile


def mma_store_32x8_to_shared_16x16_layout(thread_id, local_id):
    return mma_c_layout(thread_id, local_id)


def get_swizzle_layout(row_idx, col_idx, row_size, dtype, swizzle_bytes=None):
    """``(row, col')``: the element's column after XOR-swizzling 16-byte chunks within each row."""
    bits = DType(str(dtype)).bits
    row_bytes = bits * row_size // 8
    if row_bytes % 32:
        raise KernelTypeError(f"get_swizzle_layout: a row of {row_size} x {dtype} is {row_bytes} bytes, "
                              "not a multiple of 32")
    swizzle_bytes = swizzle_bytes or min(128, row_bytes)
    chunks = swizzle_bytes // 16
    per_chunk = 128 // bits
    chunk, within = col_idx // per_chunk, col_idx % per_chunk
    phase = (row_idx // (8 // chunks)) % chunks
    return row_idx, ((chunk // chunks) * chunks + ((chunk % chunks) ^ phase)) * per_chunk + within


def make_mma_swizzle_layout(shared_buf, is_smooth: bool = False) -> Layout:
    """The swizzled layout of an MMA operand buffer (identity when its rows cannot be swizzled)."""
    shape = list(shared_buf.shape)
    dtype = shared_buf.dtype
    if is_smooth or (shape[-1] * DType(str(dtype)).bits) % 512:
        return Layout(shape, lambda *idx: idx)

    def forward(*idx):
        return [*idx[:-2], *get_swizzle_layout(idx[-2], idx[-1], shape[-1], dtype)]

    return Layout(shape, forward)


make_mma_swizzle_layout.__tilesim_trace_time__ = True  # called on the kernel's buffers at trace time
