"""The CUDA lowering splits a tile operation's work over every thread of the block, so one under an ``if`` on
the thread index (executed by part of the block) is refused with a located error instead of leaving part of
the tile undone; the interpreter gives such a program its meaning."""

import numpy as np
import pytest

import tilesim as tilelang
import tilesim.language as T
from tilesim.errors import KernelError

from ._util import needs_numba_cuda


def half_block_double(via_let):
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=256) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((64, 64), "float32")
            group = tx // 128
            if (group == 0) if via_let else (tx < 128):
                T.copy(A, S)
                for i, j in T.Parallel(64, 64):
                    S[i, j] = S[i, j] * 2
                T.copy(S, B)
    return main


@pytest.mark.parametrize("via_let", [False, True])
def test_interpreter_runs_a_warp_group_tile_op(via_let):
    a = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    b = np.zeros_like(a)
    tilelang.compile(half_block_double(via_let))(a, b)
    np.testing.assert_array_equal(b, 2 * a)


@needs_numba_cuda
@pytest.mark.parametrize("via_let", [False, True])
def test_cuda_refuses_a_tile_op_under_a_thread_dependent_if(via_let):
    from tilesim.backends.cuda.check import cuda_twin
    with pytest.raises(KernelError, match="part of the block") as ei:
        cuda_twin(tilelang.compile(half_block_double(via_let))).get_kernel_source()
    assert ei.value.loc is not None and ei.value.loc.line > 0
