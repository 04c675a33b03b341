"""mHC's fused pre block: TileKernels' ``mhc_pre_big_fuse`` (``tile_kernels/modeling/mhc/ops/pre_big_fuse.py``,
the inference path of its ``mhc_pre``), i.e. ``mhc_pre_norm_fn`` → ``mhc_pre_split_mixes`` → ``sinkhorn_normalize``
(on the comb part) → ``mhc_pre_apply_mix`` (with the pre part) in one kernel.

Kernel (registry name ``mhc_pre_big_fuse``, family ``mhc``); tokens flattened (TileKernels' ``(n0, n1)`` is one
axis ``N``), ``m`` streams, hidden ``H``, ``K = m·H``, ``M3 = m(2+m)``:

* inputs ``Res`` (N, K) — the residual streams ``(N, m, H)`` viewed flat, bf16 (or fp32); ``Fn`` (M3, K) fp32
  (pre-multiplied by the norm weight if there is one, as TileKernels' fused path takes it); ``Scale`` (3,) and
  ``Base`` (M3,) fp32;
* outputs ``Post`` (N, m) fp32, ``Comb`` (N, m, m) fp32, ``Out`` (N, H) in Res's dtype (TileKernels' trailing
  size-1 axis of ``post_mix`` and the ``(…, m, m)`` comb view are views).

Per token::

    mixes = (Res @ Fnᵀ) · rsqrt(Σ Res² / K + rms_eps)               (fp32 GEMM; ``mhc_pre_norm_fn``)
    v     = mixes · Scale[part] + Base                              (part 0: first m, 1: next m, 2: m² rest)
    Pre   = sigmoid(v[:m]) + pre_eps;  Post = sigmoid(v[m:2m]) · post_mult
    Comb  = sinkhorn(v[2m:] as m×m, repeat, sinkhorn_eps)           (softmax + eps, column step first and last)
    Out   = Σ_r Res[r]·Pre[r]  (fp32, r ascending, one rounding)

One block per ``block_N`` tokens: the K walk (``T.gemm`` into a (block_N, 32) fp32 accumulator, Fn rows past M3
read as zeros, plus the row sums of squares), then split + Sinkhorn in registers/shared memory, then the H walk in
``block_H`` chunks re-reading the block's residual rows (chunk ``hb`` of stream ``r`` starts at column
``r·H + hb·block_H``; columns past H are never stored). Nothing intermediate goes to global memory.

TileKernels' options: ``tf32=True`` rounds each ``Fn`` tile as its ``round_to_tf32`` (``bits + 0x1000``) followed
by the TF32 MMA's truncation of the 13 low mantissa bits (:func:`tf32_round`; ties away from zero; the bf16
residual is exact in TF32). ``n_splits > 1`` is its split-K form, two launches: (1) one block per ``block_N`` tokens
× split walks ``ceil(K/block_K)/n_splits`` K tiles and writes its partial GEMM and sums of squares to global
workspaces (TileKernels' ``gemm_out_mul`` (n_splits, N, 32) and ``gemm_out_sqrsum``), (2) one block per ``block_N``
tokens adds the partials in split order (deterministic) and runs the rest as above. ``n_splits`` must divide the
number of K tiles.

Numerics: fp32 throughout, as the four separate kernels of ``kernels/mhc.py`` and ``kernels/sinkhorn.py`` (the
interpreter's fp32 GEMM is exact fp32 products and sums; on Hopper an fp32 ``T.gemm`` may run as TF32 — TileKernels
itself rounds ``fn`` to TF32 first); agreement with the float64 reference ``ref_pre_big_fuse`` is within fp32
rounding, ``Out`` within one bf16 ulp. Shapes the tiles do not divide are edge-filled and guard-stored.
Errors: ``ValueError`` for ``M3 > 32`` (m > 4), ``repeat < 1`` and ``n_splits`` not dividing the K tiles. Inputs
must be finite.
"""

import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.mhc import _close, _isz, ref_pre_apply_mix, ref_pre_norm_fn, ref_pre_split_mixes
from kernels.registry import KernelSpec, register
from kernels.sinkhorn import ref_sinkhorn
from tilesim import dtypes as _dt


