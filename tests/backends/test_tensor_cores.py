"""``T.gemm`` on tensor cores (``tensor_cores=True``; off by default): lowering choices, the sm_90 machine
code (HMMA / LDSM counts from ptxas + cuobjdump), whole kernels under numba's CUDA simulator with the
warp-level instructions modelled (``tilesim/backends/cuda/mma_sim.py``), and ``gpu`` tests for the next
session with a GPU (skipped here). The warp-level index math itself: ``test_mma_emulation.py``."""

import os
import subprocess
import sys

import numpy as np
import pytest

from ._util import ROOT, can_compile_ptx, core_module, needs_numba_cuda, sass_of

pytestmark = [needs_numba_cuda, pytest.mark.usefixtures("mma_sync_lowering")]  # the mma.sync lowering (conftest)


def _mm(ta=False, tb=False, dtype="bfloat16", bm=128, bn=128, bk=32, threads=128):
    return core_module().matmul_dynamic(block_M=bm, block_N=bn, block_K=bk, trans_A=ta, trans_B=tb,
                                        dtype=dtype, threads=threads)


def _src(k, **kw):
    from tilesim.backends.cuda import compile_cuda

    return compile_cuda(k.prim_func, sim=False, **kw).source


def test_on_by_default_and_off_by_env(monkeypatch):
    k = _mm()
    monkeypatch.delenv("TILESIM_CUDA_TENSOR_CORES", raising=False)
    on = _src(k)
    assert "_mma_bf16(" in on and on == _src(k, tensor_cores=True)
    monkeypatch.setenv("TILESIM_CUDA_TENSOR_CORES", "0")
    plain = _src(k)
    assert "_mma_" not in plain and "_ldsm4" not in plain
    assert plain == _src(k, tensor_cores=False)
    monkeypatch.setenv("TILESIM_CUDA_TENSOR_CORES", "1")
    assert "_mma_bf16(" in _src(k)


def test_off_under_the_cuda_simulator(monkeypatch):
    from tilesim.backends.cuda import caps

    monkeypatch.delenv("TILESIM_CUDA_TENSOR_CORES", raising=False)
    monkeypatch.setattr(caps, "simulator", lambda: True)
    assert caps.tensor_cores_default() is False
    monkeypatch.setattr(caps, "simulator", lambda: False)
    assert caps.tensor_cores_default() is True
    assert caps.tensor_cores_default(sim=True) is False  # code compiled for the simulator


@pytest.mark.parametrize("kw, why", [
    (dict(dtype="float32"), "fp32 operands"),
    (dict(bm=40, threads=128), "M=40 is not a multiple of 16"),
    (dict(bm=48, bn=24, threads=128), "48x24: no warp grid gives each warp 16 x 16-multiple columns"),
    (dict(bn=24), "N=24 is not a multiple of 16"),
    (dict(bk=8), "K=8 is not a multiple of 16"),
])
def test_ineligible_gemms_keep_the_cuda_core_lowering(kw, why):
    k = _mm(**kw)
    assert _src(k, tensor_cores=True, async_copy=False) == _src(k, tensor_cores=False, async_copy=False), why


def test_accumulator_layout_and_operand_padding():
    from tilesim.backends.cuda import compile_cuda
    from tilesim.backends.cuda.layout import Layout
    from tilesim.backends.cuda.mma_layout import is_mma_layout

    p = compile_cuda(_mm().prim_func, sim=False, tensor_cores=True, async_copy=False)
    src = p.source
    # A (128, 32) bf16 rows padded by 8 elements (16 B), B (32, 128) likewise; 16-byte aligned arrays
    assert "cuda.shared.array(5120, int16, alignment=16)" in src  # 128 x (32 + 8)
    assert "cuda.shared.array(4352, int16, alignment=16)" in src  # 32 x (128 + 8)
    # 2 x 2 warps (GemmWarpPolicy.Square): per warp and k16 step 4 A + 4 B ldmatrix.x4 for 4 x 8 mma
    assert src.count("_mma_bf16(") == 4 * 8 and src.count("_ldsm4ta(") == 4 and src.count("_ldsm4a(") == 4
    # the accumulator's epilogue copy walks the mma layout: rows 16 groups, 2-wide column pairs whose group
    # combines the lane (tid % 4) and the warp's grid column ((tid // 64) % 2)
    assert "_stv2(C_" in src and "(_t4_1 + (_t2_64 * 4))" in src
    assert is_mma_layout(Layout((128, 128), (32, 4), (4, 1), 128, (1, 2)))
    assert is_mma_layout(Layout((128, 128), (16, 8), (4, 1), 128, (1, 2), ((16, 0), (4, 64))))


