"""``T.gemm`` on Hopper's ``wgmma`` (``tilesim/backends/cuda/tile_wgmma.py``), checked without a GPU and on one.

* Index math against the PTX ISA model (``wgmma_sim.py``: descriptor decoding, swizzled addresses, the D
  fragment): the operand address map is the ISA's swizzle, a bijection that keeps 16-byte chunks whole; A's row
  permutation is a bijection; a whole block's gemm emulated with the lowering's own instruction list
  (``tile_wgmma.instructions``) on a byte image built with the lowering's own address maps, read back through
  the accumulator's ``Layout``, equals ``A @ B`` (Hypothesis over types, majorness, warpgroups, shapes).
  Mutations (no row permutation, the other reading of LBO/SBO) fail it.
* Generated kernels under numba's CUDA simulator (the ``wgmma`` build of ``wgmma_sim``) against NumPy.
* sm_90a machine code: PTX assembles with ``ptxas -arch=sm_90a``; SASS has HGMMA / QGMMA, no spills.
* Which gemms lower (eligibility, the switch) and that the switch off changes nothing.
* GPU (``-m gpu``): against the interpreter.
"""

import json
import os
import re
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import tilesim as tilelang
import tilesim.language as T
from tilesim.backends.cuda import mma_layout as ML
from tilesim.backends.cuda import wgmma_layout as WL
from tilesim.backends.cuda.tile_wgmma import instructions, plan_shapes
from tilesim.backends.cuda.wgmma_intrinsics import reg_slot
from tilesim.backends.cuda.wgmma_sim import wgmma_model

from ._util import ROOT, can_compile_ptx, needs_numba_cuda

_NP = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float8_e4m3fn": ml_dtypes.float8_e4m3fn}


# ------------------------------------------------------------------------------------------ address maps
@given(W=st.sampled_from([32, 64, 128]), e=st.sampled_from([1, 2]), groups=st.integers(1, 4),
       regions=st.integers(1, 3))
