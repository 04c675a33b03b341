"""Cast-backs of e4m3 / packed e2m1 / packed E5M6 with block scales in TileKernels' layouts
(kernels/quant_cast_back.py): bitwise (a NaN matching any NaN) against the NumPy reference on shapes the tiles and
blocks do not divide, every format, layout, block shape and output dtype; every code of each format decodes to the
independent ml_dtypes / fp16 value; zeros and −0, ±inf and NaN codes; the inverse of the casts of
kernels/quant_requant.py and kernels/quant_block_sf.py; equal to fp8_dequant_per_token; serial == batched; errors."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels import quant_cast_back as CB
from kernels.fp8_cast import per_token_dequant
from kernels.quant_block_sf import per_block_cast_sf
from kernels.quant_cast import pack_e5m6
from kernels.quant_requant import LAYOUTS, layout_sf, per_token_recast

BLOCKS = [(1, 32), (1, 128), (1, 40), (32, 32), (128, 128), (16, 48)]


def _run(M, N, fmt, xb, lay, od, bm=16, bn=64, seed=0, specials=False, inputs=None, options=None):
    q, s = inputs if inputs is not None else CB.cast_back_inputs(np.random.default_rng(seed), M, N, fmt, xb, lay,
                                                                   specials)
    k = CB.cast_back(M, N, fmt, xb, lay, od, bm, bn)
    y = k(q, s) if options is None else k.run(q, s, options=options)
    CB.compare_values(y, CB.ref_cast_back(q, s, fmt, xb, lay, od))
    return y


@settings(max_examples=12, deadline=None)
@given(M=st.integers(1, 150), n8=st.integers(1, 40), fmt=st.sampled_from(CB.FORMATS), xb=st.sampled_from(BLOCKS),
       lay=st.sampled_from(LAYOUTS), od=st.sampled_from(CB.OUT), bm=st.sampled_from([4, 16, 32]),
       bn=st.sampled_from([8, 64, 128]), specials=st.booleans(), seed=st.integers(0, 999))
def test_matches_reference(M, n8, fmt, xb, lay, od, bm, bn, specials, seed):
    _run(M, 8 * n8, fmt, xb, lay, od, bm, bn, seed, specials)


def test_every_code_decodes_to_its_value():
    """One row per format holding every code, scale 1: the output is ml_dtypes' (e4m3, e2m1) or fp16's (E5M6)."""
    e4 = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).reshape(1, 256)
    y = CB.cast_back(1, 256, "e4m3", (1, 32), "rows", "float32", 1, 64)(e4, np.ones((1, 8), np.float32))
    CB.compare_values(y, e4.astype(np.float32))
    codes = np.arange(256, dtype=np.uint8)  # every byte: all 16 x 16 nibble pairs
    y = CB.cast_back(1, 512, "e2m1", (1, 32), "rows", "float32", 1, 64)(codes.view(np.int8).reshape(1, 256),
                                                                         np.ones((1, 16), np.float32))
    nib = np.stack([codes & 0xF, codes >> 4], -1).reshape(1, 512).astype(np.uint8)
    assert np.array_equal(y.view(np.uint32), nib.view(ml_dtypes.float4_e2m1fn).astype(np.float32).view(np.uint32))
    c = np.arange(4096, dtype=np.uint32).reshape(1, 4096)
    y = CB.cast_back(1, 4096, "e5m6", (1, 4096), "rows", "float32", 1, 256)(pack_e5m6(c), np.ones((1, 1), np.float32))
    want = (c.astype(np.uint16) << 4).view(np.float16).astype(np.float32)
    CB.compare_values(y, want)
    assert np.isinf(y).sum() == 2 and np.isnan(y).sum() == 2 * 63 and np.signbit(y[0, 2048])  # ±inf, NaNs, −0


@pytest.mark.parametrize("fmt", CB.FORMATS)
@pytest.mark.parametrize("lay", LAYOUTS)
def test_inverts_the_per_token_cast(fmt, lay):
    """cast_back(recast(x)) is within the format's error of x: at most half a step at the group's largest value,
    times 2 for the power-of-two scale (e4m3 16/448, e2m1 1/6, E5M6 256/65024 of the group maximum, doubled)."""
    M, N, g = 37, 200, 40
    x = (np.random.default_rng(1).standard_normal((M, N)) * 3).astype(np.float32)
    x[0] = 0.0
    if fmt == "e2m1":
        g = 20
    q, s = per_token_recast(M, N, "float32", fmt, g, None, True, "rows", lay, 4)(x)
    y = _run(M, N, fmt, (1, g), lay, "float32", inputs=(q, s))
    gmax = np.repeat(np.abs(x).reshape(M, -1, g).max(axis=2), g, axis=1)
    rel = {"e4m3": 2 * 16 / 448, "e2m1": 2 / 6, "e5m6": 2 * 256 / 65024}[fmt]
    assert not np.any(y[0]) and np.all(np.abs(y - x) <= gmax * rel * (1 + 1e-6))


@pytest.mark.parametrize("fmt", ["e4m3", "e2m1"])
def test_inverts_the_per_block_cast(fmt):
    M, N, blk = 150, 200, (128, 32)
    x = (np.random.default_rng(2).standard_normal((M, N)) * 3).astype(np.float32)
    x[-1, -1] = -0.0
    q, s = per_block_cast_sf(M, N, fmt, blk, True, "tma", "float32")(x)
    y = _run(M, N, fmt, blk, "tma", "float32", inputs=(q, s))
    assert np.signbit(y[-1, -1]) and y[-1, -1] == 0


def test_equals_fp8_dequant_per_token():
    M, N = 70, 384
    q, s = CB.cast_back_inputs(np.random.default_rng(3), M, N, "e4m3", (1, 128), "rows")
    assert np.array_equal(CB.cast_back(M, N, "e4m3", (1, 128), "rows", "bfloat16")(q, s).view(np.uint16),
                          per_token_dequant(M, N, 128)(q, s).view(np.uint16))


def test_zeros_and_saturating_products():
    """Zero codes give ±0; the fp32 product overflows to inf where the scale is huge (bf16 then inf too)."""
    M, N = 5, 64
    c = np.zeros((M, N), np.uint32)
    c[1] = 0x800  # −0
    c[2] = (30 << 6) | 63  # 65024
    s = np.ones((M, 1), np.float32)
    s[2] = 2.0 ** 120
    y = _run(M, N, "e5m6", (1, 64), "rows", "bfloat16", inputs=(pack_e5m6(c), s))
    y = y.astype(np.float32)
    assert not y[:2].any() and np.signbit(y[1]).all() and not np.signbit(y[0]).any() and np.isposinf(y[2]).all()


def test_serial_equals_batched():
    q, s = CB.cast_back_inputs(np.random.default_rng(4), 37, 200, "e2m1", (32, 32), "tma_ue8m0")
    k = CB.cast_back(37, 200, "e2m1", (32, 32), "tma_ue8m0", "bfloat16", 16, 64)
    a = k.run(q, s, options=tilesim.InterpOptions(mode="serial"))
    assert np.array_equal(a.view(np.uint16), k(q, s).view(np.uint16))


@pytest.mark.parametrize("kw,msg", [({"in_fmt": "e3m2"}, "in_fmt"), ({"in_layout": "cols"}, "in_layout"),
                                    ({"out_dtype": "float16"}, "out_dtype"), ({"x_block": (0, 32)}, "x_block"),
                                    ({"in_fmt": "e5m6", "N": 100}, "multiples of 8"),
                                    ({"in_fmt": "e2m1", "N": 63}, "multiples of 2")])
def test_build_errors(kw, msg):
    args = {"M": 8, "N": 64, **kw}
    with pytest.raises(ValueError, match=msg):
        CB.cast_back(**args)


def test_layout_storage_round_trip():
    """The scale storage the inputs use is the module layouts' (the three hold the same logical scales)."""
    s = np.ldexp(np.float32(1), np.arange(-5, 7).reshape(3, 4)).astype(np.float32)
    q, _ = CB.cast_back_inputs(np.random.default_rng(5), 70, 128, "e4m3", (32, 32), "rows")
    outs = [CB.cast_back(70, 128, "e4m3", (32, 32), lay, "float32")(q, layout_sf(s, lay)) for lay in LAYOUTS]
    assert all(np.array_equal(o.view(np.uint32), outs[0].view(np.uint32)) for o in outs)
