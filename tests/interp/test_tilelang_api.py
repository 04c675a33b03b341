"""The API TileLang programs use around their kernels: autotuner, profiler, do_bench, helpers, tvm/carver names.

Each test writes the program the way a TileLang user does (``import tilesim as tilelang``) and checks the
meaning TileLang gives it; none needs the TileLang repository.
"""

import functools

import ml_dtypes
import numpy as np
import pytest

import tilesim as tilelang
import tilesim.language as T
from tilesim.autotuner import AutoTuner, autotune, set_autotune_inputs
from tilesim.profiler import do_bench
from tilesim.utils.tensor import torch_assert_close


def _matmul_factory(calls):
    def matmul(M, N, K, block_M=16, block_N=16, wrong=False):
        calls.append((block_M, block_N, wrong))

        @T.prim_func
        def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
            with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
                As = T.alloc_shared((block_M, K), "float32")
                Bs = T.alloc_shared((K, block_N), "float32")
                Cl = T.alloc_fragment((block_M, block_N), "float32")
                T.copy(A[by * block_M, 0], As)
                T.copy(B[0, bx * block_N], Bs)
                T.gemm(As, Bs, Cl, clear_accum=True)
                if wrong:
                    for i, j in T.Parallel(block_M, block_N):
                        Cl[i, j] = Cl[i, j] + 1.0
                T.copy(Cl, C[by * block_M, bx * block_N])
        return main
    return matmul


CONFIGS = [{"block_M": 16, "block_N": 16}, {"block_M": 32, "block_N": 32}, {"block_M": 64, "block_N": 32}]


def test_autotune_lazy_ranks_by_simulated_time_and_caches():
    calls = []
    tuned = autotune(configs=CONFIGS, oracle="sim")(tilelang.jit(out_idx=[-1])(_matmul_factory(calls)))
    k = tuned(200, 96, 64)
    sims = {}
    for cfg in CONFIGS:
        kk = tilelang.jit(out_idx=[-1])(_matmul_factory([]))(200, 96, 64, **cfg)
        sims[tuple(cfg.values())] = kk.simulate(hw="h200_sxm_141gb").time_s * 1e3
    best = min(sims, key=sims.get)
    assert tuple(k.config.values()) == best and k.latency == pytest.approx(sims[best])
    a, b = np.random.rand(200, 64).astype(np.float32), np.random.rand(64, 96).astype(np.float32)
    np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-5)
    n = len(calls)
    assert tuned(200, 96, 64) is k and len(calls) == n  # cached per call signature


def test_autotune_explicit_tunable_arguments_skip_the_search():
    calls = []
    tuned = autotune(configs=CONFIGS, oracle="sim")(tilelang.jit(out_idx=[-1])(_matmul_factory(calls)))
    tuned(64, 64, 32, block_M=32, block_N=16)
    assert calls == [(32, 16, False)]


def test_autotune_skips_configs_that_miss_the_reference():
    configs = [{"block_M": 16, "wrong": True}, {"block_M": 32, "wrong": False}]
    tuned = autotune(configs=configs, oracle="sim", ref_prog=lambda a, b: a @ b)(
        tilelang.jit(out_idx=[-1])(_matmul_factory([])))
    k = tuned(64, 32, 16)
    assert k.config == {"block_M": 32, "wrong": False}


def test_autotune_unknown_config_key_is_named():
    tuned = autotune(configs=[{"blockM": 16}], oracle="sim")(tilelang.jit(out_idx=[-1])(_matmul_factory([])))
    with pytest.raises(tilelang.KernelError, match="blockM"):
        tuned(64, 32, 16)


def test_autotune_eager_kernel_returns_outputs_and_compiles():
    @autotune(configs=lambda x: [{"blk": 8}, {"blk": 16}], oracle="measure", warmup=1, rep=1)
    @tilelang.jit
    def double(x, blk=4):
        M, N = T.const("M, N")
        x: T.Tensor([M, N], T.float32)
        y = T.empty([M, N], T.float32)
        with T.Kernel(T.ceildiv(M, blk), threads=32) as bx:
            for i, j in T.Parallel(blk, N):
                y[bx * blk + i, j] = x[bx * blk + i, j] * 2.0
        return y

    x = np.random.rand(37, 5).astype(np.float32)
    np.testing.assert_array_equal(double(x), 2 * x)
    k = double.compile(x)
    assert k.config in ({"blk": 8}, {"blk": 16})
    with set_autotune_inputs(x):
        np.testing.assert_array_equal(double(x), 2 * x)


