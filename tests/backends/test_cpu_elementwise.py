"""Elementwise ``T.Parallel`` loops the CPU target runs as cached helper calls (``codegen_ew.py``: ``row_op``,
``exp_affine``, ``mask_select``): bit for bit the element loops they replace (the same kernel generated with
the recogniser switched off), in place and not, 1-D and 2-D, on shapes no tile divides, with NaN, infinities
and signed zeros among the inputs; loops of other shapes keep the element loops."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim as tilelang
import tilesim.language as T
from tilesim.backends.cpu import available, codegen_rules
from tilesim.kernel import JITKernel

pytestmark = pytest.mark.skipif(not available(), reason="numba and scipy are not installed")

BM, BN = 8, 4


@tilelang.jit(out_idx=[-2, -1])
def ew_kernel(dtype="float32", bm=BM, bn=BN, off=3):
    M = T.dynamic("m")
    N = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), V: T.Tensor((M,), dtype), W: T.Tensor((M,), dtype), s: T.float32,
             C: T.Tensor((8, M, N), dtype), R: T.Tensor((M, 4), dtype)):
        with T.Kernel(T.ceildiv(M, bm), T.ceildiv(N, bn), threads=128) as (bx, by):
            x = T.alloc_fragment((bm, bn), dtype)
            y = T.alloc_fragment((bm, bn), dtype)
            z = T.alloc_fragment((bm, bn), dtype)
            v = T.alloc_fragment((bm,), dtype)
            w = T.alloc_fragment((bm,), dtype)
            u = T.alloc_fragment((bm,), dtype)
            T.copy(A[bx * bm, by * bn], x)
            T.copy(V[bx * bm], v)
            T.copy(W[bx * bm], w)
            for i, j in T.Parallel(bm, bn):  # row_op out of place, then in place
                y[i, j] = x[i, j] - v[i]
            for i, j in T.Parallel(bm, bn):
                y[i, j] = y[i, j] / w[i]
            T.copy(y, C[0, bx * bm, by * bn])
            for i, j in T.Parallel(bm, bn):
                z[i, j] = T.max(x[i, j], v[i])
            T.copy(z, C[1, bx * bm, by * bn])
            for i, j in T.Parallel(bm, bn):  # exp_affine, the three forms, exp2 and exp
                z[i, j] = T.exp2(x[i, j] * s - v[i] * 0.75)
            T.copy(z, C[2, bx * bm, by * bn])
            for i, j in T.Parallel(bm, bn):
                z[i, j] = T.exp(x[i, j] - v[i])
            T.copy(z, C[3, bx * bm, by * bn])
            for i, j in T.Parallel(bm, bn):
                y[i, j] = x[i, j]
            for i, j in T.Parallel(bm, bn):
                y[i, j] = T.exp2((y[i, j] - w[i]) * s)
            T.copy(y, C[4, bx * bm, by * bn])
            for i, j in T.Parallel(bm, bn):  # mask_select: a causal mask with an offset, and an equality
                z[i, j] = T.if_then_else(bx * bm + i >= by * bn + j - off, 0, -T.infinity(dtype))
            T.copy(z, C[5, bx * bm, by * bn])
            for i, j in T.Parallel(bm, bn):
                z[i, j] = T.if_then_else(2 * (by * bn + j) == bx * bm + i, 1.5, 0.5)
            T.copy(z, C[6, bx * bm, by * bn])
            for i, j in T.Parallel(bm, bn):  # not a helper shape: a column vector (element loops)
                z[i, j] = x[i, j] * v[j % bm]
            T.copy(z, C[7, bx * bm, by * bn])
            for i in T.Parallel(bm):  # 1-D: row_op and exp_affine on vectors, in place
                u[i] = T.min(v[i], w[i])
            for i in T.Parallel(bm):
                u[i] = T.exp2(u[i] * s - w[i] * s)
            for i in T.Parallel(bm):
                w[i] = v[i] * w[i]
            if by == 0:
                for i in T.Parallel(bm):
                    R[bx * bm + i, 0] = u[i]
                    R[bx * bm + i, 1] = w[i]
    return main


_PAIRS: dict = {}


def _pair(dtype):
    """The kernel compiled as it is, and with the recogniser off (every loop as element loops)."""
    if dtype not in _PAIRS:
        k = ew_kernel(dtype)
        kc = JITKernel(k.prim_func, out_idx=k.out_idx, target="cpu")
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(codegen_rules, "elementwise_call", lambda g, s: False)
            kl = JITKernel(k.prim_func, out_idx=k.out_idx, target="cpu")
        _PAIRS[dtype] = kc, kl
    return _PAIRS[dtype]


def _inputs(data, dtype):
    m, n = data.draw(st.integers(1, 21)), data.draw(st.integers(1, 11))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    a = (rng.standard_normal((m, n)) * 4).astype(dtype)
    v = (rng.standard_normal(m) * 4).astype(dtype)
    w = (rng.standard_normal(m) * 4).astype(dtype)
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, 200.0, -200.0], dtype=dtype)
    for arr in (a.reshape(-1), v, w):  # some special values at random places
        k = data.draw(st.integers(0, min(3, arr.size)))
        arr[rng.integers(0, arr.size, size=k)] = rng.choice(special, size=k)
    s = data.draw(st.sampled_from([0.5, 1.4426950408889634, -3.0, 0.0]))
    return a, v, w, s


def _bits(x):
    return np.asarray(x).view(np.uint32 if x.dtype == np.float32 else np.uint64)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_helper_shapes_are_recognised(dtype):
    k = ew_kernel(dtype)
    src = JITKernel(k.prim_func, out_idx=k.out_idx, target="cpu").get_kernel_source()
    assert src.count("row_op(") == 5
    if dtype == "float32":
        assert src.count("exp_affine(") == 4 and src.count("mask_select(") == 2
    else:  # exp2f/expf are float32 forms; the literal-valued select is a float32 value stored with a conversion
        assert "exp_affine(" not in src and src.count("mask_select(") == 1
    assert "% " in src, "the column-vector loop keeps its element loop"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_helpers_equal_the_element_loops_bitwise(dtype, data):
    kc, kl = _pair(dtype)
    assert "row_op(" not in kl.get_kernel_source()
    a, v, w, s = _inputs(data, dtype)
    for got, want in zip(kc(a, v, w, s), kl(a, v, w, s)):
        np.testing.assert_array_equal(_bits(got), _bits(want))


@settings(max_examples=6, deadline=None)
@given(data=st.data())
def test_helpers_match_the_interpreter(data):
    """Against the reference meaning: equal but for the exponentials (1 ulp: the interpreter calls NumPy's)."""
    k = ew_kernel("float32")
    kc = _pair("float32")[0]
    ki = JITKernel(k.prim_func, out_idx=k.out_idx, target="interp")
    a, v, w, s = _inputs(data, "float32")
    (c_cpu, r_cpu), (c_int, r_int) = kc(a, v, w, s), ki(a, v, w, s)
    exact = [0, 1, 5, 6, 7]
    np.testing.assert_array_equal(_bits(c_cpu[exact]), _bits(c_int[exact]))
    np.testing.assert_allclose(c_cpu[2:5], c_int[2:5], rtol=3e-7, atol=0)
    np.testing.assert_allclose(r_cpu, r_int, rtol=3e-7, atol=0)


_CHILD = r"""
import json, numpy as np
from tilesim.examples import flash_attention
from tilesim.kernel import JITKernel
k = flash_attention(1, 2, 100, 64, dtype="float16")
rng = np.random.default_rng(0)
args = tuple(rng.standard_normal((1, 100, 2, 64)).astype(np.float16) for _ in range(3))
kc = JITKernel(k.prim_func, out_idx=k.out_idx, target="cpu")
out = np.asarray(kc(*args))
fn = kc.program.launches[0].function()
print(json.dumps({"bits": out.view(np.uint16).ravel().tolist()[:4096], "misses": sum(fn.stats.cache_misses.values()),
                  "hits": sum(fn.stats.cache_hits.values()), "source": kc.get_kernel_source()}))
"""


def test_a_later_process_loads_the_cached_launch(tmp_path):
    """The launch's cached machine code calls the helpers by symbol: a second process registers them (``need``)
    before loading it, compiles nothing and computes the same bits."""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, TILESIM_CACHE_DIR=str(tmp_path),
               PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    runs = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, cwd=str(root),
                             timeout=600)
        assert out.returncode == 0, out.stderr[-2000:]
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    first, second = runs
    assert "need(" in first["source"] and "exp_affine(" in first["source"] and "tile_in(" in first["source"]
    assert first["misses"] == 1 and second["misses"] == 0 and second["hits"] == 1
    assert first["bits"] == second["bits"]
