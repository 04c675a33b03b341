"""Index math of ``T.gemm`` on Hopper's ``wgmma`` (shared-memory operand layout, descriptors, accumulator).

Pure Python: every function takes plain ``int`` values (the NumPy model in ``tests/backends/test_wgmma_layout.py``
and the host side of ``benchmarks/gpu_wgmma_probe.py``) or :class:`~.mma_layout.Code` values (the code
generator), so the kernel and the model compute the same addresses.

**Operand tiles in shared memory (swizzled).** A 2-D operand tile of ``R`` rows whose contiguous dimension
(K for a K-major operand, M or N for an M-/N-major one) has ``C`` elements of ``e`` bytes is stored as
``C*e / W`` *regions* of ``R`` rows of ``W`` bytes (``W`` = 128, 64 or 32: :func:`swizzle_width`), region ``j``
holding the columns ``j*W/e .. (j+1)*W/e - 1``; inside a region, the 16-byte chunk ``q`` of row ``r`` is stored
at chunk ``q ^ ((r*W // 128) % (W // 16))`` — the PTX ISA's 128/64/32-byte swizzle, which XORs address bits
4.. with bits 7.. (:func:`swizzle`). The buffer starts 1024-byte aligned and every region is a multiple of
1024 bytes, so the address bits the hardware XORs are the ones modelled here. 16-byte chunks stay whole, so
16-byte vector and ``cp.async`` writers keep working. :func:`tile_offset` is the element offset of ``(r, c)``.

**Row order of A (the accumulator's rows).** ``wgmma.m64nNk*`` gives warp ``wl`` of a warpgroup the rows
``16*wl + g`` and ``16*wl + 8 + g`` (``g = lane // 4``) of its 64-row slab, columns ``8*j + 2*t + {0, 1}``
(``t = lane % 4``) in registers ``4*j + {0, 1}`` / ``4*j + {2, 3}``: the ``mma.m16n8`` C fragment per n8
tile. The accumulator layout is :func:`~.mma_layout.mma_layout` on the all-along-M warp grid
(``WM`` = warps, ``WN = 1``) — a layout every consumer already reads — whose thread owns rows
``(2*mi + h)*8*WM + 8*w + g``. The two agree once A's rows are stored permuted (:func:`a_row_phys`): logical row
``(2*mi + h)*8*WM + 8*w + g`` of warp ``w = 4*wg + wl`` goes to physical row ``64*(mi*nWG + wg) + 16*wl + 8*h + g``,
the row the ``wgmma`` of warpgroup ``wg`` on slab ``mi*nWG + wg`` reads for that thread. Only whole 8-row groups
move, so the swizzle (rows mod 8) is unchanged. Accumulator register ``4*q + i`` of slab ``mi`` is local slot
``c_slots(mi, q, N // 4)[i]`` (:func:`~.mma_layout.c_slots`).

**Descriptors** (:func:`descriptor`, PTX ISA "matrix descriptor"): bits 0-13 the start address >> 4, 16-29
the leading-dimension byte offset >> 4, 32-45 the stride-dimension byte offset >> 4, 62-63 the swizzle mode
(0 none, 1 128-byte, 2 64-byte, 3 32-byte). K-major (:func:`kmajor_start`): SBO = ``8*W`` (the next 8 rows),
LBO unused (1); one instruction reads 32 bytes of K (k16 of 16-bit types, k32 of fp8), so the start moves by
32 bytes per step inside a region and to the next region every ``W/32`` steps. M-/N-major (:func:`mnmajor_start`):
the next 8 K-rows are ``8*W`` bytes on, the next region ``R*W`` bytes on; which of LBO / SBO names which is
:data:`MN_LBO_IS_REGION` (settled by ``benchmarks/gpu_wgmma_probe.py`` on the H200).
"""

from __future__ import annotations

#: swizzle width (bytes) -> the descriptor's 2-bit mode
SWIZZLE_MODE = {0: 0, 128: 1, 64: 2, 32: 3}

#: M-/N-major swizzled operands: True when LBO is the stride between ``W``-byte regions along M/N and SBO the
#: stride between 8-row groups along K (the reading of the PTX ISA's table this module was written to)
MN_LBO_IS_REGION = True

#: alignment (bytes) of every wgmma operand buffer and of each of its pipeline stages
ALIGN = 1024


