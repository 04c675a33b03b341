"""``T.PersistentTileScheduler``: every tile visited exactly once, by the worker and at the iteration TileLang's
decode gives (swizzle panels with a narrower tail, column- or row-major, cluster rows), in plain and cluster
launches; ``stateful=False`` decodes only. Also the slice-extent rule it relies on (``(d*L + c) // d``)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim as tilelang
import tilesim.language as T
from tilesim.carver.arch import driver
from tilesim.errors import KernelError, KernelSyntaxError, KernelTypeError
from tilesim.frontend import simplify
from tilesim.ir import nodes as N


def coord_model(t, m_clusters, n, swizzle, column_major):
    """TileLang's tile_schedule.PersistentTileScheduler.coord, written out on Python ints."""
    p, s = (m_clusters, n) if column_major else (n, m_clusters)
    group = t // (p * swizzle)
    base = group * swizzle
    width = max(1, min(swizzle, s - base))
    in_group = t - group * p * swizzle
    fast, slow = in_group // width, base + in_group % width
    return (fast, slow) if column_major else (slow, fast)


@tilelang.jit(out_idx=[-2, -1])
def visits(m_tiles, n_tiles, workers, swizzle, column_major, cluster):
    @T.prim_func
    def main(Worker: T.Tensor((m_tiles, n_tiles), "int32"), Iter: T.Tensor((m_tiles, n_tiles), "int32")):
        with T.ClusterKernel(workers * cluster, threads=32, cluster_dims=cluster) as bid:
            rank = T.block_rank_in_cluster()
            sched = T.PersistentTileScheduler(m_tiles, n_tiles, num_workers=workers, swizzle_size=swizzle,
                                              column_major=column_major, cluster_size=cluster)
            sched.init(bid // cluster)
            while sched.valid():
                bx = sched.m_idx * cluster + rank
                if bx < m_tiles:
                    Worker[bx, sched.n_idx] = bid
                    Iter[bx, sched.n_idx] = sched.current_iter
                sched.next_tile()

    return main


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 9), n=st.integers(1, 9), workers=st.integers(1, 7), swizzle=st.integers(1, 4),
       column_major=st.booleans(), cluster=st.sampled_from([1, 2]))
def test_every_tile_is_visited_once_in_tilelang_order(m, n, workers, swizzle, column_major, cluster):
    W, It = visits(m, n, workers, swizzle, column_major, cluster)()
    mc = -(-m // cluster)
    want_w, want_i = np.full((m, n), -1), np.full((m, n), -1)
    for w in range(workers):
        t, it = w, 0
        while t < mc * n:
            cm, cn = coord_model(t, mc, n, swizzle, column_major)
            for r in range(cluster):
                if cm * cluster + r < m:
                    assert want_w[cm * cluster + r, cn] == -1  # the model itself visits each tile once
                    want_w[cm * cluster + r, cn], want_i[cm * cluster + r, cn] = w * cluster + r, it
            t, it = t + workers, it + 1
    assert (want_w >= 0).all()
    np.testing.assert_array_equal(W, want_w)
    np.testing.assert_array_equal(It, want_i)


def test_default_workers_are_the_sm_count_over_the_cluster_size():
    @tilelang.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(Out: T.Tensor((2,), "int32")):
            with T.Kernel(1, threads=32):
                sched = T.PersistentTileScheduler(1, 1, cluster_size=2)
                sched.init(0)
                sched.next_tile()
                Out[0] = sched.linear_idx
                Out[1] = sched.current_iter

        return main

    np.testing.assert_array_equal(k()(), [driver.get_num_sms() // 2, 1])


def test_stateless_scheduler_only_decodes():
    @tilelang.jit(out_idx=[-1])
    def k(stateful):
        @T.prim_func
        def main(Out: T.Tensor((12, 2), "int32")):
            with T.Kernel(12, threads=32) as t:
                sched = T.PersistentTileScheduler(3, 4, num_workers=5, swizzle_size=3, stateful=stateful)
                m, n = sched.coord(t)
                Out[t, 0] = m
                Out[t, 1] = n
                if not stateful:
                    sched.init(0)

        return main

    out = k(True)()
    np.testing.assert_array_equal(out, [coord_model(t, 3, 4, 3, True) for t in range(12)])
    with pytest.raises(KernelSyntaxError, match=r"stateful=False\) has no current_iter") as e:
        k(False)()
    assert e.value.loc is not None


@pytest.mark.parametrize("args, text", [
    (dict(swizzle_size=0), "swizzle_size must be a positive Python int"),
    (dict(cluster_size=1.5), "cluster_size must be a positive Python int"),
    (dict(num_workers=2.0), "num_workers must be an integer"),
])
def test_scheduler_argument_errors_are_located(args, text):
    @tilelang.jit
    def k():
        @T.prim_func
        def main(Out: T.Tensor((2,), "int32")):
            with T.Kernel(1, threads=32):
                sched = T.PersistentTileScheduler(2, 2, **args)
                sched.init(0)

        return main

    with pytest.raises(KernelTypeError, match=text) as e:
        k()(np.zeros(2, np.int32))
    assert e.value.loc is not None and e.value.loc.file == __file__


def test_scheduler_outside_a_launch_is_an_error():
    @tilelang.jit
    def k():
        @T.prim_func
        def main(Out: T.Tensor((2,), "int32")):
            T.PersistentTileScheduler(2, 2)
            with T.Kernel(1, threads=32):
                Out[0] = 0

        return main

    with pytest.raises(KernelError, match="T.PersistentTileScheduler outside"):
        k()(np.zeros(2, np.int32))


# ----------------------------------------------------------------------------------------- extents
def test_floordiv_by_a_divisor_of_every_coefficient_is_linear():
    by = N.Var("by", "int32", kind="block")
    r = N.Var("r", "int32", kind="let")
    two, bn = N.Const(2, "int32"), N.Const(256, "int32")

    def half(x):  # (by * 2 + x) * bn // 2
        e = N.Binary("mul", N.Binary("add", N.Binary("mul", by, two, "int32"), x, "int32"), bn, "int32")
        return N.Binary("floordiv", e, two, "int32")

    lo, hi = half(r), half(N.Binary("add", r, N.Const(1, "int32"), "int32"))
    assert simplify.difference(lo, hi) == 128
    odd = N.Binary("floordiv", N.Binary("add", by, N.Const(1, "int32"), "int32"), two, "int32")
    assert simplify.linear(odd) == ({odd: 1}, 0)  # by + 1 is not a multiple of 2: an atom
    assert simplify.linear(N.Binary("floordiv", N.Binary("add", N.Binary("mul", by, N.Const(4, "int32"), "int32"),
                                                         N.Const(7, "int32"), "int32"), two, "int32")) == ({by: 2}, 3)
