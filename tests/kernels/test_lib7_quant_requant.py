"""Requantising per-token casts and the TMA-aligned / packed-UE8M0 scale layouts (kernels/quant_requant.py): bitwise
against the NumPy reference (ml_dtypes conversions) on shapes neither the row tile nor the groups divide, every
input format and scale layout; the layouts' storage round trip and zero padding; dequantised outputs within half
a quantisation step of the input; serial == batched; the build-time errors."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels import quant_requant as K


def _run(M, N, in_fmt, fmt, gs, xb, rsf, il, sl, block_M, seed):
    ins = K.recast_inputs(np.random.default_rng(seed), M, N, in_fmt, xb or (1, 1), il)
    out = K.per_token_recast(M, N, in_fmt, fmt, gs, xb, rsf, il, sl, block_M=block_M)(*ins)
    ref = K.ref_recast(*ins, in_fmt=in_fmt, fmt=fmt, group_size=gs, x_block=xb, round_sf=rsf, in_layout=il,
                       sf_layout=sl)
    K.compare_bitwise(out, ref)
    return ins, out


@settings(max_examples=10, deadline=None)
@given(M=st.integers(1, 70), half_n=st.integers(1, 150), in_fmt=st.sampled_from(["e4m3", "e2m1", "bfloat16", "float32"]),
       fmt=st.sampled_from(["e4m3", "e2m1"]), gs=st.sampled_from([32, 64, 128]),
       xb=st.sampled_from([(128, 128), (32, 32), (1, 32)]), il=st.sampled_from(K.LAYOUTS),
       sl=st.sampled_from(K.LAYOUTS), rsf=st.booleans(), block_M=st.sampled_from([4, 8, 32]), seed=st.integers(0, 999))
def test_matches_reference(M, half_n, in_fmt, fmt, gs, xb, il, sl, rsf, block_M, seed):
    plain = in_fmt in K.PLAIN
    _run(M, 2 * half_n, in_fmt, fmt, gs, None if plain else xb, rsf or sl == "tma_ue8m0", "rows" if plain else il, sl,
         block_M, seed)


def test_layout_storage_round_trip_and_padding():
    rng = np.random.default_rng(1)
    S = np.exp2(rng.integers(-20, 20, (13, 7))).astype(np.float32)
    for lay in K.LAYOUTS:
        st_ = K.layout_sf(S, lay)
        assert st_.shape == K.sf_storage(13, 7, lay)[0]
        assert np.array_equal(K.logical_sf(st_, 13, 7, lay), S)
    tma = K.layout_sf(S, "tma")
    assert (tma[:, 13:] == 0).all() and np.array_equal(tma[:, :13], S.T)
    words = K.layout_sf(S, "tma_ue8m0").view(np.int32)  # TileKernels' int32 words, column-major storage
    assert words.shape == (2, 16) and (words[:, 13:] == 0).all()
    assert words[1, 4] == (int(np.log2(S[4, 4])) + 127) | ((int(np.log2(S[4, 5])) + 127) << 8) | ((int(np.log2(S[4, 6])) + 127) << 16)


def test_kernel_layouts_store_the_same_scales():
    M, N = 29, 330
    (x,) = K.recast_inputs(np.random.default_rng(2), M, N, "bfloat16")
    outs = {lay: K.per_token_recast(M, N, "bfloat16", "e4m3", 64, None, True, "rows", lay, block_M=8)(x)
            for lay in K.LAYOUTS}
    G = -(-N // 64)
    for lay, (q, s) in outs.items():
        assert np.array_equal(q.view(np.uint8), outs["rows"][0].view(np.uint8))
        assert np.array_equal(K.logical_sf(s, M, G, lay), outs["rows"][1])


@pytest.mark.parametrize("in_fmt,fmt", [("e4m3", "e4m3"), ("e2m1", "e4m3"), ("e4m3", "e2m1")])
def test_requantised_values_stay_close(in_fmt, fmt):
    M, N, gs = 40, 256, 32
    ins, (q, s) = _run(M, N, in_fmt, fmt, gs, (32, 32), True, "rows", "rows", 8, 5)
    x = K.dequant(*ins, (32, 32), in_fmt)
    y = K.dequant(q, s, (1, gs), fmt)
    # half the coarsest step of the output format at the group's scale: e2m1 4 -> 6 (1·S), e4m3 256 -> 288 (16·S)
    step = np.repeat(s, gs, axis=1)[:, :N] * (1.0 if fmt == "e2m1" else 16.0)
    assert (np.abs(y - x) <= step + 1e-30).all()


def test_serial_equals_batched():
    ins = K.recast_inputs(np.random.default_rng(3), 21, 130, "e2m1", (32, 32), "tma_ue8m0")
    k = K.per_token_recast(21, 130, "e2m1", "e2m1", 32, (32, 32), True, "tma_ue8m0", "tma_ue8m0", block_M=8)
    for a, b in zip(k(*ins), k.run(*ins, options=tilesim.InterpOptions(mode="serial")), strict=True):
        assert np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))


def test_negative_zero_and_saturation():
    q = np.array([[0.0, -0.0, 448.0, -448.0]], np.float32).astype(ml_dtypes.float8_e4m3fn)
    s = np.array([[2.0]], np.float32)
    oq, os_ = K.per_token_recast(1, 4, "e4m3", "e2m1", 4, (1, 4), True, block_M=4)(q, s)
    rq, rs = K.ref_recast(q, s, in_fmt="e4m3", fmt="e2m1", group_size=4, x_block=(1, 4))
    assert oq.tobytes() == rq.tobytes() and os_.tobytes() == rs.tobytes()
    assert (oq.view(np.uint8)[0, 0] >> 4) == 8  # -0 keeps its sign as e2m1 code 8


@pytest.mark.parametrize("kw,match", [
    (dict(in_fmt="int8"), "in_fmt"), (dict(fmt="e5m2"), "fmt"), (dict(sf_layout="cols"), "sf_layout"),
    (dict(N=201), "even N"), (dict(x_block=None), "x_block"), (dict(sf_layout="tma_ue8m0", round_sf=False), "round_sf"),
    (dict(sf_layout="tma", block_M=6), "multiple of 4")])
def test_build_errors(kw, match):
    args = dict(M=8, N=200, in_fmt="e4m3", fmt="e2m1", group_size=32, x_block=(32, 32), round_sf=True,
                in_layout="rows", sf_layout="rows", block_M=8)
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        K.per_token_recast(**args)
