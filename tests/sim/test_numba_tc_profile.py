"""The ``numba_tc`` lowering profile: fp16/bf16 gemms on the matrix unit, every other gemm as ``numba``."""

import pytest

import tilesim.sim as S
from kernels import gemm as G


@pytest.mark.parametrize("M, N, K", [(1000, 776, 512), (512, 512, 256)])
def test_bf16_gemm_runs_on_the_matrix_unit(M, N, K):
    k = G.matmul(M, N, K, dtype="bfloat16", out_dtype="float32", block_M=128, block_N=128, block_K=32,
                 num_stages=2, threads=128)
    tc = S.simulate(k.prim_func, "h200_sxm_141gb", "numba_tc")
    fma = S.simulate(k.prim_func, "h200_sxm_141gb", "numba")
    assert any(key.startswith("tensor:") for key in tc.flops) and not any(key.startswith("tensor:") for key in fma.flops)
    assert tc.total_flops == pytest.approx(fma.total_flops)
    assert tc.time_s < fma.time_s


def test_fp32_gemm_keeps_the_fma_path():
    k = G.matmul(300, 200, 64, dtype="float32", out_dtype="float32", block_M=64, block_N=64, block_K=16,
                 num_stages=2, threads=128)
    tc = S.simulate(k.prim_func, "h200_sxm_141gb", "numba_tc")
    fma = S.simulate(k.prim_func, "h200_sxm_141gb", "numba")
    assert tc.time_s == pytest.approx(fma.time_s) and tc.flops == fma.flops
