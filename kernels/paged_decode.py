"""Flash decoding over a paged KV cache (vLLM layout), split-KV with a combine launch.

Layout
------
* ``Q``: ``(batch, q_len, heads, dim)`` — one (decode) or a few (speculative / multi-token) new query
  tokens per sequence; query ``t`` of a sequence of length ``L`` sits at position ``L - q_len + t`` and sees
  keys ``0 .. L - q_len + t`` (causal).
* ``K_cache``/``V_cache``: ``(num_blocks, block_size, kv_heads, dim)``, a pool of fixed-size pages.
* ``BlockTable``: ``(batch, max_blocks)`` int32 — page ``p`` of sequence ``b`` lives in physical block
  ``BlockTable[b, p]``; entries past the sequence's last page are never read.
* ``SeqLens``: ``(batch,)`` int32, ``q_len <= SeqLens[b] <= max_blocks * block_size``.
* Outputs: ``Output`` like ``Q`` and ``LSE`` ``(batch, q_len, heads)`` float32 (natural log).

Program
-------
Launch 1 (``num_splits x kv_heads x batch`` blocks): block ``(s, g, b)`` takes the ``s``-th of
``num_splits`` equal token ranges of sequence ``b`` (the range length depends on ``SeqLens[b]``, so the
loop trip count is data-dependent) and all ``q_len * heads/kv_heads`` query rows that share kv head ``g``
(GQA rows packed into one tile). Keys are gathered token by token through the block table, so the tile
width ``block_N`` is independent of the page size. It writes a normalised partial output and its LSE
into global workspaces (an empty range writes LSE = -inf and zeros).
Launch 2 (combine): ``O = sum_s exp(lse_s - max) O_s / sum_s exp(lse_s - max)``, ``LSE = max + log(sum)``.
"""

# no `from __future__ import annotations`: T.Tensor annotations must be evaluated

import math

import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.registry import KernelSpec, register
from kernels.tiling import fit_threads, gemm_rows, pow2_at_least
from tilesim import dtypes as _dt

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


