"""SwiGLU + per-token FP8 cast (kernels/swiglu.py) against the float64 SwiGLU followed by the exact cast recipe.

Tolerances (module docstring): Q within one e4m3 step (rtol 0.125, atol 2^-9), S to rtol 1e-5, since the
fp32 ``silu`` can differ from float64 in its last bits.
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels.fp8_cast import ref_per_token_cast
from kernels.swiglu import compare_swiglu_fp8, ref_swiglu, ref_swiglu_fp8, swiglu_fp8
from tilesim import dtypes as dt


def _x(seed, M, H, dtype):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((M, 2 * H)) * 2.0
    if M > 1:
        x[1] = 0.0  # zero row: amax floor
    if M > 2:
        x[2, :H] = np.linspace(-60, 60, H)  # gate far into both tails of silu
        x[2, H:] = 1e3
    return x.astype(dt.np_dtype(dtype))


@settings(max_examples=8)
@given(M=st.integers(1, 40), H=st.integers(1, 300), dtype=st.sampled_from(["bfloat16", "float16", "float32"]),
       clamp=st.sampled_from([None, 7.0]), ue8m0=st.booleans(), block_M=st.sampled_from([1, 8, 32]))
def test_swiglu_fp8(M, H, dtype, clamp, ue8m0, block_M):
    x = _x(M * H, M, H, dtype)
    out = swiglu_fp8(M, H, block_M=block_M, clamp_limit=clamp, in_dtype=dtype, use_ue8m0=ue8m0)(x)
    compare_swiglu_fp8(out, ref_swiglu_fp8(x, clamp_limit=clamp, use_ue8m0=ue8m0))
    # dequantised output close to the float64 SwiGLU (e4m3: 3 mantissa bits)
    q, s = out
    y = q.astype(np.float64) * np.repeat(s, 128, axis=1)[:, :H]
    h = ref_swiglu(x, clamp)
    assert np.all(np.abs(y - h) <= np.abs(h) * 2.0 ** -4 * 1.01 + np.repeat(s, 128, axis=1)[:, :H] * 2.0 ** -9)


def test_clamp_and_edge_masking():
    """The clamp bounds gate above and up on both sides; up-half values never leak into the last gate group."""
    M, H = 4, 130  # last group holds 2 gate columns; the 126 padded columns must read as 0
    x = np.zeros((M, 2 * H), dtype=np.float32)
    x[:, :H] = 1.0
    x[:, H:] = 2.0
    x[0, H - 1] = 50.0  # gate above the clamp
    x[1, 2 * H - 1] = -50.0  # up below -clamp
    q, s = swiglu_fp8(M, H, block_M=2, clamp_limit=7.0, in_dtype="float32")(x)
    rq, rs = ref_swiglu_fp8(x, clamp_limit=7.0)
    compare_swiglu_fp8((q, s), (rq, rs))
    silu = lambda g: g / (1 + np.exp(-g))  # noqa: E731
    assert np.isclose(s[0, 1], silu(7.0) * 2.0 / 448, rtol=1e-6)  # clamped gate
    assert np.isclose(s[1, 1], silu(1.0) * 7.0 / 448, rtol=1e-6)  # clamped up
    assert np.isclose(s[2, 1], silu(1.0) * 2.0 / 448, rtol=1e-6)  # only the 2 real columns count


def test_matches_unfused_cast_of_fp32_swiglu():
    """Fused == SwiGLU in fp32 followed by the per-token cast kernel's recipe (no bf16 round trip)."""
    x = _x(5, 17, 256, "bfloat16")
    q, s = swiglu_fp8(17, 256, block_M=8)(x)
    rq, rs = ref_per_token_cast(ref_swiglu(x).astype(np.float32))
    compare_swiglu_fp8((q, s), (rq, rs))


def test_serial_equals_batched():
    x = _x(1, 21, 200, "bfloat16")
    k = swiglu_fp8(21, 200, block_M=8, clamp_limit=7.0, use_ue8m0=True)
    a = k(x)
    b = k.run(x, options=tilesim.InterpOptions(mode="serial"))
    assert all(np.array_equal(np.ascontiguousarray(u).view(np.uint8), np.ascontiguousarray(v).view(np.uint8))
               for u, v in zip(a, b))
