"""mHC backward kernels: the gradients of Sinkhorn normalisation and of the mHC forward kernels, with the
semantics of TileKernels' autograd functions (``tile_kernels/modeling/mhc/ops/*.py``; the gradients of
``sinkhorn_normalize_ref`` and the ``*_ref`` functions of ``tile_kernels/torch/mhc.py``).

Tokens are one flattened axis ``N`` (as in ``kernels/mhc.py``); ``m`` is the expansion rate. Kernels
(registry names):

* ``sinkhorn_bwd`` — ``G`` (B, n, n) fp32 gradient of the output, ``X`` (B, n, n) the forward's input →
  ``GX`` (B, n, n) fp32. The forward of ``kernels/sinkhorn.py`` is recomputed per block with every
  normaliser's input and sum kept in shared memory (``2·repeat`` stages), then walked backwards: a
  normalisation ``y = p / (s + eps)`` (``s`` the row or column sum of ``p``) maps ``g`` to
  ``(g − Σ g·p / (s + eps)) / (s + eps)`` (the sum along the same axis as ``s``); the softmax (its ``+ eps``
  has gradient 1) maps ``g`` to ``(g − Σ_row g·q)·q`` with ``q`` the softmax. Square matrices only
  (TileKernels' ``hidden_size × hidden_size``); ``repeat ≥ 1`` (``ValueError`` otherwise).
* ``mhc_expand_bwd`` — ``OG`` (N, m, H) → ``XG (N, H) = Σ_r OG[:, r]`` in fp32 (r ascending), rounded once.
* ``mhc_pre_apply_mix_bwd`` — ``OG`` (N, H), ``X`` (N, m, H), ``Mix`` (N, m) → ``XG (N, m, H) = Mix·OG``
  (one rounding to X's dtype) and ``MixG (N, m) = Σ_h OG·X`` (fp32, one block walks a token's row in
  ``block_H`` chunks). TileKernels adds ``XG`` into a gradient buffer shared with ``mhc_post``'s backward
  (``grad_from_mhc_post``); here it is written, not accumulated.
* ``mhc_post_bwd`` — ``OG`` (N, m, H), ``X`` (N, H), ``Res`` (N, m, H), ``Post`` (N, m), ``Comb`` (N, m, m)
  → ``XG (N, H) = Σ_n Post[:, n]·OG[:, n]``, ``ResG[:, r] = Σ_n Comb[:, r, n]·OG[:, n]`` (both rounded
  once to X's dtype), ``PostG (N, m) = Σ_h X·OG[:, n]`` and ``CombG[:, r, n] = Σ_h Res[:, r]·OG[:, n]``
  (fp32).

Numerics: fp32 throughout, narrow inputs widened, sums over the small axes in ascending order; the long
sums over H run in chunk order (so results agree with float64 references within fp32 rounding, bf16
outputs within one ulp). Shapes the tiles do not divide are handled by edge-filled copies (zeros past
the edge add nothing to the sums) and guarded stores. Inputs must be finite (NaN/Inf propagate to their
matrix / token).
"""

import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.registry import KernelSpec, register
from kernels.sinkhorn import ref_sinkhorn
from tilesim import dtypes as _dt


