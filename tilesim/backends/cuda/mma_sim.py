"""A model of the warp-level matrix instructions (PTX ISA), and their build for numba's CUDA simulator.

The hardware model (independent of the lowering's choices in :mod:`.mma_layout`):

* :func:`ldmatrix_x4` — ``ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16``: lane ``8*j + r`` supplies
  the address of row ``r`` of matrix ``j`` (16 contiguous bytes, 16-byte aligned or it is an error);
  lane ``L`` receives, in register ``j``, elements ``(L//4, 2*(L%4))`` and ``(L//4, 2*(L%4)+1)`` of matrix
  ``j`` (of its transpose with ``.trans``).
* :func:`mma_m16n8k16` — ``mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32`` with
  ``g = L//4, t = L%4``: A register ``i`` holds ``A[g + 8*(i%2), 2t + 8*(i//2) + {0,1}]``, B register ``i``
  ``B[2t + 8*i + {0,1}, g]``, C/D element ``i`` ``C[g + 8*(i//2), 2t + i%2]``; ``D = A @ B + C``.
* :func:`mma_m16n8k32` — ``mma.sync.aligned.m16n8k32.row.col.f32.{e4m3,e5m2}.{e4m3,e5m2}.f32``: A register
  ``i`` holds ``A[g + 8*(i%2), 4t + 16*(i//2) + {0..3}]`` (lowest byte first), B register ``i``
  ``B[4t + 16*i + {0..3}, g]``, C/D as above. Numerics modelled: every product of two fp8 values is exact, and
  each ``D[i, j]`` is the **exact** sum of its 32 products and ``C[i, j]``, rounded once to fp32 (round to
  nearest even; past the fp32 range: inf) — :func:`round_f32`. The PTX ISA leaves the order and intermediate
  rounding of the sum unspecified, so the GPU may differ from this in the last bits of a sum; a NaN or Inf
  operand gives the IEEE float64 result of the same sum (NaN/Inf propagate).

:func:`sim_mma_namespace` builds ``_ldsm4``/``_ldsm4t``/``_mma_f16``/``_mma_bf16``/``_mma_<a>_<b>`` (fp8;
``_ldsm4`` then reads a ``uint8`` array at a byte index) and ``_pack_bf16x2``/``_pack_f16x2`` (two fp32 values
rounded to nearest even, packed low half first; per thread, no exchange) for the simulator,
where every GPU thread is a Python thread: each call posts its operands to a per-block mailbox, waits
at a block barrier, reads its warp's 32 posts, computes its own lane's result with the model, and waits
again. So every thread of the block must make the same calls (tile-level gemm code does); the values
are the raw b16 bits packed two per ``uint32``, as on the GPU.
"""

from __future__ import annotations

import math
import threading

import ml_dtypes
import numpy as np


def ldmatrix_x4(mem, addrs, trans: bool):
    """``regs[lane][j] = (lo, hi)`` for element addresses ``addrs[lane]`` into the 1-D array ``mem``."""
    regs = [[None] * 4 for _ in range(32)]
    for j in range(4):
        rows = [int(addrs[8 * j + r]) for r in range(8)]
        for a in rows:
            if (a * 2) % 16:  # b16 elements (``mem`` may hold them as any dtype)
                raise ValueError(f"ldmatrix row address {a} (element) is not 16-byte aligned")
        m = np.stack([np.asarray(mem[a:a + 8]) for a in rows])
        if trans:
            m = m.T
        for lane in range(32):
            g, t = lane // 4, lane % 4
            regs[lane][j] = (m[g, 2 * t], m[g, 2 * t + 1])
    return regs


