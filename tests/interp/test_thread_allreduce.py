"""TVM's thread all-reduce (``T.attr`` + ``T.comm_reducer`` + ``T.tvm_thread_allreduce``) and
``T.alloc_reducer`` accumulation in ``T.Parallel``: meaning against NumPy on shapes tiles do not divide,
located errors, and the all-reduce's CUDA lowering under numba's simulator."""

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


def splitk_gemv(N, K, BN, RT, TK=4, combine="sum"):
    """C[n] = sum_k B[n, k] A[k] with the K partials of RT threads all-reduced (or their max)."""
    BK = RT * TK
    lam = (lambda x, y: x + y) if combine == "sum" else (lambda x, y: T.max(x, y))
    ident = 0.0 if combine == "sum" else -1e30

    @T.prim_func
    def main(A: T.Tensor((K,), "float32"), B: T.Tensor((N, K), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, BN), threads=(BN, RT)) as bn:
            tn = T.get_thread_binding(0)
            tk = T.get_thread_binding(1)
            acc = T.alloc_var("float32")
            acc = ident
            for bk in T.serial(T.ceildiv(K, BK)):
                for k in T.serial(TK):
                    kk = bk * BK + tk * TK + k
                    if kk < K and bn * BN + tn < N:
                        if combine == "sum":
                            acc = acc + A[kk] * B[bn * BN + tn, kk]
                        else:
                            acc = T.max(acc, A[kk] * B[bn * BN + tn, kk])
            red = T.alloc_var("float32")
            with T.attr(T.comm_reducer(lam, [T.cast(ident, "float32")]), "reduce_scope",
                        T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), acc, True, red, tk, dtype="handle"))
            if bn * BN + tn < N:
                C[bn * BN + tn] = red
    return main


def gemv_ref(a, b, combine):
    p = b.astype(np.float64) * a.astype(np.float64)[None, :]
    return p.sum(axis=1) if combine == "sum" else p.max(axis=1)


@settings(max_examples=10, deadline=None)
@given(N=st.integers(1, 13), K=st.integers(1, 70), BN=st.sampled_from([1, 2, 4]), RT=st.sampled_from([2, 4, 8]),
       combine=st.sampled_from(["sum", "max"]))
def test_thread_allreduce_gemv(N, K, BN, RT, combine):
    rng = np.random.default_rng(N * 100 + K)
    a, b = rng.standard_normal(K).astype(np.float32), rng.standard_normal((N, K)).astype(np.float32)
    c = np.zeros(N, np.float32)
    tilelang.compile(splitk_gemv(N, K, BN, RT, combine=combine))(a, b, c)
    np.testing.assert_allclose(c, gemv_ref(a, b, combine), rtol=1e-5, atol=1e-5)


def reducer_gemv(M, N, bm, bn, op):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), X: T.Tensor((N,), "float32"), O: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as i0:
            r = T.alloc_reducer(bm, "float32", op=op, replication="all")
            T.fill(r, 0 if op == "sum" else -1e30)
            for i1 in T.Pipelined(T.ceildiv(N, bn), num_stages=2):
                a = T.alloc_fragment((bm, bn), "float32")
                T.copy(A[i0 * bm, i1 * bn], a)
                x = T.alloc_fragment(bn, "float32")
                T.copy(X[i1 * bn], x)
                for i, j in T.Parallel(bm, bn):
                    if i1 * bn + j < N:
                        if op == "sum":
                            r[i] += a[i, j] * x[j]
                        else:
                            r[i] = T.max(r[i], a[i, j] * x[j])
            T.finalize_reducer(r)
            T.copy(r, O[i0 * bm])
    return main


@settings(max_examples=10, deadline=None)
@given(M=st.integers(1, 40), N=st.integers(1, 70), bm=st.sampled_from([4, 16]), bn=st.sampled_from([8, 32]),
       op=st.sampled_from(["sum", "max"]))
def test_alloc_reducer_combines_every_parallel_iteration(M, N, bm, bn, op):
    rng = np.random.default_rng(M * 100 + N)
    a, x = rng.standard_normal((M, N)).astype(np.float32), rng.standard_normal(N).astype(np.float32)
    o = np.zeros(M, np.float32)
    tilelang.compile(reducer_gemv(M, N, bm, bn, op))(a, x, o)
    np.testing.assert_allclose(o, gemv_ref(x, a, op), rtol=1e-5, atol=1e-5)


def _bad(mode):
    @T.prim_func
    def main(A: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=8) as bx:
            tx = T.get_thread_binding()
            red = T.alloc_var("float32")
            if mode == "no-scope":
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), A[tx], True, red, tx, dtype="handle"))
            elif mode == "key":
                with T.attr(T.comm_reducer(lambda x, y: x + y, [T.cast(0, "float32")]), "pragma_unroll", 0):
                    A[tx] = 0
            elif mode == "count":
                with T.attr(T.comm_reducer(lambda x, y: x + y, [T.cast(0, "float32")]), "reduce_scope", 0):
                    T.evaluate(T.tvm_thread_allreduce(T.uint32(2), A[tx], True, red, tx, dtype="handle"))
            else:
                with T.attr(T.comm_reducer(lambda x, y: x + y, [T.cast(0, "float32")]), "reduce_scope", 0):
                    T.evaluate(T.tvm_thread_allreduce(T.uint32(1), A[tx], True, red, bx, dtype="handle"))
            A[tx] = red
    return main


@pytest.mark.parametrize("mode, msg", [("no-scope", "reduce_scope"), ("key", "pragma_unroll"), ("count", "count"),
                                       ("thread", "thread indices")])
def test_allreduce_errors_are_located(mode, msg):
    with pytest.raises(KernelError, match=msg) as ei:
        tilelang.compile(_bad(mode))
    assert ei.value.loc is not None and ei.value.loc.line > 0


CUDASIM = """
import numpy as np, sys
sys.path.insert(0, {root!r})
from tests.interp.test_thread_allreduce import splitk_gemv, gemv_ref, reducer_gemv
import tilesim as tilelang
from tilesim.backends.cuda.check import cuda_twin
rng = np.random.default_rng(5)
a, b = rng.standard_normal(19).astype(np.float32), rng.standard_normal((5, 19)).astype(np.float32)
c = np.zeros(5, np.float32)
cuda_twin(tilelang.compile(splitk_gemv(5, 19, 2, 4)))(a, b, c)
assert np.allclose(c, gemv_ref(a, b, "sum"), rtol=1e-5, atol=1e-5), c
m, x = rng.standard_normal((20, 50)).astype(np.float32), rng.standard_normal(50).astype(np.float32)
for op in ("sum", "max"):
    o = np.zeros(20, np.float32)
    cuda_twin(tilelang.compile(reducer_gemv(20, 50, 4, 8, op)))(m, x, o)
    assert np.allclose(o, gemv_ref(x, m, op), rtol=1e-5, atol=1e-5), (op, o)
print("ok")
"""


def test_thread_allreduce_and_reducers_lower_for_cuda_under_the_simulator():
    pytest.importorskip("numba_cuda")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=root)
    r = subprocess.run([sys.executable, "-c", CUDASIM.format(root=root)], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-2000:]
