"""``tilelang.cdiv`` on kernel values (eager ``T.const`` sizes): the expression ``(a + b - 1) // b`` as in
TileLang, usable in shapes and grids; on plain ints it stays a host-side integer function."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import tilesim as tilelang
import tilesim.language as T


def test_cdiv_of_ints_is_an_int():
    assert tilelang.cdiv(1000, 64) == 16 and tilelang.cdiv(1024, 64) == 16 and tilelang.cdiv(1, 64) == 1
    assert isinstance(tilelang.cdiv(7, 2), int)


@tilelang.jit
def block_sums(x, block: int = 4):
    n = T.const("n")
    nb = tilelang.cdiv(n, block)            # a symbolic size: n is bound from the argument below
    x: T.Tensor((n,), T.float32)
    out = T.empty((nb,), T.float32)
    with T.Kernel(nb) as bx:
        acc = T.alloc_var(T.float32)
        acc = 0.0
        for i in T.serial(block):
            if bx * block + i < n:
                acc += x[bx * block + i]
        out[bx] = acc
    return out


@given(n=st.integers(1, 40), block=st.sampled_from([3, 4, 8]))
def test_cdiv_of_a_symbolic_size_sizes_the_grid_and_output(n, block):
    x = np.arange(n, dtype=np.float32) + 1
    got = np.asarray(block_sums(x, block))
    nb = -(-n // block)
    want = np.add.reduceat(x, np.arange(0, n, block))
    assert got.shape == (nb,)
    np.testing.assert_allclose(got, want, rtol=1e-6)
