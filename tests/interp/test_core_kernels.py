"""The core issue's kernels against NumPy, on Hypothesis-drawn shapes that tiles do not divide.

Every kernel also runs block-by-block (mode="serial") and must agree with the batched run, and its IR
must pass the verifier (the frontend runs it; ``verify`` is called again here).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from tests import core_kernels as K
from tilesim import dtypes as dt
from tilesim.ir.verify import verify
from tilesim.testing import assert_matches_reference, compare_arrays
from tilesim.testing.strategies import dim, gemm_case, random_array

SERIAL = tilesim.InterpOptions(mode="serial")


def both_modes(kernel, inputs, ref, **tol):
    assert verify(kernel.prim_func) == []
    outs = assert_matches_reference(kernel, inputs, ref, **tol)
    serial = kernel.run(*inputs, options=SERIAL)
    serial = serial if isinstance(serial, list) else [serial]
    for o, s in zip(outs, serial):
        p = compare_arrays(s, o, rtol=1e-6, atol=1e-6, name="serial vs batched")
        assert p is None, p


def f64(x):
    return x.astype(np.float64)


GEMM_TOL = {"float32": 1e-4, "float16": 1e-3, "bfloat16": 1e-3, "float8_e4m3fn": 1e-3}


@settings(max_examples=8)
@given(gemm_case(), st.integers(0, 2**31 - 1))
def test_matmul_relu(case, seed):
    M, N, Kd, bm, bn, bk, dtype = case
    rng = np.random.default_rng(seed)
    a, b = random_array(rng, (M, Kd), dtype), random_array(rng, (Kd, N), dtype)
    k = K.matmul_relu(M, N, Kd, bm, bn, bk, dtype=dtype)
    t = GEMM_TOL[dtype]
    both_modes(k, (a, b), lambda a, b: np.maximum(f64(a) @ f64(b), 0), rtol=t, atol=t * np.sqrt(Kd))


@settings(max_examples=8)
@given(st.booleans(), st.booleans(), st.sampled_from(["float16", "bfloat16", "float32"]), st.integers(0, 2**31 - 1),
       dim(32, 2), dim(32, 2), dim(16, 3))
def test_matmul_dynamic_transposes(ta, tb, dtype, seed, M, N, Kd):
    rng = np.random.default_rng(seed)
    a = random_array(rng, (Kd, M) if ta else (M, Kd), dtype)
    b = random_array(rng, (N, Kd) if tb else (Kd, N), dtype)
    k = K.matmul_dynamic(32, 32, 16, ta, tb, dtype=dtype)

    def ref(a, b):
        return (f64(a).T if ta else f64(a)) @ (f64(b).T if tb else f64(b))

    t = GEMM_TOL[dtype]
    both_modes(k, (a, b), ref, rtol=t, atol=t * np.sqrt(Kd))


@settings(max_examples=6)
@given(dim(32, 2), dim(32, 2), dim(16, 6), st.integers(1, 4), st.integers(0, 2**31 - 1))
def test_matmul_splitk_atomic(M, N, Kd, split, seed):
    rng = np.random.default_rng(seed)
    a, b = random_array(rng, (M, Kd), "float16"), random_array(rng, (Kd, N), "float16")
    k = K.matmul_splitk(M, N, Kd, 32, 32, 16, split_k=split)
    c = np.zeros((M, N), np.float32)
    k(a, b, c)
    p = compare_arrays(c, f64(a) @ f64(b), rtol=1e-4, atol=1e-4 * np.sqrt(Kd))
    assert p is None, p
    c2 = np.zeros((M, N), np.float32)
    k.run(a, b, c2, options=SERIAL)
    assert compare_arrays(c2, c, rtol=1e-6, atol=1e-5) is None


@settings(max_examples=6)
@given(st.integers(1, 40), st.integers(1, 70), st.integers(0, 2**31 - 1))
def test_elementwise_add_eager(M, N, seed):
    rng = np.random.default_rng(seed)
    a, b = random_array(rng, (M, N), "float32"), random_array(rng, (M, N), "float32")
    out = K.elementwise_add(a, b)
    assert np.array_equal(out, a + b)
    k = K.elementwise_add.compile(M=M, N=N)
    assert np.array_equal(k.run(a, b, options=SERIAL), a + b)


def softmax_ref(x):
    x = f64(x)
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


@settings(max_examples=6)
@given(dim(8, 3), st.integers(1, 150), st.integers(0, 2**31 - 1))
def test_softmax(M, N, seed):
    x = random_array(np.random.default_rng(seed), (M, N), "float32", scale=3.0)
    both_modes(K.softmax(M, N), (x,), softmax_ref, rtol=1e-5, atol=1e-6)


@settings(max_examples=6)
@given(dim(4, 3), st.integers(1, 130), st.integers(0, 2**31 - 1))
def test_rms_norm(M, N, seed):
    rng = np.random.default_rng(seed)
    x, w = random_array(rng, (M, N), "float32"), random_array(rng, (N,), "float32")

    def ref(x, w):
        return f64(x) / np.sqrt((f64(x) ** 2).mean(1, keepdims=True) + 1e-6) * f64(w)

    both_modes(K.rms_norm(M, N), (x, w), ref, rtol=1e-5, atol=1e-5)


def attention_ref(q, k, v, causal):
    q, k, v = f64(q), f64(k), f64(v)
    s = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
    if causal:
        n = q.shape[1]
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhqk,bkhd->bqhd", p / p.sum(-1, keepdims=True), v)


@settings(max_examples=6)
@given(st.integers(1, 2), st.integers(1, 3), dim(32, 3), st.sampled_from([16, 32]), st.booleans(),
       st.sampled_from(["float16", "bfloat16"]), st.integers(0, 2**31 - 1))
def test_flash_attention(batch, heads, seq, d, causal, dtype, seed):
    rng = np.random.default_rng(seed)
    q, k, v = (random_array(rng, (batch, seq, heads, d), dtype) for _ in range(3))
    kern = K.flash_attention(batch, heads, seq, d, is_causal=causal, block_M=32, block_N=32, dtype=dtype)
    tol = 2e-3 if dtype == "float16" else 2e-2
    both_modes(kern, (q, k, v), lambda q, k, v: attention_ref(q, k, v, causal), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float8_e4m3fn"])
def test_gemm_narrow_inputs_use_full_precision_products(dtype):
    """Products of narrow inputs are exact in fp32, so a K=1 GEMM equals the float64 outer product."""
    rng = np.random.default_rng(1)
    a, b = random_array(rng, (40, 1), dtype), random_array(rng, (1, 24), dtype)
    out = K.matmul_relu(40, 24, 1, 16, 16, 16, dtype=dtype)(a, b)
    ref = np.maximum(f64(a) @ f64(b), 0)
    assert np.array_equal(out.astype(np.float64), ref.astype(np.float32).astype(np.float64))
    assert dt.canon(out.dtype) == "float32"
