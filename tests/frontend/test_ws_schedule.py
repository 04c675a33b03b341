"""``T.annotate_ws_schedule`` / ``T.ws_op`` / ``annotations={T.WSID: ...}``: checked, and no value changes."""

import numpy as np
import pytest

import tilesim
import tilesim.language as T
from tilesim import KernelError


def _gemm(M, N, K, scheduled, bad=None, bm=64, bn=64, bk=32, stages=2):
    @tilesim.jit(out_idx=[-1])
    def build():
        @T.prim_func
        def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((N, K), "float32"), C: T.Tensor((M, N), "float32")):
            with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
                A_s = T.alloc_shared((bm, bk), "float32")
                B_s = T.alloc_shared((bn, bk), "float32")
                C_l = T.alloc_fragment((bm, bn), "float32")
                mx = T.alloc_fragment((bm,), "float32")
                if scheduled:
                    pipes = [T.WSPipeline("smem", [A_s, B_s] if bad != "global" else [A], depth=stages)]
                    T.annotate_ws_schedule(T.WSSchedule(
                        num_warps=8,
                        roles=[T.WSRole("TMA", warps_lo=0, warps_hi=1, max_nreg=40),
                               T.WSRole("MMA", warps_lo=4, warps_hi=8, max_nreg=232)],
                        pipelines=pipes,
                        scopes=[T.WSScope("loop_k", {
                            "TMA": [T.WSSync.producer_acquire("smem"), "copy_A", "copy_B",
                                    T.WSSync.producer_commit("smem")],
                            "MMA" if bad != "role" else "Epilogue": [T.WSSync.consumer_wait("smem", stage=stages - 1),
                                                                     "gemm", T.WSSync.consumer_release("smem")]}),
                            T.WSScope(T.WSScope.ROOT, {"TMA": ["init"], "MMA": ["init"]})]))
                with T.ws_op("init"):
                    T.fill(C_l, 0, annotations={T.WSID: "fill"})
                for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages, annotations={T.WSID: "loop_k"}):
                    T.copy(A[by * bm, k * bk], A_s, annotations={T.WSID: "copy_A"})
                    T.copy(B[bx * bn, k * bk], B_s, annotations={T.WSID: "copy_B"})
                    T.gemm(A_s, B_s, C_l, transpose_B=True, annotations={T.WSID: "gemm"})
                T.reduce_max(C_l, mx, dim=1, annotations={T.WSID: "rmax"})
                for i, j in T.Parallel(bm, bn, annotations={T.WSID: "sub"}):
                    C_l[i, j] = C_l[i, j] - mx[i]
                T.copy(C_l, C[by * bm, bx * bn])
        return main

    return build()


def _ref(a, b, bn=64):
    """Each 64-column tile minus its row max; columns past N read zeros (the tile's padding takes part)."""
    n = b.shape[0]
    bp = np.zeros((-(-n // bn) * bn, b.shape[1]))
    bp[:n] = b
    c = a.astype(np.float64) @ bp.T
    for t in range(0, c.shape[1], bn):
        c[:, t:t + bn] -= c[:, t:t + bn].max(axis=1, keepdims=True)
    return c[:, :n]


@pytest.mark.parametrize("M, N, K", [(100, 72, 80), (64, 64, 64)])
def test_scheduled_kernel_computes_what_it_says(M, N, K):
    rng = np.random.default_rng(M)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((N, K)).astype(np.float32)
    plain = _gemm(M, N, K, scheduled=False)(a, b)
    sched = _gemm(M, N, K, scheduled=True)(a, b)
    np.testing.assert_array_equal(sched, plain)  # the schedule changes no value
    np.testing.assert_allclose(sched, _ref(a, b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("bad, msg", [("role", "unknown role 'Epilogue'"), ("global", "not a shared")])
def test_bad_schedules_are_located_errors(bad, msg):
    with pytest.raises(KernelError, match=msg) as ei:
        _gemm(64, 64, 64, scheduled=True, bad=bad)
    assert "test_ws_schedule.py" in str(ei.value)


def test_ws_op_takes_one_name():
    @tilesim.jit(out_idx=[-1])
    def build():
        @T.prim_func
        def main(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                with T.ws_op(3):
                    T.fill(A, 1)
        return main

    with pytest.raises(KernelError, match="one op name"):
        build()