def test_autotuner_from_kernel_chain():
    res = (AutoTuner.from_kernel(kernel=functools.partial(_matmul_factory([]), 64, 32, 16), configs=CONFIGS[:2])
           .set_compile_args(out_idx=[-1])
           .set_profile_args(ref_prog=lambda a, b: a @ b, oracle="sim")
           .run(warmup=1, rep=1))
    assert res.config in CONFIGS[:2] and res.latency > 0 and res.kernel.config == res.config
    assert len(res.ranking) == 2 and res.ranking[0][0] <= res.ranking[1][0]


def test_profiler_gives_torch_tensors_and_allows_one_percent():
    torch = pytest.importorskip("torch")
    k = tilelang.jit(out_idx=[-1])(_matmul_factory([]))(64, 32, 16)
    prof = k.get_profiler(tilelang.TensorSupplyType.Randn)
    seen = []

    def ref(a, b):
        seen.append(type(a))
        return a @ b
    prof.assert_allclose(ref, rtol=1e-4, atol=1e-4)
    assert seen == [torch.Tensor] and prof.func is k

    def off_by_few(a, b):  # 1% of 2048 outputs may differ: 20 do, 21 do not
        out = a @ b
        out.view(-1)[:20] += 1
        return out
    prof.assert_allclose(off_by_few, rtol=1e-4, atol=1e-4)
    with pytest.raises(AssertionError, match="mismatched"):
        prof.assert_allclose(lambda a, b: off_by_few(a, b) + (torch.arange(2048).view(64, 32) == 20),
                             rtol=1e-4, atol=1e-4)
    assert prof.do_bench(warmup=1, rep=1) > 0
    assert prof.do_bench(ref, n_warmup=2, n_repeat=3) > 0


def test_do_bench_budgets_are_milliseconds():
    n = []
    ms = do_bench(lambda: n.append(1), warmup=0, rep=0)
    assert ms >= 0 and len(n) == 3  # one estimate, one warm-up, one timed call
    n.clear()
    do_bench(lambda: n.append(1), _n_warmup=2, _n_repeat=5)
    assert len(n) == 1 + 2 + 5
    assert len(do_bench(lambda: None, rep=1, return_mode="all")) >= 1
    with pytest.raises(tilelang.KernelError, match="return_mode"):
        do_bench(lambda: None, return_mode="p99")


def test_do_bench_keywords_are_tilelangs():
    calls = []
    do_bench(lambda *a, **k: calls.append((a, k)), warmup=0, rep=0, device=None, cache_size=16,
             early_stop_baseline=None)
    assert calls and all(c == ((), {}) for c in calls)  # fn is called with no arguments
    # TileLang's do_bench(fn, ...) does not forward arguments: a call passing fn's own keywords is a TypeError
    # there (examples/gdn/example_chunk_delta_h.py), never fn() called silently without them
    with pytest.raises(TypeError, match="unexpected keyword argument 'k'"):
        do_bench(lambda k=None: calls.append(k), k=1)


def test_torch_assert_close_mismatch_allowance():
    a = np.zeros(1000)
    b = a.copy()
    b[:1] = 1
    assert torch_assert_close(a, b, max_mismatched_ratio=0.001)
    b[:2] = 1
    with pytest.raises(AssertionError, match="Too many mismatched elements: 2 > 1"):
        torch_assert_close(a, b, max_mismatched_ratio=0.001)


def test_host_helpers():
    assert tilelang.cdiv(7, 2) == 4 and tilelang.cdiv(8, 2) == 4
    assert [tilelang.math.next_power_of_2(x) for x in (0, 1, 3, 64, 65)] == [1, 1, 4, 64, 128]
    tilelang.testing.set_random_seed(3)
    first = np.random.rand(3)
    tilelang.testing.set_random_seed(3)
    assert np.array_equal(first, np.random.rand(3))
    tilelang.disable_cache()
    from tilesim.carver.arch import driver
    assert driver.get_num_sms() == 132  # the default hardware model (H200) without a GPU
    from tilesim.language.fp8 import determine_fp8_type
    assert determine_fp8_type("e5m2") == "float8_e5m2"
    with pytest.raises(tilelang.KernelError, match="e3m4"):
        determine_fp8_type("e3m4")


def test_tvm_tirx_const_and_reinterpret_in_a_kernel():
    from tilesim.tvm import tirx

    @tilelang.jit(out_idx=[-1])
    def unpack(N):
        @T.prim_func
        def main(A: T.Tensor((N,), "uint8"), B: T.Tensor((N,), "uint8")):
            with T.Kernel(1, threads=32):
                for i in T.Parallel(N):
                    B[i] = A[i] & tirx.const(15, "uint8")
        return main

    a = np.arange(40, dtype=np.uint8) * 7
    np.testing.assert_array_equal(unpack(40)(a), a & 15)


