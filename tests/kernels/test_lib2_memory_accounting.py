"""Dense vs DSA memory/FLOP accounting (kernels/memory_accounting.py): numbers recomputed by hand from the
configs, the structural identities (top-k >= context makes the sparse part dense), and input checks."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.memory_accounting import CONFIGS, AttentionCost, attention_cost, causal_pairs, topk_pairs

K128 = 131072


def test_deepseek_v32_cache_bytes_at_128k():
    c = attention_cost("deepseek-v3.2", K128)
    assert c.kv_cache_bytes == 61 * K128 * (512 + 64) * 2  # one bf16 latent row per token and layer
    assert c.index_cache_bytes == 61 * K128 * (128 * 1 + 4)  # fp8 index key + one fp32 scale
    assert c.dsa_cache_bytes == c.kv_cache_bytes + c.index_cache_bytes > c.kv_cache_bytes  # DSA adds, never removes
    assert c.dense_scores_bytes_per_layer == 128 * K128 * K128 * 4
    assert c.index_logits_bytes_per_layer == K128 * K128 * 4
    assert c.topk_indices_bytes_per_layer == K128 * 2048 * 4
    assert attention_cost("dsv32", K128, dtype_bytes=1).kv_cache_bytes == c.kv_cache_bytes // 2


def test_llama_gqa_cache_and_no_dsa_fields():
    c = attention_cost("llama-gqa-8b", K128, batch=2)
    assert c.kv_cache_bytes == 2 * 32 * K128 * 2 * 8 * 128 * 2 == 32 * 2**30
    assert c.dsa_cache_bytes is None and c.prefill_flops_dsa is None and c.decode_speedup is None
    assert c.prefill_flops_dense == 2 * 32 * 32 * causal_pairs(K128) * 2 * (128 + 128)
    assert "n/a" in c.summary()


def test_flop_formulas():
    L = 5000
    c = attention_cost("deepseek-v3.2", L)
    assert c.prefill_flops_dense == 61 * 128 * causal_pairs(L) * 2 * (192 + 128)  # MHA-form prefill
    assert c.decode_flops_dense == 61 * 128 * L * 2 * (576 + 512)  # absorbed decode
    index_per_pair = 64 * (2 * 128 + 2)
    assert c.prefill_indexer_flops == 61 * causal_pairs(L) * index_per_pair
    assert c.prefill_flops_dsa == c.prefill_indexer_flops + 61 * 128 * topk_pairs(L, 2048) * 2 * (576 + 512)
    assert c.decode_flops_dsa == 61 * (L * index_per_pair + 128 * 2048 * 2 * (576 + 512))
    assert c.linear_flops_per_token == 2 * 37e9


@settings(max_examples=6)
@given(st.integers(1, 3000), st.integers(1, 3000))
def test_topk_pairs(n, k):
    assert topk_pairs(n, k) == sum(min(t + 1, k) for t in range(n))
    assert topk_pairs(n, k) <= causal_pairs(n)


@settings(max_examples=6)
@given(st.integers(1, 2048), st.integers(1, 4))
def test_short_contexts_select_everything(L, batch):
    # with context <= top-k the sparse attention is the absorbed dense attention: only the indexer is extra
    cfg = dict(CONFIGS["deepseek-v3.2"])
    c = attention_cost(cfg, L, batch=batch)
    absorbed = dict(cfg, qk_nope_head_dim=512, v_head_dim=512)  # MHA-form dims := absorbed (576, 512)
    dense_absorbed = attention_cost(absorbed, L, batch=batch).prefill_flops_dense
    assert c.prefill_flops_dsa - c.prefill_indexer_flops == dense_absorbed
    assert c.decode_read_bytes_dsa - c.index_cache_bytes == c.decode_read_bytes_dense


def test_longer_contexts_favour_dsa():
    r = [attention_cost("deepseek-v3.2", n).decode_speedup for n in (8192, 32768, K128)]
    assert r[0] < r[1] < r[2]
    p = [attention_cost("deepseek-v3.2", n).prefill_speedup for n in (8192, 32768, K128)]
    assert p[0] < 1 < p[1] < p[2]  # short prefill: the 576/512-wide MQA form costs more than 192/128 MHA


def test_result_is_frozen_and_serialisable():
    c = attention_cost("deepseek-v3.2", 8192)
    assert isinstance(c, AttentionCost)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.context_len = 1
    d = c.as_dict()
    assert d["config"] == "deepseek-v3.2" and d["decode_speedup"] == c.decode_speedup
    assert "GiB" in c.summary()


@pytest.mark.parametrize("bad,msg", [
    ("gpt-5", "unknown model config"),
    ({"attention": "mha"}, "'mla' or 'gqa'"),
    ({"attention": "gqa", "layers": 2, "heads": 4}, "kv_heads"),
])
def test_config_errors(bad, msg):
    with pytest.raises(ValueError, match=msg):
        attention_cost(bad, 100)
    with pytest.raises(ValueError):
        attention_cost("llama", 0)
