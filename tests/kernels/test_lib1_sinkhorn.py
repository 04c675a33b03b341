"""Sinkhorn normalisation (kernels/sinkhorn.py) against a float64 reference.

Tolerance: rtol 1e-4, atol 1e-5 (fp32 math over ≤ 20 iterations of divisions by sums of ≤ 8 terms)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels.sinkhorn import ref_sinkhorn, sinkhorn
from tilesim import dtypes as dt
from tilesim.testing.compare import assert_matches_reference


@settings(max_examples=8)
@given(batch=st.integers(1, 40), R=st.integers(1, 8), C=st.integers(1, 8), iters=st.sampled_from([0, 1, 3, 20]),
       dtype=st.sampled_from(["float32", "bfloat16", "float16"]), block_B=st.sampled_from([1, 4, 16]),
       scale=st.sampled_from([1.0, 2.0, 10.0]))
def test_sinkhorn(batch, R, C, iters, dtype, block_B, scale):
    x = (np.random.default_rng(batch * R * C).standard_normal((batch, R, C)) * scale).astype(dt.np_dtype(dtype))
    k = sinkhorn(batch, R, C, iters=iters, block_B=block_B, dtype=dtype)
    P = assert_matches_reference(k, (x,), lambda X: ref_sinkhorn(X, iters=iters), rtol=1e-4, atol=1e-5)[0]
    assert np.allclose(P.sum(axis=2), 1.0, atol=1e-4)  # the last step normalises rows


def test_doubly_stochastic_and_edges():
    """Square inputs converge to doubly stochastic; -inf entries stay 0; a NaN poisons only its matrix."""
    batch, n = 6, 4
    x = np.random.default_rng(0).standard_normal((batch, n, n)).astype(np.float32)
    x[1, :, 0] = -np.inf
    x[1, 0, 0] = 0.0
    x[2] = 0.0
    x[3, 2, 3] = np.nan
    k = sinkhorn(batch, n, n, iters=50, block_B=4)
    P = assert_matches_reference(k, (x,), lambda X: ref_sinkhorn(X, iters=50), rtol=1e-4, atol=1e-5)[0]
    ok = np.array([b != 3 for b in range(batch)])
    assert np.isnan(P[3]).all() and np.isfinite(P[ok]).all()
    dense = np.array([b not in (1, 3) for b in range(batch)])  # matrix 1's sparse column converges slowly
    assert np.allclose(P[dense].sum(axis=1), 1.0, atol=1e-4) and np.allclose(P[ok].sum(axis=2), 1.0, atol=1e-5)
    assert np.all(P[1, 1:, 0] == 0) and np.allclose(P[2], 1 / n)


def test_serial_equals_batched():
    x = np.random.default_rng(1).standard_normal((9, 4, 4)).astype(np.float32)
    k = sinkhorn(9, 4, 4, iters=5, block_B=4)
    assert np.array_equal(k(x), k.run(x, options=tilesim.InterpOptions(mode="serial")))
