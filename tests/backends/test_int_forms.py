"""The cheaper integer forms of the ``mma.sync`` path (issue 14, brief AQ; ``emitter.INT_FORMS``).

* the range proofs of :mod:`tilesim.backends.cuda.affine_mask` decide int32 / int64 / no rewrite (unit tests of
  the decision: a shape near the int32 limit, an unbounded 64-bit value);
* kernels with affine comparisons in ``T.Parallel`` (every operator, coefficients other than 1, tiles that do not
  divide the shapes) under numba's CUDA simulator against the interpreter, with the forms on and off;
* the sm_90a SASS of the causal flash-attention loop stays under the integer-instruction count measured here.
"""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

import tilesim as tilelang
import tilesim.language as T

from ._util import ROOT, can_compile_ptx, needs_numba_cuda, sass_of

pytestmark = pytest.mark.usefixtures("mma_sync_lowering")  # the mma.sync lowering's integer forms (conftest)


def _src(k, **kw):
    from tilesim.backends.cuda.runtime import CudaProgram

    return CudaProgram(k.prim_func, sim=False, **kw).source


def band(M, N, block_M=16, block_N=16, threads=64, seq=None, off=0, coef=1):
    """out[i, j] = x[i, j] where row*coef + off >= col and col < seq (else -1), in tiles: the causal mask's shape."""
    seq = N if seq is None else seq

    @tilelang.jit(out_idx=[1])
    def build(M, N):
        @T.prim_func
        def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
            with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
                f = T.alloc_fragment((block_M, block_N), "float32")
                T.copy(X[by * block_M, bx * block_N], f)
                for i, j in T.Parallel(block_M, block_N):
                    f[i, j] = T.if_then_else(((by * block_M + i) * coef + off >= bx * block_N + j)
                                             & (bx * block_N + j < seq)
                                             & (2 * j - i > -block_M) & (i - j <= block_M),
                                             f[i, j], -1.0)
                T.copy(f, Y[by * block_M, bx * block_N])

        return main

    return build(M, N)


# ------------------------------------------------------------------------------------ the decisions
@needs_numba_cuda
def test_the_mask_is_rewritten_with_an_all_true_version_and_32_bit_differences():
    src = _src(band(40, 56))
    assert len(re.findall(r"_hm\d+ = int32\(", src)) == 4, src  # one per comparison, all proven inside int32
    assert "if _hm" in src and "(True and True)" in src.replace("((True and True) and True)", "(True and True)")


@needs_numba_cuda
def test_a_shape_near_the_int32_limit_keeps_64_bit_differences():
    # row * 2**20 reaches 2**31 for rows >= 2048: the difference is proven inside int64, not int32
    src = _src(band(4096, 64, coef=2 ** 20))
    assert len(re.findall(r"_hm\d+ = int64\(", src)) == 1 and len(re.findall(r"_hm\d+ = int32\(", src)) == 3
    assert re.search(r"_hm\d+ = int64\(1048576 \* ", src)  # the coefficient is kept (not only its sign)
    # rows * 2**20 where rows < 1024 (plus the offsets): every term fits int32
    src = _src(band(1000, 64, coef=2 ** 20))
    assert len(re.findall(r"_hm\d+ = int32\(", src)) == 4, src


@needs_numba_cuda
def test_unbounded_values_are_not_rewritten():
    @tilelang.jit(out_idx=[1])
    def build(N):
        @T.prim_func
        def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), big: T.int64):
            with T.Kernel(T.ceildiv(N, 32), threads=32) as bx:
                f = T.alloc_fragment((32,), "float32")
                T.copy(X[bx * 32], f)
                for i in T.Parallel(32):
                    f[i] = T.if_then_else(bx * 32 + i < big, f[i], 0.0)
                T.copy(f, Y[bx * 32])

        return main

    src = _src(build(64))
    assert "_hm" not in src  # an int64 parameter has no proven range: the ordinary comparison


@needs_numba_cuda
def test_names_bound_inside_the_loop_body_are_not_invariant():
    @tilelang.jit(out_idx=[1])
    def build(N):
        @T.prim_func
        def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
            with T.Kernel(T.ceildiv(N, 32), threads=32) as bx:
                f = T.alloc_fragment((32,), "float32")
                T.copy(X[bx * 32], f)
                for i in T.Parallel(32):
                    r = T.int32(f[i])  # varies per element, has no loop variable in its name
                    f[i] = T.if_then_else(bx * 32 + i < r, f[i], 0.0)
                T.copy(f, Y[bx * 32])

        return main

    src = _src(build(64))
    assert "_hm" not in src  # the comparison keeps its ordinary form


def test_interval_arithmetic_of_the_range_proofs():
    from tilesim.backends.cuda import affine_mask as AM
    from tilesim.ir import nodes as N

    class G:
        par = None
        nt = 128

    c = lambda v: N.Const(v, "int32")  # noqa: E731
    x = N.Var("x", "int32", kind="param")
    assert AM.interval(G, N.Binary("mul", c(3), c(-4), "int32")) == (-12, -12)
    assert AM.interval(G, x) == (-(2 ** 31), 2 ** 31 - 1)
    assert AM.interval(G, N.Binary("floormod", x, c(8), "int32")) == (0, 7)
    assert AM.interval(G, N.Binary("floordiv", N.Binary("floormod", x, c(64), "int32"), c(8), "int32")) == (0, 7)
    assert AM.interval(G, N.Binary("min", c(32), x, "int32")) == (-(2 ** 31), 32)
    assert AM.interval(G, N.Var("y", "int64", kind="param")) is None
    assert AM.interval(G, N.Binary("floordiv", x, x, "int32")) is None  # division by a variable: unknown


