"""mHC multilayer recompute (kernels/mhc_recompute.py, TileKernels' ``mhc_multilayer_recompute``): bit for bit
against the NumPy fp32 operation-order reference and against our ``mhc_pre_apply_mix`` / ``mhc_post`` kernels
chained layer by layer (TileKernels' own test chains its two kernels the same way), on token counts and hidden
sizes the tiles do not divide, ``Lp = L`` and ``Lp = L − 1``; the ValueErrors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels import mhc as U
from kernels import mhc_recompute as K


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint16)


@settings(max_examples=8, deadline=None)
@given(N=st.integers(1, 20), H=st.integers(1, 300), m=st.sampled_from([1, 2, 4]), L=st.integers(1, 4),
       drop_last=st.booleans(), block_N=st.sampled_from([2, 4]), block_H=st.sampled_from([64, 256]),
       seed=st.integers(0, 99))
def test_bitwise_to_fp32_order_reference(N, H, m, L, drop_last, block_N, block_H, seed):
    Lp = L - 1 if drop_last and L > 1 else L
    ins = K.recompute_inputs(np.random.default_rng(seed), N, m, H, L, Lp)
    lin, resid = K.mhc_multilayer_recompute(N, m, H, L, Lp, block_N=block_N, block_H=block_H)(*ins)
    rlin, rresid = K.ref_multilayer_recompute(*ins)
    assert lin.shape == (L, N, H) and resid.shape == (Lp, N, m, H)
    assert np.array_equal(_bits(lin), _bits(rlin))
    assert np.array_equal(_bits(resid), _bits(rresid))


@pytest.mark.parametrize("N,m,H,L,Lp", [(13, 4, 200, 4, 3), (6, 2, 70, 3, 3)])
def test_bitwise_equal_to_unfused_chain(N, m, H, L, Lp):
    res0, pre, out, post, comb = K.recompute_inputs(np.random.default_rng(N), N, m, H, L, Lp)
    lin, resid = K.mhc_multilayer_recompute(N, m, H, L, Lp, block_H=128)(res0, pre, out, post, comb)
    res = res0
    for lay in range(L):
        assert np.array_equal(_bits(lin[lay]), _bits(U.mhc_pre_apply_mix(N, m, H)(res, pre[lay])))
        if lay < Lp:
            res = U.mhc_post(N, m, H)(out[lay], res, post[lay], comb[lay])
            assert np.array_equal(_bits(resid[lay]), _bits(res))


def test_identity_layers_keep_the_residual():
    """Comb = I and Post = 0 at every layer: every residual is Res0, bit for bit."""
    N, m, H, L = 7, 4, 90, 3
    res0, pre, out, post, comb = K.recompute_inputs(np.random.default_rng(1), N, m, H, L, L)
    post[:] = 0.0
    comb[:] = np.eye(m, dtype=np.float32)
    _, resid = K.mhc_multilayer_recompute(N, m, H, L, L, block_H=64)(res0, pre, out, post, comb)
    for lay in range(L):
        assert np.array_equal(_bits(resid[lay]), _bits(res0))


@pytest.mark.parametrize("L,Lp", [(0, 0), (3, 1), (2, 3), (1, 0)])
def test_invalid_layer_counts(L, Lp):
    with pytest.raises(ValueError, match="Lp in"):
        K.mhc_multilayer_recompute(4, 4, 8, L, Lp)
