"""Kernels for the compiled CPU target's tests (TileLang style; dynamic shapes, so one compilation serves
every shape Hypothesis draws)."""

import tilesim as tilelang
import tilesim.language as T


@tilelang.jit(out_idx=[-1])
def cast_ops(src_dtype="float32", dst_dtype="float16", block=64):
    """Elementwise arithmetic in ``dst_dtype`` (rounded per operation) and a conversion back."""
    M = T.dynamic("m")

    @T.prim_func
    def main(A: T.Tensor((M,), src_dtype), B: T.Tensor((M,), src_dtype), C: T.Tensor((M,), dst_dtype)):
        with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
            for i in T.Parallel(block):
                a = T.cast(A[bx * block + i], dst_dtype)
                b = T.cast(B[bx * block + i], dst_dtype)
                C[bx * block + i] = a * b + a - T.max(a, b) / T.cast(2, dst_dtype)
    return main


@tilelang.jit(out_idx=[-1])
def to_int(src_dtype="float32", dst_dtype="int8", block=32):
    """Float -> integer conversion (truncation, saturation, NaN -> 0) and integer arithmetic."""
    M = T.dynamic("m")

    @T.prim_func
    def main(A: T.Tensor((M,), src_dtype), C: T.Tensor((M,), dst_dtype)):
        with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = T.cast(A[bx * block + i], dst_dtype)
    return main


@tilelang.jit(out_idx=[-1])
def int_div(block=16):
    M = T.dynamic("m")

    @T.prim_func
    def main(A: T.Tensor((M,), "int32"), B: T.Tensor((M,), "int32"), C: T.Tensor((M, 4), "int32")):
        with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
            for i in T.Parallel(block):
                if bx * block + i < M:
                    a = A[bx * block + i]
                    b = B[bx * block + i]
                    C[bx * block + i, 0] = a // b
                    C[bx * block + i, 1] = a % b
                    C[bx * block + i, 2] = T.truncdiv(a, b)
                    C[bx * block + i, 3] = T.truncmod(a, b)
    return main


@tilelang.jit
def scatter_add(block=32, dtype="float32"):
    """Atomic adds from every block into a small histogram (order matters for narrow dtypes)."""
    M = T.dynamic("m")
    H = T.dynamic("h")

    @T.prim_func
    def main(Idx: T.Tensor((M,), "int32"), V: T.Tensor((M,), dtype), Out: T.Tensor((H,), dtype)):
        with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
            for i in T.Parallel(block):
                if bx * block + i < M:
                    T.atomic_add(Out[Idx[bx * block + i]], V[bx * block + i])
    return main


@tilelang.jit(out_idx=[-1])
def row_reduce(block_M=4, N=48, dtype="float16"):
    """Row max and row sum of a tile (fp32 accumulation), edge tiles of a dynamic row count."""
    M = T.dynamic("m")

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), C: T.Tensor((M, 2), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            a = T.alloc_fragment((block_M, N), "float32")
            mx = T.alloc_fragment((block_M,), "float32")
            sm = T.alloc_fragment((block_M,), "float32")
            T.copy(A[bx * block_M, 0], a)
            T.reduce_max(a, mx, dim=1)
            T.reduce_sum(a, sm, dim=1)
            for i in T.Parallel(block_M):
                C[bx * block_M + i, 0] = mx[i]
                C[bx * block_M + i, 1] = sm[i]
    return main
