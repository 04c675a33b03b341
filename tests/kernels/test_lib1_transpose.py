"""Batched transpose (kernels/transpose.py): bitwise equal to ``numpy.swapaxes`` for every dtype."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels.transpose import _inputs, batched_transpose, ref_transpose

DTYPES = ("bfloat16", "float16", "float32", "float8_e4m3fn", "int8", "int32")


def _bits(a):
    return np.ascontiguousarray(a).view({1: np.uint8, 2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


@settings(max_examples=8)
@given(B=st.integers(1, 3), M=st.integers(1, 100), N=st.integers(1, 100), dtype=st.sampled_from(DTYPES),
       tiles=st.sampled_from([(16, 16), (16, 32), (64, 32)]))
def test_transpose_bitwise(B, M, N, dtype, tiles):
    (x,) = _inputs(np.random.default_rng(M * N), B, M, N, dtype)
    y = batched_transpose(B, M, N, block_M=tiles[0], block_N=tiles[1], dtype=dtype)(x)
    assert y.shape == (B, N, M) and y.dtype == x.dtype
    assert np.array_equal(_bits(y), _bits(ref_transpose(x)))


def test_special_values():
    """±0, ±inf, NaN and extreme finite values move bit for bit (fp32, fp16; fp8 e4m3 NaN and ±448)."""
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3.4e38, -1e-45, 1.0], dtype=np.float32)
    x = np.resize(x, (2, 9, 13))
    with np.errstate(over="ignore"):
        x16 = x.astype(np.float16)
    for dtype, arr in (("float32", x), ("float16", x16),
                       ("float8_e4m3fn", np.resize(np.array([0, 0x80, 0x7F, 0xFF, 0x7E, 0xFE, 1], np.uint8),
                                                   (2, 9, 13)).view(tilesim.dtypes.np_dtype("float8_e4m3fn")))):
        y = batched_transpose(2, 9, 13, block_M=8, block_N=8, dtype=dtype)(arr)
        assert np.array_equal(_bits(y), _bits(ref_transpose(arr))), dtype


def test_serial_equals_batched():
    (x,) = _inputs(np.random.default_rng(0), 2, 70, 45, "bfloat16")
    k = batched_transpose(2, 70, 45, block_M=32, block_N=16)
    assert np.array_equal(_bits(k(x)), _bits(k.run(x, options=tilesim.InterpOptions(mode="serial"))))


@settings(max_examples=6)
@given(B=st.integers(1, 2), M=st.integers(1, 40), N=st.integers(1, 40), seed=st.integers(0, 2**31))
def test_bf16_nan_payloads_move_bitwise(B, M, N, seed):
    """Every bf16 bit pattern moves untouched, including NaNs with non-canonical payloads (0x7fc1,
    signalling 0x7f81, negative 0xffa1): TileKernels' transpose moves bytes, and so does this one."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 1 << 16, size=(B, M, N), dtype=np.uint16)
    bits.reshape(-1)[: 4] = np.array([0x7FC1, 0x7F81, 0xFFA1, 0x7FFF], np.uint16)[: bits.size]
    x = bits.view(tilesim.dtypes.np_dtype("bfloat16"))
    y = batched_transpose(B, M, N, block_M=16, block_N=16)(x)
    assert np.array_equal(_bits(y), _bits(ref_transpose(x)))


def test_fp32_to_bf16_nan_keeps_payload_and_stays_nan():
    """The conversion behind it: a NaN keeps its sign and top payload bits; a payload only in the low 16
    bits gets the quiet bit (it must stay a NaN, not become inf); finite values round to nearest even."""
    u = np.array([0x7FC10000, 0xFF810000, 0x7F800001, 0x3F808000, 0x3F818000], np.uint32)
    out = tilesim.dtypes.convert(u.view(np.float32), "bfloat16").view(np.uint16)
    assert [hex(v) for v in out] == ["0x7fc1", "0xff81", "0x7fc0", "0x3f80", "0x3f82"]
