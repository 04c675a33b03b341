"""FlashAttention forward/backward (kernels/attention.py) against float64 NumPy on Hypothesis-drawn shapes:
sequence lengths not divisible by the tiles, MHA and GQA, causal (incl. chunked prefill) and not."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels.attention import (
    attention_bwd_reference,
    attention_reference,
    flash_attention_bwd,
    flash_attention_fwd,
)
from tilesim.testing import assert_matches_reference, compare_arrays
from tilesim.testing.strategies import dim, random_array

SERIAL = tilesim.InterpOptions(mode="serial")
TOL = {"float16": 4e-3, "bfloat16": 1.6e-2}


@st.composite
def attention_case(draw):
    bm = draw(st.sampled_from([16, 32]))
    bn = draw(st.sampled_from([16, 32]))
    seq_q = draw(dim(bm, max_tiles=2))
    causal = draw(st.booleans())
    seq_kv = seq_q + draw(st.integers(0, 20)) if causal else draw(dim(bn, max_tiles=2))
    return dict(batch=draw(st.integers(1, 2)), kv_heads=draw(st.integers(1, 2)),
                groups=draw(st.sampled_from([1, 2, 3])),
                seq_q=seq_q, seq_kv=seq_kv, dim=draw(st.sampled_from([8, 16])), is_causal=causal,
                block_M=bm, block_N=bn, dtype=draw(st.sampled_from(["float16", "bfloat16"])),
                num_stages=draw(st.integers(0, 2)))


def _inputs(c, seed):
    rng = np.random.default_rng(seed)
    h = c["kv_heads"] * c["groups"]
    q = random_array(rng, (c["batch"], c["seq_q"], h, c["dim"]), c["dtype"])
    k = random_array(rng, (c["batch"], c["seq_kv"], c["kv_heads"], c["dim"]), c["dtype"])
    v = random_array(rng, (c["batch"], c["seq_kv"], c["kv_heads"], c["dim"]), c["dtype"])
    return q, k, v


def _build_args(c, fn):
    return fn(c["batch"], c["kv_heads"] * c["groups"], c["seq_q"], c["dim"], seq_kv=c["seq_kv"], groups=c["groups"],
              is_causal=c["is_causal"], block_M=c["block_M"], block_N=c["block_N"], num_stages=c["num_stages"],
              dtype=c["dtype"])


@settings(max_examples=6)
@given(attention_case(), st.integers(0, 2**31 - 1))
def test_flash_attention_fwd(c, seed):
    k = _build_args(c, flash_attention_fwd)
    inputs = _inputs(c, seed)
    t = TOL[c["dtype"]]
    outs = assert_matches_reference(k, inputs, lambda q, kk, v: attention_reference(q, kk, v, is_causal=c["is_causal"]),
                                    rtol=t, atol=t)
    assert outs[1].dtype == np.float32 and outs[1].shape == (c["batch"], c["kv_heads"] * c["groups"], c["seq_q"])


@settings(max_examples=4)
@given(attention_case(), st.integers(0, 2**31 - 1))
def test_flash_attention_bwd(c, seed):
    q, kk, v = _inputs(c, seed)
    o, lse = _build_args(c, flash_attention_fwd)(q, kk, v)
    do = random_array(np.random.default_rng(seed + 1), q.shape, c["dtype"])
    k = _build_args(c, flash_attention_bwd)
    t = 2 * TOL[c["dtype"]]
    assert_matches_reference(k, (q, kk, v, o, do, lse),
                             lambda *a: attention_bwd_reference(*a, is_causal=c["is_causal"]), rtol=t, atol=t)


def test_serial_equals_batched_fwd_and_bwd():
    c = dict(batch=2, kv_heads=1, groups=2, seq_q=19, seq_kv=27, dim=8, is_causal=True, block_M=16, block_N=16,
             dtype="float16", num_stages=1)
    q, kk, v = _inputs(c, 3)
    fwd = _build_args(c, flash_attention_fwd)
    outs = fwd(q, kk, v)
    for a, b in zip(outs, fwd.run(q, kk, v, options=SERIAL)):
        assert np.array_equal(a, b)
    do = random_array(np.random.default_rng(4), q.shape, "float16")
    bwd = _build_args(c, flash_attention_bwd)
    grads = bwd(q, kk, v, outs[0], do, outs[1])
    for a, b in zip(grads, bwd.run(q, kk, v, outs[0], do, outs[1], options=SERIAL)):
        assert np.array_equal(a, b)


def test_gqa_equals_mha_with_repeated_kv():
    c = dict(batch=1, kv_heads=2, groups=3, seq_q=21, seq_kv=21, dim=16, is_causal=True, block_M=16, block_N=16,
             dtype="float16", num_stages=1)
    q, kk, v = _inputs(c, 11)
    gqa = _build_args(c, flash_attention_fwd)(q, kk, v)
    mha = _build_args(dict(c, kv_heads=6, groups=1), flash_attention_fwd)(q, np.repeat(kk, 3, axis=2),
                                                                           np.repeat(v, 3, axis=2))
    for a, b in zip(gqa, mha):
        assert compare_arrays(a, b, rtol=0, atol=0, exact=True) is None


def test_lse_is_natural_log_sum_exp():
    c = dict(batch=1, kv_heads=1, groups=1, seq_q=5, seq_kv=5, dim=8, is_causal=False, block_M=16, block_N=16,
             dtype="float16", num_stages=1)
    q, kk, v = _inputs(c, 5)
    _, lse = _build_args(c, flash_attention_fwd)(q, kk, v)
    s = np.einsum("id,jd->ij", q[0, :, 0].astype(np.float64), kk[0, :, 0].astype(np.float64)) / np.sqrt(8)
    assert np.allclose(lse[0, 0], np.log(np.exp(s).sum(-1)), rtol=1e-5)
