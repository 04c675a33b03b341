"""Per-channel e4m3 cast fused with a row gather / e4m3 dequantisation, and with a transpose
(kernels/quant_channel_fused.py).

Bit for bit against the NumPy references on shapes the tiles, row blocks and input groups do not divide; and,
independently of those references: the gather equals the cast of the materialised gathered rows, the dequantising
input equals the fp32 cast of ``x · xs``, the transpose equals the library's plain per-channel cast
(``kernels.quant_cast``) transposed, padding rows are zero, values dequantise to within half an e4m3 step, and
zero blocks take the floor's scale.
"""

import importlib.util
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.quant_cast import per_channel_cast
from kernels.quant_channel_fused import (
    FP8,
    per_channel_cast_fused,
    per_channel_cast_transpose,
    ref_per_channel_cast_fused,
    ref_per_channel_cast_transpose,
)
from tilesim import dtypes as dt

IN_DTYPES = ("bfloat16", "float16", "float32")
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)


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
    """Random values with a zero row and column, huge values, tiny values and −0."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((M, N)) * 3.0).astype(np.float32)
    big = {"bfloat16": 1e38, "float16": 6e4, "float32": 3e38, FP8: 448.0}[dtype]
    x[:, rng.integers(0, N)] = 0.0
    if M > 1:
        x[1] = 0.0
    if M > 2:
        x[2, :: max(1, N // 3)] = big
    if M > 3:
        x[3] *= 1e-30 if dtype == "float32" else 1e-3
    if M > 4:
        x[4, 0] = -0.0
    if dtype == FP8:
        x = np.clip(x, -448, 448)
    return x.astype(dt.np_dtype(dtype) if dtype != FP8 else E4M3)


def gather_index(seed, M_in, M_out):
    rng = np.random.default_rng(seed)
    p = rng.integers(0, M_in, M_out).astype(np.int32)
    p[rng.random(M_out) < 0.2] = -1
    if M_out > 3:
        p[3] = -7  # any negative index is padding
    return p


def in_scales(seed, M, N, g):
    rng = np.random.default_rng(seed)
    G = -(-N // g)
    return (rng.uniform(0.5, 4.0, (M, G)) * 2.0 ** rng.integers(-10, 10, (M, G))).astype(np.float32)


# ------------------------------------------------------------------------------------------ fused (gather)
@settings(max_examples=10, deadline=None)
@given(M_in=st.integers(1, 160), N=st.integers(1, 140), M_out=st.integers(1, 300), gather=st.booleans(),
       in_group=st.sampled_from([None, None, 128, 48]), dtype=st.sampled_from(IN_DTYPES), ue8m0=st.booleans(),
       block_rows=st.sampled_from([128, 32]), block_N=st.sampled_from([16, 32, 64]))
def test_fused_bitwise(M_in, N, M_out, gather, in_group, dtype, ue8m0, block_rows, block_N):
    M_out = M_out if gather else M_in
    dtype = FP8 if in_group else dtype
    x = edge_matrix(M_in * 7 + N, M_in, N, dtype)
    args = [x] + ([in_scales(N, M_in, N, in_group)] if in_group else []) + ([gather_index(M_out, M_in, M_out)]
                                                                           if gather else [])
    k = per_channel_cast_fused(M_in, N, M_out=M_out, gather=gather, in_group=in_group, in_dtype=dtype,
                               use_ue8m0=ue8m0, block_rows=block_rows, block_N=block_N)
    q, s = k(*args)
    rq, rs = ref_per_channel_cast_fused(*args, gather=gather, in_group=in_group, block_rows=block_rows,
                                        use_ue8m0=ue8m0)
    assert q.shape == (M_out, N) and s.shape == (-(-M_out // block_rows), N)
    assert_bitwise(s, rs, "S")
    assert_bitwise(q, rq, "Q")
    if gather:
        assert np.all(_bits(q[args[-1] < 0]) == 0)  # padding rows are +0


@pytest.mark.parametrize("dtype,ue8m0", [("bfloat16", False), ("float32", True)])
def test_gather_equals_cast_of_gathered_rows(dtype, ue8m0):
    """Independent of the reference: gathering inside the kernel == casting rows gathered beforehand (padding
    rows as zero rows); indices >= M_in read as padding."""
    M_in, N, M_out = 50, 90, 170
    x = edge_matrix(1, M_in, N, dtype)
    p = gather_index(2, M_in, M_out)
    p[5], p[6] = M_in, 10**6
    q, s = per_channel_cast_fused(M_in, N, M_out=M_out, gather=True, in_dtype=dtype, use_ue8m0=ue8m0,
                                  block_N=32)(x, p)
    ok = (p >= 0) & (p < M_in)
    xg = np.where(ok[:, None], x[np.where(ok, p, 0)].astype(np.float32), 0).astype(dt.np_dtype(dtype))
    q2, s2 = per_channel_cast(M_out, N, block_N=32, in_dtype=dtype, use_ue8m0=ue8m0)(xg)
    assert_bitwise(s, s2, "S")
    assert_bitwise(q, q2, "Q")


def test_dequant_input_equals_fp32_cast_of_product():
    """e4m3 data with 1 x g scales == the fp32 per-channel cast of the fp32 products ``x · xs``."""
    M, N, g = 140, 200, 128
    x = edge_matrix(3, M, N, FP8)
    xs = in_scales(4, M, N, g)
    xs[7] = 0.0  # a zero input scale zeroes its row (signed zeros)
    q, s = per_channel_cast_fused(M, N, in_group=g, in_dtype=FP8, block_N=64)(x, xs)
    prod = (x.astype(np.float32) * np.repeat(xs, g, axis=1)[:, :N]).astype(np.float32)
    q2, s2 = per_channel_cast(M, N, block_N=64, in_dtype="float32")(prod)
    assert_bitwise(s, s2, "S")
    assert_bitwise(q, q2, "Q")
    assert np.all(q[7].astype(np.float32) == 0)  # ±0: the sign of x survives x · 0


def test_round_trip_zero_block_and_saturation():
    """Q · S within half an e4m3 step (relative 2^-4) of x; an all-zero column block gets 1e-4 / 448; the column
    maximum lands on ±448."""
    M, N = 200, 40
    x = edge_matrix(5, M, N, "float32")
    x[:, 7] = 0.0
    x[0, 9], x[1, 9] = 3e38, -3e38
    q, s = per_channel_cast_fused(M, N, in_dtype="float32", block_N=16)(x)
    y = q.astype(np.float32) * np.repeat(s, 128, axis=0)[:M]
    tol = np.maximum(np.abs(x) * 2.0 ** -4, np.repeat(s, 128, axis=0)[:M] * 2.0 ** -10)
    assert np.all(np.abs(y - x) <= tol * 1.0001)
    assert np.all(s[:, 7] == np.float32(1e-4) / np.float32(448.0)) and np.all(q[:, 7] == 0)
    assert q[0, 9] == 448.0 and q[1, 9] == -448.0
    assert np.all(np.abs(q.astype(np.float32)) <= 448.0)


def test_fused_build_errors():
    with pytest.raises(ValueError, match="at least one row"):
        per_channel_cast_fused(4, 8, M_out=0, gather=True)
    with pytest.raises(ValueError, match="without a gather"):
        per_channel_cast_fused(4, 8, M_out=5)
    with pytest.raises(ValueError, match="e4m3 data"):
        per_channel_cast_fused(4, 8, in_group=128, in_dtype="bfloat16")


# ------------------------------------------------------------------------------------------ transpose
@settings(max_examples=10, deadline=None)
@given(M=st.integers(1, 300), N=st.integers(1, 140), dtype=st.sampled_from(IN_DTYPES), ue8m0=st.booleans(),
       block_rows=st.sampled_from([128, 32, 16]), block_N=st.sampled_from([16, 32, 64]))
def test_transpose_bitwise(M, N, dtype, ue8m0, block_rows, block_N):
    x = edge_matrix(M + 11 * N, M, N, dtype)
    q, s = per_channel_cast_transpose(M, N, block_rows=block_rows, block_N=block_N, in_dtype=dtype,
                                      use_ue8m0=ue8m0)(x)
    rq, rs = ref_per_channel_cast_transpose(x, block_rows, ue8m0)
    assert q.shape == (N, M) and s.shape == (-(-M // block_rows), N)
    assert_bitwise(s, rs, "S")
    assert_bitwise(q, rq, "Q")


@pytest.mark.parametrize("block_rows,ue8m0", [(128, False), (32, True)])
def test_transpose_equals_plain_cast_transposed(block_rows, ue8m0):
    M, N = 161, 75
    x = edge_matrix(9, M, N, "bfloat16")
    q, s = per_channel_cast_transpose(M, N, block_rows=block_rows, block_N=32, use_ue8m0=ue8m0)(x)
    q2, s2 = per_channel_cast(M, N, block_rows=block_rows, block_N=64, use_ue8m0=ue8m0)(x)
    assert_bitwise(s, s2, "S")
    assert_bitwise(q, np.ascontiguousarray(q2.T), "Q")


# ------------------------------------------------------------------------------------------ fidelity script
def test_fidelity_families_are_bound_and_expansion_map_is_padded():
    """benchmarks/tilekernels_fidelity_af.py is loaded by the fidelity script; its MoE expansion map pads each
    expert's segment with −1 to the alignment and lists each routed token once per expert."""
    pytest.importorskip("torch")
    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("tilekernels_fidelity", root / "benchmarks" / "tilekernels_fidelity.py")
    fid = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fid)
    for fam in ("channel_fused", "channel_transpose", "swiglu_channel"):
        assert fid.FAMILIES[fam].args[0].bitwise is fid.bitwise
    pos_to_token = fid.FAMILIES["channel_fused"].func.__globals__["pos_to_token"]  # the _af module's helper
    p2t = pos_to_token(np.random.default_rng(0), 37, 8, 3, 16, 0.3)
    assert p2t.dtype == np.int32 and len(p2t) % 16 == 0 and p2t.min() == -1 and p2t.max() < 37
    real = p2t[p2t >= 0]
    assert 37 <= len(real) <= 3 * 37
