"""GEMM family (kernels/gemm.py) against float64 NumPy references.

Tolerances: the output dtype's default from ``tilesim.testing.compare`` (bf16 1.6e-2, fp16 2e-3, fp32
1e-4 relative), which covers one rounding of C plus fp32 accumulation; ``test_fp32_accumulation`` uses
an fp32 output and the fp32 summation error bound to show that narrow inputs accumulate in fp32.
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels.gemm import matmul, matmul_splitk, ref_gemm
from tilesim import dtypes as dt
from tilesim.testing.compare import assert_matches_reference

DTYPES = ("float32", "float16", "bfloat16")
SMALL = dict(block_M=32, block_N=32, block_K=16, num_stages=2)


def _data(seed, M, N, K, dtype, trans_B=False, bias=False):
    rng = np.random.default_rng(seed)
    A = (rng.standard_normal((M, K))).astype(dt.np_dtype(dtype))
    B = (rng.standard_normal((N, K) if trans_B else (K, N)) / np.sqrt(K)).astype(dt.np_dtype(dtype))
    out = [A, B]
    if bias:
        out.append(rng.standard_normal(N).astype(dt.np_dtype(dtype)))
    return out


dims = st.integers(1, 90)


@settings(max_examples=8)
@given(M=dims, N=dims, K=dims, dtype=st.sampled_from(DTYPES), trans_B=st.booleans())
def test_gemm(M, N, K, dtype, trans_B):
    k = matmul(M, N, K, dtype=dtype, trans_B=trans_B, **SMALL)
    ins = _data(M * 7 + N, M, N, K, dtype, trans_B)
    assert_matches_reference(k, ins, lambda A, B: ref_gemm(A, B, trans_B=trans_B))


@settings(max_examples=8)
@given(M=dims, N=dims, K=dims, dtype=st.sampled_from(DTYPES), bias=st.booleans(),
       activation=st.sampled_from([None, "relu", "gelu_tanh", "silu"]), trans_B=st.booleans())
def test_gemm_epilogue(M, N, K, dtype, bias, activation, trans_B):
    k = matmul(M, N, K, dtype=dtype, trans_B=trans_B, bias=bias, activation=activation, **SMALL)
    ins = _data(K, M, N, K, dtype, trans_B, bias)
    assert_matches_reference(k, ins, lambda *a: ref_gemm(*a, trans_B=trans_B, activation=activation))


@settings(max_examples=4)
@given(M=dims, N=dims, K=st.integers(100, 300), dtype=st.sampled_from(("float16", "bfloat16")))
def test_fp32_accumulation(M, N, K, dtype):
    """Narrow inputs, fp32 output: products are exact in fp32, so only fp32 summation error remains —
    within the classical bound K·2^-24·(|A| @ |B|), which a narrower accumulator would exceed ~10^4-fold."""
    k = matmul(M, N, K, dtype=dtype, out_dtype="float32", **SMALL)
    A, B = _data(1, M, N, K, dtype)
    C = k(A, B)
    bound = K * 2.0 ** -24 * (np.abs(A.astype(np.float64)) @ np.abs(B.astype(np.float64)))
    assert np.all(np.abs(C - ref_gemm(A, B)) <= bound)


@settings(max_examples=6)
@given(M=dims, N=dims, K=st.integers(1, 200), split_k=st.sampled_from([1, 2, 3, 5]),
       dtype=st.sampled_from(DTYPES), trans_B=st.booleans())
def test_splitk(M, N, K, split_k, dtype, trans_B):
    """Outputs start as NaN, so a correct result also shows the zeroing launch ran first; more splits
    than K blocks leave some slices empty."""
    k = matmul_splitk(M, N, K, split_k=split_k, dtype=dtype, trans_B=trans_B, **SMALL)
    ins = _data(2, M, N, K, dtype, trans_B)
    assert_matches_reference(k, ins, lambda A, B: ref_gemm(A, B, trans_B=trans_B), rtol=1e-3, atol=1e-4)


def test_splitk_has_zeroing_launch_and_no_races():
    from tilesim.ir import nodes as N
    k = matmul_splitk(40, 50, 130, split_k=3, dtype="float16", **SMALL)
    launches = [s for s in k.prim_func.body if isinstance(s, N.Launch)]
    assert len(launches) == 2
    ins = _data(3, 40, 50, 130, "float16")
    out = k.run(*ins, options=tilesim.InterpOptions(races=True))
    assert np.allclose(out, ref_gemm(*ins), rtol=1e-3, atol=1e-4)


def test_edge_values():
    """Zeros, large magnitudes and the NaN policy (a NaN in A reaches exactly its row of C)."""
    M, N, K = 37, 45, 50
    A, B = _data(4, M, N, K, "float32")
    A[3] = 0.0
    A[5] *= 1e15
    A[7, 11] = np.nan
    k = matmul(M, N, K, dtype="float32", **SMALL)
    C = assert_matches_reference(k, [A, B], ref_gemm)[0]
    assert np.all(C[3] == 0) and np.isnan(C[7]).all() and np.isfinite(np.delete(C, 7, axis=0)).all()
    kb = matmul(M, N, K, dtype="bfloat16", bias=True, activation="relu", **SMALL)
    A16 = np.full((M, K), 1e30, dtype=dt.np_dtype("bfloat16"))
    B16 = np.full((K, N), 1e-30, dtype=dt.np_dtype("bfloat16"))
    bias = np.zeros(N, dtype=dt.np_dtype("bfloat16"))
    assert_matches_reference(kb, [A16, B16, bias], lambda *a: ref_gemm(*a, activation="relu"))


def test_serial_equals_batched():
    for k, ins in ((matmul(50, 40, 70, dtype="bfloat16", bias=True, activation="silu", trans_B=True, **SMALL),
                    _data(5, 50, 40, 70, "bfloat16", True, True)),
                   (matmul_splitk(50, 40, 70, split_k=3, dtype="float16", **SMALL), _data(5, 50, 40, 70, "float16"))):
        a = k(*ins)
        b = k.run(*ins, options=tilesim.InterpOptions(mode="serial"))
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8))
