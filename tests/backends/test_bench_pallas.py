"""The JAX Pallas column of ``tilesim bench`` (``tilesim/bench_pallas.py``): absent without jax; where jax is
installed, its kernels agree with NumPy (run on tile-multiple shapes: the Pallas kernels, like the bench's, take
shapes the tiles divide)."""

import importlib.util

import numpy as np
import pytest

from tilesim import bench, bench_pallas

HAVE_JAX = importlib.util.find_spec("jax") is not None


def test_no_column_without_jax(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(bench_pallas.importlib.util, "find_spec", lambda name: None if name == "jax" else real(name))
    assert bench_pallas.column("gemm", (np.ones((64, 32), np.float32), np.ones((32, 64), np.float32))) is None


@pytest.mark.skipif(not HAVE_JAX, reason="jax is not installed")
def test_pallas_gemm_and_causal_attention_match_numpy():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((128, 96), dtype=np.float32)
    b = rng.standard_normal((96, 192), dtype=np.float32)
    first, warm, c = bench_pallas.column("gemm", (a, b), reps=1)
    assert first > 0 and warm > 0
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)
    q, k, v = (rng.standard_normal((2, 128, 3, 32), dtype=np.float32) for _ in range(3))
    _, _, o = bench_pallas.column("attention", (q, k, v), reps=1)
    np.testing.assert_allclose(o, bench._ref_attention(q, k, v), rtol=1e-4, atol=1e-5)


@pytest.mark.skipif(not HAVE_JAX, reason="jax is not installed")
def test_a_failing_child_is_a_runtime_error_with_its_message():
    with pytest.raises(RuntimeError, match="the Pallas column"):
        bench_pallas.column("attention", (np.ones((4, 4), np.float32),), reps=1)
