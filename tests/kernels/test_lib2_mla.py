"""DeepSeek MLA decode, absorbed form (kernels/mla.py): variable sequence lengths (rows past a sequence
hold NaN and must not be read), split-KV + combine, head blocks that do not divide the heads; and its
agreement with the DSA sparse kernel when every position is selected."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels.dsa import sparse_mla_fwd
from kernels.mla import mla_decode, mla_decode_reference
from tilesim.testing import assert_matches_reference, compare_arrays
from tilesim.testing.strategies import random_array

SERIAL = tilesim.InterpOptions(mode="serial")


def _inputs(rng, batch, heads, seq_kv, dim, pe, dtype, lens=None):
    q = random_array(rng, (batch, heads, dim + pe), dtype)
    kv = random_array(rng, (batch, seq_kv, dim + pe), dtype).astype(np.float32)
    lens = rng.integers(1, seq_kv + 1, size=batch) if lens is None else np.asarray(lens)
    for b in range(batch):
        kv[b, lens[b]:] = np.nan
    return q, kv.astype(q.dtype), lens.astype(np.int32)


@settings(max_examples=6)
@given(st.integers(1, 3), st.integers(1, 9), st.integers(1, 50), st.sampled_from([(16, 8), (32, 16)]),
       st.integers(1, 4), st.sampled_from([4, 8, 64]), st.sampled_from([8, 16]),
       st.sampled_from(["bfloat16", "float16"]), st.integers(0, 2**31 - 1))
def test_mla_decode(batch, heads, seq_kv, dims, splits, block_H, block_N, dtype, seed):
    dim, pe = dims
    k = mla_decode(batch, heads, seq_kv, dim=dim, pe_dim=pe, num_splits=splits, block_H=block_H, block_N=block_N,
                   dtype=dtype)
    inputs = _inputs(np.random.default_rng(seed), batch, heads, seq_kv, dim, pe, dtype)
    t = 1.6e-2 if dtype == "bfloat16" else 4e-3
    assert_matches_reference(k, inputs, lambda q, kv, n: mla_decode_reference(q, kv, n, dim=dim), rtol=t, atol=t)


def test_mla_decode_serial_equals_batched():
    inputs = _inputs(np.random.default_rng(2), 2, 5, 37, 16, 8, "bfloat16", lens=[37, 3])
    k = mla_decode(2, 5, 37, dim=16, pe_dim=8, num_splits=3, block_H=4, block_N=8)
    for a, b in zip(k(*inputs), k.run(*inputs, options=SERIAL)):
        assert np.array_equal(a, b)


def test_dense_mla_decode_equals_sparse_kernel_selecting_everything():
    n, heads, dim, pe = 23, 4, 32, 16
    q, kv, lens = _inputs(np.random.default_rng(3), 1, heads, n, dim, pe, "bfloat16", lens=[n])
    dense_o, dense_l = mla_decode(1, heads, n, dim=dim, pe_dim=pe, num_splits=2, block_N=8)(q, kv, lens)
    # one query token at the last position, every key selected
    idx = np.arange(n, dtype=np.int32)[None]
    sp_o, sp_l = sparse_mla_fwd(1, n, heads, n, dim=dim, pe_dim=pe, block_K=8)(q, kv[0], idx)
    assert compare_arrays(dense_o, sp_o, rtol=1.6e-2, atol=1.6e-2) is None
    assert compare_arrays(dense_l, sp_l, rtol=1e-5, atol=1e-5) is None