def test_float8_e5m2_multi_block_copy():
    @tilelang.jit(out_idx=[-1])
    def widen(M, N, bm=16, bn=16):
        @T.prim_func
        def main(A: T.Tensor((M, N), "float8_e5m2"), B: T.Tensor((M, N), "float32")):
            with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=64) as (bx, by):
                t = T.alloc_shared((bm, bn), "float8_e5m2")
                T.copy(A[by * bm, bx * bn], t)
                T.copy(t, B[by * bm, bx * bn])
        return main

    a = np.random.randn(45, 37).astype(ml_dtypes.float8_e5m2)
    np.testing.assert_array_equal(widen(45, 37)(a), a.astype(np.float32))


def test_eager_kernel_source_and_tuple_arguments():
    @tilelang.jit
    def scale_rows(x, factors):
        M, N = T.const("M, N")
        x: T.Tensor([M, N], T.float32)
        y = T.empty([M, N], T.float32)
        with T.Kernel(1, threads=32):
            for i, j in T.Parallel(M, N):
                y[i, j] = x[i, j] * factors[0] + factors[1]
        return y

    x = np.ones((3, 4), np.float32)
    np.testing.assert_array_equal(scale_rows(x, (2.0, 3.0)), x * 2 + 3)
    np.testing.assert_array_equal(scale_rows(x, [1.0, 1.0]), x + 1)
    assert "scale_rows" in scale_rows.get_kernel_source(x, (2.0, 3.0))


def test_small_modules_programs_import():
    from tilesim.engine.callback import register_cuda_postproc_callback, registered
    from tilesim.tileop.base import GemmWarpPolicy
    from tilesim.transform import PassConfigKey, simplify_prim_func
    from tilesim.utils.tensor import TensorSupplyType, get_tensor_supply

    k = tilelang.jit(out_idx=[-1])(_matmul_factory([]))(48, 32, 16)
    assert simplify_prim_func(k.prim_func) is k.prim_func
    with pytest.raises(tilelang.KernelError, match="prim_func"):
        simplify_prim_func(k)
    supply = get_tensor_supply(TensorSupplyType.One, tensor_type="numpy")
    a = supply(k.input_params[0])
    assert a.shape == (48, 16) and a.dtype == np.float32 and (a == 1).all()

    @register_cuda_postproc_callback
    def post(code, target):
        return code
    assert post in registered
    assert GemmWarpPolicy is T.GemmWarpPolicy and PassConfigKey is tilelang.PassConfigKey
    tilelang.set_log_level("WARNING")


def test_autotune_configs_may_carry_pass_configs():
    configs = [{"block_M": 16, "pass_configs": {"tl.disable_safe_memory_legalize": True}},
               {"block_M": 32, "pass_configs": {"tl.disable_safe_memory_legalize": False}}]
    k = autotune(configs=configs, oracle="sim")(tilelang.jit(out_idx=[-1])(_matmul_factory([])))(64, 32, 16)
    assert k.config in configs
    assert k.pass_configs["tl.disable_safe_memory_legalize"] is k.config["pass_configs"]["tl.disable_safe_memory_legalize"]
    assert k.options.oob == ("error" if k.config["block_M"] == 16 else "zero")


def test_supply_prog_gets_kernel_params():
    """``supply_prog(params)`` gets TileLang's KernelParam view: int shapes, a T.dtype (``as_torch()``)."""
    seen = []

    def supply(params):
        seen.append([(p.name, p.shape, str(p.dtype), p.is_scalar(), p.is_float8()) for p in params])
        assert all(isinstance(p.dtype, T.dtype) for p in params)
        return [np.random.default_rng(0).standard_normal([int(s) for s in p.shape]).astype(np.float32) for p in params]

    tuned = autotune(configs=CONFIGS[:2], oracle="measure", warmup=1, rep=1, supply_prog=supply,
                     ref_prog=lambda a, b: a @ b)(tilelang.jit(out_idx=[-1])(_matmul_factory([])))
    k = tuned(40, 24, 16)
    assert seen and seen[0] == [("A", [40, 16], "float32", False, False), ("B", [16, 24], "float32", False, False)]
    a, b = np.random.rand(40, 16).astype(np.float32), np.random.rand(16, 24).astype(np.float32)
    np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-5)
