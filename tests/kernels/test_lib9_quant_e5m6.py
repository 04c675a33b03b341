"""E5M6 output of the per-token (re)quantising cast (kernels/quant_requant.py, ``fmt="e5m6"``; registry
``quant_requant_e5m6``): bitwise against the NumPy reference on shapes neither the row tile nor the groups divide,
every input format and scale layout; decoded codes within half an E5M6 step of the input; TileKernels' E5M6 edge
values, zeros, −0 and the largest value; serial == batched; the build-time errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels import quant_requant as K


def _run(M, N, in_fmt, gs, xb, rsf, il, sl, block_M, seed=0, x=None):
    ins = (x,) if x is not None else K.recast_inputs(np.random.default_rng(seed), M, N, in_fmt, xb or (1, 1), il)
    kern = K.per_token_recast(M, N, in_fmt, "e5m6", gs, xb, rsf, il, sl, block_M=block_M)
    out = kern(*ins)
    ref = K.ref_recast(*ins, in_fmt=in_fmt, fmt="e5m6", group_size=gs, x_block=xb, round_sf=rsf, in_layout=il,
                       sf_layout=sl)
    K.compare_bitwise(out, ref)
    return ins, out, kern


def _decode(words):
    """fp32 values of packed E5M6 words (M, 3k): each 12-bit code is the top of an fp16 bit pattern."""
    w = np.asarray(words, np.uint64).reshape(words.shape[0], -1, 3)
    w0, w1, w2 = w[..., 0], w[..., 1], w[..., 2]
    codes = [w0 >> 20, w0 >> 8, (w0 << 4) | (w1 >> 28), w1 >> 16, w1 >> 4, (w1 << 8) | (w2 >> 24), w2 >> 12, w2]
    c = np.stack([x & np.uint64(0xFFF) for x in codes], axis=-1).reshape(words.shape[0], -1)
    return (c << np.uint64(4)).astype(np.uint16).view(np.float16).astype(np.float32)


@settings(max_examples=10, deadline=None)
@given(M=st.integers(1, 40), k=st.integers(1, 40), gk=st.integers(1, 24),
       in_fmt=st.sampled_from(["e4m3", "e2m1", "bfloat16", "float32"]),
       xb=st.sampled_from([(128, 128), (32, 32), (1, 32)]), il=st.sampled_from(K.LAYOUTS),
       sl=st.sampled_from(K.LAYOUTS), rsf=st.booleans(), block_M=st.sampled_from([4, 8, 16]), seed=st.integers(0, 999))
def test_matches_reference(M, k, gk, in_fmt, xb, il, sl, rsf, block_M, seed):
    plain = in_fmt in K.PLAIN
    N = 8 * k
    _run(M, N, in_fmt, min(8 * gk, N), None if plain else xb, rsf or sl == "tma_ue8m0", "rows" if plain else il, sl,
         block_M, seed)


@pytest.mark.parametrize("rsf", [True, False])
def test_decoded_values_within_half_a_step(rsf):
    M, N, gs = 19, 208, 64
    ins, (q, s), _ = _run(M, N, "bfloat16", gs, None, rsf, "rows", "rows", 8, seed=4)
    x = np.asarray(ins[0], np.float32)
    S = np.repeat(s, gs, axis=1)[:, :N]
    y = _decode(q) * S
    # 6 mantissa bits: half a step is 2^-7 of the scaled value's binade (fp16 subnormals: a fixed step 2^-20)
    v = np.abs(x) / S
    half = np.maximum(np.exp2(np.floor(np.log2(np.maximum(v, 1e-30)))) * 2.0 ** -7, 2.0 ** -21) * S
    assert (np.abs(y - x) <= half * 1.001).all()


@pytest.mark.parametrize("v", [2.0 ** -20, 2.0 ** -14 * 63 / 64, 2.0 ** -14])
def test_tilekernels_edge_values(v):
    x = np.full((13, 72), v, np.float32)
    x[:, -1] = 65024.0  # amax 65024: S = 1, so v itself is quantised (fp16 subnormal / min normal)
    _, (q, s), _ = _run(13, 72, "float32", 72, None, True, "rows", "tma_ue8m0", 4, x=x)
    d = _decode(q)
    assert (d[:, -1] == 65024.0).all() and (d[:, :-1] == np.float32(v)).all()


def test_zeros_negative_zero_and_all_zero_row():
    x = np.zeros((5, 16), np.float32)
    x[0, 1] = -0.0
    x[2] = np.linspace(-3, 3, 16)
    _, (q, s), _ = _run(5, 16, "float32", 16, None, True, "rows", "rows", 4, x=x)
    d = _decode(q)
    assert (d[[0, 1, 3, 4]] == 0).all() and np.signbit(d[0, 1]) and not np.signbit(d[0, 0])
    # an all-zero row takes the floor 1e-4 / 65024 rounded up to a power of two
    assert s[1, 0] == np.float32(2.0 ** np.ceil(np.log2(np.float32(1e-4) / np.float32(65024.0))))


def test_serial_equals_batched():
    ins, out, kern = _run(21, 136, "e2m1", 40, (32, 32), True, "tma_ue8m0", "tma_ue8m0", 8, seed=3)
    for a, b in zip(out, kern.run(*ins, options=tilesim.InterpOptions(mode="serial")), strict=True):
        assert np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))


@pytest.mark.parametrize("kw,match", [(dict(N=204), "multiples of 8"), (dict(group_size=36), "multiples of 8"),
                                      (dict(fmt="e5m7"), "fmt")])
def test_build_errors(kw, match):
    args = dict(M=8, N=200, in_fmt="bfloat16", fmt="e5m6", group_size=40, x_block=None, round_sf=True,
                in_layout="rows", sf_layout="rows", block_M=8)
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        K.per_token_recast(**args)