def _check(m, K, repeat, block_K, n_splits):
    if m * (2 + m) > 32:
        raise ValueError(f"mhc_pre_big_fuse keeps the {m * (2 + m)} mixes (m={m}) in one 32-wide accumulator (m <= 4)")
    if repeat < 1:
        raise ValueError(f"repeat={repeat} must be >= 1 (2*repeat-1 Sinkhorn normalisations)")
    if n_splits < 1 or T.ceildiv(K, block_K) % n_splits:
        raise ValueError(f"n_splits={n_splits} must divide the {T.ceildiv(K, block_K)} K tiles (K={K}, "
                         f"block_K={block_K})")


@tilelang.jit(out_idx=[4, 5, 6])
def mhc_pre_big_fuse(N, m, H, rms_eps=1e-6, pre_eps=1e-6, sinkhorn_eps=1e-6, post_mult=1.0, repeat=10, block_N=32,
                     block_K=128, block_H=512, dtype="bfloat16", num_stages=2, threads=128, tf32=False, n_splits=1):
    K, M3 = m * H, m * (2 + m)
    _check(m, K, repeat, block_K, n_splits)
    kps = T.ceildiv(K, block_K) // n_splits  # K tiles per split

    @T.macro
    def k_walk(Res, Fn, bx, k0, acc, ss):
        """acc += Res[rows] @ Fn[:, K tiles k0 .. k0+kps)ᵀ, ss += Σ Res² over the same columns."""
        rs = T.alloc_shared((block_N, block_K), "float32")
        fs = T.alloc_shared((32, block_K), "float32")
        sq = T.alloc_fragment((block_N, block_K), "float32")
        for t in T.Pipelined(kps, num_stages=num_stages):
            T.copy(Res[bx * block_N, (k0 + t) * block_K], rs)
            T.copy(Fn[0, (k0 + t) * block_K], fs)  # rows past M3 read as zeros
            if tf32:  # TileKernels' round_to_tf32 (+0x1000), then the TF32 MMA's truncation to 10 mantissa bits
                for o, k in T.Parallel(32, block_K):
                    fs[o, k] = T.reinterpret("float32", (T.reinterpret("int32", fs[o, k]) + 0x1000) & -8192)
            T.gemm(rs, fs, acc, transpose_B=True)
            for i, k in T.Parallel(block_N, block_K):
                sq[i, k] = rs[i, k] * rs[i, k]
            T.reduce_sum(sq, ss, dim=1, clear=False)

    @T.macro
    def rest(Res, Scale, Base, Post, Comb, Out, bx, acc, ss):
        """split mixes, Sinkhorn of the comb part, pre mix applied to the residual (one block's tokens)."""
        # --- split_mixes: v = mixes * Scale[part] + Base
        v = T.alloc_shared((block_N, M3), "float32")
        for i, o in T.Parallel(block_N, M3):
            v[i, o] = (acc[i, o] * T.rsqrt(ss[i] / K + rms_eps)) * Scale[
                T.if_then_else(o < m, 0, T.if_then_else(o < 2 * m, 1, 2))] + Base[o]
        pre = T.alloc_shared((block_N, m), "float32")
        post = T.alloc_fragment((block_N, m), "float32")
        for i, r in T.Parallel(block_N, m):
            pre[i, r] = T.sigmoid(v[i, r]) + pre_eps
            post[i, r] = T.sigmoid(v[i, m + r]) * post_mult
        T.copy(post, Post[bx * block_N, 0])
        # --- sinkhorn on the comb part (softmax + eps, column step, repeat-1 (row, column) rounds)
        p = T.alloc_fragment((block_N, m, m), "float32")
        row = T.alloc_fragment((block_N, m), "float32")
        col = T.alloc_fragment((block_N, m), "float32")
        for i, r, c in T.Parallel(block_N, m, m):
            p[i, r, c] = v[i, 2 * m + r * m + c]
        T.reduce_max(p, row, dim=2)
        for i, r, c in T.Parallel(block_N, m, m):
            p[i, r, c] = T.exp(p[i, r, c] - row[i, r])
        T.reduce_sum(p, row, dim=2)
        for i, r, c in T.Parallel(block_N, m, m):
            p[i, r, c] = p[i, r, c] / row[i, r] + sinkhorn_eps
        T.reduce_sum(p, col, dim=1)
        for i, r, c in T.Parallel(block_N, m, m):
            p[i, r, c] = p[i, r, c] / (col[i, c] + sinkhorn_eps)
        for _ in T.serial(repeat - 1):
            T.reduce_sum(p, row, dim=2)
            for i, r, c in T.Parallel(block_N, m, m):
                p[i, r, c] = p[i, r, c] / (row[i, r] + sinkhorn_eps)
            T.reduce_sum(p, col, dim=1)
            for i, r, c in T.Parallel(block_N, m, m):
                p[i, r, c] = p[i, r, c] / (col[i, c] + sinkhorn_eps)
        T.copy(p, Comb[bx * block_N, 0, 0])
        # --- apply_mix: Out = sum_r Res[:, r] * Pre[:, r] (fp32, r ascending, one rounding)
        xs = T.alloc_shared((block_N, block_H), dtype)
        o_acc = T.alloc_fragment((block_N, block_H), "float32")
        for hb in T.serial(T.ceildiv(H, block_H)):
            T.clear(o_acc)
            for r in T.serial(m):
                T.copy(Res[bx * block_N, r * H + hb * block_H], xs)  # columns past H: never stored
                for i, j in T.Parallel(block_N, block_H):
                    o_acc[i, j] = o_acc[i, j] + T.cast(xs[i, j], "float32") * pre[i, r]
            T.copy(o_acc, Out[bx * block_N, hb * block_H])

    if n_splits == 1:
        @T.prim_func
        def main(Res: T.Tensor((N, K), dtype), Fn: T.Tensor((M3, K), "float32"), Scale: T.Tensor((3,), "float32"),
                 Base: T.Tensor((M3,), "float32"), Post: T.Tensor((N, m), "float32"),
                 Comb: T.Tensor((N, m, m), "float32"), Out: T.Tensor((N, H), dtype)):
            with T.Kernel(T.ceildiv(N, block_N), threads=threads) as bx:
                acc = T.alloc_fragment((block_N, 32), "float32")
                ss = T.alloc_fragment((block_N,), "float32")
                T.clear(acc)
                T.clear(ss)
                k_walk(Res, Fn, bx, 0, acc, ss)
                rest(Res, Scale, Base, Post, Comb, Out, bx, acc, ss)
    else:
        @T.prim_func
        def main(Res: T.Tensor((N, K), dtype), Fn: T.Tensor((M3, K), "float32"), Scale: T.Tensor((3,), "float32"),
                 Base: T.Tensor((M3,), "float32"), Post: T.Tensor((N, m), "float32"),
                 Comb: T.Tensor((N, m, m), "float32"), Out: T.Tensor((N, H), dtype)):
            Mul = T.alloc_global((n_splits, N, 32), "float32")  # split-K partials (TileKernels' gemm_out_mul)
            Sq = T.alloc_global((n_splits, N), "float32")  # and sums of squares (gemm_out_sqrsum)
            with T.Kernel(T.ceildiv(N, block_N), n_splits, threads=threads) as (bx, sp):
                acc = T.alloc_fragment((block_N, 32), "float32")
                ss = T.alloc_fragment((block_N,), "float32")
                T.clear(acc)
                T.clear(ss)
                k_walk(Res, Fn, bx, sp * kps, acc, ss)
                T.copy(acc, Mul[sp, bx * block_N, 0])
                for i in T.Parallel(block_N):
                    if bx * block_N + i < N:
                        Sq[sp, bx * block_N + i] = ss[i]
            with T.Kernel(T.ceildiv(N, block_N), threads=threads) as bx:
                acc = T.alloc_fragment((block_N, 32), "float32")
                ss = T.alloc_fragment((block_N,), "float32")
                T.clear(acc)
                T.clear(ss)
                for s in T.serial(n_splits):  # partials added in split order: deterministic
                    for i, o in T.Parallel(block_N, 32):
                        acc[i, o] = acc[i, o] + T.if_then_else(bx * block_N + i < N,
                                                               Mul[s, T.min(bx * block_N + i, N - 1), o], 0.0)
                    for i in T.Parallel(block_N):
                        ss[i] = ss[i] + T.if_then_else(bx * block_N + i < N, Sq[s, T.min(bx * block_N + i, N - 1)], 0.0)
                rest(Res, Scale, Base, Post, Comb, Out, bx, acc, ss)

    return main


