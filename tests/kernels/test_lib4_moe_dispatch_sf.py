"""MoE dispatch/combine with scale factors (kernels/moe_dispatch_sf.py): bitwise against the NumPy
references (the reference emulates the kernel's fp32 order) on random routings with unused slots,
padding rows and ragged T, H and P; the combine also against a float64 sum (the math, not the order)."""

import ml_dtypes
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.moe_dispatch import fused_mapping, routed_topk
from kernels.moe_dispatch_sf import (
    expand_to_fused_sf,
    reduce_fused_sf,
    ref_expand_to_fused_sf,
    ref_reduce_fused_sf,
)

E4M3 = ml_dtypes.float8_e4m3fn


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


def _routing(rng, T_, E, k, align, drop):
    return fused_mapping(routed_topk(rng, T_, E, k, drop=drop), E, align)


@settings(max_examples=8)
@given(T_=st.integers(1, 30), H=st.integers(1, 150), E=st.integers(2, 12), data=st.data(), group=st.sampled_from([32, 128]),
       block_P=st.sampled_from([4, 16]), block_H=st.sampled_from([32, 64]), seed=st.integers(0, 99))
def test_expand_with_sf_bitwise(T_, H, E, data, group, block_P, block_H, seed):
    k = data.draw(st.integers(1, E))
    rng = np.random.default_rng(seed)
    _, p2t, _ = _routing(rng, T_, E, k, 4, 0.3)
    bits = rng.integers(0, 256, (T_, H), dtype=np.uint8)  # every e4m3 pattern, NaN included: bytes move
    x = bits.view(E4M3)
    sf = rng.standard_normal((T_, -(-H // group))).astype(np.float32)
    y, ysf = expand_to_fused_sf(T_, H, sf.shape[1], p2t.shape[0], block_P=block_P, block_H=block_H)(x, sf, p2t)
    ry, rysf = ref_expand_to_fused_sf(x, sf, p2t)
    assert np.array_equal(_bits(y), _bits(ry)) and np.array_equal(_bits(ysf), _bits(rysf))
    assert np.all(_bits(y)[p2t < 0] == 0) and np.all(ysf[p2t < 0] == 0)


@settings(max_examples=10)
@given(T_=st.integers(1, 30), H=st.integers(1, 150), E=st.integers(2, 12), data=st.data(),
       flags=st.tuples(st.booleans(), st.booleans(), st.booleans()),
       io=st.sampled_from([("float8_e4m3fn", None), ("float8_e4m3fn", "bfloat16"), ("bfloat16", None),
                           ("bfloat16", "float8_e4m3fn"), ("float32", None)]),
       block_T=st.sampled_from([1, 4, 8]), seed=st.integers(0, 99))
def test_reduce_with_sf(T_, H, E, data, flags, io, block_T, seed):
    k = data.draw(st.integers(1, E))
    use_w, use_sf, use_g = flags
    dtype, out_dtype = io
    rng = np.random.default_rng(seed)
    t2p, p2t, _ = _routing(rng, T_, E, k, 4, 0.3)
    P = p2t.shape[0]
    x = (rng.standard_normal((P, H)) * 3).astype(np.float32)
    x = np.clip(x, -448, 448).astype(E4M3) if dtype == "float8_e4m3fn" else x.astype(np.dtype(getattr(ml_dtypes, dtype, dtype)))
    w = rng.random((T_, k)).astype(np.float32)
    xsf = (rng.random(P) * 0.5).astype(np.float32)
    g = np.array([0.4375], np.float32)
    kern = reduce_fused_sf(P, H, T_, k, use_w, use_sf, use_g, dtype=dtype, out_dtype=out_dtype, block_T=block_T, block_H=32)
    out = kern(x, w, xsf, g, t2p)
    ref = ref_reduce_fused_sf(x, w, xsf, g, t2p, use_w, use_sf, use_g, dtype=dtype, out_dtype=out_dtype)
    assert out.dtype == ref.dtype and np.array_equal(_bits(out), _bits(ref))
    # the math in float64: sum over valid slots of x · w · xsf, times the global scale
    s = (w if use_w else np.ones_like(w)).astype(np.float64)
    if use_sf:
        s = s * np.where(t2p >= 0, xsf[np.maximum(t2p, 0)], 0.0)
    want = np.einsum("tkh,tk->th", np.where((t2p >= 0)[..., None], x.astype(np.float64)[np.maximum(t2p, 0)], 0.0), s)
    want = want * (0.4375 if use_g else 1.0)
    lim = 448.0 if (out_dtype or dtype) == "float8_e4m3fn" else np.inf
    rel = {"float8_e4m3fn": 2.0 ** -3, "bfloat16": 2.0 ** -7, "float32": 1e-5}[out_dtype or dtype]
    np.testing.assert_allclose(out.astype(np.float64), np.clip(want, -lim, lim), rtol=rel, atol=2.0 ** -8)
