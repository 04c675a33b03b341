"""The tensor-core gemm's warp grid (``GemmWarpPolicy``) and every consumer of its accumulator.

``Square`` (TileLang's default) puts 4 warps on a 2 x 2 grid for a square tile, so the accumulator's column
group is ``lane % 4`` plus the warp's grid column: a *split* layout dimension (``Layout.split``). Here:
the placement's choices (split kept for column reductions, ``T.Parallel`` epilogues, copies; FullRow
chosen, with a note, when a row reduction needs whole rows in one warp), and whole kernels with tiles that
do not divide the problem, run under numba's CUDA simulator with the warp-level instructions modelled
(``mma_sim.py``) and compared with the interpreter. The index math itself: ``test_mma_emulation.py``.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tilesim as tilelang
import tilesim.language as T
from tilesim.backends.cuda.layout import Layout

from ._util import ROOT, needs_numba_cuda

pytestmark = [needs_numba_cuda, pytest.mark.usefixtures("mma_sync_lowering")]  # the mma.sync lowering (conftest)

_POL = {"Square": T.GemmWarpPolicy.Square, "FullRow": T.GemmWarpPolicy.FullRow,
        "FullCol": T.GemmWarpPolicy.FullCol}


@tilelang.jit(out_idx=[-2, -1])
def gemm_colsum_bias_relu(M, N, K, block_M=64, block_N=64, block_K=32, threads=128, policy="Square"):
    """C = relu(A @ B + bias) and, per row block, the column sums of A @ B (a reduction along M)."""
    nbm = (M + block_M - 1) // block_M

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), Bias: T.Tensor((N,), "float32"),
             C: T.Tensor((M, N), "float32"), S: T.Tensor((nbm, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            bias_l = T.alloc_fragment((block_N,), "float32")
            col = T.alloc_fragment((block_N,), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l, policy=_POL[policy])
            T.reduce_sum(C_l, col, dim=0)
            T.copy(Bias[bx * block_N], bias_l)
            for i, j in T.Parallel(block_M, block_N):
                C_l[i, j] = T.max(C_l[i, j] + bias_l[j], 0)
            T.copy(C_l, C[by * block_M, bx * block_N])
            T.copy(col, S[by, bx * block_N])

    return main


@tilelang.jit(out_idx=[-2, -1])
def gemm_rowmax(M, N, K, block_M=64, block_N=64, block_K=32, threads=128):
    """C = A @ B and its row maxima per column block (a reduction along N: FullRow is chosen)."""
    nbn = (N + block_N - 1) // block_N

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32"),
             R: T.Tensor((nbn, M), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            m = T.alloc_fragment((block_M,), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.reduce_max(C_l, m, dim=1)
            T.copy(C_l, C[by * block_M, bx * block_N])
            T.copy(m, R[bx, by * block_M])

    return main


@tilelang.jit(out_idx=[-1])
def gemm_relayout(M, N, K, block_M=64, block_N=64, threads=128):
    """E = 2 A @ B with one K tile: a Square gemm, a copy into a FullRow accumulator (two layouts: relayout
    through shared scratch), then a FullRow gemm accumulating into it."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), E: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, K), "float16")
            B_s = T.alloc_shared((K, block_N), "float16")
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            E_l = T.alloc_fragment((block_M, block_N), "float32")
            T.copy(A[by * block_M, 0], A_s)
            T.copy(B[0, bx * block_N], B_s)
            T.gemm(A_s, B_s, C_l, clear_accum=True)
            T.copy(C_l, E_l)
            T.gemm(A_s, B_s, E_l, policy=T.GemmWarpPolicy.FullRow)
            T.copy(E_l, E[by * block_M, bx * block_N])

    return main


def _compile(k):
    from tilesim.backends.cuda import compile_cuda

    return compile_cuda(k.prim_func, sim=False, tensor_cores=True, async_copy=False)


def _layouts(prog):
    """{buffer name: Layout} of the first kernel's register fragments."""
    from tilesim.backends.cuda.layout import place_buffers
    from tilesim.backends.cuda.mma_layout import tensor_core_accumulator
    from tilesim.ir import nodes as N
    from tilesim.ir.traverse import walk_stmts

    launch = prog.pf.launches[0]
    pl = place_buffers(launch, accumulator=tensor_core_accumulator)
    names = {s.buffer.uid: s.buffer.name for s in walk_stmts(launch.body) if isinstance(s, N.Alloc)}
    return {names[u]: lay for u, lay in pl.reg.items()}, pl


def test_square_grid_serves_column_reductions_and_epilogues():
    prog = _compile(gemm_colsum_bias_relu(100, 72, 40))
    lays, pl = _layouts(prog)
    assert lays["C_l"] == Layout((64, 64), (16, 8), (4, 1), 128, (1, 2), ((16, 0), (4, 64)))
    # the column sums and the bias keep the accumulator's (split) column groups, replicated over its rows
    assert lays["col"] == lays["C_l"].restrict([1]) == lays["bias_l"] and lays["col"].is_split(0)
    assert not pl.notes and "FullRow" not in prog.source
    assert prog.source.count("_mma_f16(") == 2 * 4  # 64x64 on 2x2 warps: 2 m16 x 4 n8 tiles per warp


