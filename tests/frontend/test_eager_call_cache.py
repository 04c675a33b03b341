"""Eager ``@tilesim.jit`` calls: the discovery trace runs once per scalar arguments, and a call like an earlier one
(same tensor shapes and dtypes, same scalars, same positions and keywords) goes straight to its kernel.
Every error of a first call is still raised."""

import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
import tilesim.language as T

J = importlib.import_module("tilesim.jit")  # the module (``tilesim.jit`` the attribute is the decorator)


@tilesim.jit
def add_scaled(A, B, scale=1.0, block=64):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), "float32")
    B: T.Tensor((M, N), "float32")
    C = T.empty((M, N), "float32")
    with T.Kernel(T.ceildiv(M * N, block), threads=32) as bx:
        for i in T.Parallel(block):
            idx = bx * block + i
            if idx < M * N:
                C[idx // N, idx % N] = A[idx // N, idx % N] * scale + B[idx // N, idx % N]
    return C


def _arrays(m, n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, n)).astype(np.float32), rng.standard_normal((m, n)).astype(np.float32)


def test_discovery_runs_once_per_scalars(monkeypatch):
    calls = []
    real = J.discover_eager
    monkeypatch.setattr(J, "discover_eager", lambda fn, scalars: calls.append(dict(scalars)) or real(fn, scalars))
    f = J.EagerJIT(add_scaled.fn, "interp", None, None)
    a, b = _arrays(7, 45)
    for m in (7, 7, 9):
        a, b = _arrays(m, 45)
        f.specialize(a, b)
    f.specialize(a, b, scale=2.0)
    assert len(calls) == 2 and calls[1]["scale"] == 2.0


def test_repeated_calls_take_the_cached_kernel():
    f = J.EagerJIT(add_scaled.fn, "interp", None, None)
    a, b = _arrays(7, 45)  # 315 elements: no block of 64 divides it
    outs = [f(a, b) for _ in range(3)]
    assert all(np.allclose(o, a + b, atol=1e-6) for o in outs)
    assert len(f._calls) == 1
    np.testing.assert_allclose(f(a, B=b, scale=2.0), 2 * a + b, atol=1e-5)
    np.testing.assert_allclose(f(A=a, B=b, scale=2.0), 2 * a + b, atol=1e-5)
    a2, b2 = _arrays(5, 3, seed=1)
    np.testing.assert_allclose(f(a2, b2), a2 + b2, atol=1e-6)  # another shape: another kernel
    assert len(f._calls) == 4 and len(f._cache) == 3


def test_errors_stay_after_a_cached_call():
    f = J.EagerJIT(add_scaled.fn, "interp", None, None)
    a, b = _arrays(7, 45)
    f(a, b)
    with pytest.raises(tilesim.KernelRuntimeError, match="dimension 0 .M. is 6 but another argument set M = 7"):
        f(a, b[:6])
    with pytest.raises(tilesim.KernelRuntimeError, match="expected dtype float32, got float64"):
        f(a.astype(np.float64), b)
    with pytest.raises(tilesim.KernelRuntimeError, match="argument 'B' is a tensor, got None"):
        f(a, B=None)
    np.testing.assert_allclose(f(a, b), a + b, atol=1e-6)


def test_only_known_arguments_are_keyed():
    a, b = _arrays(2, 3)
    assert J._call_key((a, b), {}) == J._call_key((a + 1, b), {})
    assert J._call_key((a, b), {}) != J._call_key((a[:1], b[:1]), {})
    assert J._call_key((a, b), {}) != J._call_key((a.astype(np.float64), b), {})
    assert J._call_key((a, b), {"scale": 1.0}) != J._call_key((a, b), {"scale": 2.0})
    assert J._call_key((memoryview(b"ab"), b), {}) is None
    assert J._call_key((a, np.float32(1.0)), {}) is None  # a NumPy scalar: specialised every time


@settings(max_examples=12, deadline=None)
@given(st.integers(1, 40), st.integers(1, 70), st.sampled_from([1.0, -0.5]))
def test_cached_calls_match_numpy(m, n, scale):
    a, b = _arrays(m, n, seed=m * 100 + n)
    for _ in range(2):
        np.testing.assert_allclose(add_scaled(a, b, scale=scale), a * scale + b, rtol=1e-6, atol=1e-6)
