"""Engram kernels (kernels/engram.py): the hash bit for bit (including int64 wrap-around and negative
hashes, where the floor modulo matters), the gate against a float64 reference within one bf16 ulp, on
ragged token counts and hidden sizes; the gate's sign(0) case and invalid n-gram sizes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels.engram import (
    engram_gate,
    engram_hash,
    gate_inputs,
    hash_inputs,
    ref_engram_gate,
    ref_engram_hash,
)
from tilesim import dtypes as dt
from tilesim.testing.compare import compare_arrays


@settings(max_examples=8)
@given(N=st.integers(1, 80), n=st.integers(2, 5), L=st.integers(1, 3), J=st.integers(1, 9), big=st.booleans(),
       block_N=st.sampled_from([16, 64]), seed=st.integers(0, 99))
def test_hash_bitwise(N, n, L, J, big, block_N, seed):
    rng = np.random.default_rng(seed)
    ids, mul, vocab, off = hash_inputs(rng, N, n, L, J)
    if big:  # products overflow int64 and wrap; hashes go negative: floor modulo (torch's %), not C's remainder
        mul = rng.integers(-(2 ** 62), 2 ** 62, (L, n), dtype=np.int64)
    out = engram_hash(N, n, L, J, block_N=block_N)(ids, mul, vocab, off)
    ref = ref_engram_hash(ids, mul, vocab, off)
    assert np.array_equal(out, ref)
    assert np.all((out - off[:, None, :] >= 0) | (off[:, None, :] > 2 ** 30))  # the modulo is non-negative


@settings(max_examples=6)
@given(N=st.integers(1, 20), hc=st.sampled_from([1, 2, 4]), H=st.integers(1, 300), block_R=st.sampled_from([4, 8]),
       block_H=st.sampled_from([64, 256]), seed=st.integers(0, 99))
def test_gate(N, hc, H, block_R, block_H, seed):
    ins = gate_inputs(np.random.default_rng(seed), N, hc, H)
    out = engram_gate(N, hc, H, block_R=block_R, block_H=block_H)(*ins)
    msg = compare_arrays(out, ref_engram_gate(*ins), rtol=2.0 ** -7, atol=1e-5, name="Out")
    assert msg is None, msg


def test_gate_zero_dot_is_half():
    """A zero key row: dot = 0, sign 0, sigmoid(0) = 1/2 — Out = x + v/2 (exact in bf16 here)."""
    rng = np.random.default_rng(0)
    x, k, v, wh, we = gate_inputs(rng, 3, 2, 64)
    k[:] = 0
    x = dt.convert(np.round(x.astype(np.float32) * 4) / 4, "bfloat16")
    v = dt.convert(np.round(v.astype(np.float32) * 4) / 4, "bfloat16")
    out = engram_gate(3, 2, 64)(x, k, v, wh, we)
    want = x.astype(np.float32) + 0.5 * v.astype(np.float32)[:, None, :]
    assert np.array_equal(out.astype(np.float32), want)


def test_invalid_and_serial():
    with pytest.raises(ValueError, match="at least 2"):
        engram_hash(4, 1, 1, 1)
    ins = hash_inputs(np.random.default_rng(1), 9, 3, 2, 4)
    k = engram_hash(9, 3, 2, 4, block_N=4)
    assert np.array_equal(k(*ins), k.run(*ins, options=tilesim.InterpOptions(mode="serial")))
