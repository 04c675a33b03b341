"""SwiGLU → per-channel e4m3 cast → transpose (kernels/swiglu_channel.py).

Bit for bit against the NumPy reference (fp32 ``g / (1 + exp(−g)) · u``, rounded to the input dtype, then the
per-channel cast) on shapes the tiles and row blocks do not divide, with and without the clamp, transposed or
not; and independently of that reference: the transposed output is the straight one transposed, the rounding to
the input dtype and the clamp are live, and the result equals the library's per-channel transpose cast of the
rounded activation.
"""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.quant_channel_fused import per_channel_cast_transpose, ref_channel_cast
from kernels.swiglu_channel import ref_swiglu_per_channel_cast, ref_swiglu_rounded, swiglu_per_channel_cast
from tests.kernels.test_lib8_quant_channel import assert_bitwise
from tilesim import dtypes as dt


def swiglu_input(seed, M, H, dtype):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((M, 2 * H)) * 2.0).astype(np.float32)
    x[:, rng.integers(0, H)] *= 30.0  # an outlier gate channel
    if M > 1:
        x[1] = 0.0
    if M > 2:
        x[2, :H] = -100.0  # exp(100) is finite in fp32; silu → −0 · u
    if M > 3:
        x[3, :H] = -1000.0  # exp(1000) = inf: g / inf = −0
    return x.astype(dt.np_dtype(dtype))


@settings(max_examples=10, deadline=None)
@given(M=st.integers(1, 300), H=st.integers(1, 140), dtype=st.sampled_from(["bfloat16", "float16", "float32"]),
       clamp=st.sampled_from([None, 10.0, 0.5]), transpose=st.booleans(), ue8m0=st.booleans(),
       block_rows=st.sampled_from([128, 32]), block_N=st.sampled_from([16, 32, 64]))
def test_swiglu_channel_bitwise(M, H, dtype, clamp, transpose, ue8m0, block_rows, block_N):
    x = swiglu_input(M * 3 + H, M, H, dtype)
    q, s = swiglu_per_channel_cast(M, H, block_rows=block_rows, block_N=block_N, clamp_limit=clamp,
                                   transpose=transpose, in_dtype=dtype, use_ue8m0=ue8m0)(x)
    rq, rs = ref_swiglu_per_channel_cast(x, block_rows, clamp, transpose, dtype, ue8m0)
    assert q.shape == ((H, M) if transpose else (M, H)) and s.shape == (-(-M // block_rows), H)
    assert_bitwise(s, rs, "S")
    assert_bitwise(q, rq, "Q")


def test_transposed_is_straight_transposed_and_matches_transpose_cast():
    M, H = 150, 70
    x = swiglu_input(1, M, H, "bfloat16")
    qt, st_ = swiglu_per_channel_cast(M, H, block_N=32, clamp_limit=10.0)(x)
    q, s = swiglu_per_channel_cast(M, H, block_N=64, clamp_limit=10.0, transpose=False)(x)
    assert_bitwise(st_, s, "S")
    assert_bitwise(qt, np.ascontiguousarray(q.T), "Q")
    h = ref_swiglu_rounded(x, 10.0).astype(ml_dtypes.bfloat16)  # exact: the values are bf16 already
    q2, s2 = per_channel_cast_transpose(M, H, block_N=32)(h)
    assert_bitwise(st_, s2, "S")
    assert_bitwise(qt, q2, "Q")


def test_rounding_and_clamp_are_live():
    """The bf16 rounding of the activation changes some scales (TileKernels' contract), and the clamp changes Q."""
    M, H = 128, 64
    x = swiglu_input(2, M, H, "bfloat16")
    q, s = swiglu_per_channel_cast(M, H, transpose=False)(x)
    h32 = ref_swiglu_rounded(x, None, "float32")
    uq, us = ref_channel_cast(h32, 128)
    assert np.any(s != us)
    qc, sc = swiglu_per_channel_cast(M, H, transpose=False, clamp_limit=0.5)(x)
    assert np.any(sc != s)
    rq, rs = ref_swiglu_per_channel_cast(x, 128, 0.5, False)
    assert_bitwise(sc, rs, "S clamp")
    assert_bitwise(qc, rq, "Q clamp")


def test_zero_rows_and_overflowing_exp():
    """A zero row casts to +0; a gate of −100 or −1000 gives silu −0 (the sign survives the cast)."""
    M, H = 40, 30
    x = swiglu_input(3, M, H, "bfloat16")
    q, _ = swiglu_per_channel_cast(M, H, transpose=False)(x)
    b = q.view(np.uint8)
    assert np.all(b[1] == 0)
    up = x[2:4, H:].astype(np.float32)
    assert np.all((b[2:4] == 0x80) == (up > 0)) and np.all(q[2:4].astype(np.float32) == 0)


def test_build_errors():
    with pytest.raises(ValueError, match="M, H and block_rows >= 1"):
        swiglu_per_channel_cast(0, 64)
    with pytest.raises(ValueError, match="at least one row"):
        per_channel_cast_transpose(8, 0)
