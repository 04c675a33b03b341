"""CPU stand-in for the ``flash_attn`` package (FlashAttention 2), used by the tilelang_examples harness only.

flash_attn ships CUDA kernels only, and several TileLang example programs use it as their *reference*. The
harness installs this file as ``flash_attn`` on the programs' path when the real package is missing; on import
it prints ``tilesim-standin: flash_attn`` to stderr so the harness marks the row ("flash_attn stand-in").

Written here in plain torch from flash_attn's documented interface (``flash_attn_interface.py`` docstrings);
only the functions TileLang's examples import are provided: :func:`flash_attn_func`,
:func:`flash_attn_varlen_func`, :func:`flash_attn_with_kvcache`.

Semantics (as documented by flash_attn 2.x):

* scores ``q . k * softmax_scale`` (default ``1 / sqrt(headdim)``), computed in float32, softmax over keys,
  output ``P @ v`` cast back to ``q``'s dtype;
* multi-query / grouped-query attention: ``nheads % nheads_k == 0``; query head ``h`` reads key/value head
  ``h // (nheads // nheads_k)``;
* ``causal`` (and ``window_size=(left, right)``, ``-1`` meaning unbounded) is aligned to the bottom-right
  corner of the score matrix: query ``i`` of a sequence of ``seqlen_q`` queries against ``seqlen_k`` keys sees
  key ``j`` iff ``i + seqlen_k - seqlen_q - left <= j <= i + seqlen_k - seqlen_q + right`` (causal: right = 0);
  a query row that sees no key yields output 0;
* ``softcap > 0``: scores become ``softcap * tanh(scores / softcap)`` before the softmax;
* varlen: sequences packed along dim 0, ``cu_seqlens_*`` int32 prefix sums of shape ``(batch + 1,)``;
* kvcache: ``cache_seqlens`` (int or ``(batch,)``) keys of each sequence are valid; with ``k``/``v`` given they
  are first written into the cache (in place) at positions ``cache_seqlens ..``, and attention covers
  ``cache_seqlens + seqlen_new`` keys; ``block_table`` ``(batch, max_blocks)`` int32 maps a sequence's logical
  page ``t // page_block_size`` to a row of a paged cache ``(num_blocks, page_block_size, nheads_k, d)``;
  ``cache_batch_idx`` selects the cache row of each batch element.

Errors: ``NotImplementedError`` for what the stand-in does not provide (dropout > 0, ALiBi, rotary embeddings,
returning attention probabilities, ``cache_leftpad``) -- never a silently different answer; ``ValueError`` for
shapes flash_attn rejects (head counts that do not divide).
"""
from __future__ import annotations

import math
import sys

import torch

__version__ = "2.0.0+tilesim.standin"
print("tilesim-standin: flash_attn", file=sys.stderr)


def _refuse(**unsupported):
    for name, value in unsupported.items():
        if value is not None and (isinstance(value, torch.Tensor) or value):
            raise NotImplementedError(f"flash_attn stand-in: {name}={value!r} is not provided (CPU stand-in)")