# ------------------------------------------------------------------------------------ the simulator
_SIM = r"""
import json, sys
import numpy as np
sys.path.insert(0, {root!r})
from tests.backends.test_int_forms import band
from tilesim.backends.cuda import emitter as E
from tilesim.backends.cuda.check import cuda_twin, interp_twin

rng = np.random.default_rng(0)
for forms in (True, False):
    E.INT_FORMS = forms
    for M, N, kw in ((40, 56, {{}}), (33, 70, dict(seq=50, off=3)), (48, 48, dict(coef=3, off=-5, block_M=32)),
                     (20, 44, dict(block_N=32, threads=128, off=-17))):
        k = band(M, N, **kw)
        jk = cuda_twin(k)
        src = jk.get_kernel_source()
        assert ("_hm" in src) == forms, src
        X = rng.standard_normal((M, N)).astype(np.float32)
        out = np.asarray(jk(X.copy()))
        ref = np.asarray(interp_twin(k)(X.copy()))
        print(json.dumps({{"forms": forms, "case": [M, N, kw], "equal": bool(np.array_equal(out, ref)),
                          "masked": int((ref == -1).sum()), "kept": int((ref != -1).sum())}}), flush=True)

# static shapes the tiles divide: every cp.async tile is proven inside its tensor (no bounds check, no zero-fill form)
from kernels.gemm import matmul
from tests.core_kernels import flash_attention
for forms in (True, False):
    E.INT_FORMS = forms
    for tb in (False, True):
        k = matmul(64, 32, 48, block_M=32, block_N=16, block_K=16, num_stages=2, threads=64, dtype="float16",
                   out_dtype="float32", trans_B=tb)
        A = rng.standard_normal((64, 48)).astype(np.float16)
        B = rng.standard_normal((32, 48) if tb else (48, 32)).astype(np.float16)
        jk = cuda_twin(k, tensor_cores=True, async_copy=True)
        src = jk.get_kernel_source()
        assert ("_nb" not in src) == forms and "_cp_async16" in src, src
        out, ref = np.asarray(jk(A, B)), np.asarray(interp_twin(k)(A, B))
        print(json.dumps({{"forms": forms, "case": ["matmul", tb], "err": float(np.abs(out - ref).max()),
                          "equal": bool(np.abs(out - ref).max() < 1e-3), "masked": 1, "kept": 1}}), flush=True)
    k = flash_attention(1, 2, 32, 16, is_causal=True, block_M=16, block_N=16, num_stages=2, threads=32)
    q, kk, v = (rng.standard_normal((1, 32, 2, 16)).astype(np.float16) for _ in range(3))
    jk = cuda_twin(k, tensor_cores=True, async_copy=True)
    assert ("_nb" not in jk.get_kernel_source()) == forms
    out, ref = jk(q, kk, v), interp_twin(k)(q, kk, v)
    out = out if isinstance(out, (list, tuple)) else [out]
    ref = ref if isinstance(ref, (list, tuple)) else [ref]
    err = max(float(np.abs(np.asarray(o, np.float64) - np.asarray(r, np.float64)).max()) for o, r in zip(out, ref))
    print(json.dumps({{"forms": forms, "case": ["flash_causal"], "err": err, "equal": err < 2e-3,
                      "masked": 1, "kept": 1}}), flush=True)
"""


@needs_numba_cuda
def test_rewritten_masks_match_the_interpreter_in_the_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    r = subprocess.run([sys.executable, "-c", _SIM.format(root=ROOT)], capture_output=True, text=True, env=env,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-4000:]
    import json

    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 8 + 6, r.stdout
    for row in rows:
        assert row["equal"] and row["masked"] > 0 and row["kept"] > 0, row


# ------------------------------------------------------------------------------------ machine code
def test_flash_attention_loop_integer_instructions(tmp_path):
    """Pins the gain: the hot-path iteration of the causal FA loop (64x64/t128/s2, bf16, (2, 16, 2048, 128)) issued
    1459 instructions per warp, 736 of them integer, before these forms and 725 / 122 with them (sm_90, CUDA 13 ptxas);
    the bounds leave ~25 % for another ptxas."""
    sys.path.insert(0, ROOT)
    from benchmarks.mma_loop_sass import loop_counts
    from kernels import attention as A
    from tilesim.backends.cuda.runtime import CudaProgram

    if not can_compile_ptx():
        pytest.skip("numba-cuda cannot compile here (no NVVM)")
    k = A.flash_attention_fwd(2, 16, 2048, 128, is_causal=True, dtype="bfloat16", block_M=64, block_N=64,
                              threads=128, num_stages=2)
    (_, ptx), = CudaProgram(k.prim_func, sim=False, tensor_cores=True, async_copy=True).compile_ptx((9, 0))
    log, sass = sass_of(ptx, tmp_path)
    assert "0 bytes spill stores" in log
    c = loop_counts(sass)
    assert c["hot"]["HMMA"] == 128 and c["hot"]["LDSM"] == 72 and c["hot"]["LDGSTS"] == 16, c
    assert c["hot"]["INT"] <= 145, ("integer instructions per FA iteration grew back toward the 736 of the int64 "
                                    f"generic-address forms: {c['hot']}")
    assert c["hot"]["total"] <= 890, c
    assert np.isfinite(c["loop_bytes"])