def tf32_round(a):
    """TileKernels' ``round_to_tf32`` (``bits + 0x1000``) followed by the TF32 MMA's truncation of the low 13
    mantissa bits: fp32 values rounded to 10 mantissa bits, ties away from zero (NumPy)."""
    b = np.ascontiguousarray(a, np.float32).view(np.int32)
    return ((b + 0x1000) & np.int32(-8192)).view(np.float32)


# ------------------------------------------------------------------------------------------ reference
def ref_pre_big_fuse(Res, Fn, Scale, Base, m, rms_eps=1e-6, pre_eps=1e-6, sinkhorn_eps=1e-6, post_mult=1.0,
                     repeat=10, tf32=False, **_):
    """The four unfused references chained (float64 inside each step, fp32 between steps): (Post, Comb, Out);
    ``tf32`` feeds the GEMM ``tf32_round(Fn)`` (split-K changes only the fp32 summation order)."""
    N = Res.shape[0]
    if tf32:
        Fn = tf32_round(Fn)
    mixes = ref_pre_norm_fn(Res, Fn, eps=rms_eps)
    pre, post, comb = ref_pre_split_mixes(mixes, Scale, Base, m, post_mult=post_mult, eps=pre_eps)
    comb = ref_sinkhorn(comb, repeat=repeat, eps=sinkhorn_eps).astype(np.float32)
    out = ref_pre_apply_mix(np.asarray(Res).reshape(N, m, -1), pre)
    return post, comb, out


