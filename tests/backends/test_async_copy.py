"""``cp.async`` software pipelining of ``T.Pipelined`` loops in the CUDA backend (``tilesim/backends/cuda/pipeline.py``):
the option, which copies qualify (and that every other one keeps the ordinary lowering), shared-memory
accounting of the stages, the sm_90 machine code (LDGSTS / DEPBAR from ptxas + cuobjdump), whole kernels under
numba's CUDA simulator with the asynchronous copies modelled (writes land only when a ``cp.async.wait_group``
retires them, ``cp_async.sim_cp_async_namespace``) against the interpreter, and ``gpu`` tests for a GPU session."""

import os
import subprocess
import sys

import numpy as np
import pytest

import tilesim as tilelang
import tilesim.language as T

from ._util import ROOT, can_compile_ptx, core_module, needs_numba_cuda, sass_of

pytestmark = [needs_numba_cuda, pytest.mark.usefixtures("mma_sync_lowering")]  # the mma.sync lowering (conftest)


@tilelang.jit(out_idx=[-1])
def colsum(M, K, block_M=16, block_K=16, num_stages=2, dtype="float16", threads=32, variant=""):
    """``Y[i, j] = sum_k X[i, k * block_K + j]`` (zero past K): a pipelined copy whose bytes reach the output
    through exact sums (integer-valued inputs), so the CUDA result must equal the interpreter's bit for bit.
    ``variant`` makes the copy ineligible for cp.async in one way each (see ``_INELIGIBLE``)."""
    sdt = "float32" if variant == "convert" else dtype
    cols = 2 * block_K if variant == "subregion" else block_K

    @T.prim_func
    def main(X: T.Tensor((M, K), dtype), Y: T.Tensor((M, block_K), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            X_s = T.alloc_shared((block_M, cols), sdt)
            acc = T.alloc_fragment((block_M, block_K), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                if variant == "read_before":
                    for i, j in T.Parallel(block_M, block_K):
                        acc[i, j] += X_s[i, j]
                if variant == "subregion":
                    T.copy(X[bx * block_M, k * block_K], X_s[0:block_M, 0:block_K])
                else:
                    T.copy(X[bx * block_M, k * block_K], X_s)
                for i, j in T.Parallel(block_M, block_K):
                    acc[i, j] += X_s[i, j]
            if variant == "written":
                X[bx * block_M, 0] = T.cast(0, dtype)
            T.copy(acc, Y[bx * block_M, 0])

    return main


@tilelang.jit(out_idx=[-1])
def colsum_passes(M, K, block_M=16, block_K=16, num_stages=2, dtype="float16", threads=32, passes=3):
    """``colsum`` weighted over ``passes`` runs of the pipeline inside an outer loop, pass ``p`` starting at tile
    ``p``: the pipeline restarts (prologue, stages) with a start that varies."""

    @T.prim_func
    def main(X: T.Tensor((M, K), dtype), Y: T.Tensor((M, block_K), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            X_s = T.alloc_shared((block_M, block_K), dtype)
            acc = T.alloc_fragment((block_M, block_K), "float32")
            T.clear(acc)
            for p in T.serial(passes):
                for k in T.Pipelined(p, T.ceildiv(K, block_K), num_stages=num_stages):
                    T.copy(X[bx * block_M, k * block_K], X_s)
                    for i, j in T.Parallel(block_M, block_K):
                        acc[i, j] += X_s[i, j] * (p + 1)
            T.copy(acc, Y[bx * block_M, 0])

    return main


def _src(k, **kw):
    from tilesim.backends.cuda import compile_cuda

    return compile_cuda(k.prim_func, sim=False, **kw).source


def _mm(ta=False, tb=False, dtype="bfloat16", bm=128, bn=128, bk=32, threads=128, stages=3):
    return core_module().matmul_dynamic(block_M=bm, block_N=bn, block_K=bk, trans_A=ta, trans_B=tb, dtype=dtype,
                                        threads=threads, num_stages=stages)


def test_on_where_tensor_cores_are_and_switchable(monkeypatch):
    from tilesim.backends.cuda import caps

    k = _mm()
    monkeypatch.delenv("TILESIM_CUDA_ASYNC_COPY", raising=False)
    monkeypatch.delenv("TILESIM_CUDA_TENSOR_CORES", raising=False)
    assert "_cp_async16" in _src(k) and _src(k) == _src(k, async_copy=True)
    assert "_cp_async16" not in _src(k, tensor_cores=False)  # follows tensor cores by default
    assert "_cp_async16" in _src(k, tensor_cores=False, async_copy=True)
    assert "_cp_async16" not in _src(k, async_copy=False)
    monkeypatch.setenv("TILESIM_CUDA_ASYNC_COPY", "0")
    assert "_cp_async16" not in _src(k)
    monkeypatch.setenv("TILESIM_CUDA_ASYNC_COPY", "1")
    assert "_cp_async16" in _src(k, tensor_cores=False)
    monkeypatch.delenv("TILESIM_CUDA_ASYNC_COPY")
    assert caps.async_copy_default(False) is False and caps.async_copy_default(True) is True
    # the pass config reaches the target
    from tilesim.backends.cuda.check import cuda_twin

    on = cuda_twin(k, tensor_cores=True, async_copy=True).get_kernel_source()
    off = cuda_twin(k, tensor_cores=True, async_copy=False).get_kernel_source()
    assert "_cp_async16" in on and "_cp_async16" not in off


def test_pipeline_structure_stages_and_one_barrier_per_iteration():
    k = _mm(stages=3)
    src = _src(k, async_copy=True)
    off = _src(k, async_copy=False)
    # 3 stages of A (128 x (32 + 8)) and B (32 x (128 + 8)) bf16: 3 x 18944 B, past 48 KB: dynamic, rows padded
    assert "56832 B of dynamic shared memory" in src
    import re

    a = re.search(r"\b(A_shared_\d+)_st = _dsm_int16\[0:15360\]", src).group(1)  # 3 x 128 x 40
    assert re.search(r"\bB_shared_\d+_st = _dsm_int16\[15360:28416\]", src)  # 3 x 32 x 136
    loop = src[src.index("    for k_"):]
    body = loop[:loop.index("\n    _cp_wait0()")]
    assert body.count("cuda.syncthreads()") == 1 and body.count("_cp_wait1()") == 1
    assert body.index("_cp_wait1()") < body.index("cuda.syncthreads()") < body.index("_cp_async16")
    assert body.index("_cp_commit()") < body.index("_ldsm4a(")
    assert f"{a} = {a}_st[_sc" in body
    pro = src[src.index("pipeline prologue"):src.index("    for k_")]
    assert "range(2)" in src[src.index("pipeline prologue") - 40:] and pro.count("_cp_commit()") == 1
    # without cp.async: the two barriers of the synchronous loop
    oloop = off[off.index("    for k_"):]
    assert oloop.count("cuda.syncthreads()") == 2


_INELIGIBLE = {
    "convert": "the copy converts fp16 to fp32 (cp.async moves bytes)",
    "subregion": "the copy writes part of the shared buffer",
    "read_before": "the loop reads the buffer before the copy (it sees the previous iteration's tile)",
    "written": "the kernel writes the source tensor",
}


@pytest.mark.parametrize("variant", sorted(_INELIGIBLE))
def test_ineligible_copies_keep_the_ordinary_lowering(variant):
    k = colsum(64, 64, variant=variant)
    assert _src(k, async_copy=True) == _src(k, async_copy=False), _INELIGIBLE[variant]
    assert "_cp_async16" in _src(colsum(64, 64), async_copy=True)


@pytest.mark.parametrize("kw, why", [
    (dict(block_K=4), "rows of 8 bytes (not a multiple of 16)"),
    (dict(num_stages=1), "one stage"),
    (dict(num_stages=0), "no stages"),
])
def test_loops_and_rows_that_do_not_qualify(kw, why):
    k = colsum(64, 64, **kw)
    assert _src(k, async_copy=True) == _src(k, async_copy=False), why


def test_stage_copies_that_do_not_fit_fall_back_with_a_note():
    # 3 stages of 128 x 256 + 256 x 128 bf16 tiles (padded rows): 3 x 135 KB, over 227 KB; without stages 135 KB fits
    k = _mm(bm=128, bn=128, bk=256, stages=3)
    src = _src(k, async_copy=True)
    assert "_cp_async16" not in src
    assert "cp.async pipelining off: the stage copies exceed shared memory" in src
    assert _src(_mm(bm=128, bn=128, bk=256, stages=3), async_copy=False).count("_cp_") == 0


def test_static_shapes_issue_whole_tiles_without_per_chunk_bounds():
    from kernels.gemm import matmul
    from tilesim.backends.cuda import emitter as E

    # 4000 rows: the last M/N tiles stick out, so the whole-tile check stays (K tiles are all inside)
    src = _src(matmul(4000, 4000, 4096, block_M=128, block_N=128, block_K=32, num_stages=3, dtype="bfloat16",
                      out_dtype="float32"), tensor_cores=True, async_copy=True)
    # per copy (A, B) and issue point (prologue, loop): one unpredicated and one zero-filling chunk form
    assert src.count(", 16)\n") == 2 * 2 and src.count("_cp_async16") == 2 * 2 * 2
    # 4096^3: every tile is proven inside its tensor from the value ranges of its starts (issue 14, brief AQ): only the
    # unpredicated form, no bounds check; the forms before that keep the check and the zero-filling form
    k = matmul(4096, 4096, 4096, block_M=128, block_N=128, block_K=32, num_stages=3, dtype="bfloat16",
               out_dtype="float32")
    src = _src(k, tensor_cores=True, async_copy=True)
    assert src.count(", 16)\n") == 2 * 2 and src.count("_cp_async16") == 2 * 2 and "_nb" not in src
    E.INT_FORMS = False
    try:
        old = _src(k, tensor_cores=True, async_copy=True)
    finally:
        E.INT_FORMS = True
    assert old.count(", 16)\n") == 2 * 2 and old.count("_cp_async16(") == 2 * 2 * 2
    assert ", 16)\n" not in _src(_mm(), tensor_cores=True, async_copy=True)  # dynamic shapes: per chunk only


# ------------------------------------------------------------------------------------ machine code
def test_sm90_machine_code_has_ldgsts_and_one_barrier(tmp_path):
    from tilesim.backends.cuda.runtime import CudaProgram

    if not can_compile_ptx():
        pytest.skip("numba-cuda cannot compile here (no NVVM)")
    prog = CudaProgram(_mm(stages=3).prim_func, sim=False, tensor_cores=True, async_copy=True)
    (_, ptx), = prog.compile_ptx((9, 0))
    assert "cp.async.cg.shared.global" in ptx and "cp.async.wait_group 1;" in ptx
    log, sass = sass_of(ptx, tmp_path)
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in log
    import re

    regs = int(re.search(r"Used (\d+) registers", log).group(1))
    assert regs <= 255
    # A 128x32 and B 32x128 bf16: 512 + 512 16-byte chunks per stage over 128 threads = 8 per thread;
    # issued in the prologue loop (2 stages, one loop body) and once per iteration
    assert sass.count("LDGSTS.E.BYPASS.128.ZFILL") == 16  # .cg (L2 only), zero-fill by src-size
    assert sass.count("LDGDEPBAR") == 2 and sass.count("DEPBAR.LE SB0, 0x1") == 1 and sass.count("DEPBAR.LE SB0, 0x0") == 1
    # 2 x 2 warps (GemmWarpPolicy.Square): 2 k16 steps x 4 m16 x 8 n8 mma, 4 A + 4 B ldmatrix.x4 per step
    assert sass.count("HMMA.16816.F32.BF16") == 2 * 4 * 8
    assert sass.count("LDSM.16.M88.4") + sass.count("LDSM.16.MT88.4") == 2 * (4 + 4)
    assert sass.count("BAR.SYNC") == 2  # one per k-step (two without cp.async), one after the loop


# ------------------------------------------------------------------------------------ the simulator
_SIM = r"""
import json, sys
import numpy as np
sys.path.insert(0, {root!r})
from tests.core_kernels import matmul_dynamic, flash_attention
from tests.backends.test_async_copy import colsum, colsum_passes
from tilesim.backends.cuda import runtime
from tilesim.backends.cuda.check import cuda_twin, interp_twin, rel_err

def run(name, k, inputs, tc=True, staged=True):
    jk = cuda_twin(k, tensor_cores=tc, async_copy=True)
    assert ("_cp_async16" in jk.get_kernel_source()) == staged, name
    out = jk(*[x.copy() for x in inputs])
    ref = interp_twin(k)(*[x.copy() for x in inputs])
    out = out if isinstance(out, (list, tuple)) else [out]
    ref = ref if isinstance(ref, (list, tuple)) else [ref]
    same = all(np.array_equal(np.asarray(o), np.asarray(r)) for o, r in zip(out, ref))
    print(json.dumps({{"name": name, "err": max(rel_err(o, r) for o, r in zip(out, ref)), "bitwise": same}}), flush=True)

rng = np.random.default_rng(0)
# exact sums of copied bytes; K = 72: aligned rows, cp.async with zero-filled chunks past K; K = 50: rows of
# 100 bytes, known when lowering: no pipeline
for stages in (2, 3, 4):
    for K in (72, 50):
        X = rng.integers(-8, 9, size=(40, K)).astype(np.float16)
        run(f"colsum_s{{stages}}_K{{K}}", colsum(40, K, num_stages=stages), [X], tc=False, staged=K == 72)
    X = rng.integers(-8, 9, size=(40, 72)).astype(np.float16)
    run(f"colsum_passes_s{{stages}}", colsum_passes(40, 72, num_stages=stages), [X], tc=False)
for stages in (2, 3):
    for ta, tb in ((False, False), (False, True), (True, False), (True, True)):
        k = matmul_dynamic(block_M=32, block_N=16, block_K=16, trans_A=ta, trans_B=tb, dtype="float16", threads=64,
                           num_stages=stages)
        M, N, K = 40, 24, 56  # the tiles divide none of them
        A = rng.standard_normal((K, M) if ta else (M, K)).astype(np.float16)
        B = rng.standard_normal((N, K) if tb else (K, N)).astype(np.float16)
        run(f"matmul_s{{stages}}_{{'T' if ta else 'N'}}{{'T' if tb else 'N'}}", k, [A, B])
    # K = 50 (dynamic): A's rows are 100 bytes, found at run time: A's stages filled by ordinary copies, B's by cp.async
    k = matmul_dynamic(block_M=32, block_N=16, block_K=16, dtype="float16", threads=64, num_stages=stages)
    A = rng.standard_normal((40, 50)).astype(np.float16)
    B = rng.standard_normal((50, 24)).astype(np.float16)
    run(f"matmul_s{{stages}}_NN_K50", k, [A, B])
# static shapes: interior tiles take the unpredicated chunks, edge tiles the zero-filling ones, in one kernel
from kernels.gemm import matmul as static_matmul
for tb in (False, True):
    A = rng.standard_normal((72, 56)).astype(np.float16)
    B = rng.standard_normal((40, 56) if tb else (56, 40)).astype(np.float16)
    k = static_matmul(72, 40, 56, block_M=32, block_N=16, block_K=16, num_stages=2, threads=64, dtype="float16",
                      out_dtype="float32", trans_B=tb)
    run(f"matmul_static_{{'NT' if tb else 'NN'}}", k, [A, B])
for causal in (True, False):
    k = flash_attention(1, 2, 40, 16, is_causal=causal, block_M=16, block_N=16, num_stages=2, threads=32)
    q, kk, v = (rng.standard_normal((1, 40, 2, 16)).astype(np.float16) for _ in range(3))
    run(f"flash_attention_{{'causal' if causal else 'full'}}_s2", k, [q, kk, v])
# a wait one group too weak must be caught: the compute then reads a stage whose copies have not landed
ns = runtime._namespace(True)
ns["_cp_wait1"], saved = ns["_cp_wait2"], ns["_cp_wait1"]
try:
    X = rng.integers(-8, 9, size=(48, 72)).astype(np.float16)  # a shape not compiled above (kernels are cached)
    run("weak_wait_colsum_s3", colsum(48, 72, num_stages=3), [X], tc=False)
finally:
    ns["_cp_wait1"] = saved
"""


def test_whole_kernels_in_the_simulator_with_modelled_async_copies():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    r = subprocess.run([sys.executable, "-c", _SIM.format(root=ROOT)], capture_output=True, text=True, env=env,
                       timeout=1200, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-4000:]
    import json

    rows = {row["name"]: row for row in (json.loads(line) for line in r.stdout.splitlines() if line.startswith("{"))}
    assert len(rows) == 9 + 10 + 2 + 2 + 1, r.stdout
    for name, row in rows.items():
        if name.startswith("weak_wait"):
            assert not row["bitwise"] and row["err"] > 1e-3, row  # the model catches a missing wait
        elif name.startswith("colsum"):
            assert row["bitwise"], row  # copies move bytes: equal to the interpreter bit for bit
        else:
            assert row["err"] < 1e-5, row


# ------------------------------------------------------------------------------------ on a GPU
@pytest.mark.gpu
@pytest.mark.parametrize("stages, ta, tb", [(2, False, False), (3, False, False), (4, False, False), (3, True, True),
                                            (3, False, True)])
def test_pipelined_gemm_on_the_gpu(stages, ta, tb):
    from tilesim.backends.cuda.caps import available
    from tilesim.backends.cuda.check import cuda_twin, rel_err

    if not available():
        pytest.skip("no CUDA GPU")
    import ml_dtypes

    jk = cuda_twin(_mm(ta, tb, stages=stages), tensor_cores=True, async_copy=True)
    assert "_cp_async16" in jk.get_kernel_source()
    rng = np.random.default_rng(5)
    M, N = 1000, 776  # the 128x128x32 tiles divide none of M, N, K
    for K in (520, 514):  # 514: rows not 16-byte aligned, the stages are filled by ordinary copies
        A = rng.standard_normal((K, M) if ta else (M, K)).astype(ml_dtypes.bfloat16)
        B = rng.standard_normal((N, K) if tb else (K, N)).astype(ml_dtypes.bfloat16)
        ref = (A.T if ta else A).astype(np.float64) @ (B.T if tb else B).astype(np.float64)
        assert rel_err(np.asarray(jk(A, B)), ref) < 1e-5, K


@pytest.mark.gpu
@pytest.mark.parametrize("K", [72, 50])
def test_pipelined_copies_are_bitwise_on_the_gpu(K):
    from tilesim.backends.cuda.caps import available
    from tilesim.backends.cuda.check import cuda_twin, interp_twin

    if not available():
        pytest.skip("no CUDA GPU")
    X = np.random.default_rng(6).integers(-8, 9, size=(1000, K)).astype(np.float16)
    for stages in (2, 3, 4):
        k = colsum(1000, K, num_stages=stages)
        jk = cuda_twin(k, async_copy=True)
        # K=50: fp16 rows of 100 bytes are not whole 16-byte chunks, so the static shape keeps ordinary copies
        # (the H200 run of 2026-12-02 failed here when this asserted cp.async for both K)
        assert ("_cp_async16" in jk.get_kernel_source()) == (K * 2 % 16 == 0)
        assert np.array_equal(np.asarray(jk(X)), np.asarray(interp_twin(k)(X)))


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [True, False])
def test_pipelined_flash_attention_on_the_gpu(causal):
    from kernels import attention as A
    from tilesim.backends.cuda.caps import available
    from tilesim.backends.cuda.check import cuda_twin, interp_twin, rel_err

    if not available():
        pytest.skip("no CUDA GPU")
    import ml_dtypes

    k = A.flash_attention_fwd(1, 4, 300, 128, is_causal=causal, block_M=64, block_N=64, num_stages=2,
                              dtype="bfloat16")
    rng = np.random.default_rng(7)
    q, kk, v = (rng.standard_normal((1, 300, 4, 128)).astype(ml_dtypes.bfloat16) for _ in range(3))
    jk = cuda_twin(k, tensor_cores=True, async_copy=True)
    assert "_cp_async16" in jk.get_kernel_source()
    got, want = jk(q, kk, v), interp_twin(k)(q, kk, v)
    assert rel_err(got[0], want[0]) < float(ml_dtypes.finfo(ml_dtypes.bfloat16).eps) / 16  # see test_tensor_cores
    assert rel_err(got[1], want[1]) < 1e-5
