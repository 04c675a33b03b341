"""mHC forward kernels (kernels/mhc.py) against float64 references on token counts and hidden sizes the
tiles do not divide, plus exact identities (one-hot mixes select a stream; an identity ``Comb`` with zero
``Post`` returns the residual; expand repeats bit for bit)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels import mhc as K
from tilesim import dtypes as dt
from tilesim.testing.compare import compare_arrays

BF16 = dt.np_dtype("bfloat16")


def _ok(out, ref, rtol, atol):
    msg = compare_arrays(out, ref, rtol=rtol, atol=atol, name="out")
    assert msg is None, msg


@settings(max_examples=6)
@given(N=st.integers(1, 40), H=st.integers(1, 300), m=st.sampled_from([1, 2, 4]), seed=st.integers(0, 99),
       block_H=st.sampled_from([64, 256]))
def test_streams(N, H, m, seed, block_H):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, H)).astype(np.float32).astype(BF16)
    e = K.mhc_expand(N, H, m, block_N=8, block_H=block_H)(x)
    assert np.array_equal(e.view(np.uint16), K.ref_expand(x, m).view(np.uint16))
    xs = rng.standard_normal((N, m, H)).astype(np.float32).astype(BF16)
    w = rng.random((N, m)).astype(np.float32)
    _ok(K.mhc_pre_apply_mix(N, m, H, block_N=8, block_H=block_H)(xs, w), K.ref_pre_apply_mix(xs, w), 2.0 ** -7, 1e-6)
    pm, cm = rng.standard_normal((N, m)).astype(np.float32), rng.standard_normal((N, m, m)).astype(np.float32)
    _ok(K.mhc_post(N, m, H, block_N=4, block_H=block_H)(x, xs, pm, cm), K.ref_post(x, xs, pm, cm), 2.0 ** -7, 1e-5)


@settings(max_examples=6)
@given(N=st.integers(1, 150), m=st.sampled_from([1, 2, 4]), seed=st.integers(0, 99), block_N=st.sampled_from([16, 64]))
def test_mixes(N, m, seed, block_N):
    rng = np.random.default_rng(seed)
    mix, sc, base = rng.standard_normal((N, m)).astype(np.float32), rng.standard_normal(1).astype(np.float32), \
        rng.standard_normal(m).astype(np.float32)
    _ok(K.mhc_head_compute_mix(N, m, eps=1e-6, block_N=block_N)(mix, sc, base), K.ref_head_compute_mix(mix, sc, base),
        1e-5, 1e-6)
    M3 = m * (2 + m)
    mixes, sc3, base3 = (rng.standard_normal(s).astype(np.float32) for s in ((N, M3), (3,), (M3,)))
    outs = K.mhc_pre_split_mixes(N, m, post_mult=2.0, eps=1e-6, block_N=block_N)(mixes, sc3, base3)
    for o, r in zip(outs, K.ref_pre_split_mixes(mixes, sc3, base3, m, 2.0, 1e-6), strict=True):
        _ok(o, r, 1e-5, 1e-6)


@settings(max_examples=6)
@given(N=st.integers(1, 70), H=st.integers(1, 200), m=st.sampled_from([1, 2, 4]), dtype=st.sampled_from(["bfloat16", "float32"]),
       block_K=st.sampled_from([32, 128]), seed=st.integers(0, 99))
def test_pre_norm_fn(N, H, m, dtype, block_K, seed):
    rng = np.random.default_rng(seed)
    M3 = m * (2 + m)
    res = dt.convert((rng.standard_normal((N, m * H)) * 3).astype(np.float32), dtype)
    fn = (rng.standard_normal((M3, m * H)) * 0.05).astype(np.float32)
    out = K.mhc_pre_norm_fn(N, m * H, M3, block_N=16, block_K=block_K, dtype=dtype)(res, fn)
    ref = K.ref_pre_norm_fn(res, fn)
    scale = np.abs(res.astype(np.float64)) @ np.abs(fn.astype(np.float64)).T / np.sqrt(
        (res.astype(np.float64) ** 2).mean(axis=1, keepdims=True) + 1e-6)
    assert np.all(np.abs(out - ref) <= 1e-5 * scale + 1e-6)


def test_exact_identities():
    rng = np.random.default_rng(0)
    N, m, H = 9, 4, 130
    xs = rng.standard_normal((N, m, H)).astype(np.float32).astype(BF16)
    onehot = np.eye(m, dtype=np.float32)[rng.integers(0, m, N)]
    sel = K.mhc_pre_apply_mix(N, m, H, block_H=64)(xs, onehot)
    assert np.array_equal(sel.view(np.uint16), xs[np.arange(N), onehot.argmax(1)].view(np.uint16))
    x = rng.standard_normal((N, H)).astype(np.float32).astype(BF16)
    out = K.mhc_post(N, m, H, block_H=64)(x, xs, np.zeros((N, m), np.float32), np.tile(np.eye(m, dtype=np.float32), (N, 1, 1)))
    assert np.array_equal(out.view(np.uint16), xs.view(np.uint16))


def test_invalid_and_serial():
    with pytest.raises(ValueError, match="M3 <= 32"):
        K.mhc_pre_norm_fn(8, 64, 35)
    rng = np.random.default_rng(2)
    res = rng.standard_normal((7, 96)).astype(np.float32)
    fn = rng.standard_normal((8, 96)).astype(np.float32)
    k = K.mhc_pre_norm_fn(7, 96, 8, block_N=4, block_K=32, dtype="float32")
    assert np.array_equal(k(res, fn), k.run(res, fn, options=tilesim.InterpOptions(mode="serial")))
