"""Memory and FLOP accounting of dense vs DSA attention, and of dense vs paged KV storage.

:func:`attention_cost` derives every number from a model configuration (a name in :data:`CONFIGS` or
a dict with the same keys) and a context length; nothing is measured or fitted. Its purpose is to let
claims such as "DSA takes 128K-context memory from 192 GB to 32 GB" or "DSA is 2.3x faster" be checked
against what the architecture implies (``docs/kernels-2.md`` does this).

Assumptions (each one is a choice of what to count; change the config or the arguments to change it)
--------------------------------------------------------------------------------------------------
Caches
  * KV cache per token and layer: MLA stores one latent row of ``kv_lora_rank + qk_rope_head_dim``
    elements (512 + 64 for DeepSeek-V3.2); GQA stores K and V: ``2 * kv_heads * head_dim``. Elements
    take ``dtype_bytes`` (2 = bf16 by default; pass 1 for an fp8 cache, ignoring its scales).
  * DSA adds an indexer key cache: ``index_head_dim`` fp8 elements (``index_key_bytes``) plus one float32
    scale per ``index_quant_block`` elements (``index_scale_bytes``) per token and layer.
  * Every layer has attention (and, with DSA, an indexer); caches are summed over ``layers``.
Intermediates (per layer: layers run one after another, so one layer's intermediates are live at once)
  * ``dense_scores_bytes_per_layer``: the full ``batch x heads x L x L`` score/probability matrix of a
    naive prefill at ``score_bytes`` each (4 = fp32). FlashAttention never materialises it and keeps
    only per-row statistics: ``flash_stats_bytes_per_layer = batch x heads x L x 4`` (the LSE).
  * DSA prefill: the indexer logits ``batch x L x L x 4`` if materialised for all queries at once
    (kernels process query chunks; scale it down by the chunk fraction), the top-k indices
    ``batch x L x topk x 4`` (int32), and the sparse scores ``batch x heads x L x topk x score_bytes`` if
    materialised (a fused kernel keeps them on chip).
FLOPs (multiply-add = 2 FLOPs; attention only unless the field says otherwise)
  * Prefill of ``L`` tokens is causal: query ``t`` (0-based) sees ``t + 1`` keys, ``L (L + 1) / 2`` pairs;
    with DSA it sees ``min(t + 1, topk)`` selected keys.
  * Dense MLA prefill runs in MHA form (per head ``qk_nope + qk_rope = 192`` for QK^T, ``v_head_dim = 128``
    for PV), as DeepSeek-V3 prefills; dense MLA decode and all DSA attention run in the absorbed MQA form
    (``kv_lora + rope = 576`` for QK^T, ``kv_lora = 512`` for PV), as DeepSeek-V3.2 runs DSA. GQA uses
    ``head_dim`` for both. Softmax, masking and the projections into/out of attention are not counted.
  * Indexer: per (query, key) pair ``index_heads x (2 index_head_dim + 2)`` (dot product, then weight
    and sum; ReLU not counted). Top-k selection is not counted (integer work, O(L) per query).
  * Decode: one new token per sequence whose context holds ``L`` tokens (itself included).
  * ``linear_flops_per_token = 2 x active_params``: the weight matmuls per token (the config's activated
    parameter count, a published figure), for putting attention into an end-to-end FLOP ratio.
Bytes read per decode step
  * Dense: the whole KV cache of the sequence; DSA: the whole index-key cache plus ``min(L, topk)``
    latent rows. Weights, queries and outputs are not counted.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

CONFIGS: dict[str, dict] = {
    # DeepSeek-V3.2-Exp config.json (num_hidden_layers, num_attention_heads, kv_lora_rank, qk_*_head_dim,
    # v_head_dim, index_n_heads, index_head_dim, index_topk); index keys are quantised to fp8 with one
    # float32 scale per 128-element block as in its reference inference code; 37B activated parameters
    # per token (DeepSeek-V3 technical report).
    "deepseek-v3.2": {
        "attention": "mla", "layers": 61, "heads": 128, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128, "v_head_dim": 128, "index_heads": 64, "index_head_dim": 128,
        "index_topk": 2048, "index_key_bytes": 1, "index_scale_bytes": 4, "index_quant_block": 128,
        "active_params": 37e9,
    },
    # Llama-3-8B-style GQA: 32 layers, 32 query heads, 8 kv heads, head_dim 128, 8.03B parameters
    # (Meta Llama 3 model card). No indexer: the DSA fields of its cost are None.
    "llama-gqa-8b": {
        "attention": "gqa", "layers": 32, "heads": 32, "kv_heads": 8, "head_dim": 128, "active_params": 8.03e9,
    },
}
CONFIGS["dsv32"] = CONFIGS["deepseek-v3.2"]
CONFIGS["llama"] = CONFIGS["llama-gqa-8b"]


@dataclass(frozen=True)
class AttentionCost:
    """What :func:`attention_cost` reports. Bytes and FLOPs are whole-model (all layers) unless the name
    ends in ``_per_layer``. DSA fields are None for a config without an indexer."""

    config: str
    context_len: int
    batch: int
    dtype_bytes: int
    score_bytes: int
    # caches
    kv_cache_bytes: int
    index_cache_bytes: int | None
    dsa_cache_bytes: int | None
    # prefill intermediates, one layer
    dense_scores_bytes_per_layer: int
    flash_stats_bytes_per_layer: int
    index_logits_bytes_per_layer: int | None
    topk_indices_bytes_per_layer: int | None
    sparse_scores_bytes_per_layer: int | None
    # FLOPs
    prefill_flops_dense: int
    prefill_flops_dsa: int | None
    prefill_indexer_flops: int | None
    decode_flops_dense: int
    decode_flops_dsa: int | None
    linear_flops_per_token: int
    # decode traffic
    decode_read_bytes_dense: int
    decode_read_bytes_dsa: int | None

    @property
    def prefill_speedup(self) -> float | None:
        """Dense / DSA attention FLOPs of a prefill."""
        return None if self.prefill_flops_dsa is None else self.prefill_flops_dense / self.prefill_flops_dsa

    @property
    def decode_speedup(self) -> float | None:
        """Dense / DSA attention FLOPs of one decode step."""
        return None if self.decode_flops_dsa is None else self.decode_flops_dense / self.decode_flops_dsa

    @property
    def decode_read_ratio(self) -> float | None:
        """Dense / DSA cache bytes read by one decode step."""
        return None if self.decode_read_bytes_dsa is None else self.decode_read_bytes_dense / self.decode_read_bytes_dsa

    @property
    def prefill_end_to_end_ratio(self) -> float | None:
        """(linear + dense attention) / (linear + DSA attention) FLOPs of a prefill of ``context_len`` tokens."""
        if self.prefill_flops_dsa is None:
            return None
        lin = self.linear_flops_per_token * self.batch * self.context_len
        return (lin + self.prefill_flops_dense) / (lin + self.prefill_flops_dsa)

    @property
    def decode_end_to_end_ratio(self) -> float | None:
        """(linear + dense attention) / (linear + DSA attention) FLOPs of one decode step."""
        if self.decode_flops_dsa is None:
            return None
        lin = self.linear_flops_per_token * self.batch
        return (lin + self.decode_flops_dense) / (lin + self.decode_flops_dsa)

    def as_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        for p in ("prefill_speedup", "decode_speedup", "decode_read_ratio", "prefill_end_to_end_ratio",
                  "decode_end_to_end_ratio"):
            d[p] = getattr(self, p)
        return d

    def summary(self) -> str:
        """Human-readable lines (GiB = 2**30 bytes, TFLOP = 1e12)."""
        def gib(x):
            return "n/a" if x is None else f"{x / 2**30:,.2f} GiB"

        def tf(x):
            return "n/a" if x is None else f"{x / 1e12:,.3f} TFLOP"

        def rt(x):
            return "n/a" if x is None else f"{x:,.2f}x"

        return "\n".join([
            f"{self.config}: context {self.context_len:,} tokens, batch {self.batch}, cache dtype "
            f"{self.dtype_bytes} B, scores {self.score_bytes} B",
            f"  KV cache (all layers)            dense {gib(self.kv_cache_bytes)}   DSA {gib(self.dsa_cache_bytes)}"
            f" (index keys {gib(self.index_cache_bytes)})",
            f"  prefill scores, one layer        naive {gib(self.dense_scores_bytes_per_layer)}   flash "
            f"{gib(self.flash_stats_bytes_per_layer)}",
            f"  DSA prefill, one layer           index logits {gib(self.index_logits_bytes_per_layer)}   top-k "
            f"{gib(self.topk_indices_bytes_per_layer)}   sparse scores {gib(self.sparse_scores_bytes_per_layer)}",
            f"  prefill attention FLOPs          dense {tf(self.prefill_flops_dense)}   "
            f"DSA {tf(self.prefill_flops_dsa)}"
            f" (indexer {tf(self.prefill_indexer_flops)})   ratio {rt(self.prefill_speedup)}",
            f"  decode attention FLOPs / step    dense {tf(self.decode_flops_dense)}   DSA {tf(self.decode_flops_dsa)}"
            f"   ratio {rt(self.decode_speedup)}",
            f"  decode cache reads / step        dense {gib(self.decode_read_bytes_dense)}   DSA "
            f"{gib(self.decode_read_bytes_dsa)}   ratio {rt(self.decode_read_ratio)}",
            f"  end-to-end FLOP ratio (+2 x active params per token)   prefill {rt(self.prefill_end_to_end_ratio)}"
            f"   decode {rt(self.decode_end_to_end_ratio)}",
        ])


_REQUIRED = {"mla": ("layers", "heads", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"),
             "gqa": ("layers", "heads", "kv_heads", "head_dim")}
_INDEX_KEYS = ("index_heads", "index_head_dim", "index_topk")


def resolve_config(config) -> tuple[str, dict]:
    """``(name, dict)`` for a config name or dict; raises ``ValueError`` naming missing keys."""
    if isinstance(config, str):
        key = config.lower()
        if key not in CONFIGS:
            raise ValueError(f"unknown model config {config!r}; known: {', '.join(sorted(CONFIGS))}")
        return key, dict(CONFIGS[key])
    cfg = dict(config)
    kind = cfg.get("attention")
    if kind not in _REQUIRED:
        raise ValueError("config needs 'attention': 'mla' or 'gqa'")
    missing = [k for k in _REQUIRED[kind] if k not in cfg]
    if missing:
        raise ValueError(f"{kind} config is missing {', '.join(missing)}")
    return str(cfg.get("name", "custom")), cfg


def _dims(cfg):
    """(KV elements per token and layer, dense-prefill qk/v dims, absorbed-or-decode qk/v dims)."""
    if cfg["attention"] == "mla":
        latent = cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]
        mha = (cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"], cfg["v_head_dim"])
        mqa = (latent, cfg["kv_lora_rank"])
        return latent, mha, mqa
    d = cfg["head_dim"]
    return 2 * cfg["kv_heads"] * d, (d, d), (d, d)


def causal_pairs(n: int) -> int:
    """Query-key pairs of a causal prefill of ``n`` tokens."""
    return n * (n + 1) // 2


def topk_pairs(n: int, k: int) -> int:
    """Pairs of a causal prefill where query ``t`` attends to ``min(t + 1, k)`` keys."""
    if n <= k:
        return causal_pairs(n)
    return causal_pairs(k) + (n - k) * k


def attention_cost(config_name_or_dict, context_len: int, batch: int = 1, dtype_bytes: int = 2,
                   score_bytes: int = 4) -> AttentionCost:
    """Memory and FLOPs of dense vs DSA attention for a model at a context length.

    Args:
        config_name_or_dict: a key of :data:`CONFIGS` (``"deepseek-v3.2"``, ``"llama-gqa-8b"``, aliases
            ``"dsv32"``, ``"llama"``) or a dict with ``attention`` (``"mla"``/``"gqa"``) and that kind's
            keys; DSA fields need ``index_heads``, ``index_head_dim``, ``index_topk`` (plus optional
            ``index_key_bytes`` = 1, ``index_scale_bytes`` = 4, ``index_quant_block`` = 128).
        context_len: tokens in context (prefill length, or cache length at a decode step).
        batch: sequences, all at ``context_len``.
        dtype_bytes: bytes per KV-cache element.
        score_bytes: bytes per materialised attention score.

    Returns:
        An :class:`AttentionCost`; the module docstring lists every assumption.
    """
    name, cfg = resolve_config(config_name_or_dict)
    L, B = int(context_len), int(batch)
    if L <= 0 or B <= 0:
        raise ValueError("context_len and batch must be positive")
    layers, H = cfg["layers"], cfg["heads"]
    kv_elems, (dqk_pre, dv_pre), (dqk_dec, dv_dec) = _dims(cfg)
    kv_tok = kv_elems * dtype_bytes  # bytes per token and layer
    kv_cache = layers * B * L * kv_tok
    dense_prefill = layers * B * H * causal_pairs(L) * 2 * (dqk_pre + dv_pre)
    dense_decode = layers * B * H * L * 2 * (dqk_dec + dv_dec)
    lin = int(2 * cfg.get("active_params", 0))
    has_index = all(k in cfg for k in _INDEX_KEYS)
    idx = dict.fromkeys(("index_cache_bytes", "dsa_cache_bytes", "index_logits_bytes_per_layer",
                         "topk_indices_bytes_per_layer", "sparse_scores_bytes_per_layer", "prefill_flops_dsa",
                         "prefill_indexer_flops", "decode_flops_dsa", "decode_read_bytes_dsa"))
    if has_index:
        hi, di, k = cfg["index_heads"], cfg["index_head_dim"], cfg["index_topk"]
        qblock = cfg.get("index_quant_block", 128)
        idx_tok = di * cfg.get("index_key_bytes", 1) + -(-di // qblock) * cfg.get("index_scale_bytes", 4)
        per_pair_index = hi * (2 * di + 2)
        index_prefill = layers * B * causal_pairs(L) * per_pair_index
        sparse_prefill = layers * B * H * topk_pairs(L, k) * 2 * (dqk_dec + dv_dec)
        sel = min(L, k)
        idx.update(
            index_cache_bytes=layers * B * L * idx_tok,
            dsa_cache_bytes=kv_cache + layers * B * L * idx_tok,
            index_logits_bytes_per_layer=B * L * L * 4,
            topk_indices_bytes_per_layer=B * L * k * 4,
            sparse_scores_bytes_per_layer=B * H * L * k * score_bytes,
            prefill_flops_dsa=index_prefill + sparse_prefill,
            prefill_indexer_flops=index_prefill,
            decode_flops_dsa=layers * B * (L * per_pair_index + H * sel * 2 * (dqk_dec + dv_dec)),
            decode_read_bytes_dsa=layers * B * (L * idx_tok + sel * kv_tok),
        )
    return AttentionCost(
        config=name, context_len=L, batch=B, dtype_bytes=dtype_bytes, score_bytes=score_bytes,
        kv_cache_bytes=kv_cache,
        dense_scores_bytes_per_layer=B * H * L * L * score_bytes,
        flash_stats_bytes_per_layer=B * H * L * 4,
        prefill_flops_dense=dense_prefill, decode_flops_dense=dense_decode, linear_flops_per_token=lin,
        decode_read_bytes_dense=layers * B * L * kv_tok,
        **idx,
    )


# ---------------------------------------------------------------------------------------- paged KV
@dataclass(frozen=True)
class PagedKVBytes:
    """KV bytes of a batch stored contiguously at ``max_len`` per sequence vs in fixed-size pages."""

    batch: int
    max_len: int
    block_size: int
    dense_bytes: int  # every sequence reserves max_len tokens
    paged_bytes: int  # every sequence holds ceil(len / block_size) pages
    used_bytes: int  # tokens actually cached

    @property
    def paged_saving(self) -> float:
        """Fraction of the dense reservation that paging does not allocate."""
        return 1.0 - self.paged_bytes / self.dense_bytes if self.dense_bytes else 0.0

    @property
    def paged_waste(self) -> float:
        """Fraction of the paged allocation left unused in partially filled last pages."""
        return 1.0 - self.used_bytes / self.paged_bytes if self.paged_bytes else 0.0


def kv_bytes_per_token(config_name_or_dict, dtype_bytes: int = 2) -> int:
    """KV-cache bytes of one token over all layers (see :func:`attention_cost` for the layout)."""
    _, cfg = resolve_config(config_name_or_dict)
    return cfg["layers"] * _dims(cfg)[0] * dtype_bytes


def paged_kv_bytes(seq_lens, *, block_size: int = 16, bytes_per_token: int | None = None, config=None,
                   dtype_bytes: int = 2, max_len: int | None = None) -> PagedKVBytes:
    """Dense vs paged KV-cache bytes for a batch with the given sequence lengths.

    Args:
        seq_lens: tokens cached per sequence.
        block_size: tokens per page.
        bytes_per_token: KV bytes per token (all layers); or give ``config`` (+ ``dtype_bytes``) instead.
        max_len: the length a dense cache reserves per sequence (default: the longest sequence).
    """
    lens = [int(x) for x in seq_lens]
    if bytes_per_token is None:
        if config is None:
            raise ValueError("give bytes_per_token or config")
        bytes_per_token = kv_bytes_per_token(config, dtype_bytes)
    mx = max(lens) if max_len is None else int(max_len)
    if any(n < 0 or n > mx for n in lens):
        raise ValueError("sequence lengths must lie in [0, max_len]")
    pages = sum(-(-n // block_size) for n in lens)
    return PagedKVBytes(batch=len(lens), max_len=mx, block_size=block_size,
                        dense_bytes=len(lens) * mx * bytes_per_token,
                        paged_bytes=pages * block_size * bytes_per_token,
                        used_bytes=sum(lens) * bytes_per_token)