@pytest.mark.parametrize("policy, grid, mma, lda, ldb", [
    ("FullRow", (4, 1), 2 * 16, 2, 8), ("FullCol", (1, 4), 8 * 4, 8, 2), ("Square", (2, 2), 4 * 8, 4, 4)])
def test_force_policy_picks_the_grid(monkeypatch, policy, grid, mma, lda, ldb):
    from tilesim.backends.cuda import mma_layout as ML

    monkeypatch.setattr(ML, "FORCE_POLICY", policy)
    src = _src(_mm(), tensor_cores=True, async_copy=False)
    assert src.count("_mma_bf16(") == mma and src.count("_ldsm4a(") == lda and src.count("_ldsm4ta(") == ldb
    assert ML.warp_grid(128, 128, 128) == grid


_CASES = [(False, False, "bfloat16"), (False, True, "bfloat16"), (True, False, "bfloat16"), (True, True, "bfloat16"),
          (False, False, "float16")]


# NN and TT use both ldmatrix forms for each operand; NT with fp16
@pytest.mark.parametrize("ta, tb, dtype", [_CASES[0], _CASES[3], (False, True, "float16")])
def test_sm90_machine_code_has_hmma_and_ldsm(ta, tb, dtype, tmp_path):
    from tilesim.backends.cuda.runtime import CudaProgram

    if not can_compile_ptx():
        pytest.skip("numba-cuda cannot compile here (no NVVM)")
    prog = CudaProgram(_mm(ta, tb, dtype).prim_func, sim=False, tensor_cores=True, async_copy=False)
    (_, ptx), = prog.compile_ptx((9, 0))
    kind = "bf16" if dtype == "bfloat16" else "f16"
    assert f"mma.sync.aligned.m16n8k16.row.col.f32.{kind}.{kind}.f32" in ptx
    log, sass = sass_of(ptx, tmp_path)
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in log
    hmma = sass.count("HMMA.16816.F32" + (".BF16" if kind == "bf16" else ""))
    ldsm = sass.count("LDSM.16.M88.4")
    ldsm_t = sass.count("LDSM.16.MT88.4")
    # block 128x128x32, 2 x 2 warps: 2 k16 steps x (4 m16 x 8 n8) mma; per step 4 A + 4 B ldmatrix.x4
    # (4 warps along M, the earlier grid: 2 x (2 x 16) mma, per step 2 A + 8 B)
    assert hmma == 2 * 4 * 8
    assert ldsm + ldsm_t == 2 * (4 + 4)
    assert ldsm_t == 2 * ((4 if ta else 0) + (0 if tb else 4))


