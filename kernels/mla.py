"""DeepSeek MLA decode in the absorbed form: the dense counterpart of DSA's sparse attention.

With the key/value up-projections absorbed into the query and output projections, MLA attention is
multi-query attention over one shared latent cache row per token: ``KV (batch, seq_kv, dim + pe_dim)``
(512 latent + 64 rope columns in DeepSeek-V2/V3/V3.2), keys are all 576 columns, values the first 512.
``Q`` is ``(batch, heads, dim + pe_dim)`` (one new token per sequence), ``SeqLens (batch,)`` int32 gives each
sequence's length (``1 <= SeqLens[b] <= seq_kv``; rows past it are never read). Outputs: ``Output (batch,
heads, dim)`` and ``LSE (batch, heads)`` float32 (natural log).

Program: launch 1 splits each sequence's ``SeqLens[b]`` tokens into ``num_splits`` equal ranges (a
data-dependent trip count) and runs an online softmax of ``block_H`` heads over one range, writing a
normalised partial output and its LSE to workspaces; launch 2 combines the splits. The softmax scale
defaults to DeepSeek-V3's ``(128 + 64) ** -0.5`` (see ``kernels.dsa``).
"""

# no `from __future__ import annotations`: T.Tensor annotations must be evaluated

import math

import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.dsa import DEEPSEEK_SM_SCALE, mla_attention_reference
from kernels.registry import KernelSpec, register
from kernels.tiling import fit_threads, gemm_rows, mma_k, pow2_at_least, round_up
from tilesim import dtypes as _dt

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


