"""The Triton-interpreter column of ``tilesim bench`` (``tilesim/bench_triton.py``)."""

import importlib.util

import numpy as np
import pytest

from tilesim import bench, bench_triton

HAVE_TRITON = importlib.util.find_spec("triton") is not None and importlib.util.find_spec("torch") is not None


def test_no_column_without_triton(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(bench_triton.importlib.util, "find_spec", lambda name: None if name == "triton" else real(name))
    assert bench_triton.column("gemm", (np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))) is None


@pytest.mark.skipif(not HAVE_TRITON, reason="triton and torch are not installed")
def test_triton_gemm_and_attention_match_numpy_on_edge_sizes():
    """Sizes the 64x64(x32) tiles do not divide: masks and the causal bound are exercised."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((70, 45), dtype=np.float32)
    b = rng.standard_normal((45, 90), dtype=np.float32)
    first, warm, c = bench_triton.column("gemm", (a, b), reps=1)
    assert first > 0 and warm > 0
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)
    q, k, v = (rng.standard_normal((2, 77, 3, 32), dtype=np.float32) for _ in range(3))
    _, _, o = bench_triton.column("attention", (q, k, v), reps=1)
    np.testing.assert_allclose(o, bench._ref_attention(q, k, v), rtol=1e-4, atol=1e-5)


@pytest.mark.skipif(not HAVE_TRITON, reason="triton and torch are not installed")
def test_a_failing_child_is_a_runtime_error_with_its_message():
    with pytest.raises(RuntimeError, match="the Triton column"):
        bench_triton.column("attention", (np.ones((4, 4), np.float32),), reps=1)
