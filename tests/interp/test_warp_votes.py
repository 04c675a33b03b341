"""``T.any_sync`` / ``T.all_sync`` / ``T.ballot_sync``: per-warp votes (built from xor shuffles)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
import tilesim.language as T
from tilesim import KernelError


def _votes(n_threads):
    @tilesim.jit(out_idx=[1, 2, 3])
    def build():
        @T.prim_func
        def main(X: T.Tensor((n_threads,), "float32"), A: T.Tensor((n_threads,), "int32"),
                 L: T.Tensor((n_threads,), "int32"), B: T.Tensor((n_threads,), "uint64")):
            with T.Kernel(1, threads=n_threads):
                tx = T.get_thread_binding()
                A[tx] = T.any_sync(X[tx] < 0.0)
                L[tx] = T.all_sync(X[tx] < 0.0)
                B[tx] = T.ballot_sync(X[tx] < 0.0)
        return main

    return build()


def _expect(x):
    n = len(x)
    any_, all_, ballot = np.zeros(n, np.int32), np.zeros(n, np.int32), np.zeros(n, np.uint64)
    for w in range(0, n, 32):
        neg = x[w:w + 32] < 0
        any_[w:w + 32] = neg.any()
        all_[w:w + 32] = neg.all()
        ballot[w:w + 32] = sum(1 << i for i, b in enumerate(neg) if b)
    return any_, all_, ballot


@settings(max_examples=15, deadline=None)
@given(st.sampled_from([32, 64, 128]), st.integers(0, 2 ** 31), st.sampled_from([0.0, 0.05, 0.5, 1.0]))
def test_votes_per_warp(n, seed, frac_negative):
    rng = np.random.default_rng(seed)
    x = np.where(rng.random(n) < frac_negative, -1.0, 1.0).astype(np.float32)
    a, l, b = _votes(n)(x)
    ea, el, eb = _expect(x)
    np.testing.assert_array_equal(np.asarray(a) != 0, ea != 0)
    np.testing.assert_array_equal(np.asarray(l) != 0, el != 0)
    np.testing.assert_array_equal(np.asarray(b), eb)


def test_float_predicate_is_refused():
    @tilesim.jit(out_idx=[1])
    def build():
        @T.prim_func
        def main(X: T.Tensor((32,), "float32"), A: T.Tensor((32,), "int32")):
            with T.Kernel(1, threads=32):
                tx = T.get_thread_binding()
                A[tx] = T.any_sync(X[tx])
        return main

    with pytest.raises(KernelError, match="integer or boolean predicate"):
        build()
