"""mHC (manifold-constrained hyper-connections) forward kernels beyond Sinkhorn, with TileKernels' semantics
(``tile_kernels/torch/mhc.py``: ``expand_to_mhc_ref``, ``mhc_head_compute_mix_ref``,
``mhc_pre_split_mixes_ref``, ``mhc_pre_apply_mix_ref``, ``mhc_post_ref``, ``mhc_pre_norm_fn_ref``).

Tokens are flattened: TileKernels' ``(n0, n1, …)`` leading dimensions are one ``N = n0·n1`` here (a view);
``m`` is the expansion rate (``mhc_mult``, 4 in DeepSeek's models), ``H`` the hidden size. Kernels
(registry names):

* ``mhc_expand`` — ``X`` (N, H) → ``Out`` (N, m, H): each token row repeated ``m`` times (values move).
* ``mhc_head_compute_mix`` — ``Mix`` (N, m), ``Scale`` (1,), ``Base`` (m,) fp32 →
  ``sigmoid(Mix·Scale + Base) + eps`` (product and sum rounded separately, as the reference's two ops).
* ``mhc_pre_split_mixes`` — ``Mixes`` (N, m(2+m)), ``Scale`` (3,), ``Base`` (m(2+m),) fp32: ``v = Mixes·s +
  Base`` with ``s = Scale[0]`` for the first m columns, ``Scale[1]`` for the next m, ``Scale[2]`` for the
  m² rest → ``Pre = sigmoid(v[:, :m]) + eps`` (N, m), ``Post = sigmoid(v[:, m:2m])·post_mult`` (N, m),
  ``Comb = v[:, 2m:]`` (N, m, m) (TileKernels' trailing size-1 axes of Pre/Post are views).
* ``mhc_pre_apply_mix`` — ``X`` (N, m, H) bf16, ``Mix`` (N, m) fp32 → ``Out (N, H) = Σ_r X[:, r]·Mix[:, r]``
  in fp32 (r ascending), rounded once to X's dtype.
* ``mhc_post`` — ``X`` (N, H), ``Res`` (N, m, H) bf16, ``Post`` (N, m), ``Comb`` (N, m, m) fp32 →
  ``Out[:, n] = X·Post[:, n] + Σ_r Comb[:, r, n]·Res[:, r]`` (fp32, r ascending), rounded once.
* ``mhc_pre_norm_fn`` — ``Res`` (N, m·H) (the flattened residual streams, bf16 or fp32), ``Fn`` (M3, m·H)
  fp32 (``M3 = m(2+m)``; pre-multiplied by the norm weight when TileKernels gets one: ``Fn·w`` is a
  separate elementwise step there too) → ``Mixes (N, M3) = (Res @ Fnᵀ) · rsqrt(Σ Res² / (m·H) + eps)``.
  One block per ``block_N`` tokens walks K = m·H in ``block_K`` chunks: a ``T.gemm`` into a (block_N, 32)
  fp32 accumulator (M3 ≤ 32; Fn rows past M3 read as zeros) and the row sums of squares.

Numerics: fp32 throughout (sigmoid via ``exp``; sums in the stated order; the GEMM accumulates in fp32 in
the interpreter — on Hopper an fp32 ``T.gemm`` may run as TF32, as TileKernels' own kernel does for
bf16 inputs), so results agree with the float64 references within fp32 rounding (bf16 outputs within
one bf16 ulp). Shapes the tiles do not divide are handled by edge-filled copies and guarded stores;
``ValueError`` for ``M3 > 32`` in ``mhc_pre_norm_fn``. Inputs must be finite.
"""

import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.registry import KernelSpec, register
from tilesim import dtypes as _dt
from tilesim.testing.compare import compare_arrays


@tilelang.jit(out_idx=[1])
def mhc_expand(N, H, m, block_N=8, block_H=256, dtype="bfloat16", threads=128):
    @T.prim_func
    def main(X: T.Tensor((N, H), dtype), Out: T.Tensor((N, m, H), dtype)):
        with T.Kernel(T.ceildiv(H, block_H), T.ceildiv(N, block_N), threads=threads) as (bx, by):
            xs = T.alloc_shared((block_N, block_H), dtype)
            o = T.alloc_shared((block_N, m, block_H), dtype)
            T.copy(X[by * block_N, bx * block_H], xs)
            for i, r, j in T.Parallel(block_N, m, block_H):
                o[i, r, j] = xs[i, j]
            T.copy(o, Out[by * block_N, 0, bx * block_H])

    return main


