"""``MatrixCoreIntrinEmitter`` / ``MatrixCorePreshuffleIntrinEmitter``: TileLang's AMD matrix-core (MFMA) macros as
per-thread code with the hardware's 64-lane fragment layouts.

Contract
--------
``MatrixCoreIntrinEmitter(a_dtype, b_dtype, accum_dtype, a_transposed, b_transposed, block_row_warps,
block_col_warps, warp_row_tiles, warp_col_tiles, chunk, reduce_k=1, num_elems_per_byte=1, k_pack=None,
is_m_first=False, b_preshuffle=False, thread_var=None, target=None, mfma_shape=None)`` derives TileLang's sizes:
a warp is 64 lanes; one MFMA is ``16 x 16 x k_dim`` with ``k_dim`` 32 for 8-bit operands (fp8, int8), 16 for
16-bit and 4 for 32-bit ones; ``micro_size_x/y/k = 16, 16, k_dim``; ``local_size_a/b/out = 16 * k_dim / 64,
16 * k_dim / 64, 4``; ``warp_rows/cols = warp_row/col_tiles // 16``; ``threads = 64 * warps * reduce_k``. A K
step of the macros covers ``k_pack * k_dim`` (``pack_k``) columns, ``k_pack`` MFMAs.

Fragments (TileLang's ``mfma_layout``): lane ``t`` of a warp holds, of each 16 x ``pack_k`` operand tile (rows:
the M or N index), row ``t % 16`` and the ``L = pack_k / 4`` consecutive K columns from ``(t // 16) * L``, in
local order; MFMA ``kp`` of a K step reads local elements ``kp * local_size .. (kp + 1) * local_size``. Warp
``(warp_m, warp_n)`` of thread ``tx``: ``warp_m = (tx // 64) % block_row_warps``, ``warp_n = (tx // (64 *
block_row_warps)) % block_col_warps`` (``is_m_first`` swaps the two).

Macros (``@T.macro``, inlined where called; they name the thread index, so the launch is per-thread code;
fragment operands must be ``T.alloc_local`` arrays, a ``KernelTypeError`` otherwise):

* ``ldmatrix_a(A_local, A_shared, ki, rk=0)`` / ``ldmatrix_b(B_local, B_shared, ki, rk=0)``: every thread loads
  its fragments of its warp's tiles at K offset ``rk * chunk + ki * pack_k`` from a 2-D buffer (``[M, K]`` /
  ``[N, K]`` when transposed for B, else ``[K, M]`` / ``[K, N]``).
* Preshuffle emitter, ``ldmatrix_b(B_local, B, ki, rk=0, pid_m=None, pid_n=None)`` with ``b_preshuffle=True``:
  B is pre-shuffled 4-D, ``[N / 16, K / pack_k, 16, pack_k]`` when ``b_transposed`` (else ``[K / pack_k, N / 16,
  pack_k, 16]``): with ``pid_n`` a global tensor read at block column ``pid_n`` (tile ``(pid_n * block_col_warps
  + warp_n) * warp_cols + j``), without it a shared copy of the block's tiles; K tile ``rk * (chunk /
  micro_size_k) + ki``. ``a_preshuffle`` likewise for A (``pid_m``).
* ``mfma(A_local, B_local, C_local, k_inner=0)``: every warp's ``C[i, j] += A[i] @ B[j]^T`` over the K step,
  products and sums in ``accum_dtype`` (the MFMA's). ``C_local`` is the block's ``(block_row_warps *
  warp_row_tiles, block_col_warps * warp_col_tiles)`` ``T.alloc_fragment`` (annotated with
  ``make_mfma_store_layout``): the threads' fragments are exchanged through shared memory between two
  ``T.sync_threads`` and multiplied as one tile gemm, so it is warp-collective (not under a thread-dependent
  ``if``). A per-thread ``T.alloc_local`` C, ``reduce_k > 1`` and 32 x 32 MFMA shapes are refused
  (``KernelTypeError``): no program here uses them.
* ``make_mfma_store_layout(C_local)``: the ``T.Fragment`` of the accumulator (element ``(i, j)`` -> thread,
  register) of TileLang's ``mfma_store_index_map``: within a 16 x 16 tile, lane ``r + 16 * (c // 4)``, register
  ``c % 4``.
"""