@tilelang.jit(out_idx=[5, 6])
def paged_decode(batch, heads, dim, num_blocks, block_size, max_blocks, groups=1, q_len=1, num_splits=4,
                 block_N=32, block_H=64, num_stages=1, threads=128, dtype="float16"):
    """Split-KV paged flash decoding; returns ``(Output, LSE)``. See the module docstring."""
    if heads % groups:
        raise ValueError(f"heads ({heads}) must be a multiple of groups ({groups})")
    kv_heads = heads // groups
    valid = q_len * groups  # query rows sharing one kv head
    rows = gemm_rows(valid)  # the gemms' M: a multiple of 16 (TileLang: "M must be divisible by 16")
    # the warps of launch 1 must split both gemm tiles (rows x block_N, rows x dim): with rows = 16 a tile 16 wide
    # takes at most 2 warps (TileLang: "No valid warp partition"), so small heads run with fewer threads
    threads1 = fit_threads(threads, [(rows, block_N), (rows, dim)])
    # the combine launch reduces over the splits and keeps block_H rows: TileLang's all-reduce wants powers of two
    # (padding splits: LSE -inf, weight 0; padding rows: never stored)
    block_H = min(block_H, heads)
    hc, ns = pow2_at_least(block_H), pow2_at_least(num_splits)
    scale = LOG2E / math.sqrt(dim)
    accum = "float32"
    ninf = -math.inf  # a Python float adopts the float32 dtype of the expression it meets

    @T.prim_func
    def main(Q: T.Tensor((batch, q_len, heads, dim), dtype),
             K_cache: T.Tensor((num_blocks, block_size, kv_heads, dim), dtype),
             V_cache: T.Tensor((num_blocks, block_size, kv_heads, dim), dtype),
             BlockTable: T.Tensor((batch, max_blocks), "int32"), SeqLens: T.Tensor((batch,), "int32"),
             Output: T.Tensor((batch, q_len, heads, dim), dtype), LSE: T.Tensor((batch, q_len, heads), accum)):
        O_part = T.alloc_global((batch, q_len, heads, num_splits, dim), accum)
        L_part = T.alloc_global((batch, q_len, heads, num_splits), accum)
        with T.Kernel(num_splits, kv_heads, batch, threads=threads1) as (bs, bh, bb):
            Q_s = T.alloc_shared((rows, dim), dtype)
            K_s = T.alloc_shared((block_N, dim), dtype)
            V_s = T.alloc_shared((block_N, dim), dtype)
            acc_s = T.alloc_fragment((rows, block_N), accum)
            # P goes through shared memory: real TileLang 0.1.15 cannot give this (rows x block_N) fragment one layout
            # for both gemms ("Layout infer conflict between acc_s and acc_s_cast", H200 2026-12-01), and its warps split N
            # (FullCol): split along M, a warp would get fewer than the 16 rows an mma needs
            P_s = T.alloc_shared((rows, block_N), dtype)
            acc_o = T.alloc_fragment((rows, dim), accum)
            m = T.alloc_fragment((rows,), accum)
            m_prev = T.alloc_fragment((rows,), accum)
            m_safe = T.alloc_fragment((rows,), accum)
            r_scale = T.alloc_fragment((rows,), accum)
            r_sum = T.alloc_fragment((rows,), accum)
            l = T.alloc_fragment((rows,), accum)
            seq_len = T.alloc_var("int32")
            seq_len = SeqLens[bb]
            chunk = T.ceildiv(seq_len, num_splits)
            lo = bs * chunk
            hi = T.min(seq_len, lo + chunk)

            for r, j in T.Parallel(rows, dim):  # padding rows (r >= valid) are zeros and never stored
                Q_s[r, j] = T.if_then_else(r < valid, Q[bb, T.min(r // groups, q_len - 1), bh * groups + r % groups, j], 0)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, ninf)
            for it in T.Pipelined(T.ceildiv(T.max(hi - lo, 0), block_N), num_stages=num_stages):
                base = lo + it * block_N
                for i, j in T.Parallel(block_N, dim):
                    K_s[i, j] = T.if_then_else(base + i < hi, K_cache[BlockTable[bb, (base + i) // block_size],
                                                                      (base + i) % block_size, bh, j], 0)
                for r, i in T.Parallel(rows, block_N):
                    acc_s[r, i] = T.if_then_else((base + i < hi) & (base + i <= seq_len - q_len + r // groups),
                                                 0, ninf)
                T.gemm(Q_s, K_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                for i, j in T.Parallel(block_N, dim):
                    V_s[i, j] = T.if_then_else(base + i < hi, V_cache[BlockTable[bb, (base + i) // block_size],
                                                                      (base + i) % block_size, bh, j], 0)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for r in T.Parallel(rows):
                    # a row may see no key of this tile yet (causal rows of a multi-token query): keep it finite
                    m_safe[r] = T.if_then_else(m[r] == ninf, 0, m[r])
                    r_scale[r] = T.exp2(m_prev[r] * scale - m_safe[r] * scale)
                for r, i in T.Parallel(rows, block_N):
                    acc_s[r, i] = T.exp2(acc_s[r, i] * scale - m_safe[r] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for r in T.Parallel(rows):
                    l[r] = l[r] * r_scale[r] + r_sum[r]
                T.copy(acc_s, P_s)
                for r, j in T.Parallel(rows, dim):
                    acc_o[r, j] *= r_scale[r]
                T.gemm(P_s, V_s, acc_o, policy=T.GemmWarpPolicy.FullCol)
            for r, j in T.Parallel(rows, dim):
                if r < valid:
                    O_part[bb, r // groups, bh * groups + r % groups, bs, j] = T.if_then_else(
                        l[r] > 0, acc_o[r, j] / l[r], 0)
            for r in T.Parallel(rows):
                if r < valid:
                    L_part[bb, r // groups, bh * groups + r % groups, bs] = T.if_then_else(
                        l[r] > 0, (m[r] * scale + T.log2(l[r])) * LN2, ninf)

        with T.Kernel(T.ceildiv(heads, block_H), q_len, batch, threads=threads) as (bx, qi, bb):
            lse_f = T.alloc_fragment((hc, ns), accum)
            w = T.alloc_fragment((hc, ns), accum)
            mx = T.alloc_fragment((hc,), accum)
            den = T.alloc_fragment((hc,), accum)
            acc = T.alloc_fragment((hc, dim), accum)
            if hc == block_H and ns == num_splits:
                T.copy(L_part[bb, qi, bx * block_H:(bx + 1) * block_H, :], lse_f)
            else:
                for h, s in T.Parallel(hc, ns):
                    lse_f[h, s] = T.if_then_else(s < num_splits, T.if_then_else(
                        h < block_H, L_part[bb, qi, bx * block_H + h, T.min(s, num_splits - 1)], 0), ninf)
            T.reduce_max(lse_f, mx, dim=1)
            for h, s in T.Parallel(hc, ns):
                w[h, s] = T.exp(lse_f[h, s] - mx[h])
            T.reduce_sum(w, den, dim=1)
            T.clear(acc)
            for s in T.serial(num_splits):
                for h, j in T.Parallel(hc, dim):
                    acc[h, j] += w[h, s] * O_part[bb, qi, bx * block_H + h, s, j]
            for h, j in T.Parallel(hc, dim):
                acc[h, j] = acc[h, j] / den[h]
            for h in T.Parallel(hc):
                mx[h] = mx[h] + T.log(den[h])
            if hc == block_H:
                T.copy(acc, Output[bb, qi, bx * block_H:(bx + 1) * block_H, :])
                T.copy(mx, LSE[bb, qi, bx * block_H:(bx + 1) * block_H])
            else:  # the padding rows are not stored
                for h, j in T.Parallel(hc, dim):
                    if h < block_H:
                        Output[bb, qi, bx * block_H + h, j] = T.cast(acc[h, j], dtype)
                for h in T.Parallel(hc):
                    if h < block_H:
                        LSE[bb, qi, bx * block_H + h] = mx[h]

    return main


# ---------------------------------------------------------------------------------------- reference
def gather_kv(cache, block_table, seq_len, b):
    """The first ``seq_len`` tokens of sequence ``b``: ``(seq_len, kv_heads, dim)``."""
    t = np.arange(seq_len)
    return cache[block_table[b, t // cache.shape[1]], t % cache.shape[1]]


def paged_decode_reference(q, k_cache, v_cache, block_table, seq_lens):
    """Float64 ``(Output, LSE)`` of causal attention of the ``q_len`` newest tokens over each paged sequence."""
    batch, q_len, heads, dim = q.shape
    out = np.zeros(q.shape, dtype=np.float64)
    lse = np.zeros((batch, q_len, heads), dtype=np.float64)
    for b in range(batch):
        n = int(seq_lens[b])
        k = gather_kv(k_cache, block_table, n, b).astype(np.float64)
        v = gather_kv(v_cache, block_table, n, b).astype(np.float64)
        g = heads // k.shape[1]
        k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
        s = np.einsum("thd,shd->hts", q[b].astype(np.float64), k) / math.sqrt(dim)
        vis = np.arange(n)[None, :] <= (n - q_len + np.arange(q_len))[:, None]
        s = np.where(vis[None], s, -np.inf)
        mx = s.max(-1, keepdims=True)
        e = np.exp(s - mx)
        den = e.sum(-1, keepdims=True)
        out[b] = np.einsum("hts,shd->thd", e / den, v)
        lse[b] = (mx + np.log(den))[..., 0].T
    return out, lse


# ---------------------------------------------------------------------------------------- registry glue
def _geometry(batch, max_len, block_size):
    max_blocks = -(-max_len // block_size)
    return max_blocks, batch * max_blocks + 1  # one spare physical block that no sequence owns


def build_paged_decode(batch, heads, dim, max_len, block_size=16, groups=1, q_len=1, num_splits=4, block_N=32,
                       num_stages=1, dtype="float16", **_):
    """Registry ``build``: derives the page-table geometry from ``max_len`` and ``block_size``."""
    max_blocks, num_blocks = _geometry(batch, max_len, block_size)
    return paged_decode(batch, heads, dim, num_blocks, block_size, max_blocks, groups=groups, q_len=q_len,
                        num_splits=num_splits, block_N=block_N, num_stages=num_stages, dtype=dtype)


def _seq_lens(rng, batch, max_len, q_len, seq_lens=None):
    if seq_lens is not None:
        return np.asarray(seq_lens, dtype=np.int32)
    return rng.integers(q_len, max_len + 1, size=batch).astype(np.int32)


def make_paged_inputs(rng, batch, heads, dim, max_len, block_size=16, groups=1, q_len=1, dtype="float16",
                      seq_lens=None, **_):
    """Random Q and a shuffled page pool. Every slot no sequence owns (the spare block, the unused tail of
    each last page) holds NaN, so a kernel that reads past a sequence's end shows it."""
    npd = _dt.np_dtype(dtype)
    max_blocks, num_blocks = _geometry(batch, max_len, block_size)
    kv_heads = heads // groups
    lens = _seq_lens(rng, batch, max_len, q_len, seq_lens)
    perm = rng.permutation(num_blocks - 1)
    table = np.full((batch, max_blocks), num_blocks - 1, dtype=np.int32)
    k_cache = np.full((num_blocks, block_size, kv_heads, dim), np.nan)
    v_cache = np.full_like(k_cache, np.nan)
    nxt = 0
    for b in range(batch):
        pages = -(-int(lens[b]) // block_size)
        table[b, :pages] = perm[nxt:nxt + pages]
        nxt += pages
        t = np.arange(int(lens[b]))
        k_cache[table[b, t // block_size], t % block_size] = rng.standard_normal((len(t), kv_heads, dim))
        v_cache[table[b, t // block_size], t % block_size] = rng.standard_normal((len(t), kv_heads, dim))
    q = rng.standard_normal((batch, q_len, heads, dim))
    return q.astype(npd), k_cache.astype(npd), v_cache.astype(npd), table, lens


def _ref(q, k_cache, v_cache, block_table, seq_lens, **_):
    return paged_decode_reference(q, k_cache, v_cache, block_table, seq_lens)


def _lens_for_cost(batch, max_len, q_len=1, seq_lens=None, **_):
    return [int(x) for x in seq_lens] if seq_lens is not None else [max_len] * batch


def _flops(batch, heads, dim, max_len, q_len=1, seq_lens=None, **_):
    lens = _lens_for_cost(batch, max_len, q_len, seq_lens)
    pairs = sum(q_len * n - q_len * (q_len - 1) // 2 for n in lens)
    return 4 * heads * dim * pairs


def _bytes(batch, heads, dim, max_len, block_size=16, groups=1, q_len=1, seq_lens=None, dtype="float16", **_):
    e = _dt.np_dtype(dtype).itemsize
    lens = _lens_for_cost(batch, max_len, q_len, seq_lens)
    kv = 2 * sum(lens) * (heads // groups) * dim * e  # each visible K/V token read once
    table = 4 * sum(-(-n // block_size) for n in lens) + 4 * batch
    return kv + table + 2 * batch * q_len * heads * dim * e + 4 * batch * q_len * heads


def _hints(batch, max_len, q_len=1, seq_lens=None, **_):
    """Simulator inputs: the per-sequence lengths, as the ``SeqLens`` tensor the loop bounds read."""
    return {"SeqLens": np.asarray(_lens_for_cost(batch, max_len, q_len, seq_lens), dtype=np.int32)}


def _shapes():
    out = []
    for ctx, label in ((8192, "8K"), (32768, "32K"), (131072, "128K")):
        # a serving mix: a quarter of the batch at the full context, the rest at 1/2, 1/4 and 1/8 of it
        lens = tuple([ctx] * 4 + [ctx // 2] * 4 + [ctx // 4] * 4 + [ctx // 8] * 4)
        out.append({"label": f"llama-gqa32/8-d128-{label}-b16-mixed", "batch": 16, "heads": 32, "groups": 4,
                    "dim": 128, "max_len": ctx, "block_size": 16, "seq_lens": lens, "dtype": "bfloat16",
                    "num_splits": 8 if ctx >= 32768 else 4})
    out.append({"label": "llama-gqa32/8-d128-32K-b4-mtp2", "batch": 4, "heads": 32, "groups": 4, "dim": 128,
                "max_len": 32768, "block_size": 16, "q_len": 2, "seq_lens": (32768, 30000, 20000, 12345),
                "dtype": "bfloat16", "num_splits": 8})
    return tuple(out)


register(KernelSpec(
    name="paged_decode", family="decode",
    description="flash decoding over a vLLM-style paged KV cache: block-table gathers, per-sequence lengths, "
                "split-KV partials in a workspace and a combine launch; GQA rows packed per kv head",
    build=build_paged_decode, make_inputs=make_paged_inputs, reference=_ref, flops=_flops, bytes=_bytes,
    shapes=_shapes(),
    test_shapes=(
        {"label": "mha-b3", "batch": 3, "heads": 2, "groups": 1, "dim": 16, "max_len": 45, "block_size": 8},
        {"label": "gqa-q2-bf16", "batch": 2, "heads": 4, "groups": 2, "dim": 16, "max_len": 37, "block_size": 4,
         "q_len": 2, "dtype": "bfloat16", "num_splits": 3},
    ),
    tunables={"block_N": [16, 32, 64, 128], "num_splits": [1, 2, 4, 8, 16], "num_stages": [1, 2]},
    defaults={"block_size": 16, "groups": 1, "q_len": 1, "num_splits": 4, "block_N": 32, "num_stages": 1,
              "dtype": "float16"},
    tolerance={"rtol": 1.6e-2, "atol": 1.6e-2},
    data_hints=_hints,
))