# ------------------------------------------------------------------------------------------ Sinkhorn
@tilelang.jit(out_idx=[-1])
def sinkhorn_bwd(batch, n, repeat=10, eps=1e-6, block_B=8, threads=128):
    if repeat < 1:
        raise ValueError(f"repeat={repeat} must be >= 1 (2*repeat-1 normalisations)")
    S = 2 * repeat

    @T.prim_func
    def main(G: T.Tensor((batch, n, n), "float32"), X: T.Tensor((batch, n, n), "float32"),
             GX: T.Tensor((batch, n, n), "float32")):
        with T.Kernel(T.ceildiv(batch, block_B), threads=threads) as bx:
            g = T.alloc_fragment((block_B, n, n), "float32")
            p = T.alloc_fragment((block_B, n, n), "float32")
            t = T.alloc_fragment((block_B, n, n), "float32")
            s = T.alloc_fragment((block_B, n), "float32")
            d = T.alloc_fragment((block_B, n), "float32")
            ps = T.alloc_shared((S, block_B, n, n), "float32")  # stage k's input (0: the softmax)
            ss = T.alloc_shared((S, block_B, n), "float32")  # stage k's sums (row or column)
            T.copy(G[bx * block_B, 0, 0], g)
            T.copy(X[bx * block_B, 0, 0], p)
            # forward recomputation, as kernels/sinkhorn.py
            T.reduce_max(p, s, dim=2)
            for b, i, j in T.Parallel(block_B, n, n):
                p[b, i, j] = T.exp(p[b, i, j] - s[b, i])
            T.reduce_sum(p, s, dim=2)
            for b, i, j in T.Parallel(block_B, n, n):
                p[b, i, j] = p[b, i, j] / s[b, i]
                ps[0, b, i, j] = p[b, i, j]
            for b, i, j in T.Parallel(block_B, n, n):
                p[b, i, j] = p[b, i, j] + eps
                ps[1, b, i, j] = p[b, i, j]
            T.reduce_sum(p, s, dim=1)
            for b, j in T.Parallel(block_B, n):
                ss[1, b, j] = s[b, j]
            for b, i, j in T.Parallel(block_B, n, n):
                p[b, i, j] = p[b, i, j] / (s[b, j] + eps)
            for r in T.serial(repeat - 1):
                for b, i, j in T.Parallel(block_B, n, n):
                    ps[2 * r + 2, b, i, j] = p[b, i, j]
                T.reduce_sum(p, s, dim=2)
                for b, i in T.Parallel(block_B, n):
                    ss[2 * r + 2, b, i] = s[b, i]
                for b, i, j in T.Parallel(block_B, n, n):
                    p[b, i, j] = p[b, i, j] / (s[b, i] + eps)
                for b, i, j in T.Parallel(block_B, n, n):
                    ps[2 * r + 3, b, i, j] = p[b, i, j]
                T.reduce_sum(p, s, dim=1)
                for b, j in T.Parallel(block_B, n):
                    ss[2 * r + 3, b, j] = s[b, j]
                for b, i, j in T.Parallel(block_B, n, n):
                    p[b, i, j] = p[b, i, j] / (s[b, j] + eps)
            # backward: the last column step, then (row, column) pairs down to stage 1
            for r in T.serial(repeat):
                k = S - 1 - 2 * r  # a column step
                for b, i, j in T.Parallel(block_B, n, n):
                    t[b, i, j] = g[b, i, j] * ps[k, b, i, j]
                T.reduce_sum(t, d, dim=1)
                for b, i, j in T.Parallel(block_B, n, n):
                    g[b, i, j] = (g[b, i, j] - d[b, j] / (ss[k, b, j] + eps)) / (ss[k, b, j] + eps)
                if r < repeat - 1:  # the row step before it
                    for b, i, j in T.Parallel(block_B, n, n):
                        t[b, i, j] = g[b, i, j] * ps[k - 1, b, i, j]
                    T.reduce_sum(t, d, dim=2)
                    for b, i, j in T.Parallel(block_B, n, n):
                        g[b, i, j] = (g[b, i, j] - d[b, i] / (ss[k - 1, b, i] + eps)) / (ss[k - 1, b, i] + eps)
            # softmax (+ eps: gradient 1)
            for b, i, j in T.Parallel(block_B, n, n):
                t[b, i, j] = g[b, i, j] * ps[0, b, i, j]
            T.reduce_sum(t, d, dim=2)
            for b, i, j in T.Parallel(block_B, n, n):
                g[b, i, j] = (g[b, i, j] - d[b, i]) * ps[0, b, i, j]
            T.copy(g, GX[bx * block_B, 0, 0])

    return main


def ref_sinkhorn_bwd(G, X, repeat=10, eps=1e-6, **_):
    """Float64 reverse-mode gradient of ``ref_sinkhorn`` (written out step by step)."""
    x = np.asarray(X).astype(np.float64)
    q = np.exp(x - x.max(axis=-1, keepdims=True))
    q = q / q.sum(axis=-1, keepdims=True)
    p = q + eps
    tape = []  # (input, axis) of every normalisation
    for k in range(2 * repeat - 1):
        ax = -2 if k % 2 == 0 else -1
        tape.append((p, ax))
        p = p / (p.sum(axis=ax, keepdims=True) + eps)
    g = np.asarray(G).astype(np.float64)
    for p, ax in reversed(tape):
        c = p.sum(axis=ax, keepdims=True) + eps
        g = (g - (g * p).sum(axis=ax, keepdims=True) / c) / c
    return (g - (g * q).sum(axis=-1, keepdims=True)) * q


def _sk_inputs(rng, batch, n, **_):
    return (rng.standard_normal((batch, n, n)).astype(np.float32),
            (rng.standard_normal((batch, n, n)) * 2.0).astype(np.float32))


register(KernelSpec(
    name="sinkhorn_bwd", family="mhc_bwd",
    description="gradient of TileKernels' Sinkhorn normalisation: forward recomputed with every stage kept in "
                "shared memory, then 2*repeat-1 normalisation steps and the softmax walked backwards",
    build=lambda batch, n, repeat, eps, block_B, threads, **_: sinkhorn_bwd(batch, n, repeat, eps, block_B, threads),
    make_inputs=_sk_inputs, reference=ref_sinkhorn_bwd,
    flops=lambda batch, n, repeat=10, **_: batch * n * n * (8 + 7 * (2 * repeat - 1)),
    bytes=lambda batch, n, **_: 12 * batch * n * n,
    shapes=({"label": "mHC 4x4 mixing, 16384 tok, repeat 10", "batch": 16384, "n": 4},
            {"label": "8x8 mixing, 8192 tok, repeat 10", "batch": 8192, "n": 8}),
    test_shapes=({"label": "4x4, batch 45", "batch": 45, "n": 4},
                 {"label": "3x3, batch 10, repeat 3", "batch": 10, "n": 3, "repeat": 3, "block_B": 4}),
    tunables={"block_B": [1, 2, 4, 8, 16, 32], "threads": [32, 64, 128, 256]},
    defaults={"repeat": 10, "eps": 1e-6, "block_B": 8, "threads": 128},
    tolerance={"rtol": 1e-4, "atol": 1e-5},
))

__all__ = ["sinkhorn_bwd", "ref_sinkhorn_bwd", "ref_sinkhorn"]
