"""A model of the warp-level matrix instructions (PTX ISA), and their build for numba's CUDA simulator.

The hardware model (independent of the lowering's choices in :mod:`.mma_layout`):

* :func:`ldmatrix_x4` — ``ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16``: lane ``8*j + r`` supplies
  the address of row ``r`` of matrix ``j`` (16 contiguous bytes, 16-byte aligned or it is an error);
  lane ``L`` receives, in register ``j``, elements ``(L//4, 2*(L%4))`` and ``(L//4, 2*(L%4)+1)`` of matrix
  ``j`` (of its transpose with ``.trans``).
* :func:`mma_m16n8k16` — ``mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32`` with
  ``g = L//4, t = L%4``: A register ``i`` holds ``A[g + 8*(i%2), 2t + 8*(i//2) + {0,1}]``, B register ``i``
  ``B[2t + 8*i + {0,1}, g]``, C/D element ``i`` ``C[g + 8*(i//2), 2t + i%2]``; ``D = A @ B + C``.

:func:`sim_mma_namespace` builds ``_ldsm4``/``_ldsm4t``/``_mma_f16``/``_mma_bf16`` for the simulator,
where every GPU thread is a Python thread: each call posts its operands to a per-block mailbox, waits
at a block barrier, reads its warp's 32 posts, computes its own lane's result with the model, and waits
again. So every thread of the block must make the same calls (tile-level gemm code does); the values
are the raw b16 bits packed two per ``uint32``, as on the GPU.
"""

from __future__ import annotations

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


def mma_m16n8k16(a_regs, b_regs, c_regs):
    """D per lane (4 values) from per-lane A pairs (4), B pairs (2) and C values (4)."""
    A = np.zeros((16, 16))
    B = np.zeros((16, 8))
    C = np.zeros((16, 8))
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i in range(4):
            for h in range(2):
                A[g + 8 * (i % 2), 2 * t + h + 8 * (i // 2)] = a_regs[lane][i][h]
        for i in range(2):
            for h in range(2):
                B[2 * t + h + 8 * i, g] = b_regs[lane][i][h]
        for i in range(4):
            C[g + 8 * (i // 2), 2 * t + i % 2] = c_regs[lane][i]
    D = A @ B + C
    return [[D[g + 8 * (i // 2), 2 * t + i % 2] for i in range(4)] for g, t in ((L // 4, L % 4) for L in range(32))]


def _pack(lo, hi) -> int:
    return (int(lo) & 0xFFFF) | ((int(hi) & 0xFFFF) << 16)


def _unpack(u, kind: str):
    u = int(u)
    bits = np.array([u & 0xFFFF, (u >> 16) & 0xFFFF], dtype=np.uint16)
    vals = bits.view(np.float16) if kind == "f16" else bits.view(ml_dtypes.bfloat16)
    return float(vals[0]), float(vals[1])


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
            bits = np.asarray(arr).view(np.uint16)
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

    return {"_ldsm4": ldsm(False), "_ldsm4t": ldsm(True), "_mma_f16": mma("f16"), "_mma_bf16": mma("bf16")}