from __future__ import annotations

from ... import language as T
from ...errors import KernelTypeError
from ...language.types import DType
from ...layout import Fragment

__all__ = ["MatrixCoreIntrinEmitter", "MatrixCorePreshuffleIntrinEmitter"]

WARP = 64
_EIGHT_BIT_K32 = {"float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "int8"}


def _local(buf, what):
    scope = getattr(buf, "scope", None)
    if scope != "local":
        raise KernelTypeError(f"MatrixCoreIntrinEmitter.{what}: the fragment operand must be a T.alloc_local array "
                              f"(per-thread registers), got scope {scope!r}",
                              hint="allocate MFMA operand fragments with T.alloc_local((n,), dtype)")


_local.__tilesim_trace_time__ = True


def _accumulator(buf, shape):
    if getattr(buf, "scope", None) != "fragment" or tuple(buf.shape) != shape:
        raise KernelTypeError(f"MatrixCoreIntrinEmitter.mfma: C must be the block's {shape} T.alloc_fragment, got "
                              f"{getattr(buf, 'scope', None)} {tuple(getattr(buf, 'shape', ()))}",
                              hint="allocate C with T.alloc_fragment((block_M, block_N), accum_dtype)")


_accumulator.__tilesim_trace_time__ = True


def _given(value) -> bool:
    return value is not None


_given.__tilesim_trace_time__ = True  # a macro argument left at None, decided while tracing


def _single_k_group(reduce_k):
    if reduce_k != 1:
        raise KernelTypeError(f"MatrixCoreIntrinEmitter.mfma with reduce_k={reduce_k} is not provided by tilesim "
                              "(reduce_k = 1 only)")


_single_k_group.__tilesim_trace_time__ = True


class MatrixCoreIntrinEmitter:
    """AMD MFMA macros (see the module docstring)."""

    WARP_SIZE = WARP
    M_DIM = N_DIM = 16

    def __init__(self, a_dtype="float16", b_dtype="float16", accum_dtype="float16", a_transposed=False,
                 b_transposed=False, block_row_warps=2, block_col_warps=2, warp_row_tiles=8, warp_col_tiles=8,
                 chunk=16, reduce_k=1, num_elems_per_byte=1, k_pack=None, is_m_first=False, b_preshuffle=False,
                 thread_var=None, target=None, mfma_shape=None):
        self.a_dtype, self.b_dtype, self.accum_dtype = str(a_dtype), str(b_dtype), str(accum_dtype)
        self.a_transposed, self.b_transposed = bool(a_transposed), bool(b_transposed)
        self.block_row_warps, self.block_col_warps = int(block_row_warps), int(block_col_warps)
        self.warp_row_tiles, self.warp_col_tiles = int(warp_row_tiles), int(warp_col_tiles)
        self.chunk, self.reduce_k, self.num_elems_per_byte = int(chunk), int(reduce_k), num_elems_per_byte
        self.k_pack = 1 if k_pack is None else int(k_pack)
        self.is_m_first = bool(is_m_first)
        self.b_preshuffle = bool(b_preshuffle)
        self.a_preshuffle = False
        self.thread_var, self.target = thread_var, target
        if mfma_shape is not None:
            m, n, k = (int(x) for x in mfma_shape)
            if (m, n) != (16, 16):
                raise KernelTypeError(f"MatrixCoreIntrinEmitter: MFMA shape {tuple(mfma_shape)} is not provided by "
                                      "tilesim (16 x 16 x K only)")
            self.k_dim = k
        elif self.a_dtype in _EIGHT_BIT_K32:
            self.k_dim = 32
        else:
            bits = DType(self.a_dtype).bits
            if bits not in (16, 32):
                raise ValueError(f"Unsupported a_dtype = {self.a_dtype}")
            self.k_dim = 16 if bits == 16 else 4
        self.pack_k = self.k_dim * self.k_pack
        if self.pack_k not in (4, 16, 32, 64):
            raise ValueError(f"k_dim * k_pack must be 4, 16, 32 or 64, got {self.pack_k}")
        for name, tiles in (("warp_row_tiles", self.warp_row_tiles), ("warp_col_tiles", self.warp_col_tiles)):
            if tiles < 16 or tiles % 16:
                raise ValueError(f"{name} must be a positive multiple of 16, got {tiles}")
        self.micro_size_x, self.micro_size_y, self.micro_size_k = 16, 16, self.k_dim
        self.local_size_a = self.local_size_b = 16 * self.k_dim // WARP
        self.local_size_out = 16 * 16 // WARP
        self.warp_rows, self.warp_cols = self.warp_row_tiles // 16, self.warp_col_tiles // 16
        self.threads = WARP * self.block_row_warps * self.block_col_warps * self.reduce_k
        self.ldmatrix_a = self._load("A")
        self.ldmatrix_b = self._load("B")
        self.mfma = self._mfma()

    # ------------------------------------------------------------------ Python helpers
    def extract_thread_binding(self, thread_id, is_m_first=None):
        """``(lane, warp_n, warp_m)`` of thread ``thread_id`` (TileLang's order)."""
        first = self.is_m_first if is_m_first is None else is_m_first
        lane, warp = thread_id % WARP, thread_id // WARP
        if first:
            return lane, warp % self.block_col_warps, (warp // self.block_col_warps) % self.block_row_warps
        return lane, (warp // self.block_row_warps) % self.block_col_warps, warp % self.block_row_warps

    def make_mfma_store_layout(self, local_buf) -> Fragment:
        cols, wrt, wct = self.warp_cols, self.warp_row_tiles, self.warp_col_tiles
        brw, bcw, first = self.block_row_warps, self.block_col_warps, self.is_m_first

        def forward(i, j):
            wm, wn = i // wrt, j // wct
            ti, tj = (i % wrt) // 16, (j % wct) // 16
            r, c = i % 16, j % 16
            warp = wm * bcw + wn if first else wn * brw + wm
            return warp * WARP + r + 16 * (c // 4), (ti * cols + tj) * 4 + c % 4

        return Fragment(tuple(local_buf.shape), forward_fn=forward)

    make_mfma_store_layout.__tilesim_trace_time__ = True  # called on the kernel's buffer while tracing

    # ------------------------------------------------------------------ macros
    def _load(self, which):
        pre = self.a_preshuffle if which == "A" else self.b_preshuffle
        tiles = self.warp_rows if which == "A" else self.warp_cols
        tile_span = self.warp_row_tiles if which == "A" else self.warp_col_tiles
        mn_first = (not self.a_transposed) if which == "A" else self.b_transposed  # buffer axes [MN, K]
        local, pack, pack_k, chunk = self.local_size_a, self.k_pack, self.pack_k, self.chunk
        quarter, steps = self.pack_k // 4, self.chunk // self.micro_size_k
        brw, bcw, first, thread_var = self.block_row_warps, self.block_col_warps, self.is_m_first, self.thread_var
        warps_along = brw if which == "A" else bcw
        name = f"ldmatrix_{which.lower()}"

        @T.macro
        def load(local_buf, src, ki, rk=0, pid_m=None, pid_n=None):
            _local(local_buf, name)
            tx = T.get_thread_binding() if thread_var is None else thread_var
            lane = tx % 64
            warp = tx // 64
            wm = (warp // bcw) % brw if first else warp % brw
            wn = warp % bcw if first else (warp // brw) % bcw
            w = wn
            pid = pid_n
            if which == "A":
                w = wm
                pid = pid_m
            global_tiles = _given(pid)
            for i in T.serial(tiles):
                for q in T.serial(pack * local):
                    mn = lane % 16
                    kk = (lane // 16) * quarter + q
                    if pre:
                        tile = w * tiles + i
                        if global_tiles:
                            tile = (pid * warps_along + w) * tiles + i
                        if mn_first:
                            local_buf[i * pack * local + q] = src[tile, rk * steps + ki, mn, kk]
                        else:
                            local_buf[i * pack * local + q] = src[rk * steps + ki, tile, kk, mn]
                    elif mn_first:
                        local_buf[i * pack * local + q] = src[w * tile_span + i * 16 + mn, rk * chunk + ki * pack_k + kk]
                    else:
                        local_buf[i * pack * local + q] = src[rk * chunk + ki * pack_k + kk, w * tile_span + i * 16 + mn]

        return load

    def _mfma(self):
        rows, cols, pack, local = self.warp_rows, self.warp_cols, self.k_pack, self.local_size_a
        wrt, wct, pack_k, quarter = self.warp_row_tiles, self.warp_col_tiles, self.pack_k, self.pack_k // 4
        brw, bcw, first, thread_var = self.block_row_warps, self.block_col_warps, self.is_m_first, self.thread_var
        block = (brw * wrt, bcw * wct)
        a_dtype, b_dtype, reduce_k = self.a_dtype, self.b_dtype, self.reduce_k

        @T.macro
        def mfma(A_local, B_local, C_local, k_inner=0):
            _local(A_local, "mfma")
            _local(B_local, "mfma")
            _accumulator(C_local, block)
            _single_k_group(reduce_k)
            sA = T.alloc_shared((block[0], pack_k), a_dtype)
            sB = T.alloc_shared((block[1], pack_k), b_dtype)
            tx = T.get_thread_binding() if thread_var is None else thread_var
            lane = tx % 64
            warp = tx // 64
            wm = (warp // bcw) % brw if first else warp % brw
            wn = warp % bcw if first else (warp // brw) % bcw
            for i in T.serial(rows):
                for q in T.serial(pack * local):
                    sA[wm * wrt + i * 16 + lane % 16, (lane // 16) * quarter + q] = A_local[i * pack * local + q]
            for j in T.serial(cols):
                for q in T.serial(pack * local):
                    sB[wn * wct + j * 16 + lane % 16, (lane // 16) * quarter + q] = B_local[j * pack * local + q]
            T.sync_threads()
            T.gemm(sA, sB, C_local, transpose_B=True)
            T.sync_threads()

        return mfma


class MatrixCorePreshuffleIntrinEmitter(MatrixCoreIntrinEmitter):
    """MFMA macros whose A and/or B operand is pre-shuffled into 16 x ``pack_k`` tiles (see the module docstring)."""

    def __init__(self, a_dtype="float16", b_dtype="float16", accum_dtype="float16", a_transposed=False,
                 b_transposed=False, block_row_warps=2, block_col_warps=2, warp_row_tiles=8, warp_col_tiles=8,
                 chunk=16, reduce_k=1, num_elems_per_byte=1, k_pack=None, is_m_first=False, a_preshuffle=False,
                 b_preshuffle=False, thread_var=None, target=None, mfma_shape=None):
        self._pre = (bool(a_preshuffle), bool(b_preshuffle))
        super().__init__(a_dtype, b_dtype, accum_dtype, a_transposed, b_transposed, block_row_warps,
                         block_col_warps, warp_row_tiles, warp_col_tiles, chunk, reduce_k, num_elems_per_byte,
                         k_pack, is_m_first, b_preshuffle, thread_var, target, mfma_shape)

    def _load(self, which):
        self.a_preshuffle, self.b_preshuffle = self._pre
        return super()._load(which)
