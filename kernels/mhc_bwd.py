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
  ``block_H`` chunks). ``fuse_grad_acc=True`` (TileKernels' default) is its fused gradient accumulation: the
  kernel also reads ``XG0`` (N, m, H) — the residual gradient ``mhc_post``'s backward left in
  ``grad_from_mhc_post`` — and returns ``XG = XG0 + Mix·OG`` (``XG0`` widened to fp32, the fp32 product added,
  one rounding to X's dtype: TileKernels' kernel's arithmetic, where the product may be an fma). TileKernels
  updates the buffer in place; here ``XG`` is a new output with the same values (no separate add launch either
  way). ``fuse_grad_acc=False``: ``(OG, X, Mix) → (Mix·OG, MixG)`` (what TileKernels computes into zeros).
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



# ------------------------------------------------------------------------------------------ stream kernels
@tilelang.jit(out_idx=[1])
def mhc_expand_bwd(N, m, H, block_N=8, block_H=256, dtype="bfloat16", threads=128):
    @T.prim_func
    def main(OG: T.Tensor((N, m, H), dtype), XG: T.Tensor((N, H), dtype)):
        with T.Kernel(T.ceildiv(H, block_H), T.ceildiv(N, block_N), threads=threads) as (bx, by):
            og = T.alloc_shared((block_N, m, block_H), dtype)
            acc = T.alloc_fragment((block_N, block_H), "float32")
            T.copy(OG[by * block_N, 0, bx * block_H], og)
            T.clear(acc)
            for r in T.serial(m):
                for i, j in T.Parallel(block_N, block_H):
                    acc[i, j] = acc[i, j] + T.cast(og[i, r, j], "float32")
            T.copy(acc, XG[by * block_N, bx * block_H])

    return main


@tilelang.jit(out_idx=[-2, -1])
def _pre_apply_mix_bwd(N, m, H, block_N, block_H, dtype, threads, acc):
    """The kernel of ``mhc_pre_apply_mix_bwd``; with ``acc`` it reads ``XG0`` and writes ``XG0 + Mix·OG``."""

    @T.macro
    def body(OG, X, Mix, XG0, XG, MixG):
        with T.Kernel(T.ceildiv(N, block_N), threads=threads) as bx:
            og = T.alloc_shared((block_N, block_H), dtype)
            xs = T.alloc_shared((block_N, m, block_H), dtype)
            w = T.alloc_shared((block_N, m), "float32")
            xg = T.alloc_fragment((block_N, m, block_H), "float32")
            t = T.alloc_fragment((block_N, m, block_H), "float32")
            mg = T.alloc_fragment((block_N, m), "float32")
            T.copy(Mix[bx * block_N, 0], w)
            T.clear(mg)
            for hb in T.serial(T.ceildiv(H, block_H)):
                T.copy(OG[bx * block_N, hb * block_H], og)
                T.copy(X[bx * block_N, 0, hb * block_H], xs)
                if acc:
                    g0 = T.alloc_shared((block_N, m, block_H), dtype)
                    T.copy(XG0[bx * block_N, 0, hb * block_H], g0)
                    for i, r, j in T.Parallel(block_N, m, block_H):
                        xg[i, r, j] = T.cast(g0[i, r, j], "float32") + w[i, r] * T.cast(og[i, j], "float32")
                else:
                    for i, r, j in T.Parallel(block_N, m, block_H):
                        xg[i, r, j] = w[i, r] * T.cast(og[i, j], "float32")
                for i, r, j in T.Parallel(block_N, m, block_H):
                    t[i, r, j] = T.cast(og[i, j], "float32") * T.cast(xs[i, r, j], "float32")
                T.reduce_sum(t, mg, dim=2, clear=False)
                T.copy(xg, XG[bx * block_N, 0, hb * block_H])
            T.copy(mg, MixG[bx * block_N, 0])

    if acc:
        @T.prim_func
        def main(OG: T.Tensor((N, H), dtype), X: T.Tensor((N, m, H), dtype), Mix: T.Tensor((N, m), "float32"),
                 XG0: T.Tensor((N, m, H), dtype), XG: T.Tensor((N, m, H), dtype), MixG: T.Tensor((N, m), "float32")):
            body(OG, X, Mix, XG0, XG, MixG)
    else:
        @T.prim_func
        def main(OG: T.Tensor((N, H), dtype), X: T.Tensor((N, m, H), dtype), Mix: T.Tensor((N, m), "float32"),
                 XG: T.Tensor((N, m, H), dtype), MixG: T.Tensor((N, m), "float32")):
            body(OG, X, Mix, None, XG, MixG)

    return main


def mhc_pre_apply_mix_bwd(N, m, H, block_N=4, block_H=256, dtype="bfloat16", threads=128, fuse_grad_acc=True):
    """``fuse_grad_acc=True`` (TileKernels' default): ``(OG, X, Mix, XG0) -> (XG0 + Mix·OG, MixG)``; ``False``:
    ``(OG, X, Mix) -> (Mix·OG, MixG)``."""
    return _pre_apply_mix_bwd(N, m, H, block_N, block_H, dtype, threads, bool(fuse_grad_acc))


@tilelang.jit(out_idx=[5, 6, 7, 8])
def mhc_post_bwd(N, m, H, block_N=2, block_H=256, dtype="bfloat16", threads=128):
    @T.prim_func
    def main(OG: T.Tensor((N, m, H), dtype), X: T.Tensor((N, H), dtype), Res: T.Tensor((N, m, H), dtype),
             Post: T.Tensor((N, m), "float32"), Comb: T.Tensor((N, m, m), "float32"),
             XG: T.Tensor((N, H), dtype), ResG: T.Tensor((N, m, H), dtype), PostG: T.Tensor((N, m), "float32"),
             CombG: T.Tensor((N, m, m), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), threads=threads) as bx:
            og = T.alloc_shared((block_N, m, block_H), dtype)
            xs = T.alloc_shared((block_N, block_H), dtype)
            rs = T.alloc_shared((block_N, m, block_H), dtype)
            ps = T.alloc_shared((block_N, m), "float32")
            cs = T.alloc_shared((block_N, m, m), "float32")
            cg = T.alloc_shared((block_N, m, m), "float32")
            xg = T.alloc_fragment((block_N, block_H), "float32")
            rg = T.alloc_fragment((block_N, m, block_H), "float32")
            t = T.alloc_fragment((block_N, m, block_H), "float32")
            pg = T.alloc_fragment((block_N, m), "float32")
            d = T.alloc_fragment((block_N, m), "float32")
            T.copy(Post[bx * block_N, 0], ps)
            T.copy(Comb[bx * block_N, 0, 0], cs)
            T.clear(pg)
            for i, r, c in T.Parallel(block_N, m, m):
                cg[i, r, c] = 0.0
            for hb in T.serial(T.ceildiv(H, block_H)):
                T.copy(OG[bx * block_N, 0, hb * block_H], og)
                T.copy(X[bx * block_N, hb * block_H], xs)
                T.copy(Res[bx * block_N, 0, hb * block_H], rs)
                T.clear(xg)
                T.clear(rg)
                for c in T.serial(m):
                    for i, j in T.Parallel(block_N, block_H):
                        xg[i, j] = xg[i, j] + ps[i, c] * T.cast(og[i, c, j], "float32")
                    for i, r, j in T.Parallel(block_N, m, block_H):
                        rg[i, r, j] = rg[i, r, j] + cs[i, r, c] * T.cast(og[i, c, j], "float32")
                for i, c, j in T.Parallel(block_N, m, block_H):
                    t[i, c, j] = T.cast(xs[i, j], "float32") * T.cast(og[i, c, j], "float32")
                T.reduce_sum(t, pg, dim=2, clear=False)
                for r in T.serial(m):
                    for i, c, j in T.Parallel(block_N, m, block_H):
                        t[i, c, j] = T.cast(rs[i, r, j], "float32") * T.cast(og[i, c, j], "float32")
                    T.reduce_sum(t, d, dim=2)
                    for i, c in T.Parallel(block_N, m):
                        cg[i, r, c] = cg[i, r, c] + d[i, c]
                T.copy(xg, XG[bx * block_N, hb * block_H])
                T.copy(rg, ResG[bx * block_N, 0, hb * block_H])
            T.copy(pg, PostG[bx * block_N, 0])
            T.copy(cg, CombG[bx * block_N, 0, 0])

    return main


def _round(a, dtype):
    return _dt.convert(np.asarray(a).astype(np.float32), _dt.canon(str(dtype)))


def ref_expand_bwd(OG, **_):
    return _round(OG.astype(np.float64).sum(axis=1), OG.dtype)


def ref_pre_apply_mix_bwd(OG, X, Mix, XG0=None, **_):
    """float64 products, one rounding; with ``XG0`` the fp32 sum ``XG0 + fp32(Mix·OG)`` rounded once (the kernel's
    exact arithmetic)."""
    og = OG.astype(np.float64)
    if XG0 is not None:
        prod = (Mix[:, :, None].astype(np.float32) * og[:, None, :].astype(np.float32)).astype(np.float32)
        xg = _round(np.asarray(XG0).astype(np.float32) + prod, X.dtype)
        return xg, np.einsum("nh,nrh->nr", og, X.astype(np.float64)).astype(np.float32)
    return (_round(Mix[:, :, None].astype(np.float64) * og[:, None, :], X.dtype),
            np.einsum("nh,nrh->nr", og, X.astype(np.float64)).astype(np.float32))


def ref_post_bwd(OG, X, Res, Post, Comb, **_):
    og, x, res = OG.astype(np.float64), X.astype(np.float64), Res.astype(np.float64)
    return (_round(np.einsum("nc,nch->nh", Post.astype(np.float64), og), X.dtype),
            _round(np.einsum("nrc,nch->nrh", Comb.astype(np.float64), og), X.dtype),
            np.einsum("nh,nch->nc", x, og).astype(np.float32),
            np.einsum("nrh,nch->nrc", res, og).astype(np.float32))


def _bf(rng, shape, dtype="bfloat16"):
    return _round(rng.standard_normal(shape), dtype)


def _isz(dtype):
    return _dt.itemsize(_dt.canon(dtype))


_TOK = ({"label": "DeepSeek-V4-style mHC x4, hidden 7168, 4096 tok", "N": 4096, "H": 7168},)
_EDGE = ({"label": "ragged: 37 tok, hidden 200", "N": 37, "H": 200},
         {"label": "m 2, 5 tok, hidden 70", "N": 5, "H": 70, "m": 2})
_TUNE = {"block_N": [1, 2, 4, 8], "block_H": [128, 256, 512]}
_BF_TOL = {"rtol": 2.0 ** -7, "atol": 1e-5}

register(KernelSpec(
    name="mhc_expand_bwd", family="mhc_bwd", description="mHC expand backward: the m stream gradients summed (fp32)",
    build=lambda N, m, H, block_N, block_H, threads, dtype="bfloat16", **_: mhc_expand_bwd(N, m, H, block_N, block_H,
                                                                                           dtype, threads),
    make_inputs=lambda rng, N, m, H, dtype="bfloat16", **_: (_bf(rng, (N, m, H), dtype),), reference=ref_expand_bwd,
    flops=lambda N, m, H, **_: N * m * H, bytes=lambda N, m, H, dtype="bfloat16", **_: int(N * H * (m + 1) * _isz(dtype)),
    shapes=_TOK, test_shapes=_EDGE, tunables=_TUNE,
    defaults={"m": 4, "threads": 128, "block_N": 8, "block_H": 256, "dtype": "bfloat16"}, tolerance=_BF_TOL))

register(KernelSpec(
    name="mhc_pre_apply_mix_bwd", family="mhc_bwd",
    description="mHC pre-apply-mix backward: stream gradients mix * grad, mix gradient sum_h grad * x (fp32)",
    build=lambda N, m, H, block_N, block_H, threads, dtype="bfloat16", fuse_grad_acc=True, **_: mhc_pre_apply_mix_bwd(
        N, m, H, block_N, block_H, dtype, threads, fuse_grad_acc),
    make_inputs=lambda rng, N, m, H, dtype="bfloat16", fuse_grad_acc=True, **_: (
        _bf(rng, (N, H), dtype), _bf(rng, (N, m, H), dtype), rng.random((N, m)).astype(np.float32),
        *((_bf(rng, (N, m, H), dtype),) if fuse_grad_acc else ())),
    reference=ref_pre_apply_mix_bwd,
    flops=lambda N, m, H, **_: 3 * N * m * H,
    bytes=lambda N, m, H, dtype="bfloat16", fuse_grad_acc=True, **_: int(
        N * H * ((3 if fuse_grad_acc else 2) * m + 1) * _isz(dtype)),
    shapes=(*_TOK, {"label": "DeepSeek-V4-style mHC x4, hidden 7168, 4096 tok, gradient written", "N": 4096,
                    "H": 7168, "fuse_grad_acc": False}),
    test_shapes=(*_EDGE, {"label": "ragged: 37 tok, hidden 200, gradient written", "N": 37, "H": 200,
                          "fuse_grad_acc": False}),
    tunables=_TUNE,
    defaults={"m": 4, "threads": 128, "block_N": 4, "block_H": 256, "dtype": "bfloat16", "fuse_grad_acc": True},
    tolerance={"rtol": 2.0 ** -7, "atol": 1e-4}))

register(KernelSpec(
    name="mhc_post_bwd", family="mhc_bwd",
    description="mHC post backward: x and residual gradients (one rounding), post and comb gradients (fp32 sums over H)",
    build=lambda N, m, H, block_N, block_H, threads, dtype="bfloat16", **_: mhc_post_bwd(N, m, H, block_N, block_H,
                                                                                         dtype, threads),
    make_inputs=lambda rng, N, m, H, dtype="bfloat16", **_: (
        _bf(rng, (N, m, H), dtype), _bf(rng, (N, H), dtype), _bf(rng, (N, m, H), dtype),
        rng.standard_normal((N, m)).astype(np.float32), rng.standard_normal((N, m, m)).astype(np.float32)),
    reference=ref_post_bwd,
    flops=lambda N, m, H, **_: 4 * N * m * (m + 1) * H,
    bytes=lambda N, m, H, dtype="bfloat16", **_: int(N * H * (3 * m + 2) * _isz(dtype)),
    shapes=_TOK, test_shapes=_EDGE, tunables=_TUNE,
    defaults={"m": 4, "threads": 128, "block_N": 2, "block_H": 256, "dtype": "bfloat16"},
    tolerance={"rtol": 2.0 ** -7, "atol": 1e-4}))

__all__ = ["mhc_expand_bwd", "mhc_post_bwd", "mhc_pre_apply_mix_bwd", "ref_expand_bwd", "ref_post_bwd",
           "ref_pre_apply_mix_bwd", "ref_sinkhorn", "ref_sinkhorn_bwd", "sinkhorn_bwd"]
