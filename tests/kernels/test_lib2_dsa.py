"""DeepSeek sparse attention (kernels/dsa.py): the fp8 lightning indexer, the radix top-k selector (index
sets compared as sets, deterministic ties, -1 padding), sparse MLA attention, the chained pipeline, and
the property that with top-k >= sequence length DSA is dense causal attention."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels.dsa import (
    compare_index_sets,
    dsa_attention,
    indexer_reference,
    lightning_indexer,
    mla_attention_reference,
    sparse_mla_fwd,
    topk_reference,
    topk_selector,
)
from tilesim.testing import assert_matches_reference, compare_arrays
from tilesim.testing.strategies import random_array

SERIAL = tilesim.InterpOptions(mode="serial")


def _seq(draw, max_q=20, max_extra=25):
    seq_q = draw(st.integers(1, max_q))
    return seq_q, seq_q + draw(st.integers(0, max_extra))


def _index_inputs(rng, seq_q, seq_kv, heads, d):
    q = random_array(rng, (seq_q, heads, d), "float8_e4m3fn", scale=2.0)
    k = random_array(rng, (seq_kv, d), "float8_e4m3fn", scale=2.0)
    w = (rng.standard_normal((seq_q, heads)) / np.sqrt(heads)).astype(np.float32)
    return q, k, w


@settings(max_examples=6)
@given(st.data(), st.integers(0, 2**31 - 1))
def test_lightning_indexer(data, seed):
    seq_q, seq_kv = _seq(data.draw)
    causal = data.draw(st.booleans())
    heads, d = data.draw(st.integers(1, 5)), data.draw(st.sampled_from([16, 32]))
    bm, bn = data.draw(st.sampled_from([1, 2, 4])), data.draw(st.sampled_from([8, 16, 32]))
    k = lightning_indexer(seq_q, seq_kv, index_heads=heads, index_dim=d, is_causal=causal, block_M=bm, block_N=bn)
    inputs = _index_inputs(np.random.default_rng(seed), seq_q, seq_kv, heads, d)
    assert_matches_reference(k, inputs, lambda q, kk, w: indexer_reference(q, kk, w, causal), rtol=1e-4, atol=1e-3)


@st.composite
def logits_case(draw):
    seq_q, seq_kv = _seq(draw, max_q=8, max_extra=150)
    kind = draw(st.sampled_from(["ties", "wide", "specials", "sparse"]))
    return seq_q, seq_kv, kind, draw(st.integers(1, seq_kv + 10)), draw(st.sampled_from([8, 32, 128]))


def _logits(rng, seq_q, seq_kv, kind):
    shape = (seq_q, seq_kv)
    if kind == "ties":
        x = np.round(rng.standard_normal(shape) * 2) / 2
    elif kind == "wide":
        x = rng.standard_normal(shape) * 10.0 ** rng.integers(-30, 30, size=shape)
    elif kind == "specials":
        x = rng.choice(np.array([-0.0, 0.0, 1.0, -1.0, 3e38, -3e38, 1e-40, -np.inf], dtype=np.float32), size=shape)
    else:
        x = np.where(rng.random(shape) < 0.8, -np.inf, rng.standard_normal(shape))
    causal = np.arange(seq_kv)[None, :] <= np.arange(seq_q)[:, None] + (seq_kv - seq_q)
    return np.where(causal, x, -np.inf).astype(np.float32)


@settings(max_examples=6)
@given(logits_case(), st.integers(0, 2**31 - 1))
def test_topk_selector_index_sets(case, seed):
    seq_q, seq_kv, kind, topk, bn = case
    logits = _logits(np.random.default_rng(seed), seq_q, seq_kv, kind)
    out = topk_selector(seq_q, seq_kv, topk, block_N=bn)(logits)
    ref = topk_reference(logits, topk)
    compare_index_sets(out, ref)
    # deterministic ties and ascending order: the output is the reference itself
    assert np.array_equal(out, ref)


def test_topk_ties_go_to_the_smaller_index_and_rows_pad_with_minus_one():
    logits = np.array([[1.0, 2.0, 2.0, 2.0, -np.inf, 0.5],
                       [-np.inf] * 6,
                       [0.0, -0.0, 0.0, -0.0, 0.0, 7.0]], dtype=np.float32)
    out = topk_selector(3, 6, 4, block_N=4)(logits)
    assert out.tolist() == [[0, 1, 2, 3], [-1, -1, -1, -1], [0, 1, 2, 5]]
    out = topk_selector(3, 6, 7, block_N=4)(logits)
    assert out[0].tolist() == [0, 1, 2, 3, 5, -1, -1]


@st.composite
def sparse_case(draw):
    seq_q, seq_kv = _seq(draw, max_q=8, max_extra=30)
    return dict(seq_q=seq_q, seq_kv=seq_kv, heads=draw(st.integers(1, 6)), topk=draw(st.integers(1, 40)),
                dim=draw(st.sampled_from([16, 32])), pe_dim=draw(st.sampled_from([8, 16])),
                block_H=draw(st.sampled_from([2, 4, 64])), block_K=draw(st.sampled_from([8, 16])),
                dtype=draw(st.sampled_from(["bfloat16", "float16"])))


def _sparse_inputs(rng, c, allow_future=False):
    q = random_array(rng, (c["seq_q"], c["heads"], c["dim"] + c["pe_dim"]), c["dtype"])
    kv = random_array(rng, (c["seq_kv"], c["dim"] + c["pe_dim"]), c["dtype"])
    # arbitrary int32 indices: valid ones, duplicates-free; -1 padding anywhere; some out of the causal range
    idx = np.full((c["seq_q"], c["topk"]), -1, dtype=np.int32)
    off = c["seq_kv"] - c["seq_q"]
    for t in range(c["seq_q"]):
        pool = c["seq_kv"] if allow_future else t + off + 1
        n = int(rng.integers(0 if t else 1, min(c["topk"], pool) + 1))
        idx[t, :n] = rng.choice(pool, size=n, replace=False)
        idx[t] = idx[t][rng.permutation(c["topk"])]
    return q, kv, idx


@settings(max_examples=6)
@given(sparse_case(), st.booleans(), st.integers(0, 2**31 - 1))
def test_sparse_mla_fwd(c, allow_future, seed):
    k = sparse_mla_fwd(c["seq_q"], c["seq_kv"], c["heads"], c["topk"], dim=c["dim"], pe_dim=c["pe_dim"],
                       block_H=c["block_H"], block_K=c["block_K"], dtype=c["dtype"])
    inputs = _sparse_inputs(np.random.default_rng(seed), c, allow_future)
    t = 1.6e-2 if c["dtype"] == "bfloat16" else 4e-3
    assert_matches_reference(k, inputs, lambda q, kv, i: mla_attention_reference(q, kv, dim=c["dim"], indices=i),
                             rtol=t, atol=t)


def test_sparse_row_without_valid_index_gives_zeros_and_minus_inf_lse():
    c = dict(seq_q=3, seq_kv=3, heads=2, topk=4, dim=16, pe_dim=8, dtype="bfloat16")
    q, kv, _ = _sparse_inputs(np.random.default_rng(0), c)
    idx = np.array([[-1, -1, -1, -1], [2, 1, -1, 7], [0, 1, 2, -1]], dtype=np.int32)  # row 1: 2 is in the future
    out, lse = sparse_mla_fwd(3, 3, 2, 4, dim=16, pe_dim=8, block_K=2)(q, kv, idx)
    assert np.all(out[0].astype(np.float32) == 0) and np.all(lse[0] == -np.inf)
    ref_o, ref_l = mla_attention_reference(q, kv, dim=16, indices=idx)
    assert compare_arrays(out, ref_o) is None and compare_arrays(lse, ref_l) is None


def _pipeline_inputs(seed, seq_q, seq_kv, heads, dim, pe, ih, idim):
    rng = np.random.default_rng(seed)
    qi, ki, w = _index_inputs(rng, seq_q, seq_kv, ih, idim)
    q = random_array(rng, (seq_q, heads, dim + pe), "bfloat16")
    kv = random_array(rng, (seq_kv, dim + pe), "bfloat16")
    return q, kv, qi, ki, w


CFG = dict(indexer_config={"block_M": 2, "block_N": 16}, topk_config={"block_N": 16},
           attn_config={"block_K": 16, "block_H": 4})


@settings(max_examples=4)
@given(st.data(), st.integers(0, 2**31 - 1))
def test_dsa_with_topk_at_least_the_sequence_is_dense_causal_attention(data, seed):
    seq_q, seq_kv = _seq(data.draw, max_q=24, max_extra=10)
    heads = data.draw(st.integers(1, 5))
    topk = seq_kv + data.draw(st.integers(0, 9))
    q, kv, qi, ki, w = _pipeline_inputs(seed, seq_q, seq_kv, heads, 32, 16, 3, 16)
    out, lse, idx, _ = dsa_attention(q, kv, qi, ki, w, topk, dim=32, **CFG)
    dense_o, dense_l = mla_attention_reference(q, kv, dim=32, is_causal=True)
    assert compare_arrays(out, dense_o) is None
    assert compare_arrays(lse, dense_l) is None
    # every causally visible position selected, the rest padded
    assert ((idx >= 0).sum(1) == np.arange(seq_q) + (seq_kv - seq_q) + 1).all()


def test_dsa_pipeline_sparse_and_serial_equals_batched():
    seq, heads, topk = 29, 3, 9
    q, kv, qi, ki, w = _pipeline_inputs(5, seq, seq, heads, 32, 16, 4, 32)
    out, lse, idx, logits = dsa_attention(q, kv, qi, ki, w, topk, dim=32, **CFG)
    assert compare_arrays(logits, indexer_reference(qi, ki, w), rtol=1e-4, atol=1e-3) is None
    assert np.array_equal(idx, topk_reference(logits, topk))
    ref_o, ref_l = mla_attention_reference(q, kv, dim=32, indices=idx)
    assert compare_arrays(out, ref_o) is None and compare_arrays(lse, ref_l) is None
    dense_o, _ = mla_attention_reference(q, kv, dim=32)
    assert compare_arrays(out[topk:], dense_o[topk:]) is not None  # sparse really drops keys
    s = dsa_attention(q, kv, qi, ki, w, topk, dim=32, options=SERIAL, **CFG)
    for a, b in zip((out, lse, idx, logits), s):
        assert np.array_equal(a, b)
