"""Sinkhorn normalisation of a batch of small matrices (the n × n residual-mixing matrices of
manifold-constrained hyper-connections, one per token), with the semantics and defaults of TileKernels'
``sinkhorn_normalize`` (deepseek-ai/TileKernels: ``repeat=10``, ``eps=1e-6``).

Kernel (registry name ``sinkhorn``), per matrix ``X`` (R × C), fp32 math::

    P = softmax(X, axis=-1) + eps                             (row softmax, then eps everywhere)
    P = P / (P.sum(axis=-2) + eps)                            (column normalisation first)
    repeat - 1 times:
        P = P / (P.sum(axis=-1) + eps)                        (row normalisation)
        P = P / (P.sum(axis=-2) + eps)                        (column normalisation)

— ``2·repeat − 1`` normalisations ending on a column step, so columns sum to 1 up to ``eps`` and
rounding and rows approximately. ``block_B`` matrices are handled per block as one 3-D fragment
(``block_B × R × C``); row sums are ``T.reduce_sum(dim=2)``, column sums ``T.reduce_sum(dim=1)``.
Batches that ``block_B`` does not divide load zero matrices past the edge (their softmax is uniform,
finite, and never stored). ``repeat`` must be ≥ 1 (``ValueError`` otherwise; TileKernels' ``repeat=0``
computes what ``repeat=1`` does).

Inputs bf16 / fp16 / fp32, output fp32 (the mixing weights are consumed in fp32). NaN/Inf policy: a NaN
in a matrix propagates to the whole matrix after the first column step (NumPy reference: the same);
``-inf`` logits are allowed if each row has a finite one (softmax 0, then ``eps``: never exactly 0).
"""

import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.registry import KernelSpec, register
from tilesim import dtypes as _dt


@tilelang.jit(out_idx=[-1])
def sinkhorn(batch, R, C, repeat=10, eps=1e-6, block_B=32, dtype="float32", threads=128):
    if repeat < 1:
        raise ValueError(f"repeat={repeat} must be >= 1 (2*repeat-1 normalisations)")

    @T.prim_func
    def main(X: T.Tensor((batch, R, C), dtype), P: T.Tensor((batch, R, C), "float32")):
        with T.Kernel(T.ceildiv(batch, block_B), threads=threads) as bx:
            p = T.alloc_fragment((block_B, R, C), "float32")
            row = T.alloc_fragment((block_B, R), "float32")
            col = T.alloc_fragment((block_B, C), "float32")
            T.copy(X[bx * block_B, 0, 0], p)
            T.reduce_max(p, row, dim=2)
            for b, i, j in T.Parallel(block_B, R, C):
                p[b, i, j] = T.exp(p[b, i, j] - row[b, i])
            T.reduce_sum(p, row, dim=2)
            for b, i, j in T.Parallel(block_B, R, C):
                p[b, i, j] = p[b, i, j] / row[b, i] + eps
            T.reduce_sum(p, col, dim=1)
            for b, i, j in T.Parallel(block_B, R, C):
                p[b, i, j] = p[b, i, j] / (col[b, j] + eps)
            for _ in T.serial(repeat - 1):
                T.reduce_sum(p, row, dim=2)
                for b, i, j in T.Parallel(block_B, R, C):
                    p[b, i, j] = p[b, i, j] / (row[b, i] + eps)
                T.reduce_sum(p, col, dim=1)
                for b, i, j in T.Parallel(block_B, R, C):
                    p[b, i, j] = p[b, i, j] / (col[b, j] + eps)
            T.copy(p, P[bx * block_B, 0, 0])

    return main


def ref_sinkhorn(X, repeat=10, eps=1e-6, **_):
    """Float64 reference: softmax + eps, a column step, then ``repeat - 1`` (row, column) rounds."""
    x = np.asarray(X).astype(np.float64)
    with np.errstate(invalid="ignore"):
        p = np.exp(x - x.max(axis=-1, keepdims=True))
        p = p / p.sum(axis=-1, keepdims=True) + eps
        p = p / (p.sum(axis=-2, keepdims=True) + eps)
        for _ in range(repeat - 1):
            p = p / (p.sum(axis=-1, keepdims=True) + eps)
            p = p / (p.sum(axis=-2, keepdims=True) + eps)
    return p


def _inputs(rng, batch, R, C, dtype="float32", **_):
    return ((rng.standard_normal((batch, R, C)) * 2.0).astype(_dt.np_dtype(dtype)),)


def _build(batch, R, C, repeat, eps, block_B, threads, dtype="float32", **_):
    return sinkhorn(batch, R, C, repeat=repeat, eps=eps, block_B=block_B, dtype=dtype, threads=threads)


register(KernelSpec(
    name="sinkhorn", family="sinkhorn",
    description="TileKernels' Sinkhorn: softmax + eps, then 2*repeat-1 column/row normalisations (+eps, column "
                "first and last) of a batch of small matrices",
    build=_build, make_inputs=_inputs, reference=ref_sinkhorn,
    flops=lambda batch, R, C, repeat=10, **_: batch * R * C * (6 + 2 * (2 * repeat - 1)),
    bytes=lambda batch, R, C, dtype="float32", **_: int(batch * R * C * (_dt.itemsize(_dt.canon(dtype)) + 4)),
    shapes=(
        {"label": "mHC 4x4 mixing, 16384 tok, repeat 10", "batch": 16384, "R": 4, "C": 4},
        {"label": "mHC 4x4 mixing, 4096 tok, repeat 10", "batch": 4096, "R": 4, "C": 4},
        {"label": "8x8 mixing, 8192 tok, repeat 10", "batch": 8192, "R": 8, "C": 8},
        {"label": "OT-style 64x64 plans, 1024 problems, repeat 5", "batch": 1024, "R": 64, "C": 64, "repeat": 5,
         "block_B": 2},
    ),
    test_shapes=(
        {"label": "4x4 fp32, batch 45", "batch": 45, "R": 4, "C": 4},
        {"label": "rectangular 3x5 bf16, batch 10", "batch": 10, "R": 3, "C": 5, "dtype": "bfloat16", "block_B": 4},
        {"label": "8x8 fp16, batch 7, repeat 3", "batch": 7, "R": 8, "C": 8, "dtype": "float16", "repeat": 3,
         "block_B": 2},
    ),
    tunables={"block_B": [1, 2, 4, 8, 16, 32, 64], "threads": [32, 64, 128, 256]},
    defaults={"repeat": 10, "eps": 1e-6, "block_B": 32, "threads": 128, "dtype": "float32"},
    tolerance={"rtol": 1e-4, "atol": 1e-5},
))
