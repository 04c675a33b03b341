"""The cost analysis' rule tables cover every IR node class; profiles and the block program."""

import numpy as np
import pytest

import hwmodels
from tests import core_kernels as K
from tilesim.analysis import COST_RULES, EXPR_RULES, PROFILES, analyze, get_profile, walk_ops
from tilesim.analysis.rule_tables import ELEMENT_RULES
from tilesim.errors import KernelTypeError
from tilesim.ir import groups


def test_every_statement_class_has_a_cost_rule():
    assert COST_RULES.groups == groups.STMTS
    COST_RULES.check_coverage()
    ELEMENT_RULES.check_coverage()


def test_every_expression_class_has_a_cost_rule():
    assert EXPR_RULES.groups == groups.EXPRS
    EXPR_RULES.check_coverage()


def test_profiles():
    assert set(PROFILES) == {"tensorcore", "numba", "numba_tc", "numba_tc_wgmma", "ascend", "mlu"}
    assert get_profile("numba_tc").gemm_unit == "matrix" and get_profile("numba_tc").matrix_dtypes
    assert get_profile("numba").gemm_unit == "vector"
    assert get_profile("tensorcore").matrix_dtype("float32") == "tf32"
    with pytest.raises(KernelTypeError, match="unknown lowering profile"):
        get_profile("tpu")


def test_causal_trip_counts_per_block_row():
    hw = hwmodels.load("h200_sxm_141gb")
    k = K.flash_attention(2, 4, 1000, 64, True, 64, 64, 2, 128)
    (prog,) = analyze(k.prim_func, hw, "tensorcore")
    loop = next(n for n in prog.body if type(n).__name__ == "Loop")
    bx_runs = prog.runs[0][0]
    trips = np.broadcast_to(loop.trip, prog.counts.shape)[:, 0, 0]
    # block row bx processes min(ceil(1000/64), ceil((bx+1)*64/64)) = min(16, bx+1) key tiles
    assert trips.tolist() == [min(16, bx + 1) for bx in bx_runs.tolist()]
    assert float(prog.counts.sum()) == 16 * 4 * 2


def test_edge_tiles_count_only_in_bounds_bytes():
    hw = hwmodels.load("h200_sxm_141gb")
    M, N, Kd = 100, 200, 70
    k = K.matmul_relu(M, N, Kd, block_M=64, block_N=64, block_K=32)
    (prog,) = analyze(k.prim_func, hw, "tensorcore")
    total_a = 0.0
    total_c = 0.0
    loop = next(n for n in prog.body if type(n).__name__ == "Loop")
    for op in walk_ops(loop.body):
        if op.label.startswith("copy A"):
            total_a = float(np.sum(np.broadcast_to(op.work["global"] * loop.trip, prog.counts.shape) * prog.counts))
    for op in walk_ops(prog.body):
        if op.label.startswith("copy C_local"):
            total_c = float(np.sum(np.broadcast_to(op.work["global"], prog.counts.shape) * prog.counts))
    grid_n = -(-N // 64)
    assert total_a == pytest.approx(M * Kd * 2 * grid_n)  # every A element once per column of blocks
    assert total_c == pytest.approx(M * N * 4)  # the output exactly once, edges clipped


def test_data_dependent_loop_needs_tensor_or_hint():
    import tilesim as tilelang
    import tilesim.language as T
    from tilesim.errors import KernelError

    @tilelang.jit(out_idx=[-1])
    def ragged(B, L, block=64):
        @T.prim_func
        def main(Lens: T.Tensor((B,), "int32"), X: T.Tensor((B, L), "float32"), Y: T.Tensor((B,), "float32")):
            with T.Kernel(B, threads=128) as bx:
                n = T.alloc_var("int32")
                n = Lens[bx]
                acc = T.alloc_fragment((block,), "float32")
                s = T.alloc_fragment((1,), "float32")
                T.clear(acc)
                for it in T.serial(T.ceildiv(n, block)):
                    T.copy(X[bx, it * block], acc)
                T.reduce_sum(acc, s, dim=0)
                Y[bx] = s[0]
        return main

    k = ragged(8, 4096)
    hw = hwmodels.load("h200_sxm_141gb")
    with pytest.raises(KernelError, match="hints"):
        analyze(k.prim_func, hw, "tensorcore")
    lens = np.array([4096, 2048, 1024, 64, 4096, 4096, 128, 512], dtype=np.int32)
    (prog,) = analyze(k.prim_func, hw, "tensorcore", lens=lens)
    loop = next(n for n in prog.body if type(n).__name__ == "Loop")
    per_block = np.broadcast_to(loop.trip, prog.counts.shape)
    assert float(np.sum(per_block * prog.counts)) == float(np.sum(-(-lens // 64)))
    (prog2,) = analyze(k.prim_func, hw, "tensorcore", hints={"it": 10})
    loop2 = next(n for n in prog2.body if type(n).__name__ == "Loop")
    assert float(np.max(loop2.trip)) == 10


@pytest.mark.parametrize("swizzle", [None, (3, "row"), (4, "column"), (10, "row")])
def test_dispatch_order_is_a_permutation_of_the_grid(swizzle):
    from tilesim.sim.device import dispatch_coords
    grid = (7, 5, 2)
    n = 7 * 5 * 2
    bx, by, bz = dispatch_coords(grid, swizzle, np.arange(n))
    seen = set(zip(bx.tolist(), by.tolist(), bz.tolist()))
    assert len(seen) == n
    if swizzle and swizzle[1] == "row":
        w = min(swizzle[0], 5)
        assert by[:w].tolist() == list(range(w)) and set(bx[:w].tolist()) == {0}  # a panel column first
