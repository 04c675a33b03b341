"""``TensorCoreIntrinEmitter``: TileLang's warp-level MMA macros (``ldmatrix_a/b``, ``mma``, ``stmatrix``) as
per-thread code with the hardware's fragment layouts.

Contract
--------
``TensorCoreIntrinEmitter(a_dtype, b_dtype, accum_dtype, a_transposed, b_transposed, block_row_warps,
block_col_warps, warp_row_tiles, warp_col_tiles, chunk, reduce_k=1, num_elems_per_byte=1, is_m_first=False,
thread_var=None)`` computes TileLang's derived sizes (``micro_size_x/y/k``, ``warp_rows/cols``,
``local_size_a/b/out``, ``threads``, ``n_dim``) the same way; a bad shape is a ``ValueError``/
``KernelTypeError`` naming it. Its macros are ``@T.macro`` values (inlined where called in a kernel):

* ``ldmatrix_a(A_local, A_shared, ki, rk=0)`` / ``ldmatrix_b(B_local, B_shared, ki, rk=0)``: every thread
  loads its MMA operand fragment (layouts in :mod:`..layout.mma_layout`) of its warp's tiles at K offset
  ``rk * chunk + ki * micro_size_k`` into its ``T.alloc_local`` array, ``warp_rows`` (``warp_cols``) tiles
  of ``local_size_a`` (``local_size_b``) elements. Warp ``(warp_m, warp_n)`` of thread ``tx``:
  ``warp_m = (tx // 32) % block_row_warps``, ``warp_n = (tx // (32 * block_row_warps)) % block_col_warps``
  (``is_m_first`` swaps the two).
* ``mma(A_local, B_local, C_local, k_inner=0)``: every warp multiplies its fragments: for each tile pair
  ``(i, j)``, ``C[i, j] += A[i] @ B[j]^T`` in ``accum_dtype``, each thread's ``C_local`` holding its C
  fragment elements. Warp-collective: all threads of the block execute it (it exchanges fragments through
  shared memory and two ``T.sync_threads`` barriers, so it must not sit under a thread-dependent ``if``).
* ``stmatrix(C_local, C_buf, pid_m=None, pid_n=None)``: every thread stores its C fragment into a 2-D
  ``(block_M, block_N)`` or 4-D ``(block_M / 16, block_N / n_dim, 16, n_dim)`` buffer, or with
  ``pid_m``/``pid_n`` into a global ``(M, N)`` tensor at that block's tile.

Fragments are the GPU's (PTX ``mma.m16n8k*``), so a program that reads ``C_local[k]`` directly sees the
element the GPU would put there. Using these macros makes the launch per-thread code (they name the thread
index). Operand buffers must be ``T.alloc_local`` arrays (per-thread); others are a ``KernelTypeError``.
Operand types: 8-, 16- and 32-bit (tf32 for float32); int4 and fp64 MMA are refused.
"""

from __future__ import annotations

from .... import language as T
from ....errors import KernelTypeError
from ....language.types import DType
from ..layout.mma_layout import elems_per_reg

__all__ = ["TensorCoreIntrinEmitter", "TransformKind"]

WARP = 32


class TransformKind:
    NonTransform = 0
    InterWarpTransform = 1
    IntraWarpTransform = 2
    LDMatrixTransform = 3


def _local(buf, what):
    scope = getattr(buf, "scope", None)
    if scope != "local":
        raise KernelTypeError(f"TensorCoreIntrinEmitter.{what}: the fragment operand must be a T.alloc_local "
                              f"array (per-thread registers), got scope {scope!r}",
                              hint="allocate MMA fragments with T.alloc_local((n,), dtype)")


_local.__tilesim_trace_time__ = True  # runs at trace time on the kernel's buffers


