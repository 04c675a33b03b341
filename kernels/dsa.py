"""DeepSeek Sparse Attention (DSA, DeepSeek-V3.2): lightning indexer, top-k selector, sparse MLA attention.

The three kernels and :func:`dsa_attention`, which chains them, for one sequence of ``seq_q`` query tokens
attending to ``seq_kv`` cached tokens (``seq_q == seq_kv`` for prefill). Causality is bottom-right aligned:
query ``t`` sits at key position ``t + seq_kv - seq_q``.

* **Lightning indexer** (:func:`lightning_indexer`): FP8 (e4m3) index queries ``Qi (seq_q, H_i, d_i)`` and
  index keys ``Ki (seq_kv, d_i)``, float32 head weights ``W (seq_q, H_i)``::

      Logits[t, s] = sum_h W[t, h] * relu(Qi[t, h] . Ki[s])      (fp32 accumulation)
      Logits[t, s] = -inf                                        for s > t + seq_kv - seq_q (causal)

  One block per ``block_M`` query tokens keeps their ``block_M * H_i`` index-head rows in shared memory and
  streams key tiles (one fp8 gemm per tile); the head sum is a reduction over a 3-D view of the scores.
  Tiles wholly past the causal limit are filled with -inf without a gemm.
* **Top-k selector** (:func:`topk_selector`): per query row, the ``topk`` largest finite logits; ties
  go to the smaller position; rows with fewer finite logits are padded with -1. Output positions are
  in ascending order (then the -1 padding). Radix select: logits map to order-preserving uint32 keys
  (``-0.0`` folded into ``+0.0``, ``-inf``/NaN to key 0 = invalid); four 8-bit passes build a histogram
  (shared-memory atomics) of the keys that match the digits found so far and pick the digit holding the
  k-th largest key, which yields the exact threshold key and how many keys equal to it to take; a last
  pass compacts the selected positions with prefix sums (``T.cumsum``).
* **Sparse MLA attention** (:func:`sparse_mla_fwd`): MLA in its absorbed (MQA) form, the layout
  DeepSeek-V3.2 runs DSA in: ``Q (seq_q, H, dim + pe_dim)``, one shared latent ``KV (seq_kv, dim + pe_dim)``
  (keys are all ``dim + pe_dim`` = 512 + 64 columns; values the first ``dim`` = 512), ``Indices (seq_q,
  topk)`` int32. Each block (one token, ``block_H`` heads) gathers ``block_K`` selected rows per step
  (index -1, out of range, or — when causal — past the query's position: zero rows, masked scores) and
  runs an online softmax. Returns ``Output (seq_q, H, dim)`` and ``LSE (seq_q, H)`` (natural log; a row
  with no valid index gives zeros and LSE = -inf).

The softmax scale defaults to ``(qk_nope_head_dim + qk_rope_head_dim) ** -0.5 = (128 + 64) ** -0.5``: the
absorbed 576-wide dot product equals the original 192-wide one, so the scale stays that of DeepSeek-V3.
"""

# no `from __future__ import annotations`: T.Tensor annotations must be evaluated

import math

import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.registry import KernelSpec, register
from kernels.tiling import fit_threads, gemm_rows, mma_k, round_up
from tilesim import dtypes as _dt

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
DEEPSEEK_SM_SCALE = (128 + 64) ** -0.5
RADIX_BITS = 8
RADIX = 1 << RADIX_BITS
SHIFTS = (24, 16, 8, 0)  # 8-bit digits of a 32-bit key, most significant first


