"""Per-block (2-D) casts with TileKernels' scale layouts (kernels/quant_block_sf.py): bitwise against the NumPy
reference on shapes the blocks do not divide (every format, block shape, layout, input dtype, ``round_sf``); every
byte of the scale storage written (padding rows, unused UE8M0 bytes: ``uninit="check"``); the three layouts hold the
same scales; equal to ``fp8_cast_per_block`` in the row-major layout; zeros, saturation, −0; serial == batched;
build errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels import quant_block_sf as B
from kernels.fp8_cast import per_block_cast
from kernels.quant_requant import LAYOUTS, compare_bitwise, logical_sf

BLOCKS = [(32, 32), (128, 128), (32, 128), (128, 32), (16, 48)]


def _run(M, N, fmt, block, rsf, lay, dt, seed=0, x=None, options=None):
    (x,) = (x,) if x is not None else B.block_inputs(np.random.default_rng(seed), M, N, dt)
    kern = B.per_block_cast_sf(M, N, fmt, block, rsf, lay, dt)
    out = kern(x) if options is None else kern.run(x, options=options)
    compare_bitwise(out, B.ref_block_cast(x, fmt, block, rsf, lay))
    return x, out


@settings(max_examples=10, deadline=None)
@given(M=st.integers(1, 300), half_n=st.integers(1, 200), fmt=st.sampled_from(["e4m3", "e2m1"]),
       block=st.sampled_from(BLOCKS), lay=st.sampled_from(LAYOUTS), rsf=st.booleans(),
       dt=st.sampled_from(["bfloat16", "float32"]), seed=st.integers(0, 999))
def test_matches_reference(M, half_n, fmt, block, lay, rsf, dt, seed):
    _run(M, 2 * half_n, fmt, block, rsf or lay == "tma_ue8m0", lay, dt, seed)


@pytest.mark.parametrize("M,N,block", [(37, 200, (32, 32)), (129, 70, (128, 32)), (5, 520, (32, 32))])
def test_every_storage_byte_is_written(M, N, block):
    for lay in LAYOUTS:
        _run(M, N, "e4m3", block, True, lay, "bfloat16", options=tilesim.InterpOptions(uninit="check"))


def test_layouts_hold_the_same_scales():
    M, N, blk = 70, 330, (32, 32)
    (x,) = B.block_inputs(np.random.default_rng(2), M, N)
    outs = {lay: B.per_block_cast_sf(M, N, "e2m1", blk, True, lay)(x) for lay in LAYOUTS}
    for lay, (q, s) in outs.items():
        assert np.array_equal(q, outs["rows"][0])
        assert np.array_equal(logical_sf(s, 3, 11, lay), outs["rows"][1])


@pytest.mark.parametrize("rsf", [False, True])
def test_rows_layout_equals_fp8_cast_per_block(rsf):
    M, N = 200, 300
    (x,) = B.block_inputs(np.random.default_rng(3), M, N)
    q, s = B.per_block_cast_sf(M, N, "e4m3", (128, 128), rsf, "rows")(x)
    q0, s0 = per_block_cast(M, N, 128, use_ue8m0=rsf)(x)
    assert np.array_equal(q.view(np.uint8), q0.view(np.uint8)) and np.array_equal(s, s0)


def test_zeros_saturation_and_negative_zero():
    x = np.zeros((32, 64), np.float32)
    x[0, 1] = -0.0
    x[1, 32:] = np.linspace(-1e6, 1e6, 32)  # block (0, 1): the extremes map to ±448 exactly, nothing overflows
    _, (q, s) = _run(32, 64, "e4m3", (32, 32), False, "rows", "float32", x=x)
    assert s[0, 0] == np.float32(1e-4) / np.float32(448.0)  # an all-zero block takes the floor
    assert np.signbit(q[0, 1].astype(np.float32)) and q[0, 0] == 0
    assert q[1, 32].astype(np.float32) == -448 and q[1, 63].astype(np.float32) == 448
    _, (q4, _) = _run(32, 64, "e2m1", (32, 32), True, "rows", "float32", x=x)
    assert (q4.view(np.uint8)[0, 0] >> 4) == 8  # −0 is e2m1 code 8
    assert np.isfinite(q.astype(np.float32)).all()  # saturation gives ±448, never the NaN code


def test_serial_equals_batched():
    (x,) = B.block_inputs(np.random.default_rng(4), 45, 140)
    k = B.per_block_cast_sf(45, 140, "e2m1", (16, 48), True, "tma_ue8m0")
    for a, b in zip(k(x), k.run(x, options=tilesim.InterpOptions(mode="serial")), strict=True):
        assert np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))


@pytest.mark.parametrize("kw,match", [(dict(fmt="e5m6"), "fmt"), (dict(sf_layout="cols"), "sf_layout"),
                                      (dict(in_dtype="float16"), "in_dtype"), (dict(block=(0, 32)), "block"),
                                      (dict(fmt="e2m1", N=201), "even N"),
                                      (dict(sf_layout="tma_ue8m0", round_sf=False), "round_sf")])
def test_build_errors(kw, match):
    args = dict(M=8, N=200, fmt="e4m3", block=(32, 32), round_sf=True, sf_layout="rows", in_dtype="bfloat16")
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        B.per_block_cast_sf(**args)
