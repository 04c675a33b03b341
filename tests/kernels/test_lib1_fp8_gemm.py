"""FP8 blockwise-scaled GEMM (kernels/fp8_gemm.py) against the float64 product of the dequantised operands.

Tolerance: bf16 output (rtol = atol = 1.6e-2, ``tilesim.testing.compare``); with an fp32 output the kernel
must be within 1e-4 of the exact product relative to the row/column magnitudes (fp32 sums of exact
e4m3 products), which a kernel applying the scales to the wrong K block would miss by far.
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels.fp8_cast import activations_like, ref_per_block_cast, ref_per_token_cast
from kernels.fp8_gemm import dequant_block, dequant_token, fp8_gemm, ref_fp8_gemm
from tilesim.testing.compare import assert_matches_reference


def _operands(seed, M, N, K, wide_scales=True):
    rng = np.random.default_rng(seed)
    a = activations_like(rng, (M, K), "float32")
    w = (rng.standard_normal((N, K)) / np.sqrt(K)).astype(np.float32)
    if wide_scales:  # K blocks and weight blocks with very different magnitudes
        a *= np.repeat(10.0 ** rng.integers(-3, 4, size=(1, -(-K // 128))), 128, axis=1)[:, :K]
        w *= np.repeat(10.0 ** rng.integers(-2, 3, size=(1, -(-K // 128))), 128, axis=1)[:, :K]
    qa, sa = ref_per_token_cast(a)
    qb, sb = ref_per_block_cast(w)
    return qa, qb, sa, sb


@settings(max_examples=8)
@given(M=st.integers(1, 80), N=st.integers(1, 300), K=st.integers(1, 400),
       block_M=st.sampled_from([32, 64]), block_N=st.sampled_from([32, 64, 128, 256]))
def test_fp8_gemm(M, N, K, block_M, block_N):
    k = fp8_gemm(M, N, K, block_M=block_M, block_N=block_N, num_stages=2)
    assert_matches_reference(k, _operands(M + K, M, N, K), ref_fp8_gemm)


@settings(max_examples=4)
@given(M=st.integers(1, 50), N=st.integers(1, 200), K=st.integers(129, 400))
def test_fp8_gemm_fp32_out_per_block_promotion(M, N, K):
    ops = _operands(K, M, N, K)
    out = fp8_gemm(M, N, K, block_M=32, block_N=64, out_dtype="float32")(*ops)
    ref = ref_fp8_gemm(*ops)
    mag = np.abs(dequant_token(ops[0], ops[2])) @ np.abs(dequant_block(ops[1], ops[3])).T
    assert np.all(np.abs(out - ref) <= 1e-5 * mag + 1e-30)


def test_edge_values():
    """Zero rows of A (scale floor), saturated e4m3 values (±448), and a NaN policy check."""
    M, N, K = 20, 70, 200
    qa, qb, sa, sb = _operands(0, M, N, K, wide_scales=False)
    qa[3] = 0
    qa[4] = np.float32(448.0)
    qb[5] = np.float32(-448.0)
    k = fp8_gemm(M, N, K, block_M=32, block_N=64)
    C = assert_matches_reference(k, (qa, qb, sa, sb), ref_fp8_gemm)[0].astype(np.float32)
    assert np.all(C[3] == 0)
    qa[6, 130] = np.nan
    C = k(qa, qb, sa, sb).astype(np.float32)
    assert np.isnan(C[6]).all() and np.isfinite(np.delete(C, 6, axis=0)).all()


def test_serial_equals_batched():
    ops = _operands(3, 40, 150, 260)
    k = fp8_gemm(40, 150, 260, block_M=32, block_N=64)
    a = k(*ops)
    b = k.run(*ops, options=tilesim.InterpOptions(mode="serial"))
    assert np.array_equal(a.view(np.uint16), b.view(np.uint16))


def _emulated_fp8_tensor_core(qa, qb, sa, sb, keep_bits=14, drop_step=None):
    """C as an fp8 tensor core computes it: per 128-wide K block, four k32 partial sums (exact) added into an
    accumulator that keeps ``keep_bits`` significant bits (truncated: the worse rounding), then scaled in fp32 and
    rounded to bf16. ``drop_step``: (block, step) whose partial sum is lost (a broken pipeline)."""
    import ml_dtypes

    A, B = np.asarray(qa).astype(np.float64), np.asarray(qb).astype(np.float64)
    M, K = A.shape
    C = np.zeros((M, B.shape[0]))
    for kb in range(-(-K // 128)):
        acc = np.zeros_like(C)
        for st_ in range(4):
            lo, hi = kb * 128 + 32 * st_, min(K, kb * 128 + 32 * st_ + 32)
            if lo >= K or (kb, st_) == drop_step:
                continue
            acc = acc + A[:, lo:hi] @ B[:, lo:hi].T
            m, e = np.frexp(acc)
            acc = np.ldexp(np.trunc(m * 2.0 ** keep_bits) / 2.0 ** keep_bits, e)
        sbn = np.repeat(np.asarray(sb, np.float64)[:, kb], 128)[: B.shape[0]]
        C += acc * np.asarray(sa, np.float64)[:, kb][:, None] * sbn[None, :]
    return C.astype(np.float32).astype(ml_dtypes.bfloat16)


def test_registry_compare_takes_the_tensor_cores_accumulation_and_rejects_a_lost_step():
    """``compare_fp8_gemm`` (the registry's check, on the GPU against the interpreter too) accepts Hopper's ~14-bit
    fp8 accumulation and still fails a lost k32 step and permuted rows."""
    import pytest

    from kernels.fp8_gemm import _inputs, compare_fp8_gemm

    for M, N, K in ((70, 150, 100), (33, 200, 300), (64, 256, 1024)):
        qa, qb, sa, sb = _inputs(np.random.default_rng(M), M, N, K)
        exact = ref_fp8_gemm(qa, qb, sa, sb)
        interp = fp8_gemm(M, N, K, num_stages=2)(qa, qb, sa, sb)
        compare_fp8_gemm([interp], [exact])
        gpu_like = _emulated_fp8_tensor_core(qa, qb, sa, sb)
        compare_fp8_gemm([gpu_like], [interp])
        compare_fp8_gemm([gpu_like], [exact])
        with pytest.raises(AssertionError):
            compare_fp8_gemm([_emulated_fp8_tensor_core(qa, qb, sa, sb, drop_step=(0, 1))], [interp])
        with pytest.raises(AssertionError):
            compare_fp8_gemm([np.roll(np.asarray(interp), 1, axis=0)], [interp])
    with pytest.raises(AssertionError):
        compare_fp8_gemm([interp[:, :-1]], [interp])
