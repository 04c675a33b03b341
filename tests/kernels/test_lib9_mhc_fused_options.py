"""TileKernels' TF32 and split-K options of the fused mHC pre block (kernels/mhc_fused.py, ``tf32``, ``n_splits``):
against the float64 chain with ``Fn`` TF32-rounded on ragged shapes and every split count that divides the K tiles;
the TF32 rounding rule on hand-picked values; the option is live (TF32 output misses the unrounded reference);
split-K bitwise equal to one launch when every sum is exact; serial == batched; the divisibility error."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels import mhc_fused as K
from kernels.mhc import _close


def _ins(seed, N, m, H, dtype="bfloat16"):
    ins = K.big_fuse_inputs(np.random.default_rng(seed), N, m, H, dtype=dtype)
    return (ins[0], ins[1] * 300.0, ins[2] * 10.0, ins[3])  # mixes of order 1 (as test_lib8_mhc_fused.py)


@settings(max_examples=8, deadline=None)
@given(N=st.integers(1, 40), H=st.integers(1, 300), m=st.sampled_from([1, 2, 4]), block_K=st.sampled_from([32, 128]),
       split_pick=st.integers(0, 99), tf32=st.booleans(), dtype=st.sampled_from(["bfloat16", "float32"]),
       seed=st.integers(0, 99))
def test_matches_reference(N, H, m, block_K, split_pick, tf32, dtype, seed):
    tiles = -(-m * H // block_K)
    divisors = [d for d in range(1, tiles + 1) if tiles % d == 0]
    n_splits = divisors[split_pick % len(divisors)]
    ins = _ins(seed, N, m, H, dtype)
    outs = K.mhc_pre_big_fuse(N, m, H, block_N=16, block_K=block_K, block_H=64, dtype=dtype, tf32=tf32,
                              n_splits=n_splits)(*ins)
    _close(1e-4, 1e-5)(list(outs), list(K.ref_pre_big_fuse(*ins, m=m, tf32=tf32)))


def test_tf32_rounding_rule():
    x = np.array([1 + 2.0 ** -11, 1 + 2.0 ** -12, 1 + 2.0 ** -10 + 2.0 ** -11, -(1 + 2.0 ** -11), 3.0, 0.0], np.float32)
    want = np.array([1 + 2.0 ** -10, 1.0, 1 + 2.0 ** -9, -(1 + 2.0 ** -10), 3.0, 0.0], np.float32)
    assert np.array_equal(K.tf32_round(x), want)  # ties away from zero (bits + 0x1000, then truncation)
    assert (K.tf32_round(np.random.default_rng(0).standard_normal(1000).astype(np.float32)).view(np.int32)
            & 0x1FFF == 0).all()


def test_tf32_option_is_live():
    N, m, H = 19, 4, 256
    ins = _ins(1, N, m, H)
    outs = list(K.mhc_pre_big_fuse(N, m, H, block_N=16, block_K=128, block_H=64, tf32=True)(*ins))
    _close(1e-4, 1e-5)(outs, list(K.ref_pre_big_fuse(*ins, m=m, tf32=True)))
    with pytest.raises(AssertionError):
        _close(1e-4, 1e-5)(outs, list(K.ref_pre_big_fuse(*ins, m=m, tf32=False)))


@pytest.mark.parametrize("n_splits", [2, 4, 8])
def test_split_k_is_bitwise_one_launch_when_sums_are_exact(n_splits):
    """Small-integer residuals and fn: every product and partial sum is exact in fp32, so the split order cannot
    change a bit; the outputs equal the one-launch kernel's."""
    N, m, H = 21, 2, 256
    rng = np.random.default_rng(2)
    res, fn, sc, base = _ins(2, N, m, H)
    res = rng.integers(-3, 4, res.shape).astype(np.float32).astype(res.dtype)
    fn = rng.integers(-2, 3, fn.shape).astype(np.float32) * np.float32(2.0 ** -10)
    one = K.mhc_pre_big_fuse(N, m, H, block_N=16, block_K=64, block_H=64)(res, fn, sc, base)
    split = K.mhc_pre_big_fuse(N, m, H, block_N=16, block_K=64, block_H=64, n_splits=n_splits)(res, fn, sc, base)
    for a, b in zip(one, split, strict=True):
        assert np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))


def test_serial_equals_batched():
    N, m, H = 23, 4, 100
    ins = _ins(3, N, m, H)
    kern = K.mhc_pre_big_fuse(N, m, H, block_N=16, block_K=80, block_H=64, tf32=True, n_splits=5)
    for a, b in zip(kern(*ins), kern.run(*ins, options=tilesim.InterpOptions(mode="serial")), strict=True):
        assert np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))


def test_split_count_must_divide_the_k_tiles():
    with pytest.raises(ValueError, match="must divide the 7 K tiles"):
        K.mhc_pre_big_fuse(5, 4, 200, block_K=128, n_splits=2)
