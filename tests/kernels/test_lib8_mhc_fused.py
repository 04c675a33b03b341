"""mHC's fused pre block (kernels/mhc_fused.py, TileKernels' ``mhc_pre_big_fuse``): against the float64 chain of
the four unfused references on token counts and hidden sizes the tiles do not divide, bit for bit against our
four unfused kernels chained (same fp32 op order), the Sinkhorn invariant of Comb, and the ValueErrors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels import mhc as U
from kernels import mhc_fused as K
from kernels.sinkhorn import sinkhorn
from tilesim.testing.compare import compare_arrays


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view({2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


@settings(max_examples=8, deadline=None)
@given(N=st.integers(1, 70), H=st.integers(1, 300), m=st.sampled_from([1, 2, 4]),
       dtype=st.sampled_from(["bfloat16", "float32"]), block_N=st.sampled_from([16, 32]),
       block_K=st.sampled_from([32, 128]), block_H=st.sampled_from([64, 256]), repeat=st.sampled_from([1, 3, 10]),
       post_mult=st.sampled_from([1.0, 2.0]), seed=st.integers(0, 99))
def test_matches_reference(N, H, m, dtype, block_N, block_K, block_H, repeat, post_mult, seed):
    rng = np.random.default_rng(seed)
    ins = K.big_fuse_inputs(rng, N, m, H, dtype=dtype)
    ins = (ins[0], ins[1] * 300.0, ins[2] * 10.0, ins[3])  # mixes of order 1: sigmoid and Sinkhorn away from 0.5/1/m
    outs = K.mhc_pre_big_fuse(N, m, H, post_mult=post_mult, repeat=repeat, block_N=block_N, block_K=block_K,
                              block_H=block_H, dtype=dtype)(*ins)
    refs = K.ref_pre_big_fuse(*ins, m=m, post_mult=post_mult, repeat=repeat)
    assert [o.shape for o in outs] == [(N, m), (N, m, m), (N, H)]
    assert outs[2].dtype == ins[0].dtype
    for name, o, r in zip(("Post", "Comb", "Out"), outs, refs, strict=True):
        rtol = 2.0 ** -7 if o.dtype != np.float32 or (name == "Out" and dtype == "bfloat16") else 1e-4
        msg = compare_arrays(o, r, rtol=rtol, atol=1e-5, name=name)
        assert msg is None, msg
    # Sinkhorn ends on a column step: every column of Comb sums to 1 (up to eps and rounding)
    assert np.allclose(outs[1].sum(axis=1), 1.0, atol=1e-4)


@pytest.mark.parametrize("N,m,H,block_K", [(37, 4, 200, 128), (5, 2, 70, 32), (19, 4, 7168 // 28, 64)])
def test_bitwise_equal_to_unfused_chain(N, m, H, block_K):
    rng = np.random.default_rng(N)
    res, fn, sc, base = K.big_fuse_inputs(rng, N, m, H)
    fn = fn * 300.0
    post, comb, out = K.mhc_pre_big_fuse(N, m, H, post_mult=2.0, block_N=16, block_K=block_K, block_H=64)(res, fn, sc,
                                                                                                            base)
    mixes = U.mhc_pre_norm_fn(N, m * H, m * (2 + m), block_N=16, block_K=block_K)(res, fn)
    upre, upost, ucomb = U.mhc_pre_split_mixes(N, m, post_mult=2.0)(mixes, sc, base)
    ucomb = sinkhorn(N, m, m)(ucomb)
    uout = U.mhc_pre_apply_mix(N, m, H)(res.reshape(N, m, H), upre)
    for o, u in ((post, upost), (comb, ucomb), (out, uout)):
        assert np.array_equal(_bits(o), _bits(u))


def test_one_hot_pre_selects_a_stream():
    """With pre_eps 0, Base pushes one pre logit to +60 (sigmoid 1.0 in fp32) and the rest to -60 (~1e-26): Out is
    that stream bit for bit."""
    N, m, H = 9, 4, 130
    rng = np.random.default_rng(3)
    res, fn, sc, base = K.big_fuse_inputs(rng, N, m, H)
    fn[:m] = 0.0
    base[:m] = -60.0
    base[2] = 60.0
    out = K.mhc_pre_big_fuse(N, m, H, pre_eps=0.0, block_H=64)(res, fn, sc, base)[2]
    assert np.array_equal(_bits(out), _bits(res.reshape(N, m, H)[:, 2]))


def test_invalid():
    with pytest.raises(ValueError, match="32-wide"):
        K.mhc_pre_big_fuse(4, 5, 8)
    with pytest.raises(ValueError, match="repeat"):
        K.mhc_pre_big_fuse(4, 4, 8, repeat=0)
