"""Per-token casts split at the scale (kernels/quant_cast_sf.py): scales only and values from given scales,
e4m3 and packed e2m1, bitwise against the NumPy references (ml_dtypes conversions) and against the full
per-token casts, on shapes the groups and row blocks do not divide."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels.fp8_cast import per_token_cast
from kernels.quant_cast import per_token_cast_fp4
from kernels.quant_cast_sf import (
    compare_bitwise,
    per_token_cast_sf_only,
    per_token_cast_with_sf,
    ref_sf_only,
    ref_with_sf,
)

DTYPES = ("bfloat16", "float32", "float16")


def _x(rng, M, N, dtype):
    x = (rng.standard_normal((M, N)) * 3.0).astype(np.float32)
    x[0, : min(N, 9)] = 0.0
    if M > 2:
        x[1] = 0.0  # an all-zero row: the floor scale
    if M > 3:
        x[2, -1] = 1e4  # an outlier sets its group's scale
    return x.astype(tilesim.dtypes.np_dtype(dtype))


@settings(max_examples=8, deadline=None)
@given(M=st.integers(1, 40), N2=st.integers(1, 90), fmt=st.sampled_from(["e4m3", "e2m1"]),
       g=st.sampled_from([16, 32, 64, 128]), dtype=st.sampled_from(list(DTYPES)), ue8m0=st.booleans(),
       block_M=st.sampled_from([1, 8, 32]), seed=st.integers(0, 99))
def test_sf_only_and_with_sf(M, N2, fmt, g, dtype, ue8m0, block_M, seed):
    N = 2 * N2
    rng = np.random.default_rng(seed)
    x = _x(rng, M, N, dtype)
    s = per_token_cast_sf_only(M, N, fmt=fmt, group_size=g, block_M=block_M, in_dtype=dtype, use_ue8m0=ue8m0)(x)
    compare_bitwise(s, ref_sf_only(np.asarray(x, np.float32), fmt, g, ue8m0))
    full = (per_token_cast(M, N, group_size=g, in_dtype=dtype, use_ue8m0=ue8m0) if fmt == "e4m3" else
            per_token_cast_fp4(M, N, group_size=g, in_dtype=dtype, use_ue8m0=ue8m0))(x)
    compare_bitwise(s, full[1])  # the same scales as the full cast
    sf = (s * rng.choice(np.float32([0.25, 0.5, 0.7, 1.0, 3.0]), s.shape)).astype(np.float32)
    sf = np.maximum(sf, np.float32(2.0**-126))  # 1/S finite (the module's contract)
    for scales in (s, sf):
        q = per_token_cast_with_sf(M, N, fmt=fmt, group_size=g, block_M=block_M, in_dtype=dtype)(x, scales)
        compare_bitwise(q, ref_with_sf(np.asarray(x, np.float32), scales, fmt, g))
    if ue8m0:  # 1/S exact: the split reproduces the full cast's values
        compare_bitwise(per_token_cast_with_sf(M, N, fmt=fmt, group_size=g, in_dtype=dtype)(x, s), full[0])


def test_with_sf_saturates_and_keeps_sign():
    x = np.array([[1000.0, -1000.0, 0.5, -0.0, 7.0, -7.0, 0.25, 0.75]], np.float32)
    s = np.ones((1, 1), np.float32)
    q8 = per_token_cast_with_sf(1, 8, group_size=8, in_dtype="float32")(x, s)
    assert np.asarray(q8).astype(np.float32).tolist() == [[448, -448, 0.5, -0.0, 7, -7, 0.25, 0.75]]
    q4 = np.asarray(per_token_cast_with_sf(1, 8, fmt="e2m1", group_size=8, in_dtype="float32")(x, s)).view(np.uint8)
    # codes: 6 → 7, -6 → 15, 0.5 → 1, -0 → 8, 7 → 7, -7 → 15, 0.25 → 0 (tie to even), 0.75 → 2 (tie to even)
    assert q4.tolist() == [[7 | 15 << 4, 1 | 8 << 4, 7 | 15 << 4, 0 | 2 << 4]]


def test_invalid():
    with pytest.raises(ValueError):
        per_token_cast_sf_only(4, 8, fmt="e5m6")
    with pytest.raises(ValueError):
        per_token_cast_with_sf(4, 7, fmt="e2m1", group_size=32)


def test_serial_equals_batched():
    rng = np.random.default_rng(3)
    x = _x(rng, 9, 70, "float32")
    k = per_token_cast_sf_only(9, 70, fmt="e2m1", group_size=32, block_M=4, in_dtype="float32")
    s = k(x)
    assert np.array_equal(s, k.run(x, options=tilesim.InterpOptions(mode="serial")))
    c = per_token_cast_with_sf(9, 70, fmt="e2m1", group_size=32, block_M=4, in_dtype="float32")
    assert np.array_equal(c(x, s), c.run(x, s, options=tilesim.InterpOptions(mode="serial")))
