"""Routed SwiGLU forward + per-token e4m3 cast (kernels/swiglu_moe.py): against the float64 reference on
routings with padding rows and ragged P and H; the clamp counters exactly; padding rows quantise to 0."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels.swiglu_moe import _inputs, compare_routed, ref_swiglu_fp8_routed, swiglu_fp8_routed


@settings(max_examples=8)
@given(T_=st.integers(1, 20), H=st.integers(1, 150), k=st.integers(1, 4), g=st.sampled_from([32, 128]),
       clamp=st.sampled_from([None, 0.5, 7.0]), ue8m0=st.booleans(), in_dtype=st.sampled_from(["bfloat16", "float32"]),
       block_M=st.sampled_from([8, 32]), seed=st.integers(0, 99))
def test_matches_reference(T_, H, k, g, clamp, ue8m0, in_dtype, block_M, seed):
    x, w, slot = _inputs(np.random.default_rng(seed), T_, H, k, 8, 4, in_dtype)
    kern = swiglu_fp8_routed(slot.shape[0], H, T_, k, g, block_M, clamp, in_dtype, ue8m0)
    outs = kern(x, w, slot)
    refs = ref_swiglu_fp8_routed(x, w, slot, g, clamp, ue8m0)
    compare_routed(list(outs), list(refs))
    assert np.all(outs[0].astype(np.float32)[slot < 0] == 0)
    if clamp is None:
        assert outs[2].tolist() == [0, 0, 0]


def test_counts_and_serial():
    x, w, slot = _inputs(np.random.default_rng(3), 11, 70, 3, 8, 8, "float32")
    x[:, :5] = 100.0  # gate above the limit
    x[:, 70:72] = -100.0  # up below -limit
    kern = swiglu_fp8_routed(slot.shape[0], 70, 11, 3, 32, 8, 1.0, "float32")
    q, s, cnt = kern(x, w, slot)
    a, b = x[:, :70], x[:, 70:]
    assert cnt.tolist() == [int((a > 1).sum()), int((b > 1).sum()), int((b < -1).sum())]
    for u, v in zip((q, s, cnt), kern.run(x, w, slot, options=tilesim.InterpOptions(mode="serial"))):
        assert np.array_equal(np.asarray(u).view(np.uint8), np.asarray(v).view(np.uint8))
