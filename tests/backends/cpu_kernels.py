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


@tilelang.jit(out_idx=[-1])
def viewed_bits(block=16):
    """A T.view reinterpreting a shared fp32 tile as int32 (not compiled by the CPU target: it runs on the
    interpreter)."""
    M = T.dynamic("m")

    @T.prim_func
    def main(A: T.Tensor((M, 4), "float32"), C: T.Tensor((M, 4), "int32")):
        with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
            s = T.alloc_shared((block, 4), "float32")
            bits = T.view(s, dtype="int32")
            T.copy(A[bx * block, 0], s)
            T.copy(bits, C[bx * block, 0])
    return main


@tilelang.jit(out_idx=[-1])
def reshaped_tile(block=16):
    """A T.reshape view of a shared tile (the CPU target compiles it as a NumPy view)."""
    M = T.dynamic("m")

    @T.prim_func
    def main(A: T.Tensor((M, 4), "float32"), C: T.Tensor((M, 4), "float32")):
        with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
            s = T.alloc_shared((block, 4), "float32")
            flat = T.reshape(s, (block * 4,))
            T.copy(A[bx * block, 0], s)
            for i in T.Parallel(block * 4):
                flat[i] = flat[i] * 2
            T.copy(s, C[bx * block, 0])
    return main


@tilelang.jit(out_idx=[-1])
def thread_scan(N, threads=32):
    """Per-thread code: a Hillis-Steele scan with barriers, thread-local values kept across them."""

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((threads,), "float32")
            v = T.alloc_var("float32")
            mine = A[bx * threads + tx]
            s[tx] = mine
            T.sync_threads()
            for i in T.serial(5):
                off = 1 << i
                v = s[tx]
                if tx >= off:
                    v = v + s[tx - off]
                T.sync_threads()
                s[tx] = v
                T.sync_threads()
            if bx * threads + tx < N:
                B[bx * threads + tx] = s[tx] - mine
    return main


@tilelang.jit(out_idx=[-1])
def checked_copy(block=16):
    """A device assertion on the data: every value must be non-negative."""
    M = T.dynamic("m")

    @T.prim_func
    def main(A: T.Tensor((M,), "float32"), C: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
            for i in T.Parallel(block):
                if bx * block + i < M:
                    T.device_assert(A[bx * block + i] >= 0, "negative input")
                    C[bx * block + i] = A[bx * block + i]
    return main
