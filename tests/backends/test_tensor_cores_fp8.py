"""fp8 (e4m3 / e5m2) ``T.gemm`` on tensor cores: ``mma.sync.m16n8k32`` with fp32 accumulation.

CPU checks: the lowering's choices (which fp8 gemms go to tensor cores, which keep the CUDA cores and why),
the sm_90 PTX and what ptxas makes of it (registers, spills, machine code), and whole kernels under numba's
CUDA simulator with the warp-level instructions modelled (``mma_sim.mma_m16n8k32``) on shapes the tiles do not
divide. ``gpu`` tests compare the GPU with the interpreter (skipped here). The warp-level index math and the
numerics model: ``test_mma_fp8.py``.
"""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import tilesim as tilelang
import tilesim.language as T

from ._util import ROOT, can_compile_ptx, needs_numba_cuda, sass_of

pytestmark = [needs_numba_cuda, pytest.mark.usefixtures("mma_sync_lowering")]  # the mma.sync lowering (conftest)

E4M3, E5M2 = "float8_e4m3fn", "float8_e5m2"


@tilelang.jit(out_idx=[-1])
def fp8_mm(block_M=64, block_N=64, block_K=64, a_dtype=E4M3, b_dtype=E4M3, trans_A=False, trans_B=True,
           threads=128, num_stages=2):
    """``C (M, N) fp32 = A @ B`` with A ``(M, K)`` (``(K, M)`` with trans_A), B ``(N, K)`` (``(K, N)`` without
    trans_B); M, N, K dynamic."""
    M, N, K = T.dynamic("m"), T.dynamic("n"), T.dynamic("k")
    A_shape, A_tile = ((K, M), (block_K, block_M)) if trans_A else ((M, K), (block_M, block_K))
    B_shape, B_tile = ((N, K), (block_N, block_K)) if trans_B else ((K, N), (block_K, block_N))

    @T.prim_func
    def main(A: T.Tensor(A_shape, a_dtype), B: T.Tensor(B_shape, b_dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared(A_tile, a_dtype)
            B_s = T.alloc_shared(B_tile, b_dtype)
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                if trans_A:
                    T.copy(A[k * block_K, by * block_M], A_s)
                else:
                    T.copy(A[by * block_M, k * block_K], A_s)
                if trans_B:
                    T.copy(B[bx * block_N, k * block_K], B_s)
                else:
                    T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, acc, transpose_A=trans_A, transpose_B=trans_B)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


def _src(k, **kw):
    from tilesim.backends.cuda import compile_cuda

    return compile_cuda(k.prim_func, sim=False, **kw).source


@pytest.mark.parametrize("a, b, name", [(E4M3, E4M3, "_mma_e4m3_e4m3("), (E5M2, E5M2, "_mma_e5m2_e5m2("),
                                        (E4M3, E5M2, "_mma_e4m3_e5m2("), (E5M2, E4M3, "_mma_e5m2_e4m3(")])
def test_fp8_gemm_lowers_to_m16n8k32_by_default(monkeypatch, a, b, name):
    monkeypatch.delenv("TILESIM_CUDA_TENSOR_CORES", raising=False)
    k = fp8_mm(block_M=128, block_N=128, block_K=64, a_dtype=a, b_dtype=b)
    src = _src(k, async_copy=False)
    # 2 x 2 warps, 64 x 64 per warp: per k32 step 4 A + 4 B ldmatrix.x4 and 4 x 8 mma; K steps of 32
    assert src.count(name) == 4 * 8 and src.count("_ldsm4a(") == 8 and "_ldsm4ta(" not in src
    assert re.search(r"for _k\d+ in range\(0, 64, 32\):", src)
    # 8-bit operand rows: 64 + 16 bytes (16-byte aligned rows, padded against bank conflicts)
    assert src.count("cuda.shared.array(10240, uint8, alignment=16)") == 2  # 128 x 80
    monkeypatch.setenv("TILESIM_CUDA_TENSOR_CORES", "0")
    assert "_mma_" not in _src(k, async_copy=False)


def test_frontend_accepts_mixed_fp8_and_refuses_fp8_with_bf16():
    from tilesim.errors import KernelTypeError

    fp8_mm(a_dtype=E4M3, b_dtype=E5M2)  # TileLang allows any fp8 pair (src/cuda/op/gemm.cc: is_float8 both)
    with pytest.raises(KernelTypeError, match="A is float8_e4m3fn but B is bfloat16"):
        fp8_mm(a_dtype=E4M3, b_dtype="bfloat16")


def test_cp_async_stages_of_fp8_operands_keep_16_byte_rows():
    src = _src(fp8_mm(block_M=64, block_N=64, block_K=128, num_stages=3), tensor_cores=True, async_copy=True)
    # three stages of 64 rows x (128 + 16) bytes (dynamic shared memory: 55 KB); before this lowering's
    # padding rule fp8 rows were padded by 8 bytes, so every odd row's cp.async chunks were misaligned
    cps = [ln for ln in src.splitlines() if "_cp_async16" in ln]
    # the chunk's shared element index: stage * 9216 + row * 144 + column (a per-thread base, then + 8 rows per round)
    bases = re.findall(r"= \(\(\w+ \* 9216\) \+ \(\(_h\d+ \* 144\) \+ _h\d+\)\)", src)
    assert len(cps) == 4 and len(bases) == 4 and all("* 144)" in ln for ln in cps), cps


@pytest.mark.parametrize("kw, why", [
    (dict(block_K=16), "K = 16 is not a multiple of 32"),
    (dict(block_K=48), "K = 48 is not a multiple of 32"),
    (dict(block_M=40), "M = 40 is not a multiple of 16"),
])
def test_ineligible_fp8_gemms_keep_the_cuda_core_lowering(kw, why):
    k = fp8_mm(**kw)
    assert _src(k, tensor_cores=True, async_copy=False) == _src(k, tensor_cores=False, async_copy=False), why


@pytest.mark.parametrize("ta, tb, ldsm, gathers", [
    (False, False, 4, 8 * 2),  # B stored (K, N): 8 n8 tiles x 2 registers gathered from bytes
    (True, True, 4, 4 * 4),  # A stored (K, M): 4 m16 tiles x 4 registers
    (True, False, 0, 4 * 4 + 8 * 2),
])
def test_m_or_n_contiguous_fp8_operands_are_gathered_with_byte_loads(ta, tb, ldsm, gathers):
    src = _src(fp8_mm(block_M=128, block_N=128, block_K=64, trans_A=ta, trans_B=tb), tensor_cores=True,
               async_copy=False)
    assert src.count("_mma_e4m3_e4m3(") == 4 * 8 and "_ldsm4ta(" not in src
    assert src.count("_ldsm4a(") == ldsm
    # each gathered register: four byte loads, the first in the lowest byte
    assert src.count(" = ((uint32(_ldx(") == gathers and src.count("uint32(_ldx(") == 4 * gathers


# ------------------------------------------------------------------------------------ sm_90 machine code
def _ptx(k, **kw):
    from tilesim.backends.cuda.runtime import CudaProgram

    prog = CudaProgram(k.prim_func, sim=False, tensor_cores=True, **kw)
    return [p for _, p in prog.compile_ptx((9, 0))]


def _spills(log: str) -> int:
    return sum(int(x) for x in re.findall(r"(\d+) bytes spill stores", log))


@pytest.mark.parametrize("a, b", [(E4M3, E4M3), (E5M2, E5M2), (E4M3, E5M2)])
def test_sm90_ptx_has_the_fp8_mma_and_ptxas_accepts_it(a, b, tmp_path):
    if not can_compile_ptx():
        pytest.skip("numba-cuda cannot compile here (no NVVM)")
    pa, pb = a[7:11], b[7:11]
    # 8 warps, 128 x 128 x 64: 2 x 4 warps of 64 x 32, 2 k32 steps x (4 m16 x 4 n8) mma
    (ptx,) = _ptx(fp8_mm(block_M=128, block_N=128, block_K=64, a_dtype=a, b_dtype=b, threads=256, num_stages=3),
                  async_copy=True)
    assert ptx.count(f"mma.sync.aligned.m16n8k32.row.col.f32.{pa}.{pb}.f32") == 2 * 16
    log, sass = sass_of(ptx, tmp_path)
    print(f"ptxas sm_90 {pa} x {pb}: {log.strip().splitlines()[-2:]}")
    assert _spills(log) == 0, log
    # sm_90 has no fp8 mma.sync datapath: ptxas widens each fragment to f16 pairs (F2FP ... UNPACK_B) and
    # issues two m16n8k16 f16 HMMA per m16n8k32 (ptxas of CUDA 12.8 / 13.0)
    assert sass.count("HMMA.16816.F32") == 2 * 2 * 16
    assert "UNPACK_B" in sass and sass.count("LDSM.16.M88.4") == 2 * (4 + 2)


@pytest.mark.parametrize("ta, tb", [(False, False), (True, False)])
def test_sm90_byte_gathered_operands(ta, tb, tmp_path):
    if not can_compile_ptx():
        pytest.skip("numba-cuda cannot compile here (no NVVM)")
    (ptx,) = _ptx(fp8_mm(block_M=128, block_N=128, block_K=64, trans_A=ta, trans_B=tb, threads=256, num_stages=3),
                  async_copy=True)
    # 16 mma per k32 step; NVVM unrolls the 2-step K loop or not
    assert ptx.count("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32") in (16, 2 * 16)
    log, sass = sass_of(ptx, tmp_path)
    print(f"ptxas sm_90 byte-gathered {'T' if ta else 'N'}{'T' if tb else 'N'}: {log.strip().splitlines()[-2:]}")
    assert _spills(log) == 0, log
    assert "LDS.U8" in sass and "HMMA.16816.F32" in sass


def test_library_fp8_gemm_uses_the_fp8_mma(tmp_path):
    from kernels.fp8_gemm import fp8_gemm

    if not can_compile_ptx():
        pytest.skip("numba-cuda cannot compile here (no NVVM)")
    for threads in (128, 256):
        k = fp8_gemm(4096, 7168, 16384, block_M=128, block_N=128, num_stages=3, threads=threads)
        (ptx,) = _ptx(k, async_copy=True)
        grid = (2, 2) if threads == 128 else (2, 4)
        n_mma = 4 * (128 // (16 * grid[0])) * (128 // (8 * grid[1]))  # 4 k32 steps of the 128-wide K block
        assert ptx.count("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32") == n_mma
        log, _ = sass_of(ptx, tmp_path)
        print(f"fp8_gemm {threads} threads: ptxas {log.strip().splitlines()[-2:]}")
        # accepted; two 128 x 128 fp32 fragments (partial, acc) per block spill at either thread count
        # (docs/cuda-backend.md records the counts)
        assert "Used" in log and "error" not in log.lower() and re.search(r"\d+ bytes spill stores", log)


# ------------------------------------------------------------------------------------ the CUDA simulator
_SIM = r"""
import json, sys
import numpy as np, ml_dtypes
sys.path.insert(0, {root!r})
from tests.backends.test_tensor_cores_fp8 import fp8_mm
from kernels import fp8_gemm as F
from tilesim.backends.cuda.check import cuda_twin, interp_twin, rel_err

def check(name, k, inputs, mma):
    jk = cuda_twin(k, tensor_cores=True, async_copy=True)
    src = jk.get_kernel_source()
    assert mma + "(" in src and "_cp_async16" in src, name
    out = jk(*[x.copy() for x in inputs])
    ref = interp_twin(k)(*[x.copy() for x in inputs])
    print(json.dumps({{"name": name, "err": rel_err(out, ref), "nonzero": bool(np.abs(np.asarray(ref)).max() > 0)}}))

rng = np.random.default_rng(0)
M, N, K = 40, 24, 72  # the 32 x 32 x 32 tiles divide none of them
for a, b, ta, tb in (("float8_e4m3fn", "float8_e4m3fn", False, True), ("float8_e5m2", "float8_e5m2", False, True),
                     ("float8_e5m2", "float8_e4m3fn", False, True), ("float8_e4m3fn", "float8_e4m3fn", False, False),
                     ("float8_e4m3fn", "float8_e5m2", True, False), ("float8_e5m2", "float8_e5m2", True, True)):
    k = fp8_mm(block_M=32, block_N=32, block_K=32, a_dtype=a, b_dtype=b, trans_A=ta, trans_B=tb, threads=64)
    A = (rng.standard_normal((K, M) if ta else (M, K)) * 3).astype(getattr(ml_dtypes, a))
    B = (rng.standard_normal((N, K) if tb else (K, N)) * 3).astype(getattr(ml_dtypes, b))
    check(f"fp8_mm {{a}} x {{b}} {{'T' if ta else 'N'}}{{'T' if tb else 'N'}}", k, [A, B],
          "_mma_" + a[7:11] + "_" + b[7:11])
M, N, K = 33, 50, 160  # the library kernel: 64 x 64 tiles, two 128-wide K blocks (the second partial)
k = F.fp8_gemm(M, N, K, block_M=64, block_N=64, num_stages=2, threads=128)
check("fp8_gemm", k, list(F._inputs(rng, M, N, K)), "_mma_e4m3_e4m3")
"""


def test_fp8_kernels_in_the_simulator_with_modelled_warp_instructions():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    r = subprocess.run([sys.executable, "-c", _SIM.format(root=ROOT)], capture_output=True, text=True, env=env,
                       timeout=900, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-4000:]
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 7, r.stdout
    for row in rows:
        # fp32 out: the model's sums differ from the interpreter's at most in the last bits;
        # fp8_gemm's bf16 out: a sixteenth of bf16's epsilon, as the bf16 mma's registry check
        assert row["nonzero"] and row["err"] < (1e-5 if row["name"] != "fp8_gemm" else 2.0**-8 / 16), row


# ------------------------------------------------------------------------------------ on a GPU
@pytest.mark.gpu
@pytest.mark.parametrize("a, b, ta, tb", [(E4M3, E4M3, False, True), (E5M2, E5M2, False, True),
                                          (E4M3, E5M2, False, True), (E5M2, E4M3, False, True),
                                          (E4M3, E4M3, False, False), (E4M3, E5M2, True, False),
                                          (E5M2, E5M2, True, True)])
def test_fp8_tensor_core_gemm_on_the_gpu(a, b, ta, tb):
    import ml_dtypes

    from tilesim.backends.cuda.caps import available
    from tilesim.backends.cuda.check import cuda_twin, interp_twin, rel_err

    if not available():
        pytest.skip("no CUDA GPU")
    M, N, K = 1000, 776, 544  # the 128 x 128 x 64 tiles divide none of them
    rng = np.random.default_rng(4)
    A = (rng.standard_normal((K, M) if ta else (M, K)) * 3).astype(getattr(ml_dtypes, a))
    B = (rng.standard_normal((N, K) if tb else (K, N)) * 3).astype(getattr(ml_dtypes, b))
    exact = (A.T if ta else A).astype(np.float64) @ (B.T if tb else B).astype(np.float64)
    for threads in (128, 256):
        k = fp8_mm(block_M=128, block_N=128, block_K=64, a_dtype=a, b_dtype=b, trans_A=ta, trans_B=tb,
                   threads=threads, num_stages=3)
        jk = cuda_twin(k, tensor_cores=True)
        assert "_mma_" + a[7:11] + "_" + b[7:11] + "(" in jk.get_kernel_source()
        got = np.asarray(jk(A, B))
        want = np.asarray(interp_twin(k)(A, B))
        # the products are exact; mma.sync sums them in another order than the interpreter (fp32 both)
        assert rel_err(got, want) < 1e-5
        assert rel_err(got, exact) < 1e-5


@pytest.mark.gpu
def test_library_fp8_gemm_with_tensor_cores_on_the_gpu():
    from kernels import fp8_gemm as F
    from tilesim.backends.cuda.caps import available
    from tilesim.backends.cuda.check import cuda_twin, interp_twin, rel_err

    if not available():
        pytest.skip("no CUDA GPU")
    rng = np.random.default_rng(5)
    for M, N, K, bn, threads in ((70, 150, 100, 128, 128), (333, 300, 640, 64, 256), (256, 512, 1024, 128, 256)):
        k = F.fp8_gemm(M, N, K, block_M=128, block_N=bn, num_stages=3, threads=threads)
        ins = F._inputs(rng, M, N, K)
        jk = cuda_twin(k, tensor_cores=True)
        assert "_mma_e4m3_e4m3(" in jk.get_kernel_source()
        got = jk(*[x.copy() for x in ins])
        want = interp_twin(k)(*[x.copy() for x in ins])
        assert rel_err(got, want) < 2.0**-8 / 16, (M, N, K)


# ------------------------------------------------------------------------------------ the benchmark row
def test_benchmark_fp8_matmul_variants_lower_to_tensor_cores_and_match_on_the_interpreter():
    import ml_dtypes

    from benchmarks.gpu_tc_fp8 import VARIANTS
    from kernels.fp8_gemm import fp8_matmul

    for bm, bn, bk, st, th in VARIANTS:
        k = fp8_matmul(4096, 4096, 4096, block_M=bm, block_N=bn, block_K=bk, num_stages=st, threads=th)
        src = _src(k, tensor_cores=True, async_copy=True)
        assert "_mma_e4m3_e4m3(" in src and "_cp_async16" in src, (bm, bn, bk, th)
    rng = np.random.default_rng(6)
    M, N, K = 70, 150, 200  # the 64 x 64 x 64 tiles divide none of them
    A = rng.standard_normal((M, K)).astype(ml_dtypes.float8_e4m3fn)
    B = rng.standard_normal((N, K)).astype(ml_dtypes.float8_e4m3fn)
    k = fp8_matmul(M, N, K, block_M=64, block_N=64, block_K=64, threads=128)
    got = np.asarray(k(A, B), dtype=np.float64)
    want = A.astype(np.float64) @ B.astype(np.float64).T
    assert np.abs(got - want).max() <= np.abs(want).max() * 2.0**-8  # bf16 out: half an ulp of the largest


def test_fp8_mma_is_refused_below_sm89_with_a_located_error():
    from tilesim.backends.cuda.runtime import CudaProgram
    from tilesim.errors import KernelRuntimeError

    k = fp8_mm(block_M=64, block_N=64, block_K=64)
    prog = CudaProgram(k.prim_func, sim=False, tensor_cores=True, async_copy=False)
    with pytest.raises(KernelRuntimeError, match="compute capability 8.9 or later; this target is 8.0") as ei:
        prog.compile_ptx((8, 0))
    assert "test_tensor_cores_fp8.py" in str(ei.value) and "cuda_tensor_cores" in str(ei.value)
    # the CUDA-core form of the same kernel compiles for sm_80
    if can_compile_ptx():
        plain = CudaProgram(k.prim_func, sim=False, tensor_cores=False, async_copy=False)
        assert "mma.sync" not in plain.compile_ptx((8, 0))[0][1]