@tilelang.jit(out_idx=[3])
def mhc_head_compute_mix(N, m, eps=1e-6, block_N=64, threads=128):
    @T.prim_func
    def main(Mix: T.Tensor((N, m), "float32"), Scale: T.Tensor((1,), "float32"), Base: T.Tensor((m,), "float32"),
             Out: T.Tensor((N, m), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), threads=threads) as bx:
            x = T.alloc_fragment((block_N, m), "float32")
            T.copy(Mix[bx * block_N, 0], x)
            s = Scale[0]
            for i, r in T.Parallel(block_N, m):
                x[i, r] = T.sigmoid(x[i, r] * s + Base[r]) + eps
            T.copy(x, Out[bx * block_N, 0])

    return main


@tilelang.jit(out_idx=[3, 4, 5])
def mhc_pre_split_mixes(N, m, post_mult=2.0, eps=1e-6, block_N=64, threads=128):
    M3 = m * (2 + m)

    @T.prim_func
    def main(Mixes: T.Tensor((N, M3), "float32"), Scale: T.Tensor((3,), "float32"), Base: T.Tensor((M3,), "float32"),
             Pre: T.Tensor((N, m), "float32"), Post: T.Tensor((N, m), "float32"), Comb: T.Tensor((N, m, m), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), threads=threads) as bx:
            v = T.alloc_shared((block_N, M3), "float32")
            pre = T.alloc_fragment((block_N, m), "float32")
            post = T.alloc_fragment((block_N, m), "float32")
            comb = T.alloc_fragment((block_N, m, m), "float32")
            T.copy(Mixes[bx * block_N, 0], v)
            for i, j in T.Parallel(block_N, M3):
                v[i, j] = v[i, j] * Scale[T.if_then_else(j < m, 0, T.if_then_else(j < 2 * m, 1, 2))] + Base[j]
            for i, r in T.Parallel(block_N, m):
                pre[i, r] = T.sigmoid(v[i, r]) + eps
                post[i, r] = T.sigmoid(v[i, m + r]) * post_mult
            for i, r, c in T.Parallel(block_N, m, m):
                comb[i, r, c] = v[i, 2 * m + r * m + c]
            T.copy(pre, Pre[bx * block_N, 0])
            T.copy(post, Post[bx * block_N, 0])
            T.copy(comb, Comb[bx * block_N, 0, 0])

    return main


@tilelang.jit(out_idx=[2])
def mhc_pre_apply_mix(N, m, H, block_N=8, block_H=256, dtype="bfloat16", threads=128):
    @T.prim_func
    def main(X: T.Tensor((N, m, H), dtype), Mix: T.Tensor((N, m), "float32"), Out: T.Tensor((N, H), dtype)):
        with T.Kernel(T.ceildiv(H, block_H), T.ceildiv(N, block_N), threads=threads) as (bx, by):
            xs = T.alloc_shared((block_N, m, block_H), dtype)
            w = T.alloc_shared((block_N, m), "float32")
            acc = T.alloc_fragment((block_N, block_H), "float32")
            T.copy(X[by * block_N, 0, bx * block_H], xs)
            T.copy(Mix[by * block_N, 0], w)
            T.clear(acc)
            for r in T.serial(m):
                for i, j in T.Parallel(block_N, block_H):
                    acc[i, j] = acc[i, j] + T.cast(xs[i, r, j], "float32") * w[i, r]
            T.copy(acc, Out[by * block_N, bx * block_H])

    return main


