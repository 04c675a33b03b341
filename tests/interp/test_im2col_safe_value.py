"""T.im2col (convolution as im2col + gemm, TileLang's conv example layout) and T.annotate_safe_value."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
import tilesim as tilelang
import tilesim.language as T


@tilelang.jit(out_idx=[2])
def conv2d(N, C, H, W, F, K, S, D, P, block_M=32, block_N=16, block_K=16, dtype="float32"):
    KH = KW = K
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1

    @T.prim_func
    def main(data: T.Tensor((N, H, W, C), dtype), kernel: T.Tensor((KH, KW, C, F), dtype),
             out: T.Tensor((N, OH, OW, F), "float32")):
        with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(N * OH * OW, block_M), threads=128) as (bx, by):
            data_s = T.alloc_shared((block_M, block_K), dtype)
            kernel_s = T.alloc_shared((block_K, block_N), dtype)
            out_l = T.alloc_fragment((block_M, block_N), "float32")
            kernel_flat = T.reshape(kernel, (KH * KW * C, F))
            out_flat = T.reshape(out, (N * OH * OW, F))
            T.clear(out_l)
            for k_iter in T.Pipelined(T.ceildiv(KH * KW * C, block_K), num_stages=2):
                T.c2d_im2col(data, data_s, by, k_iter, KH, S, D, P)
                T.copy(kernel_flat[k_iter * block_K, bx * block_N], kernel_s)
                T.gemm(data_s, kernel_s, out_l)
            T.copy(out_l, out_flat[by * block_M, bx * block_N])

    return main


def conv_ref(x, w, S, D, P):
    n, h, wd, c = x.shape
    k, _, _, f = w.shape
    oh = (h + 2 * P - D * (k - 1) - 1) // S + 1
    ow = (wd + 2 * P - D * (k - 1) - 1) // S + 1
    xp = np.pad(x.astype(np.float64), ((0, 0), (P, P), (P, P), (0, 0)))
    out = np.zeros((n, oh, ow, f))
    for kh in range(k):
        for kw in range(k):
            patch = xp[:, kh * D: kh * D + S * (oh - 1) + 1: S, kw * D: kw * D + S * (ow - 1) + 1: S, :]
            out += patch @ w[kh, kw].astype(np.float64)
    return out


@settings(max_examples=6)
@given(st.integers(1, 2), st.integers(1, 5), st.integers(3, 9), st.integers(1, 20), st.sampled_from([1, 3]),
       st.integers(1, 2), st.integers(1, 2), st.integers(0, 1))
def test_conv2d_via_im2col_matches_numpy(n, c, hw, f, k, s, d, p):
    if (hw + 2 * p - d * (k - 1) - 1) < 0:
        return  # no output pixel for this combination
    rng = np.random.default_rng(n * 1000 + c * 100 + hw)
    x = rng.standard_normal((n, hw, hw, c)).astype(np.float32)
    w = rng.standard_normal((k, k, c, f)).astype(np.float32)
    kern = conv2d(n, c, hw, hw, f, k, s, d, p)
    np.testing.assert_allclose(kern(x, w), conv_ref(x, w, s, d, p), rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(kern.run(x, w, options=tilesim.InterpOptions(mode="serial")), kern(x, w))


@tilelang.jit(out_idx=[-1])
def padded_max(M, BM, safe):
    @T.prim_func
    def main(A: T.Tensor((M,), "float32"), B: T.Tensor((T.ceildiv(M, BM),), "float32")):
        with T.Kernel(T.ceildiv(M, BM)) as bx:
            if safe:
                T.annotate_safe_value({A: -T.infinity("float32")})
            f = T.alloc_fragment((BM,), "float32")
            r = T.alloc_fragment((1,), "float32")
            T.copy(A[bx * BM], f)
            T.reduce_max(f, r, dim=0)
            B[bx] = r[0]

    return main


def test_safe_value_fills_out_of_range_reads():
    a = -np.arange(1, 11, dtype=np.float32)  # all negative: a zero fill would win the max
    assert padded_max(10, 8, False)(a)[1] == 0.0
    assert np.array_equal(padded_max(10, 8, True)(a), [-1.0, -9.0])


def test_safe_value_is_refused_by_the_cuda_backend():
    from tilesim.backends.cuda import compile_cuda
    with pytest.raises(tilesim.KernelSyntaxError, match="annotate_safe_value is not lowered"):
        compile_cuda(padded_max(10, 8, True).prim_func)


def test_im2col_conv_compiles_for_sm90_and_simulates():
    from tests.backends._util import can_compile_ptx
    from tilesim.backends.cuda import compile_cuda
    k = conv2d(2, 8, 9, 9, 16, 3, 1, 1, 1, dtype="float16")
    assert can_compile_ptx()  # the test extra installs the sm_90 toolchain
    assert "ld.global" in str(compile_cuda(k.prim_func).compile_ptx((9, 0)))
    rep = k.simulate(hw="h100_sxm5_80gb")
    assert rep.time_s >= rep.roofline_s > 0
