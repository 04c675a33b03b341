"""mHC backward of the mix activations, with the semantics of TileKernels' ``MHCHeadComputeMix`` and
``MHCPreSplitMixes`` autograd functions (the gradients of ``mhc_head_compute_mix_ref`` and
``mhc_pre_split_mixes_ref`` in ``tile_kernels/torch/mhc.py``). Tokens are one flattened axis ``N``.

* ``mhc_head_compute_mix_bwd`` — ``G`` (N, m) the output gradient, ``Mix`` (N, m), ``Scale`` (1,), ``Base`` (m,)
  fp32 → ``MixG (N, m) = d·Scale``, ``ScaleG (1,) = Σ d·Mix``, ``BaseG (m,) = Σ_tokens d`` with
  ``d = G·s·(1 − s)``, ``s = sigmoid(Mix·Scale + Base)`` recomputed (the ``+ eps`` has gradient 1).
* ``mhc_pre_split_mixes_bwd`` — ``GPre``, ``GPost`` (N, m), ``GComb`` (N, m, m), ``Mixes`` (N, m(2+m)),
  ``Scale`` (3,), ``Base`` (m(2+m),) → ``MixesG`` (N, m(2+m)), ``ScaleG`` (3,), ``BaseG`` (m(2+m),):
  per column ``d = GPre·s(1−s)`` (pre part), ``GPost·p(1 − p/post_mult)`` with ``p = sigmoid(v)·post_mult``
  (post part, TileKernels' formula on the recomputed output), ``GComb`` (comb part); ``MixesG = d·s_part``,
  ``ScaleG[part] = Σ d·Mixes`` over the part's columns and all tokens, ``BaseG = Σ_tokens d``.

Two launches, deterministic (no atomics): launch 1 handles ``block_N`` tokens per block, writes the input
gradient and the block's column sums of ``d`` and ``d·Mixes`` into a ``(blocks, columns)`` fp32 workspace
(rows past N read zero gradients and add nothing); launch 2 (one block) sums the workspace rows in block
order, then the scale parts in column order. TileKernels sums per-SM partials in another order, so the
reductions agree within fp32 rounding, the per-token gradients within sigmoid ulps. Inputs must be finite.
"""

import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.registry import KernelSpec, register


@tilelang.jit(out_idx=[4, 5, 6])
def mhc_head_compute_mix_bwd(N, m, block_N=64, threads=128):
    nb = (N + block_N - 1) // block_N

    @T.prim_func
    def main(G: T.Tensor((N, m), "float32"), Mix: T.Tensor((N, m), "float32"), Scale: T.Tensor((1,), "float32"),
             Base: T.Tensor((m,), "float32"), MixG: T.Tensor((N, m), "float32"), ScaleG: T.Tensor((1,), "float32"),
             BaseG: T.Tensor((m,), "float32")):
        PartB = T.alloc_global((nb, m), "float32")
        PartS = T.alloc_global((nb, m), "float32")
        with T.Kernel(nb, threads=threads) as bx:
            g = T.alloc_fragment((block_N, m), "float32")
            x = T.alloc_fragment((block_N, m), "float32")
            t = T.alloc_fragment((block_N, m), "float32")
            cb = T.alloc_fragment((m,), "float32")
            cs = T.alloc_fragment((m,), "float32")
            T.copy(G[bx * block_N, 0], g)
            T.copy(Mix[bx * block_N, 0], x)
            for i, r in T.Parallel(block_N, m):
                s = T.sigmoid(x[i, r] * Scale[0] + Base[r])
                g[i, r] = s * (1.0 - s) * g[i, r]
                t[i, r] = g[i, r] * x[i, r]
            T.reduce_sum(g, cb, dim=0)
            T.reduce_sum(t, cs, dim=0)
            for i, r in T.Parallel(block_N, m):
                g[i, r] = g[i, r] * Scale[0]
            T.copy(g, MixG[bx * block_N, 0])
            for r in T.Parallel(m):
                PartB[bx, r] = cb[r]
                PartS[bx, r] = cs[r]
        with T.Kernel(1, threads=32) as _:
            ab = T.alloc_fragment((m,), "float32")
            ss = T.alloc_shared((m,), "float32")
            sg = T.alloc_fragment((1,), "float32")
            T.clear(ab)
            T.clear(sg)
            for r in T.Parallel(m):
                ss[r] = 0.0
            for b in T.serial(nb):
                for r in T.Parallel(m):
                    ab[r] = ab[r] + PartB[b, r]
                    ss[r] = ss[r] + PartS[b, r]
            for r in T.serial(m):
                for k in T.Parallel(1):
                    sg[k] = sg[k] + ss[r]
            T.copy(ab, BaseG[0])
            T.copy(sg, ScaleG[0])

    return main