@tilelang.jit(out_idx=[3, 4])
def mla_decode(batch, heads, seq_kv, dim=512, pe_dim=64, num_splits=4, sm_scale=None, block_H=64, block_N=64,
               num_stages=1, threads=256, dtype="bfloat16"):
    """``(Q, KV, SeqLens) -> (Output, LSE)``; see the module docstring."""
    block_H = min(block_H, heads)
    scale = (DEEPSEEK_SM_SCALE if sm_scale is None else sm_scale) * LOG2E
    accum = "float32"
    ninf = -math.inf
    D = dim + pe_dim
    # TileLang's gemms need M % 16 == 0 and K a multiple of the instruction's K: a block of fewer than 16 heads
    # (or not a multiple of 16) runs padded rows (zero queries, never stored) and a rope width the instruction
    # does not step by is padded with zero columns (adds exact zeros); full-size shapes need neither
    rows = gemm_rows(block_H)
    pe_k = round_up(pe_dim, mma_k(dtype))
    threads1 = fit_threads(threads, [(rows, block_N), (rows, dim)])
    # the combine launch reduces over the splits and keeps block_H rows: TileLang's all-reduce wants powers of two
    # (padding splits: LSE -inf, weight 0; padding rows: never stored)
    hc, ns = pow2_at_least(block_H), pow2_at_least(num_splits)

    @T.prim_func
    def main(Q: T.Tensor((batch, heads, D), dtype), KV: T.Tensor((batch, seq_kv, D), dtype),
             SeqLens: T.Tensor((batch,), "int32"),
             Output: T.Tensor((batch, heads, dim), dtype), LSE: T.Tensor((batch, heads), accum)):
        O_part = T.alloc_global((batch, heads, num_splits, dim), accum)
        L_part = T.alloc_global((batch, heads, num_splits), accum)
        with T.Kernel(num_splits, T.ceildiv(heads, block_H), batch, threads=threads1) as (bs, by, bb):
            Q_s = T.alloc_shared((rows, dim), dtype)
            Qpe_s = T.alloc_shared((rows, pe_k), dtype)
            KV_s = T.alloc_shared((block_N, dim), dtype)
            Kpe_s = T.alloc_shared((block_N, pe_k), dtype)
            acc_s = T.alloc_fragment((rows, block_N), accum)
            # P goes through shared memory: real TileLang 0.1.15 cannot give this (rows x block_N) fragment one layout
            # for both gemms ("Layout infer conflict between acc_s and acc_s_cast", H200 2026-12-01), and its warps split N
            # (FullCol): split along M, a warp would get fewer than the 16 rows an mma needs
            P_s = T.alloc_shared((rows, block_N), dtype)
            acc_o = T.alloc_fragment((rows, dim), accum)
            m = T.alloc_fragment((rows,), accum)
            m_prev = T.alloc_fragment((rows,), accum)
            r_scale = T.alloc_fragment((rows,), accum)
            r_sum = T.alloc_fragment((rows,), accum)
            l = T.alloc_fragment((rows,), accum)
            seq_len = T.alloc_var("int32")
            seq_len = SeqLens[bb]
            chunk = T.ceildiv(seq_len, num_splits)
            lo = bs * chunk
            hi = T.min(seq_len, lo + chunk)

            if rows == block_H:
                T.copy(Q[bb, by * block_H:(by + 1) * block_H, 0:dim], Q_s)
            else:  # padding rows (h >= block_H) are zeros
                for h, j in T.Parallel(rows, dim):
                    Q_s[h, j] = T.if_then_else(h < block_H, Q[bb, by * block_H + h, j], 0)
            if rows == block_H and pe_k == pe_dim:
                T.copy(Q[bb, by * block_H:(by + 1) * block_H, dim:D], Qpe_s)
            else:
                for h, j in T.Parallel(rows, pe_k):
                    Qpe_s[h, j] = T.if_then_else((h < block_H) & (j < pe_dim),
                                                 Q[bb, by * block_H + h, dim + T.min(j, pe_dim - 1)], 0)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, ninf)
            # every tile of the loop holds at least one key (base < hi), so the running max stays finite
            for it in T.Pipelined(T.ceildiv(T.max(hi - lo, 0), block_N), num_stages=num_stages):
                base = lo + it * block_N
                for i, j in T.Parallel(block_N, dim):
                    KV_s[i, j] = T.if_then_else(base + i < hi, KV[bb, base + i, j], 0)
                if pe_k == pe_dim:
                    for i, j in T.Parallel(block_N, pe_dim):
                        Kpe_s[i, j] = T.if_then_else(base + i < hi, KV[bb, base + i, dim + j], 0)
                else:
                    for i, j in T.Parallel(block_N, pe_k):
                        Kpe_s[i, j] = T.if_then_else((base + i < hi) & (j < pe_dim),
                                                     KV[bb, base + i, dim + T.min(j, pe_dim - 1)], 0)
                for h, i in T.Parallel(rows, block_N):
                    acc_s[h, i] = T.if_then_else(base + i < hi, 0, ninf)
                T.gemm(Q_s, KV_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                T.gemm(Qpe_s, Kpe_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for h in T.Parallel(rows):
                    r_scale[h] = T.exp2(m_prev[h] * scale - m[h] * scale)
                for h, i in T.Parallel(rows, block_N):
                    acc_s[h, i] = T.exp2(acc_s[h, i] * scale - m[h] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for h in T.Parallel(rows):
                    l[h] = l[h] * r_scale[h] + r_sum[h]
                T.copy(acc_s, P_s)
                for h, j in T.Parallel(rows, dim):
                    acc_o[h, j] *= r_scale[h]
                T.gemm(P_s, KV_s, acc_o, policy=T.GemmWarpPolicy.FullCol)
            if rows == block_H:
                for h, j in T.Parallel(block_H, dim):
                    O_part[bb, by * block_H + h, bs, j] = T.if_then_else(l[h] > 0, acc_o[h, j] / l[h], 0)
                for h in T.Parallel(block_H):
                    L_part[bb, by * block_H + h, bs] = T.if_then_else(l[h] > 0,
                                                                      (m[h] * scale + T.log2(l[h])) * LN2, ninf)
            else:  # the padding rows are not stored
                for h, j in T.Parallel(rows, dim):
                    if h < block_H:
                        O_part[bb, by * block_H + h, bs, j] = T.if_then_else(l[h] > 0, acc_o[h, j] / l[h], 0)
                for h in T.Parallel(rows):
                    if h < block_H:
                        L_part[bb, by * block_H + h, bs] = T.if_then_else(
                            l[h] > 0, (m[h] * scale + T.log2(l[h])) * LN2, ninf)

        with T.Kernel(T.ceildiv(heads, block_H), batch, threads=threads) as (bx, bb):
            lse_f = T.alloc_fragment((hc, ns), accum)
            w = T.alloc_fragment((hc, ns), accum)
            mx = T.alloc_fragment((hc,), accum)
            den = T.alloc_fragment((hc,), accum)
            acc = T.alloc_fragment((hc, dim), accum)
            if hc == block_H and ns == num_splits:
                T.copy(L_part[bb, bx * block_H:(bx + 1) * block_H, :], lse_f)
            else:
                for h, s in T.Parallel(hc, ns):
                    lse_f[h, s] = T.if_then_else(s < num_splits, T.if_then_else(
                        h < block_H, L_part[bb, bx * block_H + h, T.min(s, num_splits - 1)], 0), ninf)
            T.reduce_max(lse_f, mx, dim=1)
            for h, s in T.Parallel(hc, ns):
                w[h, s] = T.exp(lse_f[h, s] - mx[h])
            T.reduce_sum(w, den, dim=1)
            T.clear(acc)
            for s in T.serial(num_splits):
                for h, j in T.Parallel(hc, dim):
                    acc[h, j] += w[h, s] * O_part[bb, bx * block_H + h, s, j]
            for h, j in T.Parallel(hc, dim):
                acc[h, j] = acc[h, j] / den[h]
            for h in T.Parallel(hc):
                mx[h] = mx[h] + T.log(den[h])
            if hc == block_H:
                T.copy(acc, Output[bb, bx * block_H:(bx + 1) * block_H, :])
                T.copy(mx, LSE[bb, bx * block_H:(bx + 1) * block_H])
            else:  # the padding rows are not stored
                for h, j in T.Parallel(hc, dim):
                    if h < block_H:
                        Output[bb, bx * block_H + h, j] = T.cast(acc[h, j], dtype)
                for h in T.Parallel(hc):
                    if h < block_H:
                        LSE[bb, bx * block_H + h] = mx[h]

    return main


def mla_decode_reference(q, kv, seq_lens, *, dim=512, sm_scale=None):
    """Float64 ``(Output, LSE)``: each batch entry's query attends to its first ``seq_lens[b]`` latent rows."""
    outs, lses = [], []
    for b in range(q.shape[0]):
        n = int(seq_lens[b])
        o, lse = mla_attention_reference(q[b][None], kv[b, :n], dim=dim, is_causal=False, sm_scale=sm_scale)
        outs.append(o[0])
        lses.append(lse[0])
    return np.stack(outs), np.stack(lses)


# ---------------------------------------------------------------------------------------- registry glue
def _inputs(rng, batch, heads, seq_kv, dim=512, pe_dim=64, dtype="bfloat16", seq_lens=None, **_):
    npd = _dt.np_dtype(dtype)
    lens = (np.asarray(seq_lens, dtype=np.int32) if seq_lens is not None
            else rng.integers(1, seq_kv + 1, size=batch).astype(np.int32))
    kv = rng.standard_normal((batch, seq_kv, dim + pe_dim))
    for b in range(batch):
        kv[b, lens[b]:] = np.nan  # rows past a sequence's length must never be read
    q = rng.standard_normal((batch, heads, dim + pe_dim))
    return q.astype(npd), kv.astype(npd), lens


def _ref(q, kv, seq_lens, dim=512, sm_scale=None, **_):
    return mla_decode_reference(q, kv, seq_lens, dim=dim, sm_scale=sm_scale)


def _lens(batch, seq_kv, seq_lens=None):
    return [int(x) for x in seq_lens] if seq_lens is not None else [seq_kv] * batch


def _flops(batch, heads, seq_kv, dim=512, pe_dim=64, seq_lens=None, **_):
    return 2 * heads * (dim + pe_dim + dim) * sum(_lens(batch, seq_kv, seq_lens))


def _bytes(batch, heads, seq_kv, dim=512, pe_dim=64, seq_lens=None, dtype="bfloat16", **_):
    e = _dt.np_dtype(dtype).itemsize
    return (e * (dim + pe_dim) * sum(_lens(batch, seq_kv, seq_lens)) + 4 * batch
            + e * batch * heads * (2 * dim + pe_dim) + 4 * batch * heads)


def _hints(batch, seq_kv, seq_lens=None, **_):
    """Simulator inputs: the per-sequence lengths, as the ``SeqLens`` tensor the loop bounds read."""
    return {"SeqLens": np.asarray(_lens(batch, seq_kv, seq_lens), dtype=np.int32)}


_SHAPES = tuple(
    {"label": f"dsv32-mla-decode-h128-{lb}-b{b}", "batch": b, "heads": 128, "seq_kv": n, "num_splits": s,
     "dtype": "bfloat16"}
    for n, lb, b, s in ((8192, "8K", 32, 2), (32768, "32K", 8, 4), (131072, "128K", 1, 16), (131072, "128K", 8, 4)))

register(KernelSpec(
    name="mla_decode", family="mla",
    description="DeepSeek MLA decode, absorbed form (512 latent + 64 rope, KV shared by 128 heads): split-KV "
                "over per-sequence lengths plus a combine launch; the dense counterpart of DSA",
    build=mla_decode, make_inputs=_inputs, reference=_ref, flops=_flops, bytes=_bytes, shapes=_SHAPES,
    test_shapes=({"label": "b3-h5", "batch": 3, "heads": 5, "seq_kv": 41, "dim": 32, "pe_dim": 8, "num_splits": 3},
                 {"label": "b2-h20-bh16", "batch": 2, "heads": 20, "seq_kv": 27, "dim": 16, "pe_dim": 16,
                  "num_splits": 2, "block_H": 16, "dtype": "float16"}),
    tunables={"block_H": [16, 32, 64], "block_N": [32, 64, 128], "num_splits": [1, 2, 4, 8, 16],
              "num_stages": [1, 2]},
    defaults={"dim": 512, "pe_dim": 64, "num_splits": 4, "block_H": 64, "block_N": 64, "num_stages": 1,
              "dtype": "bfloat16"},
    tolerance={"rtol": 1.6e-2, "atol": 1.6e-2},
    data_hints=_hints,
))
