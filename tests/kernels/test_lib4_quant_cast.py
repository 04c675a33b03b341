"""Per-channel e4m3, packed FP4 (e2m1) and packed E5M6 casts (kernels/quant_cast.py).

The kernels are compared bit for bit with the NumPy references on shapes the tiles and groups do not
divide; the references' element codes are checked against the formats' definitions independently of
the kernels (e2m1: nearest-even on its eight magnitudes; E5M6: nearest-even to 6 mantissa bits for
fp16-normal values, fp16 truncation below), and the packing layouts are checked by unpacking.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels.quant_cast import (
    e2m1_codes,
    e5m6_codes,
    pack_e5m6,
    per_channel_cast,
    per_token_cast_e5m6,
    per_token_cast_fp4,
    ref_per_channel_cast,
    ref_per_token_cast_e5m6,
    ref_per_token_cast_fp4,
)
from tilesim import dtypes as dt

IN_DTYPES = ("bfloat16", "float16", "float32")
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


def assert_bitwise(out, ref, what):
    assert out.shape == ref.shape and out.dtype == ref.dtype, (what, out.shape, ref.shape, out.dtype, ref.dtype)
    bad = _bits(out) != _bits(ref)
    if bad.any():
        k = tuple(np.argwhere(bad)[0])
        raise AssertionError(f"{what}: {int(bad.sum())} element(s) differ, first at {k}: {out[k]!r} vs {ref[k]!r}")


def edge_matrix(seed, M, N, dtype):
    """Random values with a zero row and column, large values, tiny values and e2m1 grid ties."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((M, N)) * 3.0).astype(np.float32)
    big = {"bfloat16": 1e38, "float16": 6e4, "float32": 3e38}[dtype]
    x[:, rng.integers(0, N)] = 0.0
    if M > 1:
        x[1] = 0.0
    if M > 2:
        x[2, :: max(1, N // 3)] = big
    if M > 3:
        x[3] *= 1e-30 if dtype == "float32" else 1e-3
    if M > 4 and N >= 16:
        x[4, :16] = [6.0, 0.25, -0.75, 1.25, -1.75, 2.5, 3.5, -5.0, 0.0, -0.0, 4.0, 0.5, 3.0, -1e-3, 5.5, -2.25]
    return x.astype(dt.np_dtype(dtype))


# ------------------------------------------------------------------------------------------ kernels
@settings(max_examples=8)
@given(M=st.integers(1, 300), N=st.integers(1, 150), dtype=st.sampled_from(IN_DTYPES), ue8m0=st.booleans(),
       block_N=st.sampled_from([16, 32, 64]))
def test_per_channel_cast_bitwise(M, N, dtype, ue8m0, block_N):
    x = edge_matrix(M * 7 + N, M, N, dtype)
    q, s = per_channel_cast(M, N, block_N=block_N, in_dtype=dtype, use_ue8m0=ue8m0)(x)
    rq, rs = ref_per_channel_cast(x, 128, ue8m0)
    assert s.shape == (-(-M // 128), N)
    assert_bitwise(s, rs, "S")
    assert_bitwise(q, rq, "Q")


@settings(max_examples=8)
@given(M=st.integers(1, 70), half=st.integers(1, 110), dtype=st.sampled_from(IN_DTYPES), ue8m0=st.booleans(),
       group=st.sampled_from([32, 64, 128]), block_M=st.sampled_from([1, 8, 32]))
def test_fp4_cast_bitwise(M, half, dtype, ue8m0, group, block_M):
    N = 2 * half
    x = edge_matrix(M + 3 * N, M, N, dtype)
    q, s = per_token_cast_fp4(M, N, group_size=group, block_M=block_M, in_dtype=dtype, use_ue8m0=ue8m0)(x)
    rq, rs = ref_per_token_cast_fp4(x, group, ue8m0)
    assert q.dtype == np.int8 and q.shape == (M, N // 2) and s.shape == (M, -(-N // group))
    assert_bitwise(s, rs, "S")
    assert_bitwise(q, rq, "Q")


@settings(max_examples=8)
@given(M=st.integers(1, 70), n8=st.integers(1, 40), dtype=st.sampled_from(IN_DTYPES), ue8m0=st.booleans(),
       group=st.sampled_from([8, 40, 64, 128]), block_M=st.sampled_from([1, 4, 16]))
def test_e5m6_cast_bitwise(M, n8, dtype, ue8m0, group, block_M):
    N = 8 * n8
    x = edge_matrix(M + 5 * N, M, N, dtype)
    q, s = per_token_cast_e5m6(M, N, group_size=group, block_M=block_M, in_dtype=dtype, use_ue8m0=ue8m0)(x)
    rq, rs = ref_per_token_cast_e5m6(x, group, ue8m0)
    assert q.dtype == np.uint32 and q.shape == (M, 3 * N // 8)
    assert_bitwise(s, rs, "S")
    assert_bitwise(q, rq, "Q")


def test_fp4_round_trip_and_layout():
    """Unpacking Q (low nibble = even column) and multiplying by S gives x to within half an e2m1 step."""
    x = edge_matrix(3, 9, 100, "float32")
    x[3] = 0.0  # the edge matrix's 1e-30 row sits below the e2m1 scale floor
    q, s = per_token_cast_fp4(9, 100, group_size=32, block_M=4, in_dtype="float32")(x)
    b = q.view(np.uint8)
    codes = np.stack([b & 0xF, b >> 4], axis=-1).reshape(9, 100)
    mag = E2M1[codes & 7] * np.where(codes & 8, -1.0, 1.0)
    y = mag * np.repeat(s, 32, axis=1)[:, :100]
    step = np.where(np.abs(x) / np.repeat(s, 32, axis=1)[:, :100] < 2, 0.5, 2.0) * np.repeat(s, 32, axis=1)[:, :100]
    assert np.all(np.abs(y - x) <= step / 2 * (1 + 1e-6) + 1e-30)
    assert np.all(codes[1] == 0) and np.all(s[1] == np.float32(2.0 ** -126))  # zero row: floor 6·2^-126 / 6


def test_invalid_packing_shapes_raise():
    with pytest.raises(ValueError, match="even N"):
        per_token_cast_fp4(4, 33)
    with pytest.raises(ValueError, match="multiples of 8"):
        per_token_cast_e5m6(4, 36)
    with pytest.raises(ValueError, match="multiples of 8"):
        per_token_cast_e5m6(4, 64, group_size=36)


def test_serial_equals_batched():
    x = edge_matrix(11, 21, 96, "bfloat16")
    for k in (per_channel_cast(21, 96, block_N=32), per_token_cast_fp4(21, 96, block_M=8, use_ue8m0=True),
              per_token_cast_e5m6(21, 96, group_size=32, block_M=8)):
        for u, v in zip(k(x), k.run(x, options=tilesim.InterpOptions(mode="serial"))):
            assert_bitwise(u, v, "serial vs batched")


# ------------------------------------------------------------------------------------------ code definitions
def test_e2m1_codes_are_nearest_even_and_saturate():
    rng = np.random.default_rng(0)
    v = np.concatenate([rng.uniform(-7, 7, 4000), (np.arange(-14, 15) * 0.25), [6.5, -100.0, 3e38, 1e-40, -0.0]])
    v = v.astype(np.float32)
    codes = e2m1_codes(v)
    got = E2M1[codes & 7] * np.where(codes & 8, -1.0, 1.0)
    a = np.minimum(np.abs(v.astype(np.float64)), 6.0)
    d = np.abs(E2M1[None, :] - a[:, None])
    best = d.min(axis=1)
    assert np.all(np.abs(np.abs(got) - a) == best)  # nearest
    tie = (d == best[:, None]).sum(axis=1) == 2
    assert tie.sum() > 5 and np.all(codes[tie] % 2 == 0)  # ties to the even code
    assert np.all((codes >> 3) == np.signbit(v))  # sign kept, -0 and tiny negatives included


def test_e5m6_codes_definition():
    """fp16-normal values: nearest-even to 6 mantissa bits; fp16-subnormal values: fp16 truncation then
    the same rounding on the fp32 bits (TileKernels' rule); overflow and NaN codes."""
    rng = np.random.default_rng(1)
    v = (rng.standard_normal(20000) * np.exp2(rng.integers(-13, 16, 20000))).astype(np.float32)
    v = v[(np.abs(v) >= 2.0 ** -14) & (np.abs(v) < 65024.0)]
    codes = e5m6_codes(v)
    dec = ((codes.astype(np.uint16) << 4)).view(np.float16).astype(np.float64)
    x = v.astype(np.float64)
    ulp = np.exp2(np.floor(np.log2(np.abs(x))) - 6)
    err = np.abs(dec - x)
    assert np.all(err <= ulp / 2)
    tie = err == ulp / 2
    assert np.all(((codes[tie] & 1) == 0))
    ties = np.array([1 + 2.0 ** -7, 1 + 3 * 2.0 ** -7, -(1 + 2.0 ** -7)], np.float32)  # halfway: to even
    assert [int(c) for c in e5m6_codes(ties)] == [0x3C0, 0x3C2, 0xBC0]
    special = np.array([np.inf, -np.inf, np.nan, 1e6, 0.0, -0.0, 1e-10, 2.0 ** -40], np.float32)
    # below fp16's subnormals the code is ±0 rounded up by the same rule on the low fp32 bits: 1e-10 has
    # low bits 0x1e6ff > 0x10000 and becomes code 1 (TileKernels' reference does the same); 2^-40 has none
    assert [int(c) for c in e5m6_codes(special)] == [0x7C0, 0xFC0, 0x7FF, 0x7C0, 0, 0x800, 1, 0]
    assert int(e5m6_codes(np.array([65024.0], np.float32))[0]) == 0x7BF  # the largest E5M6 value (qmax) is exact


def test_e5m6_packing_layout():
    codes = np.arange(1, 17, dtype=np.uint32).reshape(1, 16) * np.uint32(0xF1)
    words = pack_e5m6(codes)
    assert words.shape == (1, 6)
    for k in range(2):  # each group of eight 12-bit codes fills three words, first code in the top bits
        bits = "".join(f"{int(w):032b}" for w in words[0, 3 * k: 3 * k + 3])
        assert bits == "".join(f"{int(c):012b}" for c in codes[0, 8 * k: 8 * k + 8])