@tilelang.jit(out_idx=[6, 7, 8])
def mhc_pre_split_mixes_bwd(N, m, post_mult=2.0, block_N=32, threads=128):
    M3 = m * (2 + m)
    nb = (N + block_N - 1) // block_N

    @T.prim_func
    def main(GPre: T.Tensor((N, m), "float32"), GPost: T.Tensor((N, m), "float32"),
             GComb: T.Tensor((N, m, m), "float32"), Mixes: T.Tensor((N, M3), "float32"),
             Scale: T.Tensor((3,), "float32"), Base: T.Tensor((M3,), "float32"),
             MixesG: T.Tensor((N, M3), "float32"), ScaleG: T.Tensor((3,), "float32"), BaseG: T.Tensor((M3,), "float32")):
        PartB = T.alloc_global((nb, M3), "float32")
        PartS = T.alloc_global((nb, M3), "float32")
        with T.Kernel(nb, threads=threads) as bx:
            xin = T.alloc_shared((block_N, M3), "float32")
            gp = T.alloc_shared((block_N, m), "float32")
            gq = T.alloc_shared((block_N, m), "float32")
            gc = T.alloc_shared((block_N, m, m), "float32")
            gs = T.alloc_shared((block_N, M3), "float32")
            d = T.alloc_fragment((block_N, M3), "float32")
            t = T.alloc_fragment((block_N, M3), "float32")
            cb = T.alloc_fragment((M3,), "float32")
            cs = T.alloc_fragment((M3,), "float32")
            T.copy(Mixes[bx * block_N, 0], xin)
            T.copy(GPre[bx * block_N, 0], gp)
            T.copy(GPost[bx * block_N, 0], gq)
            T.copy(GComb[bx * block_N, 0, 0], gc)
            for i, r in T.Parallel(block_N, m):
                s = T.sigmoid(xin[i, r] * Scale[0] + Base[r])
                gs[i, r] = gp[i, r] * s * (1.0 - s)
                p = T.sigmoid(xin[i, m + r] * Scale[1] + Base[m + r]) * post_mult
                gs[i, m + r] = gq[i, r] * p * (1.0 - p / post_mult)
            for i, r, c in T.Parallel(block_N, m, m):
                gs[i, 2 * m + r * m + c] = gc[i, r, c]
            for i, j in T.Parallel(block_N, M3):
                d[i, j] = gs[i, j]
                t[i, j] = gs[i, j] * xin[i, j]
            T.reduce_sum(d, cb, dim=0)
            T.reduce_sum(t, cs, dim=0)
            for i, j in T.Parallel(block_N, M3):
                d[i, j] = d[i, j] * Scale[T.if_then_else(j < m, 0, T.if_then_else(j < 2 * m, 1, 2))]
            T.copy(d, MixesG[bx * block_N, 0])
            for j in T.Parallel(M3):
                PartB[bx, j] = cb[j]
                PartS[bx, j] = cs[j]
        with T.Kernel(1, threads=32) as _:
            ab = T.alloc_fragment((M3,), "float32")
            ss = T.alloc_shared((M3,), "float32")
            sg = T.alloc_fragment((3,), "float32")
            T.clear(ab)
            T.clear(sg)
            for j in T.Parallel(M3):
                ss[j] = 0.0
            for b in T.serial(nb):
                for j in T.Parallel(M3):
                    ab[j] = ab[j] + PartB[b, j]
                    ss[j] = ss[j] + PartS[b, j]
            for j in T.serial(M3):
                for k in T.Parallel(3):
                    sg[k] = sg[k] + T.if_then_else(T.if_then_else(j < m, 0, T.if_then_else(j < 2 * m, 1, 2)) == k,
                                                   ss[j], 0.0)
            T.copy(ab, BaseG[0])
            T.copy(sg, ScaleG[0])

    return main


