"""``MatmulTemplate``: a matrix product described once, for the roller and as a runnable program.

Contract
--------
``MatmulTemplate(M, N, K, trans_A=False, trans_B=True, in_dtype, out_dtype, accum_dtype, with_bias)``
(TileLang's fields and defaults). ``with_arch(arch)`` sets the device (a :class:`~tilesim.carver.arch.CUDA`)
and returns the template. ``recommend_hints(topk)`` / ``get_hardware_aware_configs(arch, topk)`` are the
roller's tilings (:func:`tilesim.carver.roller.matmul_hints`; without ``with_arch`` the device is
``CUDA("cuda")``). ``equivalent_function()`` is a ``@T.prim_func`` computing ``C = A @ B`` (operands
transposed as the flags say, accumulated in ``accum_dtype``, ``+ Bias[n]`` with a bias, cast to
``out_dtype``), tiled by the best hint; its parameters are ``A, B[, Bias], C``. ``M, N, K`` must be positive
integers (``KernelTypeError`` otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass

from ... import language as T
from ...errors import KernelTypeError
from ..arch import CUDA
from ..roller import matmul_hints

__all__ = ["MatmulTemplate"]


@dataclass
class MatmulTemplate:
    M: int = None
    N: int = None
    K: int = None
    trans_A: bool = False
    trans_B: bool = True
    in_dtype: str = "float16"
    out_dtype: str = "float16"
    accum_dtype: str = "float16"
    with_bias: bool = False

    def __post_init__(self):
        dims = (self.M, self.N, self.K)
        if not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims):
            raise KernelTypeError(f"MatmulTemplate needs positive integer M, N, K, got {dims}")
        self._arch = None

    def with_arch(self, arch) -> MatmulTemplate:
        self._arch = arch
        return self

    @property
    def arch(self):
        if self._arch is None:
            self._arch = CUDA("cuda")
        return self._arch

    def get_hardware_aware_configs(self, arch=None, topk: int = 10) -> list:
        return matmul_hints(arch or self.arch, self.M, self.N, self.K, str(self.in_dtype), str(self.accum_dtype),
                            str(self.out_dtype), topk)

    def recommend_hints(self, topk: int = 10) -> list:
        return self.get_hardware_aware_configs(self.arch, topk)

    def equivalent_function(self):
        hint = self.recommend_hints(topk=1)[0]
        (bm, bn), bk = hint.block, hint.rstep[0]
        return _matmul(self.M, self.N, self.K, self.trans_A, self.trans_B, self.in_dtype, self.out_dtype,
                       self.accum_dtype, self.with_bias, bm, bn, bk, hint.num_threads)


def _matmul(M, N, K, trans_A, trans_B, in_dtype, out_dtype, accum_dtype, with_bias, bm, bn, bk, threads):
    a_shape, b_shape = ((K, M) if trans_A else (M, K)), ((N, K) if trans_B else (K, N))
    a_tile, b_tile = ((bk, bm) if trans_A else (bm, bk)), ((bn, bk) if trans_B else (bk, bn))

    @T.macro
    def load(A, B, A_s, B_s, by, bx, k):
        if trans_A:
            T.copy(A[k * bk, by * bm], A_s)
        else:
            T.copy(A[by * bm, k * bk], A_s)
        if trans_B:
            T.copy(B[bx * bn, k * bk], B_s)
        else:
            T.copy(B[k * bk, bx * bn], B_s)

    @T.macro
    def body(A, B, Bias, C):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared(a_tile, in_dtype)
            B_s = T.alloc_shared(b_tile, in_dtype)
            acc = T.alloc_fragment((bm, bn), accum_dtype)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                load(A, B, A_s, B_s, by, bx, k)
                T.gemm(A_s, B_s, acc, transpose_A=trans_A, transpose_B=trans_B)
            if with_bias:
                for i, j in T.Parallel(bm, bn):
                    acc[i, j] = acc[i, j] + Bias[bx * bn + j]
            T.copy(acc, C[by * bm, bx * bn])

    @T.prim_func
    def matmul_bias(A: T.Tensor(a_shape, in_dtype), B: T.Tensor(b_shape, in_dtype),
                    Bias: T.Tensor((N,), accum_dtype), C: T.Tensor((M, N), out_dtype)):
        body(A, B, Bias, C)

    @T.prim_func
    def matmul(A: T.Tensor(a_shape, in_dtype), B: T.Tensor(b_shape, in_dtype), C: T.Tensor((M, N), out_dtype)):
        body(A, B, None, C)

    return matmul_bias if with_bias else matmul
