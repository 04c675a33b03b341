"""``tilelang.tools.Analyzer`` (tilesim.tools.analyzer): FLOPs, global bytes and the roofline of a kernel."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
import tilesim.language as T
from tilesim import KernelError
from tilesim.carver.arch import CUDA
from tilesim.tools import AnalysisResult, Analyzer


def _gemm(M, N, K, bm, bn, bk, dtype="float16"):
    @tilesim.jit
    def kernel(A, B, block_M=None, block_N=None, block_K=None):
        A: T.Tensor((M, K), dtype)
        B: T.Tensor((N, K), dtype)
        C = T.empty((M, N), dtype)
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_N, block_K), dtype)
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[bx * block_N, k * block_K], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[by * block_M, bx * block_N])
        return C

    return kernel.get_tir(block_M=bm, block_N=bn, block_K=bk)


@settings(max_examples=6, deadline=None)
@given(st.sampled_from([(256, 256, 128), (200, 136, 96), (1000, 520, 72)]), st.sampled_from([(64, 64, 32), (128, 64, 32)]))
def test_counts_are_tilelangs_tile_counts(shape, tiles):
    """FLOPs: 2*bm*bn*bk per gemm call over every block and K step (edge tiles whole, as TileLang counts);
    bytes: what moves — each A tile once per column of blocks, each B tile once per row, C once, edge tiles
    clipped to the tensors."""
    M, N, K = shape
    bm, bn, bk = tiles
    res = Analyzer.analysis(_gemm(M, N, K, bm, bn, bk), CUDA("cuda"))
    nbx, nby, ksteps = -(-N // bn), -(-M // bm), -(-K // bk)
    assert res.total_flops == 2 * bm * bn * bk * nbx * nby * ksteps
    assert res.total_global_bytes == 2 * (nbx * M * K + nby * N * K + M * N)


def test_roofline_fields_follow_the_device():
    pf = _gemm(1024, 1024, 1024, 128, 128, 32)
    h200 = Analyzer.analysis(pf, CUDA("cuda"))
    a100 = Analyzer.analysis(pf, "a100_sxm4_80gb")
    assert isinstance(h200, AnalysisResult)
    assert h200.total_flops == a100.total_flops == 2 * 1024 ** 3
    assert h200.expected_bandwidth_GBps == pytest.approx(4800.0)
    assert a100.expected_bandwidth_GBps == pytest.approx(2039.0)
    for r in (h200, a100):
        assert r.expected_tflops and r.expected_tflops > 100
        roof = max(r.total_global_bytes / (r.expected_bandwidth_GBps * 1e9), r.total_flops / (r.expected_tflops * 1e12))
        assert r.estimated_time == pytest.approx(roof, rel=1e-3)
        assert r.simulated_time >= r.estimated_time * 0.99 and r.bound
    assert a100.estimated_time > h200.estimated_time


def test_two_step_form_and_compiled_kernels_agree():
    pf = _gemm(256, 128, 64, 64, 64, 32)
    one = Analyzer.analysis(pf, None)
    assert Analyzer(pf, None).ir_pass().calculate() == one
    assert Analyzer.analysis(tilesim.compile(pf), None) == one


def test_kernels_without_gemm_have_no_peak():
    @tilesim.jit(out_idx=[1])
    def scale(M):
        @T.prim_func
        def main(X: T.Tensor((M,), "float32"), Y: T.Tensor((M,), "float32")):
            with T.Kernel(T.ceildiv(M, 256), threads=256) as bx:
                for i in T.Parallel(256):
                    Y[bx * 256 + i] = X[bx * 256 + i] * 2.0
        return main

    res = Analyzer.analysis(scale.get_tir(1000), None)
    assert res.total_flops == 0 and res.expected_tflops is None
    assert res.total_global_bytes >= 2 * 1000 * 4
    assert res.estimated_time == pytest.approx(res.total_global_bytes / (res.expected_bandwidth_GBps * 1e9))


def test_bad_inputs_are_clear_errors():
    with pytest.raises(KernelError, match="PrimFunc"):
        Analyzer.analysis(object(), None)
    with pytest.raises(KernelError, match="device"):
        Analyzer.analysis(_gemm(128, 128, 64, 64, 64, 32), 3.5)
