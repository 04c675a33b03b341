"""``T.Persistent``: a persistent launch visits every tile of its domain exactly once, in TileLang's order
(grouped last extent, one tile per wave per block), on the interpreter and under numba's CUDA simulator."""

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim as tilelang
import tilesim.language as T
from tilesim.errors import KernelError


def persistent(m, n, wave, g):
    @T.prim_func
    def main(Owner: T.Tensor((m, n), "int32"), Count: T.Tensor((m, n), "int32")):
        with T.Kernel(wave, threads=32) as bid:
            for bx, by in T.Persistent([m, n], wave, bid, group_size=g):
                Owner[bx, by] = bid
                T.atomic_add(Count[bx, by], 1)
    return main


def owner_model(m, n, wave, g):
    """TileLang's PersistentFor written out: the block that visits each tile."""
    g = max(1, min(g, n))
    groups = -(-n // g)
    padded = groups * m * g
    owner = np.full((m, n), -1, np.int32)
    for bid in range(wave):
        for w in range(-(-padded // wave)):
            t = w * wave + bid
            if t >= padded:
                break
            ig, i1, i0 = t % g, (t // g) % m, t // g // m
            if i0 * g + ig < n:
                owner[i1, i0 * g + ig] = bid
    return owner


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 9), n=st.integers(1, 11), wave=st.integers(1, 7), g=st.integers(1, 12))
def test_persistent_visits_every_tile_once_in_tilelang_order(m, n, wave, g):
    k = tilelang.compile(persistent(m, n, wave, g))
    owner, count = np.full((m, n), -7, np.int32), np.zeros((m, n), np.int32)
    k(owner, count)
    np.testing.assert_array_equal(count, 1)
    np.testing.assert_array_equal(owner, owner_model(m, n, wave, g))


def test_persistent_gemm_matches_numpy():
    M, N, K, bm, bn, bk, sms = 70, 90, 40, 16, 32, 16, 3

    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(sms, threads=128) as bid:
            As = T.alloc_shared((bm, bk), "float32")
            Bs = T.alloc_shared((bk, bn), "float32")
            Cl = T.alloc_fragment((bm, bn), "float32")
            for bx, by in T.Persistent([T.ceildiv(M, bm), T.ceildiv(N, bn)], sms, bid):
                T.clear(Cl)
                for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                    T.copy(A[bx * bm, k * bk], As)
                    T.copy(B[k * bk, by * bn], Bs)
                    T.gemm(As, Bs, Cl)
                T.copy(Cl, C[bx * bm, by * bn])

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    c = np.zeros((M, N), np.float32)
    tilelang.compile(gemm)(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def _bad(mode):
    @T.prim_func
    def main(A: T.Tensor((4, 4), "int32")):
        with T.Kernel(2, threads=32) as bid:
            if mode == "names":
                for bx in T.Persistent([4, 4], 2, bid):
                    A[bx, 0] = 1
            elif mode == "group":
                for bx, by in T.Persistent([4, 4], 2, bid, group_size=0):
                    A[bx, by] = 1
            else:
                for bx, by in T.Persistent([4, 2.5], 2, bid):
                    A[bx, by] = 1
    return main


@pytest.mark.parametrize("mode, msg", [("names", "binds 1 name"), ("group", "group_size"),
                                       ("extent", "domain extent")])
def test_persistent_errors_are_located(mode, msg):
    with pytest.raises(KernelError, match=msg) as ei:
        tilelang.compile(_bad(mode))
    assert ei.value.loc is not None and ei.value.loc.line > 0


CUDASIM = """
import numpy as np, sys
sys.path.insert(0, {root!r})
from tests.interp.test_persistent import persistent, owner_model
import tilesim as tilelang
from tilesim.backends.cuda.check import cuda_twin
k = cuda_twin(tilelang.compile(persistent(5, 7, 3, 2)))
owner, count = np.zeros((5, 7), np.int32), np.zeros((5, 7), np.int32)
k(owner, count)
assert (count == 1).all() and (owner == owner_model(5, 7, 3, 2)).all(), (owner, count)
print("ok")
"""


def test_persistent_lowers_for_cuda_under_the_simulator():
    pytest.importorskip("numba_cuda")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=root)
    r = subprocess.run([sys.executable, "-c", CUDASIM.format(root=root)], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-2000:]
