"""TileLang's Python modules around the kernels: ``env``, ``contrib.nvcc``, ``tvm.target``/``tvm.testing``,
``testing.requires_package``, ``transform.simplify_prim_func`` as a decorator, and the carver (device
descriptions from the hardware model, the matmul roller, ``MatmulTemplate``)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim as tilelang
import tilesim.language as T
import tilesim.tvm as tvm
from tilesim.carver.arch import CDNA, CUDA
from tilesim.carver.roller import Hint, NoRasterization, Rasterization2DColumn, matmul_hints
from tilesim.carver.template import MatmulTemplate
from tilesim.contrib import nvcc
from tilesim.transform import simplify_prim_func


def test_env_reads_the_environment_on_each_access(monkeypatch, tmp_path):
    monkeypatch.delenv("TILELANG_CACHE_DIR", raising=False)
    assert tilelang.env.TILELANG_CACHE_DIR.endswith("cache")
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    assert tilelang.env.TILELANG_CACHE_DIR == str(tmp_path)
    assert tilelang.env.env.TILELANG_TMP_DIR == str(tmp_path / "tmp")
    with pytest.raises(AttributeError, match="TILELANG_CACHE_DIR"):
        tilelang.env.NO_SUCH_SETTING  # noqa: B018


def test_compute_version_from_target_or_hardware_model(monkeypatch):
    monkeypatch.delenv("TILESIM_HW", raising=False)
    assert nvcc.get_target_compute_version() == "9.0"  # the H200 model (no GPU here)
    assert nvcc.get_target_compute_version("cuda -arch=sm_100a") == "10.0"
    assert nvcc.get_target_compute_version(tvm.target.Target("cuda -arch=sm_86")) == "8.6"
    monkeypatch.setenv("TILESIM_HW", "a100")
    assert nvcc.get_target_compute_version() == "8.0"
    assert nvcc.parse_compute_version("8.6") == (8, 6)
    with pytest.raises(ValueError):
        nvcc.parse_compute_version("sm86")
    monkeypatch.setenv("TILESIM_HW", "ascend_910b2")
    with pytest.raises(RuntimeError, match="compute capability"):
        nvcc.get_target_compute_version()


def test_tvm_target_parses_and_selects_the_tilesim_target():
    t = tvm.target.Target("cuda  -arch=sm_90 -fast")
    assert t.kind.name == "cuda" and t.attrs == {"arch": "sm_90", "fast": True} and str(t) == "cuda -arch=sm_90 -fast"
    assert tvm.target.Target.current() is None
    with pytest.raises(ValueError):
        tvm.target.Target("  ")

    @T.prim_func
    def double(A: T.Tensor((5,), "float32"), B: T.Tensor((5,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(5):
                B[i] = A[i] * 2

    k = tilelang.compile(double, out_idx=[-1], target=tvm.target.Target("interp"))
    assert k.target == "interp"
    np.testing.assert_array_equal(k(np.arange(5, dtype=np.float32)), np.arange(5) * 2)


def test_requires_package_marks_for_pytest_and_still_runs_when_called():
    calls = []

    @tvm.testing.requires_package("numpy")
    def present():
        calls.append("present")

    @tilelang.testing.requires_package("no_such_package_tilesim_xyz")
    def absent():
        calls.append("absent")

    present()
    absent()  # a direct call runs the body (TVM's decorator only marks the test)
    assert calls == ["present", "absent"]
    assert present.tilesim_missing_packages == [] and absent.tilesim_missing_packages == ["no_such_package_tilesim_xyz"]
    marks = [m for m in getattr(absent, "pytestmark", []) if m.name == "skipif"]
    assert marks and "no_such_package_tilesim_xyz" in marks[0].kwargs["reason"]
    assert not getattr(present, "pytestmark", [])


def test_simplify_prim_func_decorates_a_program_builder():
    @simplify_prim_func
    def build(n):
        @T.prim_func
        def fill(B: T.Tensor((n,), "int32")):
            with T.Kernel(1, threads=32):
                for i in T.Parallel(n):
                    B[i] = i

        return fill

    pf = build(7)
    np.testing.assert_array_equal(tilelang.compile(pf, out_idx=[-1])(), np.arange(7))

    @simplify_prim_func
    def not_a_builder(n):
        return n

    with pytest.raises(tilelang.KernelTypeError, match="prim_func"):
        not_a_builder(3)


def test_cuda_device_description_comes_from_the_hardware_model(monkeypatch):
    monkeypatch.delenv("TILESIM_HW", raising=False)
    a = CUDA("cuda")
    model = tilelang.hw.resolve("h200")
    assert a.platform == "CUDA" and a.sm_version == 90 and a.compute_capability == "90"
    assert a.compute_max_core == model.primary_core.count == 132
    assert a.smem_cap == model.buffer_for_scope("shared").block_bytes
    assert a.reg_cap == 65536 and a.warp_size == 32 and a.l2_cache_size_bytes == model.caches[0].bytes
    assert a.tensor_flops_per_s("float16") == pytest.approx(989.4e12, rel=1e-3)
    monkeypatch.setenv("TILESIM_HW", "a100")
    b = CUDA("cuda")
    assert (b.compute_max_core, b.sm_version) == (108, 80)
    with pytest.raises(tilelang.KernelTypeError, match="AMD"):
        CDNA("hip")


def _check_hint(arch, h, M, N, K, in_bits=16):
    (bm, bn), (wm, wn), (bk,) = h.block, h.warp, h.rstep
    assert bm % wm == 0 and bn % wn == 0 and wm >= 16 and wn >= 16
    assert 32 <= h.num_threads <= arch.max_threads_per_block
    assert bk % (256 // in_bits) == 0
    assert h.pipeline_stage * (bm + bn) * bk * in_bits // 8 <= arch.smem_cap
    assert h.estimate["waves"] == math.ceil(math.ceil(M / bm) * math.ceil(N / bn)
                                           / (arch.compute_max_core * h.estimate["blocks_per_sm"]))


def test_matmul_roller_ranks_valid_tilings_by_estimate():
    arch = CUDA("cuda")
    hints = matmul_hints(arch, 4096, 4096, 4096, "float16", "float32", "float16", topk=8)
    assert len(hints) == 8 and all(isinstance(h, Hint) for h in hints)
    for h in hints:
        _check_hint(arch, h, 4096, 4096, 4096)
    times = [h.estimate["seconds"] for h in hints]
    assert times == sorted(times)
    # a large problem wants large tiles; a 4096^2 fp16 B (32 MiB) exceeds half the 60 MiB L2: rasterized
    assert hints[0].block[0] * hints[0].block[1] >= 128 * 128
    assert isinstance(hints[0].rasterization_plan, Rasterization2DColumn)
    small = matmul_hints(arch, 64, 64, 64, "float16", "float32", "float16", topk=3)
    assert small[0].rasterization_plan == NoRasterization() and small[0].block[0] <= 64
    assert [repr(h) for h in small] == [repr(h) for h in matmul_hints(arch, 64, 64, 64, topk=3)]
    int8 = matmul_hints(arch, 512, 512, 512, "int8", "int32", "int32", topk=4)
    for h in int8:
        _check_hint(arch, h, 512, 512, 512, in_bits=8)


def test_matmul_template_validates_and_recommends():
    with pytest.raises(tilelang.KernelTypeError, match="positive"):
        MatmulTemplate(M=0, N=4, K=4)
    t = MatmulTemplate(M=256, N=256, K=256).with_arch(CUDA("cuda"))
    hints = t.recommend_hints(topk=5)
    assert len(hints) == 5 and hints[0].rstep[0] % 16 == 0


@settings(max_examples=6, deadline=None)
@given(M=st.integers(1, 90), N=st.integers(1, 70), K=st.integers(1, 60), trans_A=st.booleans(),
       trans_B=st.booleans(), with_bias=st.booleans())
def test_matmul_template_equivalent_function_computes_the_product(M, N, K, trans_A, trans_B, with_bias):
    t = MatmulTemplate(M=M, N=N, K=K, trans_A=trans_A, trans_B=trans_B, in_dtype="float16",
                       out_dtype="float32", accum_dtype="float32", with_bias=with_bias)
    k = tilelang.compile(t.equivalent_function(), out_idx=[-1])
    rng = np.random.default_rng(M * 10000 + N * 100 + K)
    a = rng.standard_normal((K, M) if trans_A else (M, K)).astype(np.float16)
    b = rng.standard_normal((N, K) if trans_B else (K, N)).astype(np.float16)
    ref = (a.T if trans_A else a).astype(np.float32) @ (b.T if trans_B else b).astype(np.float32)
    if with_bias:
        bias = rng.standard_normal(N).astype(np.float32)
        out, ref = k(a, b, bias), ref + bias
    else:
        out = k(a, b)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