class TensorCoreIntrinEmitter:
    """Warp-level MMA macros (see the module docstring)."""

    M_DIM = 16
    WARP_SIZE = WARP

    def __init__(self, a_dtype="float16", b_dtype="float16", accum_dtype="float16", a_transposed=False,
                 b_transposed=False, block_row_warps=2, block_col_warps=2, warp_row_tiles=8, warp_col_tiles=8,
                 chunk=16, reduce_k=1, num_elems_per_byte=1, is_m_first=False, thread_var=None):
        self.a_dtype, self.b_dtype, self.accum_dtype = str(a_dtype), str(b_dtype), str(accum_dtype)
        self.a_transposed, self.b_transposed = bool(a_transposed), bool(b_transposed)
        self.block_row_warps, self.block_col_warps = int(block_row_warps), int(block_col_warps)
        self.warp_row_tiles, self.warp_col_tiles = int(warp_row_tiles), int(warp_col_tiles)
        self.chunk, self.reduce_k, self.num_elems_per_byte = int(chunk), int(reduce_k), num_elems_per_byte
        self.is_m_first = bool(is_m_first)
        self.thread_var = thread_var
        if DType(self.a_dtype).bits != DType(self.b_dtype).bits:
            raise KernelTypeError(f"TensorCoreIntrinEmitter: A ({self.a_dtype}) and B ({self.b_dtype}) operands "
                                  "must have the same width")
        self.e = elems_per_reg(self.a_dtype)
        self.k_dim = min(8 * self.e, self.chunk)
        if self.k_dim != 8 * self.e:
            raise KernelTypeError(f"TensorCoreIntrinEmitter: chunk={self.chunk} is smaller than one MMA's K "
                                  f"({8 * self.e} for {self.a_dtype})")
        if self.warp_row_tiles < 16 or self.warp_row_tiles % 16:
            raise ValueError(f"warp_row_tiles must be a positive multiple of 16, got {self.warp_row_tiles}")
        if self.warp_col_tiles < 8 or self.warp_col_tiles % 8:
            raise ValueError(f"warp_col_tiles must be a positive multiple of 8, got {self.warp_col_tiles}")
        self.n_dim = 16 if self.warp_col_tiles % 16 == 0 else 8
        self.micro_size_x, self.micro_size_y, self.micro_size_k = 16, self.n_dim, self.k_dim
        self.warp_rows, self.warp_cols = self.warp_row_tiles // 16, self.warp_col_tiles // self.n_dim
        self.local_size_a = 16 * self.k_dim // WARP
        self.local_size_b = self.n_dim * self.k_dim // WARP
        self.local_size_out = 16 * self.n_dim // WARP
        self.threads = WARP * self.block_row_warps * self.block_col_warps * self.reduce_k
        self.ldmatrix_a = self._ldmatrix("A")
        self.ldmatrix_b = self._ldmatrix("B")
        self.mma = self._mma()
        self.stmatrix = self._stmatrix()

    # ------------------------------------------------------------------ thread bindings (Python helpers)
    def extract_thread_binding(self, thread_id, is_m_first=None):
        """``(lane, warp_n, warp_m)`` of thread ``thread_id`` (TileLang's order)."""
        first = self.is_m_first if is_m_first is None else is_m_first
        lane, warp = thread_id % WARP, thread_id // WARP
        if first:
            return lane, warp % self.block_col_warps, (warp // self.block_col_warps) % self.block_row_warps
        return lane, (warp // self.block_row_warps) % self.block_col_warps, warp % self.block_row_warps

    # ------------------------------------------------------------------ macros
    def _ldmatrix(self, which):
        e, k_dim, chunk = self.e, self.k_dim, self.chunk
        brw, bcw, first = self.block_row_warps, self.block_col_warps, self.is_m_first
        if which == "A":
            tiles, local, tile_rows, trans = self.warp_rows, self.local_size_a, self.warp_row_tiles, self.a_transposed
        else:
            tiles, local, tile_rows, trans = self.warp_cols, self.local_size_b, self.warp_col_tiles, not self.b_transposed
        tile_w, thread_var = (16 if which == "A" else self.n_dim), self.thread_var
        name = f"ldmatrix_{which.lower()}"

        @T.macro
        def load(local_buf, shared_buf, ki, rk=0):
            _local(local_buf, name)
            tx = T.get_thread_binding() if thread_var is None else thread_var
            lane = tx % 32
            warp = tx // 32
            wm = (warp // bcw) % brw if first else warp % brw
            wn = warp % bcw if first else (warp // brw) % bcw
            base = (wm if which == "A" else wn) * tile_rows
            wk = rk * chunk + ki * k_dim
            for i in T.serial(tiles):
                for j in T.serial(local):
                    if which == "A":
                        r = lane // 4 + 8 * ((j // e) % 2)
                        c = (lane % 4) * e + j % e + 4 * e * (j // e // 2)
                    else:
                        r = lane // 4 + 8 * (j // (2 * e))
                        c = (lane % 4) * e + j % e + 4 * e * ((j % (2 * e)) // e)
                    if trans:
                        local_buf[i * local + j] = shared_buf[wk + c, base + i * tile_w + r]
                    else:
                        local_buf[i * local + j] = shared_buf[base + i * tile_w + r, wk + c]

        return load

    def _mma(self):
        e, k_dim, n_dim = self.e, self.k_dim, self.n_dim
        rows, cols = self.warp_rows, self.warp_cols
        lsa, lsb, lsc = self.local_size_a, self.local_size_b, self.local_size_out
        warps = self.threads // WARP
        R, C = rows * 16, cols * n_dim
        a_dtype, b_dtype, acc = self.a_dtype, self.b_dtype, self.accum_dtype
        thread_var = self.thread_var

        @T.macro
        def mma(A_local, B_local, C_local, k_inner=0):
            _local(A_local, "mma")
            _local(B_local, "mma")
            _local(C_local, "mma")
            sA = T.alloc_shared((warps * R, k_dim), a_dtype)
            sB = T.alloc_shared((warps * C, k_dim), b_dtype)
            sC = T.alloc_shared((warps * R, C), acc)
            tx = T.get_thread_binding() if thread_var is None else thread_var
            lane = tx % 32
            w = (tx // 32) % warps
            for i in T.serial(rows):
                for j in T.serial(lsa):
                    sA[w * R + i * 16 + lane // 4 + 8 * ((j // e) % 2),
                       (lane % 4) * e + j % e + 4 * e * (j // e // 2)] = A_local[i * lsa + j]
            for i in T.serial(cols):
                for j in T.serial(lsb):
                    sB[w * C + i * n_dim + lane // 4 + 8 * (j // (2 * e)),
                       (lane % 4) * e + j % e + 4 * e * ((j % (2 * e)) // e)] = B_local[i * lsb + j]
            T.sync_threads()
            for v in range(warps):  # one product per warp (unrolled at trace time)
                prod = T.alloc_fragment((R, C), acc)
                T.gemm(sA[v * R:(v + 1) * R, 0:k_dim], sB[v * C:(v + 1) * C, 0:k_dim], prod, transpose_B=True,
                       clear_accum=True)
                T.copy(prod, sC[v * R:(v + 1) * R, 0:C])
            T.sync_threads()
            for i in T.serial(rows):
                for j in T.serial(cols):
                    for q in T.serial(lsc):
                        C_local[(i * cols + j) * lsc + q] = C_local[(i * cols + j) * lsc + q] + sC[
                            w * R + i * 16 + lane // 4 + 8 * ((q % 4) // 2), j * n_dim + 2 * (lane % 4) + q % 2
                            + 8 * (q // 4)]
            T.sync_threads()

        return mma

    def _stmatrix(self):
        rows, cols, lsc, n_dim = self.warp_rows, self.warp_cols, self.local_size_out, self.n_dim
        brw, bcw, first, thread_var = self.block_row_warps, self.block_col_warps, self.is_m_first, self.thread_var
        block_m, block_n = brw * rows, bcw * cols

        @T.macro
        def stmatrix(C_local, C_buf, pid_m=None, pid_n=None):
            _local(C_local, "stmatrix")
            tx = T.get_thread_binding() if thread_var is None else thread_var
            lane = tx % 32
            warp = tx // 32
            wm = (warp // bcw) % brw if first else warp % brw
            wn = warp % bcw if first else (warp // brw) % bcw
            for i in T.serial(rows):
                for j in T.serial(cols):
                    for q in T.serial(lsc):
                        r = lane // 4 + 8 * ((q % 4) // 2)
                        c = 2 * (lane % 4) + q % 2 + 8 * (q // 4)
                        if pid_m is not None:
                            C_buf[(pid_m * block_m + wm * rows + i) * 16 + r,
                                  (pid_n * block_n + wn * cols + j) * n_dim + c] = C_local[(i * cols + j) * lsc + q]
                        elif len(C_buf.shape) == 4:
                            C_buf[wm * rows + i, wn * cols + j, r, c] = C_local[(i * cols + j) * lsc + q]
                        else:
                            C_buf[(wm * rows + i) * 16 + r, (wn * cols + j) * n_dim + c] = \
                                C_local[(i * cols + j) * lsc + q]

        return stmatrix