def _fragments(a_regs, b_regs, c_regs, per: int):
    """The warp's A (16 x 8·per), B (8·per x 8) and C (16 x 8) from per-lane registers holding ``per`` elements
    each (2 for 16-bit operands, m16n8k16; 4 for 8-bit ones, m16n8k32): the PTX ISA's fragment layouts."""
    k = 8 * per
    A = np.zeros((16, k))
    B = np.zeros((k, 8))
    C = np.zeros((16, 8))
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i in range(4):
            for h in range(per):
                A[g + 8 * (i % 2), per * t + h + (k // 2) * (i // 2)] = a_regs[lane][i][h]
        for i in range(2):
            for h in range(per):
                B[per * t + h + (k // 2) * i, g] = b_regs[lane][i][h]
        for i in range(4):
            C[g + 8 * (i // 2), 2 * t + i % 2] = c_regs[lane][i]
    return A, B, C


def mma_m16n8k16(a_regs, b_regs, c_regs):
    """D per lane (4 values) from per-lane A pairs (4), B pairs (2) and C values (4)."""
    A, B, C = _fragments(a_regs, b_regs, c_regs, 2)
    D = A @ B + C
    return [[D[g + 8 * (i // 2), 2 * t + i % 2] for i in range(4)] for g, t in ((L // 4, L % 4) for L in range(32))]


def round_f32(num: int, exp: int) -> np.float32:
    """``num * 2**exp`` (exact integers) rounded once to fp32, to nearest even; inf past the fp32 range."""
    if num == 0:
        return np.float32(0.0)
    sign = -1.0 if num < 0 else 1.0
    n = abs(num)
    top = n.bit_length() + exp  # the value is in [2**(top-1), 2**top)
    low = max(top - 24, -149)  # weight of the last kept bit: 24 significant bits, or the subnormal step
    shift = low - exp
    if shift > 0:
        q, r = divmod(n, 1 << shift)
        half = 1 << (shift - 1)
        if r > half or (r == half and q & 1):
            q += 1
        n, exp = q, low
    if n.bit_length() + exp > 128:
        return np.float32(sign * math.inf)
    return np.float32(sign * math.ldexp(float(n), exp))  # n < 2**25: exact in float64, then in fp32


#: every fp8 value (e4m3: smallest subnormal 2**-9, e5m2: 2**-16) is an integer multiple of 2**-_FP8_SHIFT
_FP8_SHIFT = 16


def mma_m16n8k32(a_regs, b_regs, c_regs):
    """D per lane (4 values) from per-lane A quads (4 registers of 4 fp8 values, as floats), B quads (2) and
    C values (4); numerics as the module docstring says."""
    A, B, C = _fragments(a_regs, b_regs, c_regs, 4)
    with np.errstate(all="ignore"):
        D64 = A @ B + C  # used only where an operand is NaN/Inf
    fa, fb = np.isfinite(A), np.isfinite(B)
    special = ~fa.all(axis=1)[:, None] | ~fb.all(axis=0)[None, :] | ~np.isfinite(C)
    scale = float(2 ** _FP8_SHIFT)
    Ai = (np.where(fa, A, 0.0) * scale).astype(np.int64).astype(object)
    Bi = (np.where(fb, B, 0.0) * scale).astype(np.int64).astype(object)
    P = Ai @ Bi  # exact Python ints, in units of 2**-(2 * _FP8_SHIFT)
    e0 = 2 * _FP8_SHIFT
    D = np.zeros((16, 8), dtype=np.float32)
    for i in range(16):
        for j in range(8):
            if special[i, j]:
                D[i, j] = np.float32(D64[i, j])
                continue
            cn, cd = float(C[i, j]).as_integer_ratio()
            k = cd.bit_length() - 1
            e = max(e0, k)
            D[i, j] = round_f32(int(P[i, j]) * (1 << (e - e0)) + cn * (1 << (e - k)), -e)
    return [[D[g + 8 * (i // 2), 2 * t + i % 2] for i in range(4)] for g, t in ((L // 4, L % 4) for L in range(32))]


def _pack(lo, hi) -> int:
    return (int(lo) & 0xFFFF) | ((int(hi) & 0xFFFF) << 16)


def _unpack(u, kind: str):
    u = int(u)
    bits = np.array([u & 0xFFFF, (u >> 16) & 0xFFFF], dtype=np.uint16)
    vals = bits.view(np.float16) if kind == "f16" else bits.view(ml_dtypes.bfloat16)
    return float(vals[0]), float(vals[1])


_FP8_NP = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}


def _unpack8(u, kind: str):
    """The four fp8 values of a ``uint32`` register, lowest byte first."""
    u = int(u)
    bits = np.array([(u >> (8 * h)) & 0xFF for h in range(4)], dtype=np.uint8)
    return tuple(float(v) for v in bits.view(_FP8_NP[kind]))


def _b16_view(arr, addrs):
    """A ``uint16`` view of shared array ``arr`` and the addresses in it: 1-byte arrays (fp8 bits) are read
    at byte addresses (16-byte aligned, else ``ValueError``), paired into b16 elements."""
    mem = np.asarray(arr)
    if mem.dtype.itemsize == 2:
        return mem.view(np.uint16), addrs
    if mem.dtype.itemsize != 1:
        raise ValueError(f"ldmatrix of a {mem.dtype} array")
    for a in addrs:
        if int(a) % 16:
            raise ValueError(f"ldmatrix row address {int(a)} (byte) is not 16-byte aligned")
    b = mem.view(np.uint8)
    if b.size % 2:
        b = np.concatenate([b, np.zeros(1, np.uint8)])
    return b.view(np.uint16), [int(a) // 2 for a in addrs]


def sim_mma_namespace() -> dict:
    """The simulator build of the tensor-core intrinsics (see the module docstring)."""
    mailbox: dict = {}

    def exchange(value):
        me = threading.current_thread()  # the simulator's BlockThread: its indices and block barrier
        tid = int(me.threadIdx.x)
        blk = (int(me.blockIdx.x), int(me.blockIdx.y), int(me.blockIdx.z))
        mailbox[(blk, tid)] = value
        me.syncthreads()
        w0 = tid - tid % 32
        posts = [mailbox[(blk, w0 + lane)] for lane in range(32)]
        me.syncthreads()
        return posts, tid % 32

    def ldsm(trans):
        def fn(arr, idx):
            addrs, lane = exchange(int(idx))
            bits, addrs = _b16_view(arr, addrs)
            regs = ldmatrix_x4(bits, addrs, trans)[lane]
            return tuple(np.uint32(_pack(lo, hi)) for lo, hi in regs)

        return fn

    def mma(kind):
        def fn(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
            posts, lane = exchange((a0, a1, a2, a3, b0, b1, c0, c1, c2, c3))
            a = [[_unpack(x, kind) for x in p[:4]] for p in posts]
            b = [[_unpack(x, kind) for x in p[4:6]] for p in posts]
            c = [[float(x) for x in p[6:]] for p in posts]
            return tuple(np.float32(v) for v in mma_m16n8k16(a, b, c)[lane])

        return fn

    cache: dict = {}  # a warp's 32 threads model the same instruction: compute it once per distinct input

    def mma8(ka, kb):
        def fn(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
            posts, lane = exchange((a0, a1, a2, a3, b0, b1, c0, c1, c2, c3))
            key = (ka, kb, tuple((tuple(int(x) for x in p[:6]), tuple(float(x) for x in p[6:])) for p in posts))
            d = cache.get(key)
            if d is None:
                a = [[_unpack8(x, ka) for x in p[:4]] for p in posts]
                b = [[_unpack8(x, kb) for x in p[4:6]] for p in posts]
                c = [[float(x) for x in p[6:]] for p in posts]
                d = mma_m16n8k32(a, b, c)
                if len(cache) > 4096:
                    cache.clear()
                cache[key] = d
            return tuple(np.float32(v) for v in d[lane])

        return fn

    def pack(np_type):
        def fn(lo, hi):
            with np.errstate(over="ignore"):  # past the range: inf, as cvt.rn writes it
                bits = np.array([lo, hi], dtype=np.float32).astype(np_type).view(np.uint16)
            return np.uint32(_pack(bits[0], bits[1]))

        return fn

    ns = {"_pack_bf16x2": pack(ml_dtypes.bfloat16), "_pack_f16x2": pack(np.float16),
          "_ldsm4": ldsm(False), "_ldsm4t": ldsm(True), "_mma_f16": mma("f16"), "_mma_bf16": mma("bf16")}
    for ka in ("e4m3", "e5m2"):
        for kb in ("e4m3", "e5m2"):
            ns[f"_mma_{ka}_{kb}"] = mma8(ka, kb)
    return ns
