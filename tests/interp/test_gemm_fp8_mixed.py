"""``T.gemm`` with one e4m3 and one e5m2 operand (TileLang accepts any fp8 pair: ``src/cuda/op/gemm.cc``
``is_float8()`` on both): the interpreter and the CPU target compute ``A @ B.T`` with exact products and fp32
accumulation, on shapes the tiles do not divide. (The CUDA lowering: ``tests/backends/test_tensor_cores_fp8.py``.)"""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim as tilelang
import tilesim.language as T
from tilesim.errors import KernelTypeError
from tilesim.jit import JITKernel


@tilelang.jit(out_idx=[-1])
def mixed_mm(a_dtype, b_dtype, block=32):
    M, N, K = T.dynamic("m"), T.dynamic("n"), T.dynamic("k")

    @T.prim_func
    def main(A: T.Tensor((M, K), a_dtype), B: T.Tensor((N, K), b_dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=64) as (bx, by):
            A_s = T.alloc_shared((block, block), a_dtype)
            B_s = T.alloc_shared((block, block), b_dtype)
            acc = T.alloc_fragment((block, block), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block), num_stages=2):
                T.copy(A[by * block, k * block], A_s)
                T.copy(B[bx * block, k * block], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True)
            T.copy(acc, C[by * block, bx * block])

    return main


_KERNELS = {}


def _kernel(a, b):
    if (a, b) not in _KERNELS:
        _KERNELS[(a, b)] = mixed_mm(a, b)
    return _KERNELS[(a, b)]


@settings(max_examples=12, deadline=None)
@given(m=st.integers(1, 70), n=st.integers(1, 70), k=st.integers(1, 100), swap=st.booleans(),
       target=st.sampled_from(["interp", "cpu"]), seed=st.integers(0, 2**16))
def test_mixed_fp8_gemm_is_exact_products_with_fp32_sums(m, n, k, swap, target, seed):
    a, b = ("float8_e5m2", "float8_e4m3fn") if swap else ("float8_e4m3fn", "float8_e5m2")
    rng = np.random.default_rng(seed)
    A = (rng.standard_normal((m, k)) * 4).astype(getattr(ml_dtypes, a))
    B = (rng.standard_normal((n, k)) * 4).astype(getattr(ml_dtypes, b))
    kern = _kernel(a, b)
    out = np.asarray(JITKernel(kern.prim_func, out_idx=kern.out_idx, target=target)(A, B), dtype=np.float64)
    ref = A.astype(np.float64) @ B.astype(np.float64).T
    # fp32 sums of exact products: within k fp32 ulps of the largest partial sum
    bound = k * 2.0**-23 * (np.abs(A.astype(np.float64)) @ np.abs(B.astype(np.float64)).T).max()
    assert np.abs(out - ref).max() <= bound + 1e-30


def test_fp8_with_a_16_bit_operand_is_still_refused():
    with pytest.raises(KernelTypeError, match="A is float8_e5m2 but B is float16"):
        mixed_mm("float8_e5m2", "float16")
