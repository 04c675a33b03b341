"""Batched transpose through shared memory: ``X`` (B, M, N) → ``Y`` (B, N, M).

Kernel (registry name ``batched_transpose``): one block per ``block_M × block_N`` tile of one batch
entry. The tile is read row-major (coalesced along N) into shared memory, transposed element-wise into
a second shared tile (on a GPU: the bank-conflict-prone step that padding or swizzling fixes), and
written row-major (coalesced along M).

Any dtype (bf16, fp16, fp32, fp8, int8, ...): values move without arithmetic, so the result is bitwise
equal to ``numpy.swapaxes`` — ±0, ±inf and NaN included, bf16 NaN payloads too (0x7fc1, 0x7f81 stay
as they are: TileKernels' transpose moves bytes; the interpreter's fp32 → bf16 store keeps a NaN's payload).
Edges: M and N need not be multiples of the tiles; zero-filled reads past the edge are never written.
"""

import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.registry import KernelSpec, register
from tilesim import dtypes as _dt


@tilelang.jit(out_idx=[-1])
def batched_transpose(B, M, N, block_M=64, block_N=64, dtype="bfloat16", threads=128):
    @T.prim_func
    def main(X: T.Tensor((B, M, N), dtype), Y: T.Tensor((B, N, M), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), B, threads=threads) as (bx, by, bz):
            tile = T.alloc_shared((block_M, block_N), dtype)
            tile_t = T.alloc_shared((block_N, block_M), dtype)
            T.copy(X[bz, by * block_M, bx * block_N], tile)
            for j, i in T.Parallel(block_N, block_M):
                tile_t[j, i] = tile[i, j]
            T.copy(tile_t, Y[bz, bx * block_N, by * block_M])

    return main


def ref_transpose(X, **_):
    return np.ascontiguousarray(np.swapaxes(X, 1, 2))


def _inputs(rng, B, M, N, dtype="bfloat16", **_):
    d = _dt.canon(dtype)
    if _dt.is_int(d):
        info = np.iinfo(_dt.np_dtype(d))
        return (rng.integers(info.min, info.max, size=(B, M, N), endpoint=True).astype(_dt.np_dtype(d)),)
    x = rng.standard_normal((B, M, N)) * 10.0
    return (_dt.convert(x.astype(np.float32), d),)


def _build(B, M, N, block_M, block_N, threads, dtype="bfloat16", **_):
    return batched_transpose(B, M, N, block_M=block_M, block_N=block_N, dtype=dtype, threads=threads)


register(KernelSpec(
    name="batched_transpose", family="transpose",
    description="(B, M, N) -> (B, N, M) through shared memory, bitwise for any dtype",
    build=_build, make_inputs=_inputs, reference=ref_transpose,
    flops=lambda **_: 0,
    bytes=lambda B, M, N, dtype="bfloat16", **_: int(2 * B * M * N * _dt.itemsize(_dt.canon(dtype))),
    shapes=(
        {"label": "per-expert weight transpose, 8 x 7168 x 2048 (bf16)", "B": 8, "M": 7168, "N": 2048},
        {"label": "FP8 activations for a K-major GEMM, 1 x 16384 tok x 7168 (e4m3)", "B": 1, "M": 16384, "N": 7168,
         "dtype": "float8_e4m3fn"},
        {"label": "KV heads 64 x 4096 tok x 128 dim (fp16)", "B": 64, "M": 4096, "N": 128, "dtype": "float16"},
        {"label": "8 x 8192 x 8192 fp32", "B": 8, "M": 8192, "N": 8192, "dtype": "float32"},
    ),
    test_shapes=(
        {"label": "edges bf16", "B": 3, "M": 70, "N": 100},
        {"label": "edges fp8", "B": 2, "M": 130, "N": 65, "dtype": "float8_e4m3fn"},
        {"label": "edges fp32 small tiles", "B": 2, "M": 33, "N": 47, "dtype": "float32", "block_M": 16,
         "block_N": 32},
        {"label": "edges int8", "B": 1, "M": 65, "N": 129, "dtype": "int8"},
    ),
    tunables={"block_M": [32, 64, 128], "block_N": [32, 64, 128], "threads": [64, 128, 256]},
    defaults={"block_M": 64, "block_N": 64, "threads": 128, "dtype": "bfloat16"},
    tolerance={"exact": True},
))