def swizzle_width(contig_elems: int, itemsize: int) -> int | None:
    """The swizzle width for a tile whose contiguous dimension has ``contig_elems`` elements: the widest of
    128 / 64 / 32 bytes that divides the row; None when the row is not a multiple of 32 bytes."""
    nbytes = contig_elems * itemsize
    for w in (128, 64, 32):
        if nbytes % w == 0:
            return w
    return None


def swizzle(x, W: int):
    """Byte offset ``x`` (from a 1024-byte aligned base) after the ``W``-byte swizzle (``W = 0``: none)."""
    if W == 0:
        return x
    return x ^ (((x >> 7) & (W // 16 - 1)) << 4)


def tile_offset(r, c, R: int, itemsize: int, W: int):
    """Element offset of row ``r``, contiguous-dimension index ``c`` in a swizzled tile of ``R`` rows (see the
    module docstring)."""
    ce = W // itemsize  # elements per region row
    E = 16 // itemsize  # elements per 16-byte chunk
    region, cin = c // ce, c % ce
    # swizzle(r*W + cin*itemsize, W) // itemsize, written without repeating the row term: bits 7.. of the byte
    # offset are r // (128 // W) (cin*itemsize < W), and the XOR stays inside the row
    phase = (r // (128 // W)) % (W // 16) if W < 128 else r % 8
    return region * (R * ce) + r * ce + ((cin // E) ^ phase) * E + cin % E


def a_row_phys(r, M: int, nwarps: int):
    """Physical row of A's logical row ``r`` (``0 <= r < M``) for ``nwarps`` warps (see the module docstring)."""
    nwg = nwarps // 4
    g = r % 8
    q = r // 8
    w = q % nwarps
    rest = q // nwarps  # 2*mi + h
    h = rest % 2
    mi = rest // 2
    if nwg == 1:
        return 64 * mi + 16 * w + 8 * h + g
    return 64 * (mi * nwg + w // 4) + 16 * (w % 4) + 8 * h + g


def a_row_logical(p: int, M: int, nwarps: int) -> int:
    """Inverse of :func:`a_row_phys` (ints only)."""
    nwg = nwarps // 4
    slab, within = divmod(p, 64)
    mi, wg = divmod(slab, nwg)
    wl, rem = divmod(within, 16)
    h, g = divmod(rem, 8)
    return (2 * mi + h) * 8 * nwarps + 8 * (4 * wg + wl) + g


def desc_hi(lbo: int, sbo: int, mode: int) -> int:
    """The descriptor's bits above the start address."""
    return ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32 | (mode & 3) << 62


def descriptor(addr: int, lbo: int, sbo: int, mode: int) -> int:
    """The 64-bit matrix descriptor of a shared-memory operand starting at byte address ``addr``."""
    return ((addr & 0x3FFFF) >> 4) | desc_hi(lbo, sbo, mode)


def kmajor_start(row0, k0, R: int, itemsize: int, W: int):
    """Byte offset (from the tile's base) of the instruction operand starting at row ``row0`` (a multiple of 8)
    and K index ``k0`` (a multiple of 32 bytes) of a K-major swizzled tile of ``R`` rows."""
    kb = k0 * itemsize
    return (kb // W) * (R * W) + kb % W + row0 * W


def kmajor_lbo_sbo(W: int) -> tuple[int, int]:
    return 16, 8 * W


def mnmajor_start(k0, mn0, R: int, itemsize: int, W: int):
    """Byte offset of the operand starting at K row ``k0`` (a multiple of 8) and M/N index ``mn0`` (a multiple of
    the region width) of an M-/N-major swizzled tile of ``R`` rows (= K)."""
    return (mn0 * itemsize // W) * (R * W) + k0 * W


def mnmajor_lbo_sbo(R: int, W: int, lbo_is_region: bool | None = None) -> tuple[int, int]:
    reg = MN_LBO_IS_REGION if lbo_is_region is None else lbo_is_region
    return (R * W, 8 * W) if reg else (8 * W, R * W)


def acc_coord(tid: int, i: int):
    """(row, column) inside the 64 x N slab of accumulator register ``i`` of thread ``tid`` of a warpgroup
    (PTX ISA ``wgmma`` D fragment)."""
    w, lane = (tid % 128) // 32, tid % 32
    g, t = lane // 4, lane % 4
    j, e = divmod(i, 4)
    return 16 * w + 8 * (e // 2) + g, 8 * j + 2 * t + e % 2