_SIM = r"""
import json, sys
import numpy as np
sys.path.insert(0, {root!r})
from tests.registry import REGISTRY
from tests.core_kernels import matmul_dynamic
from tilesim.backends.cuda.check import cuda_twin, interp_twin, rel_err

def check(name, k, inputs):
    jk = cuda_twin(k, tensor_cores=True)
    assert "_mma_" in jk.get_kernel_source(), name
    out = jk(*[x.copy() for x in inputs])
    ref = interp_twin(k)(*[x.copy() for x in inputs])
    print(json.dumps({{"name": name, "err": rel_err(out, ref)}}))

rng = np.random.default_rng(0)
for name in ("flash_attention_causal", "flash_attention_full", "matmul_relu"):
    tk = REGISTRY[name]
    check(name, tk.build(tk.toy), tk.inputs(rng, tk.toy))
for ta, tb in ((False, False), (False, True), (True, False), (True, True)):
    k = matmul_dynamic(block_M=32, block_N=16, block_K=16, trans_A=ta, trans_B=tb, dtype="float16", threads=64)
    M, N, K = 40, 24, 24  # the tiles do not divide any of them
    A = rng.standard_normal((K, M) if ta else (M, K)).astype(np.float16)
    B = rng.standard_normal((N, K) if tb else (K, N)).astype(np.float16)
    check(f"matmul_dynamic_{{'T' if ta else 'N'}}{{'T' if tb else 'N'}}", k, [A, B])
"""


def test_whole_kernels_in_the_simulator_with_modelled_warp_instructions():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    r = subprocess.run([sys.executable, "-c", _SIM.format(root=ROOT)], capture_output=True, text=True, env=env,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-4000:]
    import json

    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 7, r.stdout
    for row in rows:
        # attention rounds P to the operand dtype after an exp2 that NumPy computes per element here and
        # vectorised in the interpreter: the two may differ by one fp32 ulp on some CPUs (SIMD dispatch), which
        # flips a rare bf16/fp16 rounding of P, ~1e-5 of the output each; a wrong fragment layout is O(1)
        assert row["err"] < (1e-4 if row["name"].startswith("flash_attention") else 1e-5), row


# ------------------------------------------------------------------------------------ on a GPU
@pytest.mark.gpu
@pytest.mark.parametrize("ta, tb, dtype", _CASES)
def test_tensor_core_gemm_on_the_gpu(ta, tb, dtype):
    from tilesim.backends.cuda.caps import available
    from tilesim.backends.cuda.check import cuda_twin, rel_err

    if not available():
        pytest.skip("no CUDA GPU")
    import ml_dtypes

    M, N, K = 1000, 776, 512  # the 128x128 tiles do not divide M, N
    rng = np.random.default_rng(2)
    npd = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16
    A = rng.standard_normal((K, M) if ta else (M, K)).astype(npd)
    B = rng.standard_normal((N, K) if tb else (K, N)).astype(npd)
    jk = cuda_twin(_mm(ta, tb, dtype), tensor_cores=True)
    assert "_mma_" in jk.get_kernel_source()
    ref = (A.T if ta else A).astype(np.float64) @ (B.T if tb else B).astype(np.float64)
    assert rel_err(np.asarray(jk(A, B)), ref) < 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["flash_attention_causal", "flash_attention_full", "matmul_relu"])
def test_registry_kernels_with_tensor_cores_on_the_gpu(name):
    from tests.registry import REGISTRY
    from tilesim.backends.cuda.caps import available
    from tilesim.backends.cuda.check import cuda_twin, interp_twin, rel_err

    if not available():
        pytest.skip("no CUDA GPU")
    tk = REGISTRY[name]
    k = tk.build(tk.toy)
    inputs = tk.inputs(np.random.default_rng(3), tk.toy)
    jk = cuda_twin(k, tensor_cores=True)
    assert "_mma_" in jk.get_kernel_source()
    got = jk(*[x.copy() for x in inputs])
    want = interp_twin(k)(*[x.copy() for x in inputs])
    # mma.sync sums its k-products in another order than the interpreter, so a 16-bit output can round the
    # other way in a few elements (flash_attention_full, fp16 out: 1.5e-5 on the H200, 2026-12-01); a wrong
    # fragment or tile gives errors of order 1. Allow a sixteenth of the output type's epsilon.
    out_dtype = np.asarray(want).dtype
    tol = 1e-5 if out_dtype.itemsize >= 4 else float(np.finfo(out_dtype).eps) / 16
    assert rel_err(got, want) < tol