def test_row_reduction_chooses_full_row_and_says_so():
    prog = _compile(gemm_rowmax(100, 72, 40))
    lays, pl = _layouts(prog)
    assert lays["C_l"] == Layout((64, 64), (32, 4), (4, 1), 128, (1, 2)) and not lays["C_l"].is_split(1)
    assert len(pl.notes) == 1 and "C_l is reduced along a dimension its warps share" in pl.notes[0]
    assert "warps all along M (FullRow)" in prog.source.splitlines()[3]


def test_two_grids_in_one_launch_relayout():
    prog = _compile(gemm_relayout(96, 80, 32))
    lays, _ = _layouts(prog)
    assert lays["C_l"].is_split(1) and not lays["E_l"].is_split(1)
    assert "cuda.syncthreads()" in prog.source and prog.source.count("_mma_f16(") == 2 * 4 + 1 * 8


def test_attention_keeps_its_explicit_full_row():
    from tests.registry import REGISTRY

    tk = REGISTRY["flash_attention_causal"]
    lays, pl = _layouts(_compile(tk.build(tk.toy)))
    assert not pl.notes and not any(lay.is_split(d) for lay in lays.values() for d in range(lay.ndim))


_SIM = r"""
import json, sys
import numpy as np
sys.path.insert(0, {root!r})
from tests.backends.test_warp_grid import gemm_colsum_bias_relu, gemm_rowmax, gemm_relayout
from tests.core_kernels import matmul_dynamic
from tilesim.backends.cuda.check import cuda_twin, interp_twin, rel_err

def check(name, k, inputs):
    jk = cuda_twin(k, tensor_cores=True)
    assert "_mma_" in jk.get_kernel_source(), name
    out = jk(*[x.copy() for x in inputs])
    ref = interp_twin(k)(*[x.copy() for x in inputs])
    out, ref = (out, ref) if isinstance(out, (list, tuple)) else ([out], [ref])
    print(json.dumps({{"name": name, "err": max(rel_err(o, r) for o, r in zip(out, ref)), "n": len(out)}}))

rng = np.random.default_rng(0)
h = lambda *s: rng.standard_normal(s).astype(np.float16)
M, N, K = 70, 72, 20  # the 64 x 64 x 32 tiles divide none of them
for pol in ("Square", "FullCol"):
    check(f"colsum_bias_relu_{{pol}}", gemm_colsum_bias_relu(M, N, K, policy=pol),
          [h(M, K), h(K, N), rng.standard_normal(N).astype(np.float32)])
check("rowmax", gemm_rowmax(M, N, K), [h(M, K), h(K, N)])
check("relayout", gemm_relayout(96, 80, 32), [h(96, 32), h(32, 80)])
for ta, tb in ((True, True),):
    k = matmul_dynamic(block_M=32, block_N=64, block_K=16, trans_A=ta, trans_B=tb, dtype="float16", threads=128)
    M, N, K = 40, 88, 24
    A = h(K, M) if ta else h(M, K)
    B = h(N, K) if tb else h(K, N)
    check(f"matmul_dynamic_32x64_{{'T' if ta else 'N'}}{{'T' if tb else 'N'}}", k, [A, B])
"""


def test_warp_grids_in_the_simulator_with_modelled_warp_instructions():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    r = subprocess.run([sys.executable, "-c", _SIM.format(root=ROOT)], capture_output=True, text=True, env=env,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-4000:]
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert [row["name"] for row in rows] == ["colsum_bias_relu_Square", "colsum_bias_relu_FullCol", "rowmax",
                                              "relayout", "matmul_dynamic_32x64_TT"]
    for row in rows:
        assert row["err"] < 1e-5, row


@pytest.mark.gpu
@pytest.mark.parametrize("policy", ["Square", "FullRow", "FullCol"])
def test_warp_grids_on_the_gpu(policy):
    from tilesim.backends.cuda.caps import available
    from tilesim.backends.cuda.check import cuda_twin, interp_twin, rel_err

    if not available():
        pytest.skip("no CUDA GPU")
    rng = np.random.default_rng(5)
    M, N, K = 1000, 776, 200
    k = gemm_colsum_bias_relu(M, N, K, block_M=128, block_N=128, block_K=32, policy=policy)
    ins = [rng.standard_normal((M, K)).astype(np.float16), rng.standard_normal((K, N)).astype(np.float16),
           rng.standard_normal(N).astype(np.float32)]
    jk = cuda_twin(k, tensor_cores=True)
    assert "_mma_" in jk.get_kernel_source()
    for o, r in zip(jk(*[x.copy() for x in ins]), interp_twin(k)(*[x.copy() for x in ins])):
        assert rel_err(o, r) < 1e-5