@tilelang.jit(out_idx=[4])
def mhc_post(N, m, H, block_N=4, block_H=256, dtype="bfloat16", threads=128):
    @T.prim_func
    def main(X: T.Tensor((N, H), dtype), Res: T.Tensor((N, m, H), dtype), Post: T.Tensor((N, m), "float32"),
             Comb: T.Tensor((N, m, m), "float32"), Out: T.Tensor((N, m, H), dtype)):
        with T.Kernel(T.ceildiv(H, block_H), T.ceildiv(N, block_N), threads=threads) as (bx, by):
            xs = T.alloc_shared((block_N, block_H), dtype)
            rs = T.alloc_shared((block_N, m, block_H), dtype)
            ps = T.alloc_shared((block_N, m), "float32")
            cs = T.alloc_shared((block_N, m, m), "float32")
            acc = T.alloc_fragment((block_N, m, block_H), "float32")
            T.copy(X[by * block_N, bx * block_H], xs)
            T.copy(Res[by * block_N, 0, bx * block_H], rs)
            T.copy(Post[by * block_N, 0], ps)
            T.copy(Comb[by * block_N, 0, 0], cs)
            for i, n, j in T.Parallel(block_N, m, block_H):
                acc[i, n, j] = T.cast(xs[i, j], "float32") * ps[i, n]
            for r in T.serial(m):
                for i, n, j in T.Parallel(block_N, m, block_H):
                    acc[i, n, j] = acc[i, n, j] + cs[i, r, n] * T.cast(rs[i, r, j], "float32")
            T.copy(acc, Out[by * block_N, 0, bx * block_H])

    return main


@tilelang.jit(out_idx=[2])
def mhc_pre_norm_fn(N, K, M3, eps=1e-6, block_N=32, block_K=128, dtype="bfloat16", num_stages=2, threads=128):
    if M3 > 32:
        raise ValueError(f"mhc_pre_norm_fn keeps the {M3} mixes in one 32-wide accumulator (M3 <= 32)")

    @T.prim_func
    def main(Res: T.Tensor((N, K), dtype), Fn: T.Tensor((M3, K), "float32"), Mixes: T.Tensor((N, M3), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), threads=threads) as bx:
            rs = T.alloc_shared((block_N, block_K), "float32")
            fs = T.alloc_shared((32, block_K), "float32")
            sq = T.alloc_fragment((block_N, block_K), "float32")
            acc = T.alloc_fragment((block_N, 32), "float32")
            ss = T.alloc_fragment((block_N,), "float32")
            T.clear(acc)
            T.clear(ss)
            for kb in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(Res[bx * block_N, kb * block_K], rs)
                T.copy(Fn[0, kb * block_K], fs)  # rows past M3 read as zeros
                T.gemm(rs, fs, acc, transpose_B=True)
                for i, k in T.Parallel(block_N, block_K):
                    sq[i, k] = rs[i, k] * rs[i, k]
                T.reduce_sum(sq, ss, dim=1, clear=False)
            for i, o in T.Parallel(block_N, 32):
                if (o < M3) & (bx * block_N + i < N):
                    Mixes[bx * block_N + i, o] = acc[i, o] * T.rsqrt(ss[i] / K + eps)

    return main


# ------------------------------------------------------------------------------------------ references
def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def ref_expand(X, m, **_):
    return np.repeat(np.asarray(X)[:, None, :], m, axis=1)


def ref_head_compute_mix(Mix, Scale, Base, eps=1e-6, **_):
    return (_sig(Mix.astype(np.float64) * Scale[0] + Base) + eps).astype(np.float32)


def ref_pre_split_mixes(Mixes, Scale, Base, m, post_mult=2.0, eps=1e-6, **_):
    s = np.concatenate([np.full(m, Scale[0]), np.full(m, Scale[1]), np.full(m * m, Scale[2])])
    v = Mixes.astype(np.float64) * s + Base
    pre = (_sig(v[:, :m]) + eps).astype(np.float32)
    post = (_sig(v[:, m:2 * m]) * post_mult).astype(np.float32)
    return pre, post, v[:, 2 * m:].reshape(-1, m, m).astype(np.float32)


def ref_pre_apply_mix(X, Mix, **_):
    out = (X.astype(np.float64) * Mix[:, :, None]).sum(axis=1)
    return _dt.convert(out.astype(np.float32), _dt.canon(str(X.dtype)))