# ---------------------------------------------------------------------------------------- indexer
@tilelang.jit(out_idx=[3])
def lightning_indexer(seq_q, seq_kv, index_heads=64, index_dim=128, is_causal=True, block_M=4, block_N=64,
                      num_stages=1, threads=128, dtype="float8_e4m3fn"):
    """``(Qi, Ki, W) -> Logits (seq_q, seq_kv)`` float32. See the module docstring."""
    H = index_heads
    # TileLang's gemm needs M = block_M * heads % 16 == 0 and K a multiple of the fp8 instruction's 32: the heads
    # are padded to Hp (zero queries and weights: relu(0) * 0 adds exact zeros to the head sum) and index_dim
    # to dk (zero columns); the launch takes the thread count whose warps split the gemm. Full-size shapes
    # (64 heads x 128) need none of it.
    Hp = next(h for h in range(H, H + 17) if (block_M * h) % 16 == 0)
    dk = round_up(index_dim, mma_k(dtype))
    rows = block_M * Hp
    threads = fit_threads(threads, [(rows, block_N)])
    offset = seq_kv - seq_q
    accum = "float32"
    ninf = -math.inf

    @T.prim_func
    def main(Qi: T.Tensor((seq_q, H, index_dim), dtype), Ki: T.Tensor((seq_kv, index_dim), dtype),
             W: T.Tensor((seq_q, H), accum), Logits: T.Tensor((seq_q, seq_kv), accum)):
        with T.Kernel(T.ceildiv(seq_q, block_M), threads=threads) as bx:
            Q_s = T.alloc_shared((rows, dk), dtype)
            K_s = T.alloc_shared((block_N, dk), dtype)
            w_f = T.alloc_fragment((rows,), accum)
            s = T.alloc_fragment((rows, block_N), accum)
            s3 = T.reshape(s, (block_M, Hp, block_N))
            out = T.alloc_fragment((block_M, block_N), accum)
            if Hp == H and dk == index_dim:
                for r, j in T.Parallel(rows, index_dim):
                    Q_s[r, j] = Qi[bx * block_M + r // H, r % H, j]
                for r in T.Parallel(rows):
                    w_f[r] = W[bx * block_M + r // H, r % H]
            else:  # padding heads (r % Hp >= H) and columns (j >= index_dim) are zeros
                for r, j in T.Parallel(rows, dk):
                    Q_s[r, j] = T.if_then_else((r % Hp < H) & (j < index_dim), Qi[
                        bx * block_M + r // Hp, T.min(r % Hp, H - 1), T.min(j, index_dim - 1)], 0)
                for r in T.Parallel(rows):
                    w_f[r] = T.if_then_else(r % Hp < H, W[bx * block_M + r // Hp, T.min(r % Hp, H - 1)], 0)
            for kt in T.Pipelined(T.ceildiv(seq_kv, block_N), num_stages=num_stages):
                # does any row of this block see any key of this tile?
                if (not is_causal) or kt * block_N <= bx * block_M + block_M - 1 + offset:
                    if dk == index_dim:
                        T.copy(Ki[kt * block_N:(kt + 1) * block_N, :], K_s)
                    else:
                        for i, j in T.Parallel(block_N, dk):
                            K_s[i, j] = T.if_then_else(j < index_dim, Ki[kt * block_N + i, T.min(j, index_dim - 1)], 0)
                    T.gemm(Q_s, K_s, s, transpose_B=True, clear_accum=True)
                    for r, j in T.Parallel(rows, block_N):
                        s[r, j] = T.max(s[r, j], 0) * w_f[r]
                    T.reduce_sum(s3, out, dim=1)
                    if is_causal:
                        for i, j in T.Parallel(block_M, block_N):
                            out[i, j] = T.if_then_else(kt * block_N + j <= bx * block_M + i + offset, out[i, j], ninf)
                else:
                    T.fill(out, ninf)
                T.copy(out, Logits[bx * block_M, kt * block_N])

    return main


# ---------------------------------------------------------------------------------------- top-k
@T.macro
def _load_keys(Logits, key, t, c, block_N, seq_kv):
    """Order-preserving uint32 keys of ``Logits[t, c*block_N : (c+1)*block_N]``; 0 = invalid/outside."""
    for i in T.Parallel(block_N):
        v = T.if_then_else(c * block_N + i < seq_kv, Logits[t, c * block_N + i], -T.infinity("float32"))
        bits = T.reinterpret(v + 0.0, "uint32")  # + 0.0 turns -0.0 into +0.0
        key[i] = T.if_then_else(v > -T.infinity("float32"),
                                T.if_then_else(bits >= 0x80000000, 0xFFFFFFFF - bits, bits + 0x80000000), 0)


@tilelang.jit(out_idx=[1])
def topk_selector(seq_q, seq_kv, topk, block_N=1024, threads=256):
    """``Logits (seq_q, seq_kv) float32 -> Indices (seq_q, topk) int32``. See the module docstring."""
    n_chunks = -(-seq_kv // block_N)
    n_out_chunks = -(-topk // block_N)

    @T.prim_func
    def main(Logits: T.Tensor((seq_q, seq_kv), "float32"), Indices: T.Tensor((seq_q, topk), "int32")):
        with T.Kernel(seq_q, threads=threads) as t:
            key = T.alloc_fragment((block_N,), "uint32")
            hist = T.alloc_shared((RADIX,), "int32")
            csum = T.alloc_shared((RADIX,), "int32")  # TileLang scans a shared tile into a shared tile
            ge = T.alloc_fragment((RADIX,), "int32")
            red = T.alloc_fragment((1,), "int32")
            eq = T.alloc_fragment((block_N,), "int32")
            rank = T.alloc_fragment((block_N,), "int32")
            take = T.alloc_fragment((block_N,), "int32")
            pos = T.alloc_fragment((block_N,), "int32")
            # the chunk's totals (last prefix sums): serial code may read a fragment only at index 0 (TileLang:
            # "Fragment buffer access with non-zero index [1023] is not supported"), so they pass through shared
            tot = T.alloc_shared((2,), "int32")
            prefix = T.alloc_var("uint32")  # the digits of the threshold key found so far
            need = T.alloc_var("int32")  # how many keys matching `prefix` are still to take
            digit = T.alloc_var("int32")
            n_out = T.alloc_var("int32")
            eq_seen = T.alloc_var("int32")
            prefix = 0
            need = topk
            for shift in SHIFTS:  # unrolled at trace time
                T.clear(hist)
                for c in T.serial(n_chunks):
                    _load_keys(Logits, key, t, c, block_N, seq_kv)
                    for i in T.Parallel(block_N):
                        # valid, and equal to `prefix` on the digits above this one
                        if shift == SHIFTS[0]:
                            match = key[i] > 0
                        else:
                            match = (key[i] > 0) & (((key[i] ^ prefix) >> (shift + RADIX_BITS)) == 0)
                        if match:  # an int32 index: TileLang's atomic lowering refuses a uint32 one
                            T.atomic_add(hist[T.cast((key[i] >> shift) & (RADIX - 1), "int32")], 1)
                T.cumsum(hist, csum, reverse=True)  # csum[b]: matching keys whose digit is >= b
                if shift == SHIFTS[0]:
                    need = T.min(need, csum[0])  # fewer valid logits than topk: take them all
                for b in T.Parallel(RADIX):
                    ge[b] = T.if_then_else(csum[b] >= need, 1, 0)
                T.reduce_sum(ge, red, dim=0)
                digit = red[0] - 1  # the largest digit b with csum[b] >= need
                need = need - (csum[digit] - hist[digit])
                prefix = prefix | (T.cast(digit, "uint32") << shift)
            # `prefix` is now the k-th largest key; take every larger key and the first `need` equal ones
            n_out = 0
            eq_seen = 0
            for c in T.serial(n_chunks):
                _load_keys(Logits, key, t, c, block_N, seq_kv)
                for i in T.Parallel(block_N):
                    eq[i] = T.if_then_else((key[i] == prefix) & (key[i] > 0), 1, 0)
                T.cumsum(eq, rank)
                for i in T.Parallel(block_N):
                    take[i] = T.if_then_else((key[i] > 0) & ((key[i] > prefix) | (
                        (key[i] == prefix) & (rank[i] + eq_seen <= need))), 1, 0)
                T.cumsum(take, pos)
                for i in T.Parallel(block_N):
                    if take[i] > 0:
                        Indices[t, n_out + pos[i] - 1] = c * block_N + i
                    if i == block_N - 1:
                        tot[0] = pos[i]
                        tot[1] = rank[i]
                n_out = n_out + tot[0]
                eq_seen = eq_seen + tot[1]
            for c in T.serial(n_out_chunks):
                for i in T.Parallel(block_N):
                    if c * block_N + i >= n_out:
                        Indices[t, c * block_N + i] = -1

    return main


# ---------------------------------------------------------------------------------------- sparse attention
@tilelang.jit(out_idx=[3, 4])
def sparse_mla_fwd(seq_q, seq_kv, heads, topk, dim=512, pe_dim=64, is_causal=True, sm_scale=None, block_H=64,
                   block_K=64, num_stages=1, threads=256, dtype="bfloat16"):
    """``(Q, KV, Indices) -> (Output, LSE)``: MLA attention over the selected positions only."""
    block_H = min(block_H, heads)
    offset = seq_kv - seq_q
    scale = (DEEPSEEK_SM_SCALE if sm_scale is None else sm_scale) * LOG2E
    accum = "float32"
    ninf = -math.inf
    D = dim + pe_dim
    # as in kernels.mla: fewer than 16 heads (or not a multiple of 16) run padded rows (zero queries, never
    # stored), a rope width the instruction K does not divide gets zero columns, and the launch takes the
    # thread count whose warps split both gemm tiles; full-size shapes need none of it
    rows = gemm_rows(block_H)
    pe_k = round_up(pe_dim, mma_k(dtype))
    threads = fit_threads(threads, [(rows, block_K), (rows, dim)])

    @T.prim_func
    def main(Q: T.Tensor((seq_q, heads, D), dtype), KV: T.Tensor((seq_kv, D), dtype),
             Indices: T.Tensor((seq_q, topk), "int32"),
             Output: T.Tensor((seq_q, heads, dim), dtype), LSE: T.Tensor((seq_q, heads), accum)):
        with T.Kernel(seq_q, T.ceildiv(heads, block_H), threads=threads) as (bx, by):
            Q_s = T.alloc_shared((rows, dim), dtype)
            Qpe_s = T.alloc_shared((rows, pe_k), dtype)
            KV_s = T.alloc_shared((block_K, dim), dtype)
            Kpe_s = T.alloc_shared((block_K, pe_k), dtype)
            idx = T.alloc_fragment((block_K,), "int32")
            acc_s = T.alloc_fragment((rows, block_K), accum)
            S_s = T.alloc_shared((rows, block_K), dtype)  # P goes through shared memory, as in TileLang's example
            acc_o = T.alloc_fragment((rows, dim), accum)
            m = T.alloc_fragment((rows,), accum)
            m_prev = T.alloc_fragment((rows,), accum)
            m_safe = T.alloc_fragment((rows,), accum)
            r_scale = T.alloc_fragment((rows,), accum)
            r_sum = T.alloc_fragment((rows,), accum)
            l = T.alloc_fragment((rows,), accum)
            lse = T.alloc_fragment((rows,), accum)

            if rows == block_H:
                T.copy(Q[bx, by * block_H:(by + 1) * block_H, 0:dim], Q_s)
            else:  # padding rows (h >= block_H) are zeros
                for h, j in T.Parallel(rows, dim):
                    Q_s[h, j] = T.if_then_else(h < block_H, Q[bx, by * block_H + h, j], 0)
            if rows == block_H and pe_k == pe_dim:
                T.copy(Q[bx, by * block_H:(by + 1) * block_H, dim:D], Qpe_s)
            else:
                for h, j in T.Parallel(rows, pe_k):
                    Qpe_s[h, j] = T.if_then_else((h < block_H) & (j < pe_dim),
                                                 Q[bx, by * block_H + h, dim + T.min(j, pe_dim - 1)], 0)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, ninf)
            for kk in T.Pipelined(T.ceildiv(topk, block_K), num_stages=num_stages):
                for i in T.Parallel(block_K):
                    raw = T.if_then_else(kk * block_K + i < topk, Indices[bx, kk * block_K + i], -1)
                    ok = (raw >= 0) & (raw < seq_kv)
                    if is_causal:
                        ok = ok & (raw <= bx + offset)
                    idx[i] = T.if_then_else(ok, raw, -1)
                for i, j in T.Parallel(block_K, dim):
                    KV_s[i, j] = T.if_then_else(idx[i] >= 0, KV[idx[i], j], 0)
                if pe_k == pe_dim:
                    for i, j in T.Parallel(block_K, pe_dim):
                        Kpe_s[i, j] = T.if_then_else(idx[i] >= 0, KV[idx[i], dim + j], 0)
                else:
                    for i, j in T.Parallel(block_K, pe_k):
                        Kpe_s[i, j] = T.if_then_else((idx[i] >= 0) & (j < pe_dim),
                                                     KV[idx[i], dim + T.min(j, pe_dim - 1)], 0)
                for h, i in T.Parallel(rows, block_K):
                    acc_s[h, i] = T.if_then_else(idx[i] >= 0, 0, ninf)
                # warps along the rows for every gemm (TileLang's sparse MLA uses FullRow: with the default policy it
                # infers different layouts for acc_s and the P tile and refuses the launch at 256 threads)
                T.gemm(Q_s, KV_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.gemm(Qpe_s, Kpe_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for h in T.Parallel(rows):
                    m_safe[h] = T.if_then_else(m[h] == ninf, 0, m[h])
                    r_scale[h] = T.exp2(m_prev[h] * scale - m_safe[h] * scale)
                for h, i in T.Parallel(rows, block_K):
                    acc_s[h, i] = T.exp2(acc_s[h, i] * scale - m_safe[h] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for h in T.Parallel(rows):
                    l[h] = l[h] * r_scale[h] + r_sum[h]
                T.copy(acc_s, S_s)
                for h, j in T.Parallel(rows, dim):
                    acc_o[h, j] *= r_scale[h]
                T.gemm(S_s, KV_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for h, j in T.Parallel(rows, dim):
                acc_o[h, j] = T.if_then_else(l[h] > 0, acc_o[h, j] / l[h], 0)
            for h in T.Parallel(rows):
                lse[h] = T.if_then_else(l[h] > 0, (m[h] * scale + T.log2(l[h])) * LN2, ninf)
            if rows == block_H:
                T.copy(acc_o, Output[bx, by * block_H:(by + 1) * block_H, :])
                T.copy(lse, LSE[bx, by * block_H:(by + 1) * block_H])
            else:  # the padding rows are not stored
                for h, j in T.Parallel(rows, dim):
                    if h < block_H:
                        Output[bx, by * block_H + h, j] = T.cast(acc_o[h, j], dtype)
                for h in T.Parallel(rows):
                    if h < block_H:
                        LSE[bx, by * block_H + h] = lse[h]

    return main


# ---------------------------------------------------------------------------------------- pipeline
def dsa_attention(q, kv, q_index, k_index, index_weights, topk, *, dim=512, is_causal=True, sm_scale=None,
                  indexer_config=None, topk_config=None, attn_config=None, options=None):
    """DSA forward for one sequence: indexer -> top-k -> sparse MLA attention.

    Args:
        q: ``(seq_q, H, dim + pe_dim)`` attention queries (bf16/fp16), absorbed MLA form.
        kv: ``(seq_kv, dim + pe_dim)`` latent KV cache (same dtype as ``q``).
        q_index: ``(seq_q, H_i, d_i)`` fp8 e4m3 index queries; k_index: ``(seq_kv, d_i)`` fp8 index keys.
        index_weights: ``(seq_q, H_i)`` float32 per-head indexer weights.
        topk: positions kept per query token.
        *_config: extra keyword arguments (tile sizes) for each kernel's factory.
        options: ``tilesim.InterpOptions`` for all three runs.

    Returns:
        ``(Output (seq_q, H, dim), LSE (seq_q, H), Indices (seq_q, topk), Logits (seq_q, seq_kv))``.
    """
    seq_q, heads, D = q.shape
    seq_kv = kv.shape[0]
    _, hi, di = q_index.shape
    run_kw = {} if options is None else {"options": options}
    k_idx = lightning_indexer(seq_q, seq_kv, index_heads=hi, index_dim=di, is_causal=is_causal,
                              dtype=str(q_index.dtype), **(indexer_config or {}))
    logits = k_idx.run(q_index, k_index, index_weights, **run_kw)
    k_top = topk_selector(seq_q, seq_kv, topk, **(topk_config or {}))
    indices = k_top.run(logits, **run_kw)
    k_att = sparse_mla_fwd(seq_q, seq_kv, heads, topk, dim=dim, pe_dim=D - dim, is_causal=is_causal,
                           sm_scale=sm_scale, dtype=str(q.dtype), **(attn_config or {}))
    out, lse = k_att.run(q, kv, indices, **run_kw)
    return out, lse, indices, logits


# ---------------------------------------------------------------------------------------- references
def causal_mask(seq_q, seq_kv, is_causal=True):
    if not is_causal:
        return np.ones((seq_q, seq_kv), dtype=bool)
    return np.arange(seq_kv)[None, :] <= np.arange(seq_q)[:, None] + (seq_kv - seq_q)


def indexer_reference(q_index, k_index, weights, is_causal=True):
    """Float64 ``Logits[t, s] = sum_h w[t, h] relu(q[t, h] . k[s])``, -inf where causally hidden."""
    q = np.asarray(q_index, dtype=np.float64)
    k = np.asarray(k_index, dtype=np.float64)
    dots = np.einsum("thd,sd->ths", q, k)
    logits = np.einsum("th,ths->ts", np.asarray(weights, dtype=np.float64), np.maximum(dots, 0.0))
    return np.where(causal_mask(q.shape[0], k.shape[0], is_causal), logits, -np.inf)


def topk_reference(logits, topk):
    """Indices of the ``topk`` largest finite logits per row (ties: smaller index), ascending, -1 padded."""
    logits = np.asarray(logits)
    out = np.full((logits.shape[0], topk), -1, dtype=np.int32)
    for t, row in enumerate(logits):
        valid = np.nonzero(row > -np.inf)[0]
        order = valid[np.lexsort((valid, -row[valid].astype(np.float64)))][:topk]
        sel = np.sort(order)
        out[t, :len(sel)] = sel
    return out


def mla_attention_reference(q, kv, *, dim=512, is_causal=True, sm_scale=None, indices=None):
    """Float64 MLA (absorbed) attention ``(Output, LSE)``; over ``indices`` only (-1 ignored) if given."""
    q = np.asarray(q, dtype=np.float64)
    kv = np.asarray(kv, dtype=np.float64)
    seq_q, seq_kv = q.shape[0], kv.shape[0]
    sc = DEEPSEEK_SM_SCALE if sm_scale is None else sm_scale
    allowed = causal_mask(seq_q, seq_kv, is_causal)
    if indices is not None:
        sel = np.zeros((seq_q, seq_kv), dtype=bool)
        idx = np.asarray(indices)
        t, j = np.nonzero((idx >= 0) & (idx < seq_kv))
        sel[t, idx[t, j]] = True
        allowed = allowed & sel
    s = np.einsum("thd,sd->ths", q, kv) * sc
    s = np.where(allowed[:, None, :], s, -np.inf)
    mx = s.max(-1, keepdims=True)
    any_row = np.isfinite(mx)
    mx = np.where(any_row, mx, 0.0)
    e = np.exp(s - mx)
    den = e.sum(-1, keepdims=True)
    out = np.einsum("ths,sd->thd", np.where(den > 0, e / np.where(den > 0, den, 1), 0), kv[:, :dim])
    lse = np.where(den > 0, mx + np.log(np.where(den > 0, den, 1)), -np.inf)[..., 0]
    return out, lse


# ---------------------------------------------------------------------------------------- registry glue
def _npd(name):
    return _dt.np_dtype(name)


def _indexer_inputs(rng, seq_q, seq_kv, index_heads=64, index_dim=128, dtype="float8_e4m3fn", **_):
    q = rng.standard_normal((seq_q, index_heads, index_dim)) * 2
    k = rng.standard_normal((seq_kv, index_dim)) * 2
    w = rng.standard_normal((seq_q, index_heads)) / math.sqrt(index_heads)
    return q.astype(_npd(dtype)), k.astype(_npd(dtype)), w.astype(np.float32)


def _indexer_ref(q, k, w, is_causal=True, **_):
    return indexer_reference(q, k, w, is_causal)


def _causal_pairs(seq_q, seq_kv, is_causal=True):
    return seq_q * (seq_kv - seq_q) + seq_q * (seq_q + 1) // 2 if is_causal else seq_q * seq_kv


def _indexer_flops(seq_q, seq_kv, index_heads=64, index_dim=128, is_causal=True, **_):
    # 2 d per head for the dot product, + relu, multiply by w and add per head (3 H)
    return _causal_pairs(seq_q, seq_kv, is_causal) * index_heads * (2 * index_dim + 3)


def _indexer_bytes(seq_q, seq_kv, index_heads=64, index_dim=128, **_):
    return seq_q * index_heads * index_dim + seq_kv * index_dim + 4 * seq_q * index_heads + 4 * seq_q * seq_kv


def _topk_inputs(rng, seq_q, seq_kv, **_):
    # coarse values so that ties occur; the causal -inf triangle as the indexer leaves it
    logits = np.round(rng.standard_normal((seq_q, seq_kv)) * 4) / 4
    logits[rng.random((seq_q, seq_kv)) < 0.1] = -0.0
    return (np.where(causal_mask(seq_q, seq_kv), logits, -np.inf).astype(np.float32),)


def _topk_ref(logits, topk, **_):
    return topk_reference(logits, topk)


def compare_index_sets(out, ref, params=None, **_):
    """Registry ``compare`` for index outputs: each row's set of non-negative indices (and the count of
    -1 paddings) must be equal; order inside a row is free. Raises ``AssertionError``."""
    out = np.asarray(out[0] if isinstance(out, (list, tuple)) else out)
    ref = np.asarray(ref[0] if isinstance(ref, (list, tuple)) else ref)
    if out.shape != ref.shape:
        raise AssertionError(f"index output shape {out.shape} != reference {ref.shape}")
    for t in range(out.shape[0]):
        a, b = out[t], ref[t]
        sa, sb = set(a[a >= 0].tolist()), set(b[b >= 0].tolist())
        if sa != sb or len(sa) != int((a >= 0).sum()) or int((a == -1).sum()) != int((b == -1).sum()):
            raise AssertionError(f"row {t}: selected {sorted(sa)[:8]}... ({len(sa)} unique of {int((a >= 0).sum())}) "
                                 f"but the reference selects {sorted(sb)[:8]}... ({len(sb)}); missing "
                                 f"{sorted(sb - sa)[:8]}, extra {sorted(sa - sb)[:8]}")


def _topk_flops(seq_q, seq_kv, **_):
    return 5 * seq_q * seq_kv * (len(SHIFTS) + 1)  # key transform + compare per pass (integer ops)


def _topk_bytes(seq_q, seq_kv, topk, **_):
    return 4 * seq_q * seq_kv + 4 * seq_q * topk


def _sparse_inputs(rng, seq_q, seq_kv, heads, topk, dim=512, pe_dim=64, dtype="bfloat16", **_):
    q = rng.standard_normal((seq_q, heads, dim + pe_dim))
    kv = rng.standard_normal((seq_kv, dim + pe_dim))
    idx = np.full((seq_q, topk), -1, dtype=np.int32)
    off = seq_kv - seq_q
    for t in range(seq_q):
        n_vis = t + off + 1
        n = min(topk, n_vis) if t % 3 else max(1, min(topk, n_vis) // 2)  # some rows padded with -1
        sel = rng.choice(n_vis, size=n, replace=False)
        idx[t, :n] = sel
        idx[t] = idx[t][rng.permutation(topk)]  # -1s anywhere in the row
    return q.astype(_npd(dtype)), kv.astype(_npd(dtype)), idx


def _sparse_ref(q, kv, indices, dim=512, is_causal=True, sm_scale=None, **_):
    return mla_attention_reference(q, kv, dim=dim, is_causal=is_causal, sm_scale=sm_scale, indices=indices)


def _sparse_flops(seq_q, seq_kv, heads, topk, dim=512, pe_dim=64, **_):
    return 2 * seq_q * heads * min(topk, seq_kv) * (dim + pe_dim + dim)


def _sparse_bytes(seq_q, seq_kv, heads, topk, dim=512, pe_dim=64, dtype="bfloat16", **_):
    e = _npd(dtype).itemsize
    # each selected latent row read once per query token (and head block), queries and outputs once
    return (e * seq_q * min(topk, seq_kv) * (dim + pe_dim) + 4 * seq_q * topk
            + e * seq_q * heads * (2 * dim + pe_dim) + 4 * seq_q * heads)


_CTX = ((8192, "8K"), (32768, "32K"), (131072, "128K"))
# DeepSeek-V3.2: 128 attention heads, MLA latent 512 + rope 64, indexer 64 heads x 128, top-k 2048.
# Prefill of the whole context, and a 1-token decode step (seq_q = 1) at that context.
_IDX_SHAPES = tuple(
    [{"label": f"dsv32-indexer-prefill-{lb}", "seq_q": n, "seq_kv": n, "index_heads": 64, "index_dim": 128}
     for n, lb in _CTX]
    + [{"label": f"dsv32-indexer-decode-{lb}", "seq_q": 1, "seq_kv": n, "index_heads": 64, "index_dim": 128}
       for n, lb in _CTX])
_TOPK_SHAPES = tuple(
    [{"label": f"dsv32-topk2048-prefill-{lb}", "seq_q": n, "seq_kv": n, "topk": 2048} for n, lb in _CTX]
    + [{"label": f"dsv32-topk2048-decode-{lb}", "seq_q": 1, "seq_kv": n, "topk": 2048} for n, lb in _CTX])
_SPARSE_SHAPES = tuple(
    [{"label": f"dsv32-sparse-mla-h128-prefill-{lb}", "seq_q": n, "seq_kv": n, "heads": 128, "topk": 2048}
     for n, lb in _CTX]
    + [{"label": f"dsv32-sparse-mla-h128-decode-{lb}", "seq_q": 1, "seq_kv": n, "heads": 128, "topk": 2048}
       for n, lb in _CTX])

register(KernelSpec(
    name="dsa_indexer", family="dsa",
    description="DSA lightning indexer: fp8 index-head dot products with fp32 accumulation, relu, per-head "
                "weights summed over heads, causal -inf mask",
    build=lightning_indexer, make_inputs=_indexer_inputs, reference=_indexer_ref, flops=_indexer_flops,
    bytes=_indexer_bytes, shapes=_IDX_SHAPES,
    test_shapes=({"label": "prefill", "seq_q": 19, "seq_kv": 19, "index_heads": 4, "index_dim": 32},
                 {"label": "chunk", "seq_q": 7, "seq_kv": 45, "index_heads": 3, "index_dim": 16}),
    tunables={"block_M": [1, 2, 4, 8], "block_N": [64, 128, 256], "num_stages": [1, 2]},
    defaults={"index_heads": 64, "index_dim": 128, "is_causal": True, "block_M": 4, "block_N": 64,
              "num_stages": 1},
    tolerance={"rtol": 1e-4, "atol": 1e-3},
))

register(KernelSpec(
    name="dsa_topk", family="dsa",
    description="DSA top-k selector: radix select on order-preserving uint32 keys (four 8-bit histogram "
                "passes), deterministic ties, prefix-sum compaction, -1 padding",
    build=topk_selector, make_inputs=_topk_inputs, reference=_topk_ref, flops=_topk_flops, bytes=_topk_bytes,
    shapes=_TOPK_SHAPES,
    test_shapes=({"label": "prefill-k>valid", "seq_q": 11, "seq_kv": 11, "topk": 7},
                 {"label": "chunked", "seq_q": 5, "seq_kv": 70, "topk": 20}),
    tunables={"block_N": [256, 512, 1024, 2048]},
    defaults={"block_N": 1024},
    tolerance={"exact": True},
    compare=compare_index_sets,
))

register(KernelSpec(
    name="dsa_sparse_attention", family="dsa",
    description="DSA sparse MLA attention forward: per token, gather the top-k latent rows (512 + 64), "
                "online softmax over them for 128 heads sharing the latent KV; -1 indices masked",
    build=sparse_mla_fwd, make_inputs=_sparse_inputs, reference=_sparse_ref, flops=_sparse_flops,
    bytes=_sparse_bytes, shapes=_SPARSE_SHAPES,
    test_shapes=({"label": "prefill", "seq_q": 9, "seq_kv": 9, "heads": 3, "topk": 6, "dim": 32, "pe_dim": 8},
                 {"label": "decode-chunk", "seq_q": 2, "seq_kv": 30, "heads": 5, "topk": 19, "dim": 32,
                  "pe_dim": 16}),
    tunables={"block_H": [16, 32, 64], "block_K": [32, 64, 128], "num_stages": [1, 2]},
    defaults={"dim": 512, "pe_dim": 64, "is_causal": True, "block_H": 64, "block_K": 64, "num_stages": 1,
              "dtype": "bfloat16"},
    tolerance={"rtol": 1.6e-2, "atol": 1.6e-2},
))