# ------------------------------------------------------------------------------------------ references
def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def ref_head_compute_mix_bwd(G, Mix, Scale, Base, **_):
    x = Mix.astype(np.float64)
    s = _sig(x * float(Scale[0]) + Base)
    d = G.astype(np.float64) * s * (1 - s)
    return ((d * float(Scale[0])).astype(np.float32), np.array([(d * x).sum()], np.float32),
            d.sum(axis=0).astype(np.float32))


def ref_pre_split_mixes_bwd(GPre, GPost, GComb, Mixes, Scale, Base, m, post_mult=2.0, **_):
    N = Mixes.shape[0]
    part = np.repeat([0, 1, 2], [m, m, m * m])
    x = Mixes.astype(np.float64)
    v = x * Scale.astype(np.float64)[part] + Base
    s = _sig(v)
    d = np.concatenate([GPre * s[:, :m] * (1 - s[:, :m]), GPost * post_mult * s[:, m:2 * m] * (1 - s[:, m:2 * m]),
                        GComb.reshape(N, m * m).astype(np.float64)], axis=1)
    sd = (d * x).sum(axis=0)
    return ((d * Scale.astype(np.float64)[part]).astype(np.float32),
            np.array([sd[part == k].sum() for k in range(3)], np.float32), d.sum(axis=0).astype(np.float32))


# ------------------------------------------------------------------------------------------ registry
def _f(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


_TOK = ({"label": "DeepSeek-V4-style mHC x4, 4096 tok", "N": 4096},
        {"label": "mHC x4, 65536 tok (a 16x4096 batch)", "N": 65536})
_EDGE = ({"label": "ragged: 37 tok", "N": 37}, {"label": "m 2, 5 tok", "N": 5, "m": 2})

register(KernelSpec(
    name="mhc_head_compute_mix_bwd", family="mhc_bwd",
    description="mHC head mix backward: input, scale and base gradients (block partial sums, then one block)",
    build=lambda N, m, block_N, threads, **_: mhc_head_compute_mix_bwd(N, m, block_N, threads),
    make_inputs=lambda rng, N, m, **_: (_f(rng, N, m), _f(rng, N, m), _f(rng, 1), _f(rng, m)),
    reference=ref_head_compute_mix_bwd,
    flops=lambda N, m, **_: 12 * N * m, bytes=lambda N, m, **_: 12 * N * m,
    shapes=_TOK, test_shapes=_EDGE, tunables={"block_N": [32, 64, 128]},
    defaults={"m": 4, "block_N": 64, "threads": 128}, tolerance={"rtol": 1e-4, "atol": 1e-5}))

register(KernelSpec(
    name="mhc_pre_split_mixes_bwd", family="mhc_bwd",
    description="mHC pre-split backward: mixes, per-part scale and base gradients (block partial sums, then one block)",
    build=lambda N, m, block_N, threads, post_mult=2.0, **_: mhc_pre_split_mixes_bwd(N, m, post_mult, block_N, threads),
    make_inputs=lambda rng, N, m, **_: (_f(rng, N, m), _f(rng, N, m), _f(rng, N, m, m), _f(rng, N, m * (2 + m)),
                                        _f(rng, 3), _f(rng, m * (2 + m))),
    reference=ref_pre_split_mixes_bwd,
    flops=lambda N, m, **_: 12 * N * m * (2 + m), bytes=lambda N, m, **_: 12 * N * m * (2 + m),
    shapes=_TOK, test_shapes=_EDGE, tunables={"block_N": [16, 32, 64]},
    defaults={"m": 4, "block_N": 32, "threads": 128, "post_mult": 2.0}, tolerance={"rtol": 1e-4, "atol": 1e-5}))
