"""The TileLang-compatibility lint: each rule fires on the pattern real TileLang 0.1.15 rejected, and
the library kernels that compiled with real TileLang on the H200 are clean."""

import pytest

import tilesim as tilelang
import tilesim.language as T
from tests import core_kernels as K
from tilesim.cli import main
from tilesim.lint import lint


def rules(k):
    return sorted({f.rule for f in lint(k.prim_func)})


def test_non_power_of_two_rows_are_flagged():
    assert rules(K.softmax(16, 100)) == ["pow2"]
    assert rules(K.softmax(16, 128)) == []


def test_fragment_index_data_dependent_pipeline_and_bf16_workspace():
    @tilelang.jit(out_idx=[-1])
    def k(N=64):
        @T.prim_func
        def main(L: T.Tensor((4,), "int32"), A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
            W = T.alloc_global((N,), "bfloat16")
            with T.Kernel(4) as bx:
                f = T.alloc_fragment((N,), "float32")
                T.copy(A, f)
                for kk in T.Pipelined(L[bx], num_stages=2):
                    for i in T.Parallel(N):
                        B[i] = f[(i + kk) % N]
        return main

    assert rules(k()) == ["data-dependent-pipeline", "fragment-index", "global-narrow-workspace"]


@pytest.mark.parametrize("name", ["gemm", "gemm_splitk", "fp8_gemm", "rmsnorm", "layernorm", "layernorm_gelu",
                                  "layernorm_gelu_unfused", "softmax", "moe_topk_route", "swiglu_fp8",
                                  "flash_attention_fwd", "dsa_indexer", "batched_transpose"])
def test_kernels_real_tilelang_compiled_are_clean(name):
    from kernels.registry import get
    spec = get(name)
    assert rules(spec.build(**spec.params(spec.shapes[0]))) == []


def test_lint_cli_exit_codes(capsys):
    assert main(["lint", "tests/core_kernels.py::softmax", "--args", "M=16", "N=128"]) == 0
    assert main(["lint", "tests/core_kernels.py::softmax", "--args", "M=16", "N=100"]) == 1
    out = capsys.readouterr().out
    assert "[pow2]" in out and "core_kernels.py" in out
