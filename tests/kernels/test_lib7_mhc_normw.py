"""The mHC norm-weight gradient (kernels/mhc_normw.py): bitwise against the fp32 row-order reference on shapes the
column tile does not divide, within fp32 rounding of the float64 gradient, the accumulation form, the adjoint
identity of the elementwise forward, NaN confinement, serial == batched, and the block-size check."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels import mhc_normw as K


def _same(a, b):
    return np.array_equal(np.asarray(a).view(np.uint32), np.asarray(b).view(np.uint32))


@settings(max_examples=8, deadline=None)
@given(M=st.integers(1, 30), Kc=st.integers(1, 700), block_K=st.sampled_from([32, 64, 256]),
       accumulate=st.booleans(), seed=st.integers(0, 999))
def test_matches_row_order_reference(M, Kc, block_K, accumulate, seed):
    ins = K.normw_inputs(np.random.default_rng(seed), M, Kc, accumulate)
    fng, wg = K.mhc_fn_normw_bwd(M, Kc, accumulate, block_K=block_K)(*ins)
    rfng, rwg = K.ref_fn_normw_bwd(*ins)
    assert _same(fng, rfng) and _same(wg, rwg)
    f64, w64 = K.ref_fn_normw_bwd64(*ins)
    scale = (np.abs(ins[2]) * np.abs(ins[0])).sum(axis=0) + (np.abs(ins[4]) if accumulate else 0)
    assert (np.abs(wg - w64) <= 2 * M * 2.0 ** -24 * scale + 1e-30).all()
    fscale = np.abs(ins[2] * ins[1][None, :]).astype(np.float64) + (np.abs(ins[3]) if accumulate else 0)
    assert (np.abs(fng - f64) <= 2.0 ** -23 * fscale).all()


def test_adjoint_identity_and_nan():
    rng = np.random.default_rng(3)
    M, Kc = 24, 1000
    fn, w, g = K.normw_inputs(rng, M, Kc)
    fng, wg = K.mhc_fn_normw_bwd(M, Kc)(fn, w, g)
    f64, w64, g64 = (a.astype(np.float64) for a in (fn, w, g))
    lhs = (g64 * f64 * w64).sum()  # <G, Fn*w> = <FnG, Fn> = <WG, w>
    bound = 1e-5 * (np.abs(g64 * f64 * w64)).sum()
    assert abs((fng * f64).sum() - lhs) <= bound and abs((wg * w64).sum() - lhs) <= bound
    fn[5, 17] = np.nan
    fng, wg = K.mhc_fn_normw_bwd(M, Kc)(fn, w, g)
    assert np.isnan(wg[17]) and np.isfinite(np.delete(wg, 17)).all() and np.isfinite(fng).all()


def test_zero_gradient_keeps_main_grad_bits():
    rng = np.random.default_rng(4)
    M, Kc = 6, 130
    fn, w, _, fng0, wg0 = K.normw_inputs(rng, M, Kc, True)
    fng, wg = K.mhc_fn_normw_bwd(M, Kc, True, block_K=64)(fn, w, np.zeros((M, Kc), np.float32), fng0, wg0)
    assert _same(fng, fng0) and _same(wg, wg0)


def test_serial_equals_batched_and_block_check():
    ins = K.normw_inputs(np.random.default_rng(9), 5, 333, True)
    k = K.mhc_fn_normw_bwd(5, 333, True, block_K=128)
    for a, b in zip(k(*ins), k.run(*ins, options=tilesim.InterpOptions(mode="serial")), strict=True):
        assert _same(a, b)
    with pytest.raises(ValueError, match="power of two"):
        K.mhc_fn_normw_bwd(4, 100, block_K=96)
