"""FlashAttention: forward (online softmax, MHA/GQA, causal or not, log-sum-exp) and backward.

Layout (as FlashAttention-2 and TileLang's examples): ``Q`` is ``(batch, seq_q, heads, dim)``; ``K`` and ``V``
are ``(batch, seq_kv, kv_heads, dim)`` with ``kv_heads = heads // groups`` (``groups=1`` is MHA); the
output has ``Q``'s shape and the log-sum-exp ``LSE`` is ``(batch, heads, seq_q)`` float32 in natural-log
units: ``LSE[b, h, i] = log(sum_j exp(scale * q_i . k_j))`` over the keys row ``i`` may see.

Causal masking is bottom-right aligned (query ``i`` sits at key position ``i + seq_kv - seq_q``), which
for ``seq_q == seq_kv`` is the usual lower triangle and for a shorter query block is chunked prefill.
Inputs are float16/bfloat16; scores, the running max/sum and the output accumulator are float32.

The backward program has three launches: ``Delta = rowsum(dO * O)`` into a workspace, a dK/dV kernel
(one block per key tile and kv head, looping over the query tiles of every head of its group, so GQA
needs no atomics) and a dQ kernel (one block per query tile and head, looping over key tiles).
"""

# no `from __future__ import annotations`: T.Tensor annotations must be evaluated

import math

import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.registry import KernelSpec, register
from tilesim import dtypes as _dt

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


