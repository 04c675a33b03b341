"""Paged flash decoding (kernels/paged_decode.py): shuffled page pools whose unowned slots hold NaN,
variable sequence lengths, split-KV + combine, GQA, multi-token queries; and the dense-vs-paged KV
byte accounting."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels.memory_accounting import kv_bytes_per_token, paged_kv_bytes
from kernels.paged_decode import build_paged_decode, make_paged_inputs, paged_decode_reference
from tilesim.testing import assert_matches_reference

SERIAL = tilesim.InterpOptions(mode="serial")
TOL = {"float16": 4e-3, "bfloat16": 1.6e-2}


@st.composite
def decode_case(draw):
    q_len = draw(st.integers(1, 3))
    block_size = draw(st.sampled_from([4, 8, 16]))
    max_len = draw(st.integers(max(q_len, 3), 70))
    batch = draw(st.integers(1, 3))
    lens = draw(st.lists(st.integers(q_len, max_len), min_size=batch, max_size=batch))
    return dict(batch=batch, heads=draw(st.integers(1, 2)) * draw(st.sampled_from([1, 2, 4])), dim=16,
                max_len=max_len, block_size=block_size, q_len=q_len, seq_lens=tuple(lens),
                num_splits=draw(st.integers(1, 5)), block_N=draw(st.sampled_from([8, 16, 32])),
                dtype=draw(st.sampled_from(["float16", "bfloat16"])))


@settings(max_examples=6)
@given(decode_case(), st.sampled_from([1, 2, 4]), st.integers(0, 2**31 - 1))
def test_paged_decode(c, groups, seed):
    if c["heads"] % groups:
        groups = 1
    k = build_paged_decode(groups=groups, **c)
    inputs = make_paged_inputs(np.random.default_rng(seed), groups=groups, **c)
    t = TOL[c["dtype"]]
    assert_matches_reference(k, inputs, paged_decode_reference, rtol=t, atol=t)


def test_paged_decode_serial_equals_batched_and_ignores_unowned_pages():
    c = dict(batch=3, heads=4, groups=2, dim=16, max_len=29, block_size=4, q_len=2, seq_lens=(29, 2, 13),
             num_splits=3, block_N=8, dtype="float16")
    k = build_paged_decode(**c)
    inputs = make_paged_inputs(np.random.default_rng(0), **c)
    assert np.isnan(inputs[1].astype(np.float32)).any()  # unowned slots are NaN
    out, lse = k(*inputs)
    assert np.isfinite(out.astype(np.float32)).all() and np.isfinite(lse).all()
    out_s, lse_s = k.run(*inputs, options=SERIAL)
    assert np.array_equal(out, out_s) and np.array_equal(lse, lse_s)


@pytest.mark.parametrize("num_splits", [1, 2, 7])
def test_split_count_does_not_change_the_result(num_splits):
    c = dict(batch=2, heads=2, groups=1, dim=16, max_len=40, block_size=8, q_len=1, seq_lens=(40, 5), dtype="float16")
    inputs = make_paged_inputs(np.random.default_rng(1), **c)
    ref = paged_decode_reference(*inputs)
    out, lse = build_paged_decode(num_splits=num_splits, block_N=8, **c)(*inputs)
    assert np.allclose(out.astype(np.float64), ref[0], atol=2e-3)
    assert np.allclose(lse, ref[1], atol=1e-5)


def test_paged_kv_bytes():
    lens = [100, 17, 64, 1]
    r = paged_kv_bytes(lens, block_size=16, bytes_per_token=10, max_len=128)
    assert r.dense_bytes == 4 * 128 * 10
    assert r.paged_bytes == (7 + 2 + 4 + 1) * 16 * 10
    assert r.used_bytes == sum(lens) * 10
    assert 0 < r.paged_saving < 1 and 0 < r.paged_waste < 1
    # Llama-style GQA: 32 layers x (K and V) x 8 kv heads x 128 x bf16 = 128 KiB per token
    assert kv_bytes_per_token("llama-gqa-8b") == 32 * 2 * 8 * 128 * 2
    assert paged_kv_bytes([5], config="llama", block_size=16).paged_bytes == 16 * 128 * 1024
    with pytest.raises(ValueError):
        paged_kv_bytes([5])