def ref_post(X, Res, Post, Comb, **_):
    out = X.astype(np.float64)[:, None, :] * Post[:, :, None] + np.einsum("brn,brc->bnc", Comb.astype(np.float64),
                                                                          Res.astype(np.float64))
    return _dt.convert(out.astype(np.float32), _dt.canon(str(X.dtype)))


def ref_pre_norm_fn(Res, Fn, eps=1e-6, **_):
    r = np.asarray(Res).astype(np.float64)
    mix = r @ Fn.astype(np.float64).T
    return (mix / np.sqrt((r * r).mean(axis=1, keepdims=True) + eps)).astype(np.float32)


def _close(rtol, atol):
    def compare(outs, refs, *_a, **_k):
        bad = [compare_arrays(o, r, rtol=rtol if o.dtype == np.float32 else 2.0 ** -7, atol=atol, name=f"out {i}")
               for i, (o, r) in enumerate(zip(outs, refs))]
        bad = [b for b in bad if b]
        if bad:
            raise AssertionError("; ".join(bad))
    return compare


# ------------------------------------------------------------------------------------------ registry
def _bf(rng, shape, dtype="bfloat16"):
    return _dt.convert(rng.standard_normal(shape).astype(np.float32), _dt.canon(dtype))


def _f(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _mix_inputs(rng, N, m, **_):
    return _f(rng, N, m), _f(rng, 1), _f(rng, m)


def _split_inputs(rng, N, m, **_):
    return _f(rng, N, m * (2 + m)), _f(rng, 3), _f(rng, m * (2 + m))


def _apply_inputs(rng, N, m, H, dtype="bfloat16", **_):
    w = np.exp(_f(rng, N, m))
    return _bf(rng, (N, m, H), dtype), (w / w.sum(axis=1, keepdims=True)).astype(np.float32)


def _post_inputs(rng, N, m, H, dtype="bfloat16", **_):
    return _bf(rng, (N, H), dtype), _bf(rng, (N, m, H), dtype), _f(rng, N, m), _f(rng, N, m, m)


def _norm_inputs(rng, N, m, H, dtype="bfloat16", **_):
    M3 = m * (2 + m)
    return _bf(rng, (N, m * H), dtype), (_f(rng, M3, m * H) * 0.05).astype(np.float32)


TOKENS = ({"label": "DeepSeek-V4-style mHC x4, hidden 7168, 4096 tok", "N": 4096, "H": 7168},)
EDGE = ({"label": "ragged: 37 tok, hidden 200", "N": 37, "H": 200},
        {"label": "m 2, 5 tok, hidden 70", "N": 5, "H": 70, "m": 2})
_SPEC = dict(shapes=TOKENS, test_shapes=EDGE)
_DEF = {"m": 4, "threads": 128}


def _isz(dtype):
    return _dt.itemsize(_dt.canon(dtype))


register(KernelSpec(
    name="mhc_expand", family="mhc", description="mHC: each token row repeated over the m residual streams",
    build=lambda N, H, m, block_N, block_H, threads, dtype="bfloat16", **_: mhc_expand(N, H, m, block_N, block_H, dtype,
                                                                                       threads),
    make_inputs=lambda rng, N, H, dtype="bfloat16", **_: (_bf(rng, (N, H), dtype),), reference=ref_expand,
    flops=lambda **_: 0, bytes=lambda N, H, m, dtype="bfloat16", **_: int(N * H * (1 + m) * _isz(dtype)),
    tunables={"block_N": [4, 8, 16], "block_H": [128, 256, 512]},
    defaults={**_DEF, "block_N": 8, "block_H": 256, "dtype": "bfloat16"}, tolerance={"exact": True}, **_SPEC))

register(KernelSpec(
    name="mhc_head_compute_mix", family="mhc", description="mHC head mix: sigmoid(mix * scale + base) + eps",
    build=lambda N, m, block_N, threads, eps=1e-6, **_: mhc_head_compute_mix(N, m, eps, block_N, threads),
    make_inputs=_mix_inputs, reference=ref_head_compute_mix,
    flops=lambda N, m, **_: 6 * N * m, bytes=lambda N, m, **_: 8 * N * m,
    shapes=TOKENS, test_shapes=EDGE, tunables={"block_N": [32, 64, 128]},
    defaults={**_DEF, "block_N": 64}, tolerance={"rtol": 1e-5, "atol": 1e-6}))

register(KernelSpec(
    name="mhc_pre_split_mixes", family="mhc",
    description="mHC pre: mixes * per-part scale + base split into pre (sigmoid + eps), post (sigmoid * 2), comb",
    build=lambda N, m, block_N, threads, post_mult=2.0, eps=1e-6, **_: mhc_pre_split_mixes(N, m, post_mult, eps,
                                                                                           block_N, threads),
    make_inputs=_split_inputs, reference=ref_pre_split_mixes,
    flops=lambda N, m, **_: 6 * N * m * (2 + m), bytes=lambda N, m, **_: 8 * N * m * (2 + m),
    shapes=TOKENS, test_shapes=EDGE, tunables={"block_N": [32, 64, 128]},
    defaults={**_DEF, "block_N": 64}, tolerance={"rtol": 1e-5, "atol": 1e-6}, compare=_close(1e-5, 1e-6)))

register(KernelSpec(
    name="mhc_pre_apply_mix", family="mhc", description="mHC pre: the m streams mixed into one layer input (fp32 sum)",
    build=lambda N, m, H, block_N, block_H, threads, dtype="bfloat16", **_: mhc_pre_apply_mix(N, m, H, block_N, block_H,
                                                                                              dtype, threads),
    make_inputs=_apply_inputs, reference=ref_pre_apply_mix,
    flops=lambda N, m, H, **_: 2 * N * m * H, bytes=lambda N, m, H, dtype="bfloat16", **_: int(N * H * (m + 1) * _isz(dtype)),
    tunables={"block_N": [4, 8, 16], "block_H": [128, 256, 512]},
    defaults={**_DEF, "block_N": 8, "block_H": 256, "dtype": "bfloat16"}, tolerance={"rtol": 2.0 ** -7, "atol": 1e-6},
    **_SPEC))

register(KernelSpec(
    name="mhc_post", family="mhc", description="mHC post: x * post + comb^T @ residual streams (fp32), one rounding",
    build=lambda N, m, H, block_N, block_H, threads, dtype="bfloat16", **_: mhc_post(N, m, H, block_N, block_H, dtype,
                                                                                     threads),
    make_inputs=_post_inputs, reference=ref_post,
    flops=lambda N, m, H, **_: 2 * N * m * (m + 1) * H,
    bytes=lambda N, m, H, dtype="bfloat16", **_: int(N * H * (2 * m + 1) * _isz(dtype)),
    tunables={"block_N": [2, 4, 8], "block_H": [128, 256, 512]},
    defaults={**_DEF, "block_N": 4, "block_H": 256, "dtype": "bfloat16"}, tolerance={"rtol": 2.0 ** -7, "atol": 1e-5},
    **_SPEC))

register(KernelSpec(
    name="mhc_pre_norm_fn", family="mhc",
    description="mHC pre: (residual @ fn^T) * rsqrt(mean(residual^2) + eps), T.gemm into a 32-wide fp32 accumulator",
    build=lambda N, m, H, block_N, block_K, num_stages, threads, eps=1e-6, dtype="bfloat16", **_: mhc_pre_norm_fn(
        N, m * H, m * (2 + m), eps, block_N, block_K, dtype, num_stages, threads),
    make_inputs=_norm_inputs, reference=ref_pre_norm_fn,
    flops=lambda N, m, H, **_: 2 * N * m * H * (m * (2 + m) + 1),
    bytes=lambda N, m, H, dtype="bfloat16", **_: int(N * m * H * _isz(dtype) + 4 * m * (2 + m) * (m * H + N)),
    tunables={"block_N": [16, 32, 64], "block_K": [64, 128, 256], "num_stages": [1, 2, 3]},
    defaults={**_DEF, "block_N": 32, "block_K": 128, "num_stages": 2, "dtype": "bfloat16"},
    tolerance={"rtol": 1e-4, "atol": 1e-5}, **_SPEC))