def big_fuse_inputs(rng, N, m, H, dtype="bfloat16", **_):
    """TileKernels' test distribution (``generate_big_fuse_test_data``): residual ~ N(0, 1)·(1 + 0.01·stream),
    fn ~ N(0, 1e-4²)·(1 + 0.01·stream), scale ~ N(0, 0.1²), base ~ N(0, 0.1²)."""
    M3 = m * (2 + m)
    ramp = 1 + 0.01 * np.arange(m)
    res = (rng.standard_normal((N, m, H)) * ramp[None, :, None]).astype(np.float32)
    fn = (rng.standard_normal((M3, m, H)) * 1e-4 * ramp[None, :, None]).astype(np.float32)
    return (_dt.convert(res.reshape(N, m * H), _dt.canon(dtype)), fn.reshape(M3, m * H),
            (rng.standard_normal(3) * 0.1).astype(np.float32), (rng.standard_normal(M3) * 0.1).astype(np.float32))


register(KernelSpec(
    name="mhc_pre_big_fuse", family="mhc",
    description="mHC fused pre block: norm-fn GEMM + split mixes + Sinkhorn(comb) + apply pre mix, one kernel",
    build=lambda N, m, H, block_N, block_K, block_H, num_stages, threads, dtype="bfloat16", post_mult=1.0, repeat=10,
    tf32=False, n_splits=1, **_: mhc_pre_big_fuse(N, m, H, post_mult=post_mult, repeat=repeat, block_N=block_N,
                                                  block_K=block_K, block_H=block_H, dtype=dtype, num_stages=num_stages,
                                                  threads=threads, tf32=tf32, n_splits=n_splits),
    make_inputs=big_fuse_inputs, reference=ref_pre_big_fuse,
    flops=lambda N, m, H, repeat=10, **_: 2 * N * m * H * (m * (2 + m) + 2) + N * m * m * (6 + 2 * (2 * repeat - 1)),
    bytes=lambda N, m, H, dtype="bfloat16", **_: int(N * m * H * _isz(dtype) * 2 + N * H * _isz(dtype)
                                                     + 4 * m * (2 + m) * m * H + 4 * N * m * (m + 1)),
    shapes=({"label": "DeepSeek-V3 mHC x4, hidden 7168, 4096 tok", "N": 4096, "H": 7168},
            {"label": "TileKernels test: x4, hidden 4096, 8192 tok", "N": 8192, "H": 4096},
            {"label": "DeepSeek-V3 mHC x4, hidden 7168, 4096 tok, TF32 fn, split-K 16 (TileKernels' options)",
             "N": 4096, "H": 7168, "tf32": True, "n_splits": 16}),
    test_shapes=({"label": "ragged: 37 tok, hidden 200", "N": 37, "H": 200},
                 {"label": "m 2, 5 tok, hidden 70", "N": 5, "H": 70, "m": 2},
                 {"label": "ragged 37 tok, hidden 200, TF32, split-K 7", "N": 37, "H": 200, "tf32": True,
                  "n_splits": 7, "block_K": 128}),
    tunables={"block_N": [16, 32, 64], "block_K": [64, 128, 256], "block_H": [128, 256, 512], "num_stages": [1, 2, 3]},
    defaults={"m": 4, "threads": 128, "block_N": 32, "block_K": 128, "block_H": 512, "num_stages": 2,
              "dtype": "bfloat16"},
    tolerance={"rtol": 1e-4, "atol": 1e-5}, compare=_close(1e-4, 1e-5)))
