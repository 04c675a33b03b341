"""Sinkhorn normalisation (kernels/sinkhorn.py) against a float64 reference with TileKernels' semantics
(softmax + eps, column step first and last, 2·repeat − 1 normalisations, default repeat 10).

Tolerance: rtol 1e-4, atol 1e-5 (fp32 math over ≤ 39 divisions by sums of ≤ 8 terms)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels.sinkhorn import ref_sinkhorn, sinkhorn
from tilesim import dtypes as dt
from tilesim.testing.compare import assert_matches_reference


@settings(max_examples=8)
@given(batch=st.integers(1, 40), R=st.integers(1, 8), C=st.integers(1, 8), repeat=st.sampled_from([1, 2, 3, 10, 20]),
       dtype=st.sampled_from(["float32", "bfloat16", "float16"]), block_B=st.sampled_from([1, 4, 16]),
       scale=st.sampled_from([1.0, 2.0, 10.0]))
def test_sinkhorn(batch, R, C, repeat, dtype, block_B, scale):
    x = (np.random.default_rng(batch * R * C).standard_normal((batch, R, C)) * scale).astype(dt.np_dtype(dtype))
    k = sinkhorn(batch, R, C, repeat=repeat, block_B=block_B, dtype=dtype)
    P = assert_matches_reference(k, (x,), lambda X: ref_sinkhorn(X, repeat=repeat), rtol=1e-4, atol=1e-5)[0]
    # the last step normalises columns: each column sums to s / (s + eps) with s its sum before the step
    assert np.allclose(P.sum(axis=1), 1.0, atol=1e-4 * R)


def test_default_is_ten_repeats_column_first():
    """Defaults (repeat=10, eps=1e-6) equal a hand-unrolled 19-step schedule: col, (row, col) × 9."""
    x = np.random.default_rng(3).standard_normal((5, 4, 4)).astype(np.float32) * 3
    p = np.exp(x.astype(np.float64) - x.max(axis=-1, keepdims=True))
    p = p / p.sum(-1, keepdims=True) + 1e-6
    steps = ["col"] + ["row", "col"] * 9
    for s in steps:
        p = p / (p.sum(-2 if s == "col" else -1, keepdims=True) + 1e-6)
    assert len(steps) == 2 * 10 - 1
    out = sinkhorn(5, 4, 4, block_B=2)(x)
    assert np.allclose(out, p, rtol=1e-5, atol=1e-6)


def test_edges():
    """-inf entries become eps-sized (never exactly 0); a zero matrix gives the uniform 1/n; a NaN poisons
    only its matrix; saturating logits (±1e30) stay finite."""
    batch, n = 6, 4
    x = np.random.default_rng(0).standard_normal((batch, n, n)).astype(np.float32)
    x[1, :, 0] = -np.inf
    x[1, 0, 0] = 0.0
    x[2] = 0.0
    x[3, 2, 3] = np.nan
    x[4, 1] = [1e30, -1e30, 0.0, 1e30]
    k = sinkhorn(batch, n, n, repeat=10, block_B=4)
    P = assert_matches_reference(k, (x,), lambda X: ref_sinkhorn(X, repeat=10), rtol=1e-4, atol=1e-5)[0]
    ok = np.array([b != 3 for b in range(batch)])
    assert np.isnan(P[3]).all() and np.isfinite(P[ok]).all()
    assert np.all(P[1, 1:, 0] > 0) and np.allclose(P[2], 1 / n)


def test_repeat_must_be_positive():
    with pytest.raises(ValueError, match="repeat"):
        sinkhorn(4, 4, 4, repeat=0)


def test_serial_equals_batched():
    x = np.random.default_rng(1).standard_normal((9, 4, 4)).astype(np.float32)
    k = sinkhorn(9, 4, 4, repeat=5, block_B=4)
    assert np.array_equal(k(x), k.run(x, options=tilesim.InterpOptions(mode="serial")))
