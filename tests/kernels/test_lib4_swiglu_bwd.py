"""SwiGLU backward fused with the per-token e4m3 cast of the gradient (kernels/swiglu_bwd.py).

Against the fp32 NumPy reference (the module's tolerances) on routings with unused slots, padding rows
and token counts the blocks do not divide; the reference's gradient against float64 central differences
of ``w · silu(x) · y`` (so the formula is the derivative, not just the same code twice); clamping,
padding rows, unused slots and invalid group sizes explicitly.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels.swiglu_bwd import compare_swiglu_backward, ref_swiglu_backward, routed_inputs, swiglu_backward


def _run(rng, T_, H, k, E, align, c, clamp=None, ue8m0=False, grad_dtype="bfloat16", block_M=16, block_T=32,
         drop=0.1):
    ins = routed_inputs(rng, T_, H, k, E, align, c, grad_dtype=grad_dtype, drop=drop)
    kern = swiglu_backward(ins[0].shape[0], H, T_, k, num_per_channels=c, block_M=block_M, block_T=block_T,
                           clamp_limit=clamp, grad_dtype=grad_dtype, use_ue8m0=ue8m0)
    outs = kern(*ins)
    refs = ref_swiglu_backward(*ins, num_per_channels=c, clamp_limit=clamp, use_ue8m0=ue8m0)
    return kern, ins, outs, refs


@settings(max_examples=8)
@given(T_=st.integers(1, 20), hc=st.integers(1, 3), k=st.integers(1, 4), c=st.sampled_from([32, 128]),
       clamp=st.sampled_from([None, 0.5, 10.0]), ue8m0=st.booleans(), grad_dtype=st.sampled_from(["bfloat16", "float32"]),
       block_M=st.sampled_from([4, 16]), block_T=st.sampled_from([8, 32]), seed=st.integers(0, 99))
def test_matches_reference(T_, hc, k, c, clamp, ue8m0, grad_dtype, block_M, block_T, seed):
    _, ins, outs, refs = _run(np.random.default_rng(seed), T_, hc * c, k, 8, 4, c, clamp, ue8m0, grad_dtype,
                              block_M, block_T, drop=0.3)
    compare_swiglu_backward(list(outs), list(refs))
    assert not any(np.isnan(np.asarray(o, np.float32)).any() for o in outs)  # every entry written


def test_gradient_is_the_derivative():
    """dx, dy and Wgrad against float64 central differences of L = Σ g · w · silu(x) · y."""
    rng = np.random.default_rng(3)
    T_, H, k, c = 6, 64, 2, 32
    _, (xq, xs, g, w, slot, t2p), outs, _ = _run(rng, T_, H, k, 4, 4, c, grad_dtype="float32", drop=0.0)
    xf = xq.astype(np.float64) * np.repeat(xs.astype(np.float64), c, axis=1)
    wr = np.where(slot >= 0, w.reshape(-1)[np.maximum(slot, 0)], 0.0)[:, None].astype(np.float64)

    def loss_terms(x, y, wv):
        return g.astype(np.float64) * wv * x / (1 + np.exp(-x)) * y

    h = 1e-6
    x, y = xf[:, :H], xf[:, H:]
    dx = (loss_terms(x + h, y, wr) - loss_terms(x - h, y, wr)) / (2 * h)
    dy = (loss_terms(x, y + h, wr) - loss_terms(x, y - h, wr)) / (2 * h)
    np.testing.assert_allclose(outs[3][:, :H], dx, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(outs[3][:, H:], dy, rtol=1e-4, atol=1e-5)
    dw = ((loss_terms(x, y, wr + h) - loss_terms(x, y, wr - h)) / (2 * h)).sum(axis=1)
    want = np.where(t2p >= 0, dw[np.maximum(t2p, 0)], 0.0)
    np.testing.assert_allclose(outs[4], want, rtol=1e-4, atol=1e-4)
    assert np.abs(want).max() > 0.1


def test_clamp_padding_rows_and_unused_slots():
    rng = np.random.default_rng(5)
    _, (xq, xs, g, w, slot, t2p), outs, _ = _run(rng, 11, 64, 3, 8, 8, 32, clamp=0.5, drop=0.4)
    out, gq, gs, gx, wg = (np.asarray(o, np.float32) for o in outs)
    pad = slot < 0
    assert pad.any() and (t2p < 0).any()
    assert np.all(out[pad] == 0) and np.all(gx[pad] == 0) and np.all(gq.astype(np.float32)[pad] == 0)
    assert np.all(wg[t2p < 0] == 0)
    xf = xq.astype(np.float32) * np.repeat(xs, 32, axis=1)
    assert np.all(gx[:, :64][xf[:, :64] > 0.5] == 0) and (xf[:, :64] > 0.5).any()
    assert np.all(gx[:, 64:][np.abs(xf[:, 64:]) > 0.5] == 0)


def test_invalid_group_raises():
    with pytest.raises(ValueError, match="must divide H"):
        swiglu_backward(32, 96, 4, 2, num_per_channels=128)


def test_serial_equals_batched():
    kern, ins, outs, _ = _run(np.random.default_rng(7), 9, 64, 2, 4, 4, 32, clamp=10.0, block_M=4, block_T=8)
    for a, b in zip(outs, kern.run(*ins, options=tilesim.InterpOptions(mode="serial"))):
        assert np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))
