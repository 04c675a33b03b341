"""The kernel-object surface TileLang users rely on: profiler, out_idx, pass configs, caching, autotune."""

import warnings

import numpy as np
import pytest

import tilesim
import tilesim as tilelang
import tilesim.language as T
from tilesim.examples import matmul


def test_surface_names():
    for name in ("jit", "compile", "autotune", "PassConfigKey", "TensorSupplyType", "language"):
        assert hasattr(tilelang, name)
    assert tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED.value == "tl.disable_warp_specialized"


def test_profiler_assert_allclose_and_do_bench():
    k = matmul(48, 40, 24, 16, 16, 16, dtype="float16")
    prof = k.get_profiler(tilelang.TensorSupplyType.Randn, tensor_type="numpy")
    prof.assert_allclose(lambda a, b: a.astype(np.float32) @ b.astype(np.float32), rtol=1e-2, atol=1e-2)
    with pytest.raises(AssertionError):
        prof.assert_allclose(lambda a, b: a.astype(np.float32) @ b.astype(np.float32) + 1, rtol=1e-2, atol=1e-2)
    assert prof.do_bench(warmup=1, rep=2) > 0


def test_kernels_are_cached_per_arguments():
    assert matmul(32, 32, 32) is matmul(32, 32, 32)
    assert matmul(32, 32, 32) is not matmul(32, 32, 64)


def test_compile_with_out_idx_list_and_negative():
    pf = matmul(16, 16, 16, 16, 16, 16).prim_func
    k1 = tilelang.compile(pf, out_idx=-1)
    k2 = tilelang.compile(pf, out_idx=[2])
    a = np.ones((16, 16), np.float16)
    assert np.array_equal(k1(a, a), k2(a, a))


def test_pass_configs_warn_once_and_record():
    pf = matmul(16, 16, 16, 16, 16, 16).prim_func
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        k = tilelang.compile(pf, out_idx=[-1], pass_configs={tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER: True})
        tilelang.compile(pf, out_idx=[-1], pass_configs={"tl.disable_tma_lower": True})
    assert sum("tl.disable_tma_lower" in str(x.message) for x in w) == 1
    assert k.pass_configs == {"tl.disable_tma_lower": True}


def test_disable_safe_memory_pass_config_turns_on_oob_errors():
    k = tilelang.compile(matmul(20, 16, 16, 16, 16, 16, dtype="float32").prim_func, out_idx=[-1],
                         pass_configs={"tl.disable_safe_memory_legalize": True})
    with pytest.raises(tilesim.KernelRuntimeError, match="out-of-bounds"):
        k(np.ones((20, 16), np.float32), np.ones((16, 16), np.float32))


def test_autotune_picks_a_config_with_latency():
    @tilelang.autotune(configs=[{"block_M": 16}, {"block_M": 32}])
    @tilelang.jit(out_idx=[-1])
    def mm(M, N, K, block_M=16):
        @T.prim_func
        def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
            with T.Kernel(T.ceildiv(N, 16), T.ceildiv(M, block_M)) as (bx, by):
                As = T.alloc_shared((block_M, K), "float32")
                Bs = T.alloc_shared((K, 16), "float32")
                Cl = T.alloc_fragment((block_M, 16), "float32")
                T.copy(A[by * block_M, 0], As)
                T.copy(B[0, bx * 16], Bs)
                T.gemm(As, Bs, Cl, clear_accum=True)
                T.copy(Cl, C[by * block_M, bx * 16])
        return main

    k = mm(64, 32, 16)
    assert k.config in ({"block_M": 16}, {"block_M": 32}) and k.latency > 0
    a, b = np.ones((64, 16), np.float32), np.ones((16, 32), np.float32)
    assert np.array_equal(k(a, b), a @ b)


def test_macro_inlining_and_closure_constants():
    @T.macro
    def scale_rows(buf, factor):
        for i, j in T.Parallel(8, 8):
            buf[i, j] = buf[i, j] * factor

    factor = 3.0

    @tilelang.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(A: T.Tensor((8, 8), "float32"), B: T.Tensor((8, 8), "float32")):
            with T.Kernel(1) as bx:
                F = T.alloc_fragment((8, 8), "float32")
                T.copy(A, F)
                scale_rows(F, factor)
                T.copy(F, B)
        return main

    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    assert np.array_equal(k()(a), a * 3)


def test_multiple_launches_in_one_program():
    @tilelang.jit(out_idx=[-1])
    def two(N):
        @T.prim_func
        def main(A: T.Tensor((N,), "float32"), W: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
            with T.Kernel(T.ceildiv(N, 4)) as bx:
                for i in T.Parallel(4):
                    W[bx * 4 + i] = A[bx * 4 + i] * 2
            with T.Kernel(T.ceildiv(N, 4)) as bx:
                for i in T.Parallel(4):
                    B[bx * 4 + i] = W[N - 1 - (bx * 4 + i)]
        return main

    a = np.arange(10, dtype=np.float32)
    w = np.zeros(10, np.float32)
    out = two(10)(a, w)
    assert np.array_equal(out, (a * 2)[::-1])


def test_string_annotations_from_future_import(tmp_path):
    """`from __future__ import annotations` turns parameter annotations into strings naming factory locals."""
    import importlib.util
    src = (
        "from __future__ import annotations\n"
        "import tilesim as tilelang\nimport tilesim.language as T\n\n"
        "@tilelang.jit(out_idx=[-1])\n"
        "def add1(M, dtype='float32'):\n"
        "    @T.prim_func\n"
        "    def main(A: T.Tensor((M,), dtype), B: T.Tensor((M,), dtype)):\n"
        "        with T.Kernel(1) as bx:\n"
        "            for i in T.Parallel(M):\n"
        "                B[i] = A[i] + 1\n"
        "    return main\n")
    path = tmp_path / "future_mod.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("future_mod", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert np.array_equal(mod.add1(5)(np.arange(5, dtype=np.float32)), np.arange(1, 6, dtype=np.float32))