def _attend(q, k, v, softmax_scale, causal, window_size, softcap):
    """One sequence: q (sq, h, d), k (sk, hk, d), v (sk, hk, dv) -> (sq, h, dv) in q's dtype."""
    sq, h, d = q.shape
    sk, hk = k.shape[0], k.shape[1]
    if h % hk:
        raise ValueError(f"flash_attn stand-in: nheads ({h}) must be a multiple of nheads_k ({hk})")
    scale = 1.0 / math.sqrt(d) if softmax_scale is None else float(softmax_scale)
    kf = k.float().repeat_interleave(h // hk, dim=1)
    vf = v.float().repeat_interleave(h // hk, dim=1)
    s = torch.einsum("ihd,jhd->hij", q.float(), kf) * scale
    if softcap and softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    left, right = window_size
    if causal:
        right = 0
    i = torch.arange(sq).unsqueeze(1) + (sk - sq)
    j = torch.arange(sk).unsqueeze(0)
    allowed = torch.ones(sq, sk, dtype=torch.bool)
    if right >= 0:
        allowed &= j <= i + right
    if left >= 0:
        allowed &= j >= i - left
    s = s.masked_fill(~allowed, float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)  # a row with no visible key: all -inf -> NaN -> output 0
    out = torch.einsum("hij,jhd->ihd", p, vf)
    return out.to(q.dtype)


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                    alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """q (batch, seqlen_q, nheads, d), k/v (batch, seqlen_k, nheads_k, d) -> (batch, seqlen_q, nheads, d)."""
    _refuse(dropout_p=dropout_p, alibi_slopes=alibi_slopes, return_attn_probs=return_attn_probs)
    return torch.stack([_attend(q[b], k[b], v[b], softmax_scale, causal, window_size, softcap)
                        for b in range(q.shape[0])])


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None):
    """q (total_q, nheads, d), k/v (total_k, nheads_k, d), cu_seqlens_* (batch + 1,) -> (total_q, nheads, d)."""
    _refuse(dropout_p=dropout_p, alibi_slopes=alibi_slopes, return_attn_probs=return_attn_probs,
            block_table=block_table)
    cq = [int(x) for x in cu_seqlens_q.tolist()]
    ck = [int(x) for x in cu_seqlens_k.tolist()]
    out = torch.zeros(q.shape[0], q.shape[1], v.shape[2], dtype=q.dtype, device=q.device)
    for b in range(len(cq) - 1):
        if cq[b + 1] > cq[b]:
            out[cq[b]:cq[b + 1]] = _attend(q[cq[b]:cq[b + 1]], k[ck[b]:ck[b + 1]], v[ck[b]:ck[b + 1]],
                                           softmax_scale, causal, window_size, softcap)
    return out


def _cache_rows(cache, b, n, block_table):
    """The first ``n`` positions of sequence ``b``'s cache (a view list for paged caches)."""
    if block_table is None:
        return cache[b, :n]
    page = cache.shape[1]
    pages = [int(p) for p in block_table[b, :(n + page - 1) // page].tolist()]
    return torch.cat([cache[p] for p in pages], dim=0)[:n] if pages else cache[0, :0]


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, block_table=None,
                            softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                            rotary_interleaved=True, alibi_slopes=None, num_splits=0, return_softmax_lse=False):
    """q (batch, seqlen_q, nheads, d); k_cache/v_cache (batch_cache, seqlen_cache, nheads_k, d) or paged
    (num_blocks, page_block_size, nheads_k, d) with ``block_table``; returns (batch, seqlen_q, nheads, d)."""
    _refuse(rotary_cos=rotary_cos, rotary_sin=rotary_sin, cache_leftpad=cache_leftpad, alibi_slopes=alibi_slopes,
            return_softmax_lse=return_softmax_lse)
    batch = q.shape[0]
    if cache_seqlens is None:
        lens = [k_cache.shape[1] if block_table is None else block_table.shape[1] * k_cache.shape[1]] * batch
    elif isinstance(cache_seqlens, int):
        lens = [cache_seqlens] * batch
    else:
        lens = [int(x) for x in cache_seqlens.tolist()]
    rows = list(range(batch)) if cache_batch_idx is None else [int(x) for x in cache_batch_idx.tolist()]
    outs = []
    for b in range(batch):
        n = lens[b]
        if k is not None:  # append the new keys/values to the cache in place, then attend over all of them
            new = k.shape[1]
            for t in range(new):
                pos = n + t
                if block_table is None:
                    k_cache[rows[b], pos], v_cache[rows[b], pos] = k[b, t], v[b, t]
                else:
                    page = k_cache.shape[1]
                    p = int(block_table[b, pos // page])
                    k_cache[p, pos % page], v_cache[p, pos % page] = k[b, t], v[b, t]
            n += new
        table = None if block_table is None else block_table
        kb = _cache_rows(k_cache, rows[b] if table is None else b, n, table)
        vb = _cache_rows(v_cache, rows[b] if table is None else b, n, table)
        outs.append(_attend(q[b], kb, vb, softmax_scale, causal, window_size, softcap))
    return torch.stack(outs)
