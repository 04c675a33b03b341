"""A TileLang GPU target this machine cannot run (``target="cuda"`` without a GPU, ``"hip -mcpu=gfx950"``,
``{"kind": "hip", ...}``, ``tvm.target.Target("metal")``) runs the program's tile-level meaning on the interpreter
with one ``TargetFallbackWarning`` naming the requested target (``TILESIM_TARGET_WARN=0``: none); an unknown
target kind stays a ``KernelTypeError``."""

import warnings

import numpy as np
import pytest

import tilesim as tilelang
import tilesim.language as T
from tilesim import backends
from tilesim.backends.cuda import available as cuda_available
from tilesim.tvm.target import Target


def _double(n=48):
    @T.prim_func
    def k(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:
            for i in T.Parallel(32):
                if bx * 32 + i < n:
                    B[bx * 32 + i] = A[bx * 32 + i] * 2

    return k


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(backends, "_WARNED", set())
    monkeypatch.delenv("TILESIM_TARGET_WARN", raising=False)


@pytest.mark.parametrize("target", ["hip -mcpu=gfx950", "rocm", "metal", "webgpu", {"kind": "hip", "mcpu": "gfx942"},
                                    Target("hip -mcpu=gfx90a")])
def test_foreign_gpu_target_runs_on_the_interpreter_with_one_warning(target):
    a = np.arange(48, dtype=np.float32)
    with pytest.warns(tilelang.TargetFallbackWarning) as record:
        k1 = tilelang.compile(_double(), out_idx=[-1], target=target)
        k2 = tilelang.compile(_double(), out_idx=[-1], target=target)   # same target: no second warning
    assert len(record) == 1
    text = str(record[0].message)
    assert f"target '{backends.target_text(target)}'" in text and "interpreter" in text and "no " in text
    assert record[0].filename.endswith("test_target_fallback.py")          # points at the kernel
    assert k1.target == k2.target == "interp" and k1.requested_target == backends.target_text(target)
    np.testing.assert_array_equal(k1(a), 2 * a)


def test_cuda_without_a_gpu_keeps_its_generated_source():
    if cuda_available():
        pytest.skip("a CUDA GPU is present: target='cuda' runs there")
    with pytest.warns(tilelang.TargetFallbackWarning, match="target 'cuda -arch=sm_90' .*no usable CUDA GPU"):
        k = tilelang.compile(_double(), out_idx=[-1], target="cuda -arch=sm_90")
    assert k.target == "interp" and "cuda.threadIdx.x" in k.get_kernel_source()
    np.testing.assert_array_equal(k(np.ones(48, np.float32)), 2)


def test_a_construct_the_cuda_backend_refuses_is_named_in_the_warning():
    if cuda_available():
        pytest.skip("a CUDA GPU is present")

    @T.prim_func
    def shuffle(A: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            A[tx] = T.shfl_down(A[tx], 1)

    with pytest.warns(tilelang.TargetFallbackWarning, match="its backend refuses this kernel: warp shuffles"):
        k = tilelang.compile(shuffle, target="cuda")
    a = np.arange(32, dtype=np.float32)
    k(a)
    np.testing.assert_array_equal(a, np.r_[np.arange(1, 32), 31].astype(np.float32))


def test_the_warning_can_be_switched_off(monkeypatch):
    monkeypatch.setenv("TILESIM_TARGET_WARN", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k = tilelang.compile(_double(), out_idx=[-1], target="hip")
    assert k.target == "interp"


def test_unknown_kinds_stay_errors():
    for bad in ("tpu", "llvm -mcpu=x", {"kind": "vulkan"}):
        with pytest.raises(tilelang.KernelTypeError, match="unknown target"):
            tilelang.compile(_double(), out_idx=[-1], target=bad)
    assert backends.gpu_fallback("interp") is None and backends.gpu_fallback("auto") is None


def test_fallback_off_keeps_the_requested_backend():
    if cuda_available():
        pytest.skip("a CUDA GPU is present")
    k = tilelang.JITKernel(tilelang.compile(_double()).prim_func, out_idx=[-1], target="cuda", fallback=False)
    assert k.target == "cuda"
    with pytest.raises(tilelang.KernelRuntimeError, match="no usable CUDA GPU"):
        k(np.ones(48, np.float32))