@settings(max_examples=40, deadline=None)
def test_tile_offset_is_the_isa_swizzle_and_a_chunk_preserving_bijection(W, e, groups, regions):
    R = groups * (1024 // W if W < 128 else 8)
    C = regions * W // e
    offs = np.array([[WL.tile_offset(r, c, R, e, W) for c in range(C)] for r in range(R)])
    assert sorted(offs.ravel().tolist()) == list(range(R * C))
    ce = W // e
    for r in range(R):
        for c in range(C):  # the PTX ISA's XOR of address bits 4.. with bits 7.., region by region
            assert offs[r, c] * e == (c // ce) * R * W + WL.swizzle(r * W + (c % ce) * e, W)
    E = 16 // e  # 16-byte chunks stay whole and in order (vector and cp.async writers)
    assert (np.diff(offs.reshape(R, C // E, E), axis=2) == 1).all()
    assert (offs[:, ::E] % E == 0).all()


@pytest.mark.parametrize("nwarps", [4, 8])
@pytest.mark.parametrize("mi", [1, 2])
def test_a_row_permutation_is_a_bijection_with_its_inverse(nwarps, mi):
    M = 64 * mi * (nwarps // 4)
    phys = [WL.a_row_phys(r, M, nwarps) for r in range(M)]
    assert sorted(phys) == list(range(M))
    assert all(WL.a_row_logical(p, M, nwarps) == r for r, p in enumerate(phys))
    assert all(p % 8 == r % 8 for r, p in enumerate(phys))  # whole 8-row groups move: the swizzle phase is kept


# ------------------------------------------------------------------------------------------ block emulation
def _read_back(lay, acc):
    out = np.full(lay.shape, np.nan)
    S0, S1 = lay.slots
    for tid in range(lay.nthreads):
        for s0 in range(S0):
            for s1 in range(S1):
                idx = [(s // lay.vec[d]) * lay.tcount[d] * lay.vec[d] + lay.group_of(d, tid) * lay.vec[d]
                       + s % lay.vec[d] for d, s in ((0, s0), (1, s1))]
                assert np.isnan(out[idx[0], idx[1]]), "two threads own one element"
                out[idx[0], idx[1]] = acc[tid, s0 * S1 + s1]
    return out


def _store(mem, base, X, omap):
    """Write the stored tile ``X`` (its raw bits) into ``mem`` at ``base`` through ``omap``."""
    bits = X.view(np.uint8).reshape(X.shape[0], X.shape[1], X.dtype.itemsize)
    for i0 in range(X.shape[0]):
        for i1 in range(X.shape[1]):
            o = base + omap.offset(i0, i1) * X.dtype.itemsize
            assert not mem[o:o + X.dtype.itemsize].any()
            mem[o:o + X.dtype.itemsize] = bits[i0, i1]


def emulate(dtype, M, N, K, nthreads, trans_a, trans_b, seed=0):
    """A block's ``wgmma`` gemm on the ISA model with the lowering's address maps and instruction list."""
    rng = np.random.default_rng(seed)
    t = _NP[dtype]
    A = rng.integers(-3, 4, size=(M, K)).astype(t)
    B = rng.integers(-3, 4, size=(K, N)).astype(t)
    As = np.ascontiguousarray(A.T if trans_a else A)
    Bs = np.ascontiguousarray(B.T if trans_b else B)
    plan = plan_shapes(dtype, dtype, As.shape, Bs.shape, trans_a, trans_b, M, N, K, nthreads)
    if isinstance(plan, str):
        return None
    nw = nthreads // 32
    lay = ML.mma_layout(M, N, nthreads, (nw, 1))
    base_a, base_b = 1024, 1024 + -(-As.nbytes // 1024) * 1024 + 2048
    mem = np.zeros(base_b + Bs.nbytes + 1024, np.uint8)
    _store(mem, base_a, As, plan.a)
    _store(mem, base_b, Bs, plan.b)
    ins = instructions(plan, lay.slots[1])
    kind = {"float16": "f16", "bfloat16": "bf16", "float8_e4m3fn": "e4m3"}[dtype]
    acc = np.zeros((nthreads, lay.nslots))
    for wg in range(nthreads // 128):
        da = (((base_a + wg * ins.slab_bytes) >> 4) & 0x3FFF) | ins.hi_a
        db = ((base_b >> 4) & 0x3FFF) | ins.hi_b
        for o0, oa, ob in ins.steps:
            D = wgmma_model(mem, da + (oa >> 4), db + (ob >> 4), N, kind, kind, trans_a, not trans_b)
            for t_ in range(128):
                for i in range(N // 2):
                    r, c = WL.acc_coord(t_, i)
                    acc[wg * 128 + t_, o0 + reg_slot(i, N)] += D[r, c]
    return _read_back(lay, acc), A.astype(np.float64) @ B.astype(np.float64)


@given(dtype=st.sampled_from(["float16", "bfloat16", "float8_e4m3fn"]), nwg=st.sampled_from([1, 2]),
       mi=st.sampled_from([1, 2]), n16=st.integers(1, 16), ksteps=st.integers(1, 4),
       ta=st.booleans(), tb=st.booleans(), seed=st.integers(0, 3))
@settings(max_examples=25, deadline=None)
def test_block_gemm_on_the_isa_model_equals_a_at_b(dtype, nwg, mi, n16, ksteps, ta, tb, seed):
    if dtype == "float8_e4m3fn":
        ta, tb = False, True  # the PTX ISA's only 8-bit form
    N = 16 * n16
    assume(mi * N <= 256)
    K = ksteps * (32 if dtype == "float8_e4m3fn" else 16)
    got = emulate(dtype, 64 * mi * nwg, N, K, 128 * nwg, ta, tb, seed)
    assume(got is not None)  # the plan refuses some (row bytes not a swizzle width): the lowering falls back
    out, ref = got
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("case", [("float16", 128, 128, 64, 128, False, False), ("bfloat16", 128, 64, 32, 256, True, True),
                                  ("float8_e4m3fn", 128, 128, 128, 128, False, True),
                                  ("bfloat16", 64, 256, 64, 128, False, True)])
def test_fixed_shapes_on_the_isa_model(case):
    out, ref = emulate(*case)
    np.testing.assert_array_equal(out, ref)


def test_mutations_of_the_index_math_fail(monkeypatch):
    case = ("float16", 128, 128, 64, 128, False, False)
    monkeypatch.setattr(WL, "a_row_phys", lambda r, M, nw: r)  # A's rows not permuted: D lands on other rows
    out, ref = emulate(*case)
    assert not np.array_equal(out, ref)
    monkeypatch.undo()
    # the other reading of LBO/SBO for an N-major B spanning two regions: the model reads other bytes
    monkeypatch.setattr(WL, "mnmajor_lbo_sbo", lambda R, W, reg=None: (8 * W, R * W))
    out, ref = emulate(*case)
    assert not np.array_equal(out, ref)


# ------------------------------------------------------------------------------------------ lowering
def _matmul(dtype, M, N, K, **v):
    from kernels import gemm as G
    return G.matmul(M, N, K, dtype=dtype, out_dtype="float32", **v)


@needs_numba_cuda
def test_switch_off_changes_nothing_and_on_uses_wgmma():
    from tilesim.backends.cuda.runtime import CudaProgram
    k = _matmul("bfloat16", 4096, 4096, 4096, block_M=128, block_N=128, block_K=64, num_stages=3, threads=128)
    base = CudaProgram(k.prim_func, sim=False, tensor_cores=True, async_copy=True).source
    assert CudaProgram(k.prim_func, sim=False, tensor_cores=True, async_copy=True, wgmma=False).source == base
    on = CudaProgram(k.prim_func, sim=False, tensor_cores=True, async_copy=True, wgmma=True).source
    assert "_wgmma_bf16_bf16_n128_01(" in on and "_mma_bf16(" not in on and "_fence_async_smem()" in on
    assert on.count("_wgmma_bf16_bf16_n128_01(") == 8  # 4 k16 steps x 2 m64 slabs
    # tensor cores off: the switch does nothing
    assert "_wgmma_" not in CudaProgram(k.prim_func, sim=False, tensor_cores=False, wgmma=True).source


@needs_numba_cuda
def test_fp8_switch_keeps_fp8_on_mma_sync(monkeypatch):
    from kernels.fp8_gemm import fp8_matmul
    from tilesim.backends.cuda.runtime import CudaProgram
    k = fp8_matmul(512, 512, 512, block_M=128, block_N=128, block_K=128, num_stages=3, threads=128)
    on = CudaProgram(k.prim_func, sim=False, tensor_cores=True, async_copy=True, wgmma=True).source
    monkeypatch.setenv("TILESIM_CUDA_WGMMA_FP8", "0")
    off = CudaProgram(k.prim_func, sim=False, tensor_cores=True, async_copy=True, wgmma=True).source
    assert "_wgmma_e4m3_e4m3_" in on and "_wgmma_" not in off and "_mma_" in off
    bf = _matmul("bfloat16", 512, 512, 512, block_M=128, block_N=128, block_K=64, num_stages=3, threads=128)
    assert "_wgmma_bf16_bf16_" in CudaProgram(bf.prim_func, sim=False, tensor_cores=True, async_copy=True,
                                             wgmma=True).source


@needs_numba_cuda
def test_ineligible_gemms_keep_mma_sync():
    from tilesim.backends.cuda.runtime import CudaProgram
    for k in (_matmul("bfloat16", 512, 512, 512, block_M=128, block_N=128, block_K=32, num_stages=2, threads=96),
              _matmul("bfloat16", 512, 512, 512, block_M=32, block_N=128, block_K=32, num_stages=2, threads=128),
              _matmul("bfloat16", 512, 512, 512, block_M=128, block_N=128, block_K=8, num_stages=2, threads=128)):
        src = CudaProgram(k.prim_func, sim=False, tensor_cores=True, async_copy=True, wgmma=True).source
        assert "_wgmma_" not in src


_SIM = r"""
import json, sys
import numpy as np
sys.path.insert(0, {root!r})
from kernels import gemm as G
from kernels.fp8_gemm import fp8_matmul
from tests.core_kernels import matmul_dynamic
from tests.backends.test_wgmma import parallel_written_operand
from tilesim.backends.cuda.check import cuda_twin, interp_twin, rel_err

def check(name, k, inputs, ac=True, inflight=False):
    jk = cuda_twin(k, tensor_cores=True, async_copy=ac, wgmma=True)
    assert "_wgmma_" in jk.get_kernel_source(), name
    assert ("_wg_wait1()" in jk.get_kernel_source()) == inflight, name  # one group in flight (3+ stages)
    out = jk(*[x.copy() for x in inputs])
    ref = interp_twin(k)(*[x.copy() for x in inputs])
    out, ref = (out, ref) if isinstance(out, (list, tuple)) else ([out], [ref])
    print(json.dumps({{"name": name, "err": max(rel_err(o, r) for o, r in zip(out, ref))}}), flush=True)

rng = np.random.default_rng(0)
h = lambda *s: rng.standard_normal(s).astype(np.float16)
# one block per kernel where a block covers the shape (the simulator runs every thread as a Python thread);
# no tile divides any size
check("matmul_128x128x32_s2", G.matmul(100, 120, 64, dtype="float16", out_dtype="float32", block_M=128, block_N=128,
      block_K=32, num_stages=2, threads=128), [h(100, 64), h(64, 120)])
check("matmul_sync_256thr", G.matmul(100, 56, 40, dtype="float16", out_dtype="float32", block_M=128, block_N=64,
      block_K=32, num_stages=2, threads=256), [h(100, 40), h(40, 56)], ac=False)
for ta, tb in ((False, False), (False, True), (True, False), (True, True)):
    k = matmul_dynamic(block_M=64, block_N=64, block_K=32, trans_A=ta, trans_B=tb, dtype="float16", threads=128)
    M, N, K = 40, 48, 40
    check(f"matmul_dynamic_{{'T' if ta else 'N'}}{{'T' if tb else 'N'}}", k,
          [h(K, M) if ta else h(M, K), h(N, K) if tb else h(K, N)])
f8 = lambda *s: (rng.standard_normal(s) * 2).astype(np.float32)
import ml_dtypes
e4 = lambda *s: f8(*s).astype(ml_dtypes.float8_e4m3fn)
check("fp8_matmul_e4m3", fp8_matmul(40, 48, 96, block_M=64, block_N=64, block_K=64, num_stages=2, threads=128),
      [e4(40, 96), e4(48, 96)])
check("parallel_written_operand", parallel_written_operand(40, 64, 40), [h(40, 40), h(40, 64)])
from kernels import attention as A
for causal in (True, False):  # Q @ K^T on wgmma (its accumulator feeds the online softmax), P @ V on mma.sync
    k = A.flash_attention_fwd(1, 1, 80, 64, is_causal=causal, dtype="float16", block_M=64, block_N=64, threads=128,
                              num_stages=2)
    check(f"flash_attention_causal{{causal}}", k, [h(1, 80, 1, 64) for _ in range(3)])
# one wgmma group in flight (3-4 stages): several K iterations, no tile dividing a size, 1 and 2 warpgroups, fp8
check("inflight_matmul_s3", G.matmul(60, 56, 200, dtype="float16", out_dtype="float32", block_M=64, block_N=64,
      block_K=32, num_stages=3, threads=128), [h(60, 200), h(200, 56)], inflight=True)
check("inflight_matmul_256thr_s4", G.matmul(100, 56, 168, dtype="float16", out_dtype="float32", block_M=128,
      block_N=64, block_K=32, num_stages=4, threads=256), [h(100, 168), h(168, 56)], inflight=True)
check("inflight_fp8_s3", fp8_matmul(40, 48, 336, block_M=64, block_N=64, block_K=64, num_stages=3, threads=128),
      [e4(40, 336), e4(48, 336)], inflight=True)
"""


@tilelang.jit(out_idx=[-1])
def parallel_written_operand(M, N, K, block_M=64, block_N=64, block_K=32, threads=128):
    """A gemm whose A tile is written by ``T.fill`` and a ``T.Parallel`` store (scaled by 2), B by ``T.copy``."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            As = T.alloc_shared((block_M, block_K), "float16")
            Bs = T.alloc_shared((block_K, block_N), "float16")
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.fill(As, 0)
                for i, j in T.Parallel(block_M, block_K):
                    if by * block_M + i < M and ko * block_K + j < K:
                        As[i, j] = A[by * block_M + i, ko * block_K + j] * T.float16(2)
                T.copy(B[ko * block_K, bx * block_N], Bs)
                T.gemm(As, Bs, acc)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


@needs_numba_cuda
def test_generated_kernels_in_the_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    r = subprocess.run([sys.executable, "-c", _SIM.format(root=ROOT)], capture_output=True, text=True, env=env,
                       timeout=1200)
    assert r.returncode == 0, r.stderr[-4000:]
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 13, r.stdout
    for row in rows:  # fp16 outputs (attention): a sixteenth of fp16's epsilon, as the mma.sync tests
        assert row["err"] < (6.1e-5 if row["name"].startswith("flash") else 1e-5), row


_MUTANT = r"""
import sys
import numpy as np
sys.path.insert(0, {root!r})
from kernels import gemm as G
from tilesim.backends.cuda.check import cuda_twin
from tilesim.backends.cuda.pipeline import PipelineLowering
# the unsafe placement: wait_group 1 kept, but the refill one stage back (n - 1 loaded ahead), onto the stage the
# pending group of the previous iteration still reads
PipelineLowering.loads_ahead = lambda self, p: p.stages - 1
k = G.matmul(100, 120, 200, dtype="float16", out_dtype="float32", block_M=128, block_N=128, block_K=32, num_stages=3,
             threads=128)
jk = cuda_twin(k, tensor_cores=True, async_copy=True, wgmma=True)
assert "_wg_wait1()" in jk.get_kernel_source()
rng = np.random.default_rng(0)
jk(rng.standard_normal((100, 200)).astype(np.float16), rng.standard_normal((200, 120)).astype(np.float16))
print("MUTANT RAN")
"""


def _loop_lines(src):
    return [ln.strip() for ln in src.splitlines()
            if re.search(r"_cp_wait|_wg_wait|prologue|_it\d+ \+ \d+\) % \d+$|else _sc\d+ \+ \d+\)$", ln)]


@needs_numba_cuda
def test_inflight_placement_in_the_source(monkeypatch):
    from tilesim.backends.cuda import tile_wgmma as TW
    from tilesim.backends.cuda.runtime import CudaProgram

    def src(k, **kw):
        return CudaProgram(k.prim_func, sim=False, tensor_cores=True, async_copy=True, wgmma=True, **kw).source
    k3 = _matmul("bfloat16", 4096, 4096, 4096, block_M=128, block_N=128, block_K=64, num_stages=3, threads=128)
    lines = _loop_lines(src(k3))
    # 3 stages in flight: 1 iteration loaded ahead, refill (it + 1) % 3 = (it - 2) % 3 (from the stage counter:
    # "sc - 2 if sc >= 2 else sc + 1"), wait_group 1 in the loop, wait_group 0 after it, before the accumulator is read
    assert lines[0].startswith("for _p4 in range(1):") and lines[1] == "_cp_wait0()", lines
    assert re.search(r"\(_sc\d+ \+ -2 if _sc\d+ >= 2 else _sc\d+ \+ 1\)$", lines[2]), lines
    assert lines[3:] == ["_wg_wait1()", "_wg_wait0()", "_cp_wait0()"], lines
    monkeypatch.setattr(TW, "INFLIGHT", False)  # the switch off: today's wait_group 0 form
    off = _loop_lines(src(k3))
    assert off[0].startswith("for _p4 in range(2):") and off[1] == "_cp_wait1()"
    assert re.search(r"\(_sc\d+ \+ -1 if _sc\d+ >= 1 else _sc\d+ \+ 2\)$", off[2]), off
    assert off[3:] == ["_wg_wait0()", "_cp_wait0()"], off
    monkeypatch.setattr(TW, "INFLIGHT", None)
    monkeypatch.setenv("TILESIM_CUDA_WGMMA_INFLIGHT", "0")
    assert _loop_lines(src(k3)) == off
    monkeypatch.delenv("TILESIM_CUDA_WGMMA_INFLIGHT")
    # 4 stages: 2 ahead, wait_group 1 of cp.async; 2 stages: no group in flight (the refill would hit its stage)
    k4 = _matmul("bfloat16", 4096, 4096, 4096, block_M=128, block_N=128, block_K=64, num_stages=4, threads=256)
    l4 = _loop_lines(src(k4))
    assert l4[0].startswith("for _p4 in range(2):") and "_cp_wait1()" in l4 and "_wg_wait1()" in l4
    k2 = _matmul("bfloat16", 4096, 4096, 4096, block_M=128, block_N=128, block_K=64, num_stages=2, threads=128)
    assert "_wg_wait1()" not in src(k2)
    # the accumulator read inside the loop (flash attention's Q @ K^T feeds the softmax): wait_group 0
    from kernels import attention as A
    fa = A.flash_attention_fwd(1, 1, 256, 64, is_causal=True, dtype="float16", block_M=64, block_N=64, threads=128,
                               num_stages=3)
    s_fa = src(fa)
    assert "_wgmma_" in s_fa and "_wg_wait1()" not in s_fa
    # an operand written by T.fill / T.Parallel (not a pipeline stage): wait_group 0
    pw = parallel_written_operand(512, 512, 512)
    s_pw = CudaProgram(pw.prim_func, sim=False, tensor_cores=True, async_copy=True, wgmma=True).source
    assert "_wgmma_" in s_pw and "_wg_wait1()" not in s_pw


@needs_numba_cuda
def test_inflight_unsafe_refill_fails_in_the_simulator():
    """The simulator catches a refill of the stage a pending group reads (the correct placement passes in
    ``test_generated_kernels_in_the_simulator``, ``inflight_*`` rows)."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    r = subprocess.run([sys.executable, "-c", _MUTANT.format(root=ROOT)], capture_output=True, text=True, env=env,
                       timeout=600)
    assert r.returncode != 0 and "MUTANT RAN" not in r.stdout
    assert "wgmma simulator: cp.async into shared bytes" in r.stderr, r.stderr[-3000:]


# ------------------------------------------------------------------------------------------ machine code
def _sm90a(prog, tmp_path):
    from ._util import _nvidia_bin
    (_, ptx), = prog.compile_ptx((9, 0, "a"))
    assert re.search(r"^\.target sm_90a", ptx, re.M)
    ptxas, objdump = "/usr/local/bin/ptxas", _nvidia_bin("cuobjdump")
    if not os.path.exists(ptxas) or objdump is None:
        pytest.skip("CUDA 13 ptxas or Triton's cuobjdump is not installed")
    src, cubin = os.path.join(tmp_path, "k.ptx"), os.path.join(tmp_path, "k.cubin")
    with open(src, "w") as f:
        f.write(ptx)
    r = subprocess.run([ptxas, "-arch=sm_90a", "-v", src, "-o", cubin], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    sass = subprocess.run([objdump, "--dump-sass", cubin], capture_output=True, text=True, check=True).stdout
    log = r.stdout + r.stderr
    spills = max(int(x) for x in re.findall(r"(\d+) bytes spill stores", log))
    return log, sass, spills


@pytest.mark.skipif(not can_compile_ptx(), reason="numba-cuda cannot compile PTX here")
@pytest.mark.parametrize("cfg", [("bf16", 128, 128, 64, 4, 256, 4, 0), ("bf16", 128, 128, 64, 3, 128, 8, 0),
                                 ("bf16", 128, 256, 64, 3, 256, 4, 0), ("fp8", 128, 128, 128, 3, 128, 8, 0)])
def test_sm90a_machine_code_has_warpgroup_mma(cfg, tmp_path):
    from kernels.fp8_gemm import fp8_matmul
    from tilesim.backends.cuda.runtime import CudaProgram
    kind, bm, bn, bk, s, th, n_ins, max_spill = cfg  # spill bytes before brief AP: 0 / 60 / 84 / 0; after: 0
    v = dict(block_M=bm, block_N=bn, block_K=bk, num_stages=s, threads=th)
    k = fp8_matmul(4096, 4096, 4096, **v) if kind == "fp8" else _matmul("bfloat16", 4096, 4096, 4096, **v)
    log, sass, spills = _sm90a(CudaProgram(k.prim_func, sim=False, tensor_cores=True, async_copy=True, wgmma=True),
                               tmp_path)
    op = "QGMMA" if kind == "fp8" else "HGMMA"
    assert sass.count(op + ".") == n_ins and "HMMA." not in sass
    assert spills <= max_spill and "warning" not in log.lower()  # no "wgmma serialized" warning
    # one group in flight: the K loop waits with wait_group 1 (the last HGMMA carries the group's scoreboard),
    # wait_group 0 after the loop; the accumulator stays in registers (before the edge copy-out was unrolled, the
    # fp8 128-thread form had a 512-byte stack frame, and ptxas then waited after every QGMMA)
    waits = [ln.split(";")[0].split("*/")[-1].strip() for ln in sass.splitlines() if "WARPGROUP.DEPBAR" in ln]
    assert waits == ["WARPGROUP.DEPBAR.LE gsb0, 0x1", "WARPGROUP.DEPBAR.LE gsb0, 0x0"], waits
    assert not re.search(r"[1-9]\d* bytes stack frame", log) and "STL" not in sass


# ------------------------------------------------------------------------------------------ GPU
@pytest.mark.gpu
@pytest.mark.parametrize("case", ["NN", "NT", "TN", "TT", "NN256", "fp8", "parallel", "attention", "inflight3",
                                  "inflight4_256", "fp8_256"])
def test_wgmma_gemms_on_the_gpu(case):
    from tilesim.backends.cuda.caps import available
    from tilesim.backends.cuda.check import cuda_twin, interp_twin, rel_err
    if not available():
        pytest.skip("no CUDA GPU")
    from kernels.fp8_gemm import fp8_matmul
    from tests.core_kernels import matmul_dynamic
    rng = np.random.default_rng(3)
    M, N, K = 1000, 776, 544
    h = lambda *s: rng.standard_normal(s).astype(np.float16)  # noqa: E731
    if case == "fp8":
        k = fp8_matmul(M, N, K, block_M=128, block_N=128, block_K=128, num_stages=3, threads=128)
        ins = [(rng.standard_normal(s) * 2).astype(ml_dtypes.float8_e4m3fn) for s in ((M, K), (N, K))]
    elif case == "parallel":
        k = parallel_written_operand(M, N, K, block_M=128, block_N=128, block_K=64, threads=128)
        ins = [h(M, K), h(K, N)]
    elif case == "attention":
        from kernels import attention as A
        k = A.flash_attention_fwd(2, 4, 520, 128, is_causal=True, dtype="float16", block_M=64, block_N=64,
                                  threads=128, num_stages=2)
        ins = [h(2, 520, 4, 128) for _ in range(3)]
    elif case == "fp8_256":
        k = fp8_matmul(M, N, K, block_M=128, block_N=128, block_K=128, num_stages=4, threads=256)
        ins = [(rng.standard_normal(s) * 2).astype(ml_dtypes.float8_e4m3fn) for s in ((M, K), (N, K))]
    elif case in ("inflight3", "inflight4_256"):  # one wgmma group in flight (3 / 4 stages), edges in every dimension
        st_, th_ = (3, 128) if case == "inflight3" else (4, 256)
        k = _matmul("float16", M, N, K, block_M=128, block_N=128, block_K=64, num_stages=st_, threads=th_)
        ins = [h(M, K), h(K, N)]
    elif case == "NN256":
        k = _matmul("float16", M, N, K, block_M=128, block_N=256, block_K=64, num_stages=3, threads=256)
        ins = [h(M, K), h(K, N)]
    else:
        ta, tb = case[0] == "T", case[1] == "T"
        k = matmul_dynamic(block_M=128, block_N=128, block_K=64, trans_A=ta, trans_B=tb, dtype="float16", threads=128)
        ins = [h(K, M) if ta else h(M, K), h(N, K) if tb else h(K, N)]
    jk = cuda_twin(k, tensor_cores=True, wgmma=True)
    assert "_wgmma_" in jk.get_kernel_source()
    if case.startswith("inflight"):
        assert "_wg_wait1()" in jk.get_kernel_source()
    out = jk(*[x.copy() for x in ins])
    ref = interp_twin(k)(*[x.copy() for x in ins])
    out, ref = (out, ref) if isinstance(out, (list, tuple)) else ([out], [ref])
    for o, r in zip(out, ref):
        o = np.asarray(o, dtype=np.float64) if not hasattr(o, "cpu") else o.cpu().double().numpy()
        if case.startswith("fp8"):
            fp8_within_accumulation_bound(o, np.asarray(r, dtype=np.float64), *ins)
            continue
        tol = {"attention": 6.1e-5}.get(case, 1e-5)  # 16-bit outputs: a sixteenth of their epsilon
        assert rel_err(o, np.asarray(r, dtype=np.float64)) < tol


def fp8_within_accumulation_bound(out, interp, a, b):
    """An fp8 ``wgmma`` GEMM's bf16 output against the exact product, element by element.

    Hopper's fp8 tensor-core path does not accumulate in full fp32: NVIDIA's H800 kept "around 14 bits" of the
    accumulation (DeepSeek-V3 technical report, section 3.3.2), so the GPU's result is not the interpreter's
    (fp32 accumulation, then bf16 rounding) bit for bit — device run 1 of brief AP saw one-bf16-ulp differences,
    rel. norm 1.2e-3 against the interpreter. The bound: each of the ``K / 32`` instructions adds its k32 partial
    sum to the accumulator with an error of at most ``2^-13`` of the larger magnitude involved, both at most
    ``S_ij = sum_k |a_ik b_jk|``; the bf16 output adds half a bf16 ulp. So ``|out - exact| <= ulp/2 + (K/32) 2^-13
    S_ij``. A wrong layout, a lost or repeated k-step or a stale stage exceeds it (a k32 partial sum is ~32^-1/2
    of S, the bound ~(K/32) 2^-13 S). The interpreter must meet the fp32 form of the same bound (a sanity check of
    the reference)."""
    A = np.asarray(a).astype(np.float64)
    B = np.asarray(b).astype(np.float64)
    exact = A @ B.T
    S = np.abs(A) @ np.abs(B).T
    steps = -(-A.shape[1] // 32)
    ulp = np.exp2(np.floor(np.log2(np.maximum(np.abs(exact), 1e-30))) - 7)  # bf16: 8 significant bits
    err = np.abs(out - exact)
    bound = 0.5 * ulp + steps * 2.0 ** -13 * S
    worst = float(np.max(err / np.maximum(bound, 1e-30)))
    assert worst <= 1.0, f"fp8 wgmma: |out - exact| up to {worst:.3g} x the accumulation bound"
    assert np.all(np.abs(interp - exact) <= 0.5 * ulp + steps * 2.0 ** -23 * S)
