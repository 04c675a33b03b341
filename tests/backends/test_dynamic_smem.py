"""Shared memory past 48 KB: one dynamic allocation carved into the buffers (``lower._carve_dynamic``),
launched with ``sharedmem`` and the kernel's opt-in attribute set (``caps.opt_in_dynamic_smem``).
Checked here by lowering, compiling to PTX/SASS for sm_90 and running under numba's CUDA simulator;
the ``gpu`` test runs a 200 KB kernel on a real GPU (skipped without one)."""

import os
import subprocess
import sys

import numpy as np
import pytest

from ._util import ROOT, can_compile_ptx, needs_numba_cuda, sass_of

pytestmark = [needs_numba_cuda, pytest.mark.usefixtures("mma_sync_lowering")]  # the mma.sync lowering (conftest)


def _copy_kernel(M, W, rows=128, threads=128):
    """A -> fp32 shared tile -> fp16 shared tile -> B: ``rows * W * 6`` bytes of shared memory."""
    import tilesim
    import tilesim.language as T

    @tilesim.jit(out_idx=[-1], target="interp")
    def staged(M):
        @T.prim_func
        def main(A: T.Tensor((M, W), "float32"), B: T.Tensor((M, W), "float32")):
            with T.Kernel(T.ceildiv(M, rows), threads=threads) as bx:
                S1 = T.alloc_shared((rows, W), "float32")
                S2 = T.alloc_shared((rows, W), "float16")
                T.copy(A[bx * rows, 0], S1)
                T.copy(S1, S2)
                T.copy(S2, B[bx * rows, 0])

        return main

    return staged(M)


def test_under_48kb_keeps_static_arrays():
    from tilesim.backends.cuda import compile_cuda

    p = compile_cuda(_copy_kernel(300, 32).prim_func, sim=False)  # 24 KB (+ padding)
    k = p.kernels[0]
    assert k.dyn_smem == 0 and "cuda.shared.array(0" not in k.source
    assert k.source.count("cuda.shared.array(") == 2


def test_padded_rows_go_dynamic_before_unpadded_rows_stay_static():
    from tilesim.backends.cuda import compile_cuda

    # W = 64: unpadded 128 x 64 x 6 B = 48 KB exactly (static would fit), padded rows (65 fp32, 66 fp16)
    # 50176 B: padded dynamic wins — unpadded rows put every row start in one bank (2.4x slower attention)
    k = compile_cuda(_copy_kernel(300, 64).prim_func, sim=False).kernels[0]
    assert k.dyn_smem == k.smem_bytes == 128 * 65 * 4 + 128 * 66 * 2
    assert "not padded" not in " ".join(k.notes)


def test_past_48kb_one_dynamic_allocation_carved_aligned():
    from tilesim.backends.cuda import compile_cuda

    p = compile_cuda(_copy_kernel(300, 128).prim_func, sim=False)  # 96 KB
    k = p.kernels[0]
    assert k.dyn_smem == k.smem_bytes > 48 * 1024
    src = k.source
    assert "_dsm_float32 = cuda.shared.array(0, float32, alignment=16)" in src
    assert "_dsm_float16 = cuda.shared.array(0, float16, alignment=16)" in src
    # S1: 128 rows of 129 (padded) fp32 = 66048 B; S2 starts at the next 16-byte boundary, in halves
    assert "S1_" in src and "= _dsm_float32[0:16512]" in src
    assert "= _dsm_float16[33024:" in src and 33024 * 2 % 16 == 0
    assert "dynamic shared memory" in p.source


@pytest.mark.parametrize("W", [128, 272])
def test_dynamic_kernel_compiles_to_sass(W, tmp_path):
    from tilesim.backends.cuda.runtime import CudaProgram

    if not can_compile_ptx():
        pytest.skip("numba-cuda cannot compile here (no NVVM)")
    prog = CudaProgram(_copy_kernel(300, W).prim_func, sim=False)
    assert prog.kernels[0].dyn_smem > 48 * 1024
    (name, ptx), = prog.compile_ptx((9, 0))
    assert ".extern .shared .align 16" in ptx
    log, sass = sass_of(ptx, tmp_path)
    assert "0 bytes spill stores" in log and "smem" not in log  # no static shared memory left
    assert "STS" in sass and "LDS" in sass


def test_beyond_the_opt_in_limit_names_every_buffer():
    from tilesim import KernelTypeError
    from tilesim.backends.cuda import compile_cuda

    with pytest.raises(KernelTypeError) as e:
        compile_cuda(_copy_kernel(300, 320).prim_func, sim=False)  # 240 KB
    msg = str(e.value)
    assert "S1 (128, 320) float32" in msg and "S2 (128, 320) float16" in msg
    assert str(227 * 1024) in msg and "smaller tiles" in msg


_SIM = """
import sys, numpy as np
sys.path.insert(0, {root!r})
import tilesim
from tests.backends.test_dynamic_smem import _copy_kernel
k = _copy_kernel(130, 136, rows=64, threads=64)  # 51 KB: dynamic; 3 blocks, the last partial
jk = tilesim.JITKernel(k.prim_func, out_idx=[-1], target="cuda")
assert "cuda.shared.array(0" in jk.get_kernel_source()
A = np.random.default_rng(0).standard_normal((130, 136)).astype(np.float32)
B = jk(A)
print(float(np.abs(B - A.astype(np.float16).astype(np.float32)).max()))
"""


def test_dynamic_kernel_runs_in_the_cuda_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    r = subprocess.run([sys.executable, "-c", _SIM.format(root=ROOT)], capture_output=True, text=True,
                       env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert float(r.stdout.strip().splitlines()[-1]) == 0.0


@pytest.mark.gpu
def test_200kb_kernel_runs_on_the_gpu():
    from tilesim.backends.cuda.caps import available

    if not available():
        pytest.skip("no CUDA GPU")
    import tilesim
    from tilesim.backends.cuda import compile_cuda

    k = _copy_kernel(1000, 264)  # 128 x 264 x 6 B = 198 KB (+ padding)
    assert compile_cuda(k.prim_func, sim=False).kernels[0].dyn_smem > 190 * 1024
    jk = tilesim.JITKernel(k.prim_func, out_idx=[-1], target="cuda")
    A = np.random.default_rng(1).standard_normal((1000, 264)).astype(np.float32)
    np.testing.assert_array_equal(jk(A), A.astype(np.float16).astype(np.float32))