@tilelang.jit(out_idx=[3, 4])
def flash_attention_fwd(batch, heads, seq_q, dim, seq_kv=None, groups=1, is_causal=True, block_M=64, block_N=64,
                        num_stages=1, threads=128, dtype="float16"):
    """FlashAttention forward; returns ``(O, LSE)``. See the module docstring for layouts."""
    seq_kv = seq_q if seq_kv is None else seq_kv
    if heads % groups:
        raise ValueError(f"heads ({heads}) must be a multiple of groups ({groups})")
    if is_causal and seq_kv < seq_q:
        raise ValueError("causal attention needs seq_kv >= seq_q (every query must see a key)")
    kv_heads = heads // groups
    offset = seq_kv - seq_q  # causal: query i sits at key position i + offset
    scale = LOG2E / math.sqrt(dim)  # scores in log2 units
    accum = "float32"
    q_shape = (batch, seq_q, heads, dim)
    kv_shape = (batch, seq_kv, kv_heads, dim)

    @T.prim_func
    def main(Q: T.Tensor(q_shape, dtype), K: T.Tensor(kv_shape, dtype), V: T.Tensor(kv_shape, dtype),
             Output: T.Tensor(q_shape, dtype), LSE: T.Tensor((batch, heads, seq_q), accum)):
        with T.Kernel(T.ceildiv(seq_q, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_s = T.alloc_shared((block_M, dim), dtype)
            K_s = T.alloc_shared((block_N, dim), dtype)
            V_s = T.alloc_shared((block_N, dim), dtype)
            acc_s = T.alloc_fragment((block_M, block_N), accum)
            acc_s_cast = T.alloc_fragment((block_M, block_N), dtype)
            acc_o = T.alloc_fragment((block_M, dim), accum)
            m = T.alloc_fragment((block_M,), accum)
            m_prev = T.alloc_fragment((block_M,), accum)
            r_scale = T.alloc_fragment((block_M,), accum)
            r_sum = T.alloc_fragment((block_M,), accum)
            l = T.alloc_fragment((block_M,), accum)
            lse = T.alloc_fragment((block_M,), accum)
            kvh = by // groups

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            n_tiles = (T.min(T.ceildiv(seq_kv, block_N), T.ceildiv((bx + 1) * block_M + offset, block_N))
                       if is_causal else T.ceildiv(seq_kv, block_N))
            for k in T.Pipelined(n_tiles, num_stages=num_stages):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, kvh, :], K_s)
                for i, j in T.Parallel(block_M, block_N):
                    if is_causal:
                        acc_s[i, j] = T.if_then_else((bx * block_M + i + offset >= k * block_N + j)
                                                     & (k * block_N + j < seq_kv), 0, -T.infinity(accum))
                    else:
                        acc_s[i, j] = T.if_then_else(k * block_N + j < seq_kv, 0, -T.infinity(accum))
                T.gemm(Q_s, K_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(V[bz, k * block_N:(k + 1) * block_N, kvh, :], V_s)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.gemm(acc_s_cast, V_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            for i in T.Parallel(block_M):
                lse[i] = (m[i] * scale + T.log2(l[i])) * LN2
            T.copy(acc_o, Output[bz, bx * block_M:(bx + 1) * block_M, by, :])
            T.copy(lse, LSE[bz, by, bx * block_M:(bx + 1) * block_M])

    return main


@tilelang.jit(out_idx=[6, 7, 8])
def flash_attention_bwd(batch, heads, seq_q, dim, seq_kv=None, groups=1, is_causal=True, block_M=64, block_N=64,
                        num_stages=1, threads=128, dtype="float16"):
    """FlashAttention backward: ``(Q, K, V, O, dO, LSE) -> (dQ, dK, dV)`` (same layouts as the forward).

    Three launches: ``Delta`` preprocessing, dK/dV (key tiles; loops over the group's heads and query
    tiles), dQ (query tiles; loops over key tiles). No atomics; float32 accumulation throughout.
    """
    seq_kv = seq_q if seq_kv is None else seq_kv
    if heads % groups:
        raise ValueError(f"heads ({heads}) must be a multiple of groups ({groups})")
    if is_causal and seq_kv < seq_q:
        raise ValueError("causal attention needs seq_kv >= seq_q")
    kv_heads = heads // groups
    offset = seq_kv - seq_q
    sm_scale = 1.0 / math.sqrt(dim)
    scale = LOG2E * sm_scale
    accum = "float32"
    q_shape = (batch, seq_q, heads, dim)
    kv_shape = (batch, seq_kv, kv_heads, dim)
    n_q_tiles = -(-seq_q // block_M)

    @T.prim_func
    def main(Q: T.Tensor(q_shape, dtype), K: T.Tensor(kv_shape, dtype), V: T.Tensor(kv_shape, dtype),
             O: T.Tensor(q_shape, dtype), dO: T.Tensor(q_shape, dtype), LSE: T.Tensor((batch, heads, seq_q), accum),
             dQ: T.Tensor(q_shape, dtype), dK: T.Tensor(kv_shape, dtype), dV: T.Tensor(kv_shape, dtype)):
        Delta = T.alloc_global((batch, heads, seq_q), accum)
        # 1) Delta[b, h, i] = sum_d dO * O
        with T.Kernel(T.ceildiv(seq_q, block_M), heads, batch, threads=threads) as (bx, by, bz):
            o_f = T.alloc_fragment((block_M, dim), accum)
            do_f = T.alloc_fragment((block_M, dim), accum)
            d_f = T.alloc_fragment((block_M,), accum)
            T.copy(O[bz, bx * block_M:(bx + 1) * block_M, by, :], o_f)
            T.copy(dO[bz, bx * block_M:(bx + 1) * block_M, by, :], do_f)
            for i, j in T.Parallel(block_M, dim):
                o_f[i, j] = o_f[i, j] * do_f[i, j]
            T.reduce_sum(o_f, d_f, dim=1)
            T.copy(d_f, Delta[bz, by, bx * block_M:(bx + 1) * block_M])
        # 2) dK, dV: one block per key tile and kv head
        with T.Kernel(T.ceildiv(seq_kv, block_N), kv_heads, batch, threads=threads) as (bx, by, bz):
            K_s = T.alloc_shared((block_N, dim), dtype)
            V_s = T.alloc_shared((block_N, dim), dtype)
            Q_s = T.alloc_shared((block_M, dim), dtype)
            dO_s = T.alloc_shared((block_M, dim), dtype)
            lse_f = T.alloc_fragment((block_M,), accum)
            delta_f = T.alloc_fragment((block_M,), accum)
            p = T.alloc_fragment((block_M, block_N), accum)
            p_cast = T.alloc_fragment((block_M, block_N), dtype)
            dp = T.alloc_fragment((block_M, block_N), accum)
            ds_cast = T.alloc_fragment((block_M, block_N), dtype)
            dk = T.alloc_fragment((block_N, dim), accum)
            dv = T.alloc_fragment((block_N, dim), accum)
            T.copy(K[bz, bx * block_N:(bx + 1) * block_N, by, :], K_s)
            T.copy(V[bz, bx * block_N:(bx + 1) * block_N, by, :], V_s)
            T.clear(dk)
            T.clear(dv)
            # causal: query tiles whose last row sits before this key tile see none of it
            first = T.max(bx * block_N - offset, 0) // block_M if is_causal else 0
            for g in T.serial(groups):
                h = by * groups + g
                for mt in T.Pipelined(first, n_q_tiles, num_stages=num_stages):
                    T.copy(Q[bz, mt * block_M:(mt + 1) * block_M, h, :], Q_s)
                    T.copy(dO[bz, mt * block_M:(mt + 1) * block_M, h, :], dO_s)
                    T.copy(LSE[bz, h, mt * block_M:(mt + 1) * block_M], lse_f)
                    T.copy(Delta[bz, h, mt * block_M:(mt + 1) * block_M], delta_f)
                    T.gemm(Q_s, K_s, p, transpose_B=True, clear_accum=True)
                    for i, j in T.Parallel(block_M, block_N):
                        ok = (mt * block_M + i < seq_q) & (bx * block_N + j < seq_kv)
                        if is_causal:
                            ok = ok & (mt * block_M + i + offset >= bx * block_N + j)
                        p[i, j] = T.if_then_else(ok, T.exp2(p[i, j] * scale - lse_f[i] * LOG2E), 0)
                    T.copy(p, p_cast)
                    T.gemm(p_cast, dO_s, dv, transpose_A=True)
                    T.gemm(dO_s, V_s, dp, transpose_B=True, clear_accum=True)
                    for i, j in T.Parallel(block_M, block_N):
                        ds_cast[i, j] = p[i, j] * (dp[i, j] - delta_f[i]) * sm_scale
                    T.gemm(ds_cast, Q_s, dk, transpose_A=True)
            T.copy(dk, dK[bz, bx * block_N:(bx + 1) * block_N, by, :])
            T.copy(dv, dV[bz, bx * block_N:(bx + 1) * block_N, by, :])
        # 3) dQ: one block per query tile and head
        with T.Kernel(T.ceildiv(seq_q, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_s = T.alloc_shared((block_M, dim), dtype)
            dO_s = T.alloc_shared((block_M, dim), dtype)
            K_s = T.alloc_shared((block_N, dim), dtype)
            V_s = T.alloc_shared((block_N, dim), dtype)
            lse_f = T.alloc_fragment((block_M,), accum)
            delta_f = T.alloc_fragment((block_M,), accum)
            p = T.alloc_fragment((block_M, block_N), accum)
            dp = T.alloc_fragment((block_M, block_N), accum)
            ds_cast = T.alloc_fragment((block_M, block_N), dtype)
            dq = T.alloc_fragment((block_M, dim), accum)
            kvh = by // groups
            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_s)
            T.copy(dO[bz, bx * block_M:(bx + 1) * block_M, by, :], dO_s)
            T.copy(LSE[bz, by, bx * block_M:(bx + 1) * block_M], lse_f)
            T.copy(Delta[bz, by, bx * block_M:(bx + 1) * block_M], delta_f)
            T.clear(dq)
            n_tiles = (T.min(T.ceildiv(seq_kv, block_N), T.ceildiv((bx + 1) * block_M + offset, block_N))
                       if is_causal else T.ceildiv(seq_kv, block_N))
            for k in T.Pipelined(n_tiles, num_stages=num_stages):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, kvh, :], K_s)
                T.copy(V[bz, k * block_N:(k + 1) * block_N, kvh, :], V_s)
                T.gemm(Q_s, K_s, p, transpose_B=True, clear_accum=True)
                T.gemm(dO_s, V_s, dp, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(block_M, block_N):
                    ok = (bx * block_M + i < seq_q) & (k * block_N + j < seq_kv)
                    if is_causal:
                        ok = ok & (bx * block_M + i + offset >= k * block_N + j)
                    ds_cast[i, j] = T.if_then_else(
                        ok, T.exp2(p[i, j] * scale - lse_f[i] * LOG2E) * (dp[i, j] - delta_f[i]) * sm_scale, 0)
                T.gemm(ds_cast, K_s, dq)
            T.copy(dq, dQ[bz, bx * block_M:(bx + 1) * block_M, by, :])

    return main


# ---------------------------------------------------------------------------------------- references
def _mask(seq_q, seq_kv, is_causal):
    if not is_causal:
        return np.ones((seq_q, seq_kv), dtype=bool)
    return np.arange(seq_kv)[None, :] <= np.arange(seq_q)[:, None] + (seq_kv - seq_q)


def attention_reference(q, k, v, *, is_causal=True, groups=None):
    """Float64 attention: ``(O, LSE)`` for ``q (b, sq, h, d)``, ``k/v (b, skv, h/groups, d)``."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    g = q.shape[2] // k.shape[2] if groups is None else groups
    k = np.repeat(k, g, axis=2)
    v = np.repeat(v, g, axis=2)
    s = np.einsum("bihd,bjhd->bhij", q, k) / math.sqrt(q.shape[-1])
    s = np.where(_mask(q.shape[1], k.shape[1], is_causal), s, -np.inf)
    mx = s.max(axis=-1, keepdims=True)
    e = np.exp(s - mx)
    den = e.sum(axis=-1, keepdims=True)
    o = np.einsum("bhij,bjhd->bihd", e / den, v)
    return o, (mx + np.log(den))[..., 0]


def attention_bwd_reference(q, k, v, o, do, lse, *, is_causal=True):
    """Float64 gradients ``(dQ, dK, dV)`` of attention (``o``/``lse`` unused: recomputed in float64)."""
    q, k, v, do = (np.asarray(x, dtype=np.float64) for x in (q, k, v, do))
    g = q.shape[2] // k.shape[2]
    kr, vr = np.repeat(k, g, axis=2), np.repeat(v, g, axis=2)
    sm = 1.0 / math.sqrt(q.shape[-1])
    s = np.einsum("bihd,bjhd->bhij", q, kr) * sm
    s = np.where(_mask(q.shape[1], k.shape[1], is_causal), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    dv = np.einsum("bhij,bihd->bjhd", p, do)
    dp = np.einsum("bihd,bjhd->bhij", do, vr)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True)) * sm
    dq = np.einsum("bhij,bjhd->bihd", ds, kr)
    dk = np.einsum("bhij,bihd->bjhd", ds, q)
    b, skv, hkv, d = k.shape
    return dq, dk.reshape(b, skv, hkv, g, d).sum(3), dv.reshape(b, skv, hkv, g, d).sum(3)


# ---------------------------------------------------------------------------------------- registry glue
def _np_dtype(name):
    return _dt.np_dtype(name)


def _fwd_inputs(rng, batch, heads, seq_q, dim, seq_kv=None, groups=1, dtype="float16", **_):
    seq_kv = seq_q if seq_kv is None else seq_kv
    q = rng.standard_normal((batch, seq_q, heads, dim))
    k = rng.standard_normal((batch, seq_kv, heads // groups, dim))
    v = rng.standard_normal((batch, seq_kv, heads // groups, dim))
    return tuple(x.astype(_np_dtype(dtype)) for x in (q, k, v))


def _fwd_ref(q, k, v, is_causal=True, **_):
    return attention_reference(q, k, v, is_causal=is_causal)


def _visible_pairs(seq_q, seq_kv, is_causal):
    """Query-key pairs that attend (exact count of the causal band)."""
    if not is_causal:
        return seq_q * seq_kv
    return seq_q * (seq_kv - seq_q) + seq_q * (seq_q + 1) // 2  # row i sees i + seq_kv - seq_q + 1 keys


def _fwd_flops(batch, heads, seq_q, dim, seq_kv=None, is_causal=True, **_):
    seq_kv = seq_q if seq_kv is None else seq_kv
    return 4 * batch * heads * dim * _visible_pairs(seq_q, seq_kv, is_causal)  # QK^T and PV


def _fwd_bytes(batch, heads, seq_q, dim, seq_kv=None, groups=1, dtype="float16", **_):
    seq_kv = seq_q if seq_kv is None else seq_kv
    e = _np_dtype(dtype).itemsize
    return (e * batch * dim * (2 * seq_q * heads + 2 * seq_kv * heads // groups)  # Q, O; K, V
            + 4 * batch * heads * seq_q)  # LSE


def _bwd_inputs(rng, batch, heads, seq_q, dim, seq_kv=None, groups=1, is_causal=True, dtype="float16", **_):
    q, k, v = _fwd_inputs(rng, batch, heads, seq_q, dim, seq_kv, groups, dtype)
    o, lse = attention_reference(q, k, v, is_causal=is_causal)
    do = rng.standard_normal(q.shape).astype(_np_dtype(dtype))
    return q, k, v, o.astype(_np_dtype(dtype)), do, lse.astype(np.float32)


def _bwd_ref(q, k, v, o, do, lse, is_causal=True, **_):
    return attention_bwd_reference(q, k, v, o, do, lse, is_causal=is_causal)


def _bwd_flops(**p):
    return 2.5 * _fwd_flops(**p)  # QK^T, dO V^T, P^T dO, dS^T Q, dS K: 5 gemms vs 2


def _bwd_bytes(batch, heads, seq_q, dim, seq_kv=None, groups=1, dtype="float16", **_):
    seq_kv = seq_q if seq_kv is None else seq_kv
    e = _np_dtype(dtype).itemsize
    return (e * batch * dim * (4 * seq_q * heads + 4 * seq_kv * heads // groups)  # Q O dO dQ; K V dK dV
            + 4 * batch * heads * seq_q)


def _shapes(prefix_llama=True):
    out = []
    for ctx, label in ((8192, "8K"), (32768, "32K"), (131072, "128K")):
        out.append({"label": f"llama-gqa32/8-d128-{label}", "batch": 1, "heads": 32, "groups": 4, "seq_q": ctx,
                    "dim": 128, "dtype": "bfloat16"})
    out.append({"label": "mha16-d128-8K-b4", "batch": 4, "heads": 16, "groups": 1, "seq_q": 8192, "dim": 128,
                "dtype": "float16"})
    return tuple(out)


_TEST_SHAPES = (
    {"label": "mha-causal", "batch": 1, "heads": 2, "seq_q": 37, "dim": 16, "groups": 1, "is_causal": True},
    {"label": "gqa-noncausal", "batch": 2, "heads": 4, "seq_q": 23, "dim": 16, "groups": 2, "is_causal": False},
    {"label": "gqa-chunked-prefill-bf16", "batch": 1, "heads": 4, "seq_q": 13, "seq_kv": 41, "dim": 32,
     "groups": 4, "is_causal": True, "dtype": "bfloat16"},
)

register(KernelSpec(
    name="flash_attention_fwd", family="attention",
    description="FlashAttention-2 forward: online softmax over pipelined K/V tiles, MHA/GQA, causal or not, "
                "fp16/bf16 in, fp32 accumulation; returns O and the log-sum-exp",
    build=flash_attention_fwd, make_inputs=_fwd_inputs, reference=_fwd_ref, flops=_fwd_flops, bytes=_fwd_bytes,
    shapes=_shapes(), test_shapes=_TEST_SHAPES,
    tunables={"block_M": [64, 128], "block_N": [32, 64, 128], "num_stages": [1, 2, 3]},
    defaults={"block_M": 64, "block_N": 64, "num_stages": 1, "is_causal": True, "groups": 1, "dtype": "float16"},
    tolerance={"rtol": 1.6e-2, "atol": 1.6e-2},
))

register(KernelSpec(
    name="flash_attention_bwd", family="attention",
    description="FlashAttention-2 backward: Delta preprocessing, dK/dV per key tile (GQA without atomics), "
                "dQ per query tile; three launches in one program",
    build=flash_attention_bwd, make_inputs=_bwd_inputs, reference=_bwd_ref, flops=_bwd_flops, bytes=_bwd_bytes,
    shapes=_shapes(), test_shapes=_TEST_SHAPES,
    tunables={"block_M": [32, 64, 128], "block_N": [32, 64, 128], "num_stages": [1, 2]},
    defaults={"block_M": 64, "block_N": 64, "num_stages": 1, "is_causal": True, "groups": 1, "dtype": "float16"},
    tolerance={"rtol": 3e-2, "atol": 3e-2},
))
