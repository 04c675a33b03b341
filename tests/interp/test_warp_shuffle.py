"""Warp shuffles (``T.shfl_sync/xor/down/up``, ``T.tvm_warp_shuffle``) in per-thread code, against a NumPy model
of the CUDA rules (groups of ``width`` lanes; a source outside the group gives the thread its own value)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim as tilelang
import tilesim.language as T
from tilesim.backends.cuda import compile_cuda


def _model(vals, kind, arg, width):
    out = vals.copy()
    for t in range(len(vals)):
        lane = (t % 32) % width
        src = {"idx": arg % width, "xor": lane ^ arg, "down": lane + arg, "up": lane - arg}[kind]
        if 0 <= src < width:
            out[t] = vals[t - lane + src]
    return out


def _kernel(kind, nt, width, arg):
    @T.prim_func
    def k(A: T.Tensor((2, nt), "float32"), B: T.Tensor((2, nt), "float32")):
        with T.Kernel(2, threads=nt) as bx:
            tx = T.get_thread_binding()
            v = T.alloc_var("float32")
            v = A[bx, tx]
            if kind == "idx":
                B[bx, tx] = T.shfl_sync(v, arg, width=width)
            elif kind == "xor":
                B[bx, tx] = T.shfl_xor(v, arg, width=width)
            elif kind == "down":
                B[bx, tx] = T.shfl_down(v, arg, width=width)
            else:
                B[bx, tx] = T.shfl_up(v, arg, width=width)

    return tilelang.compile(k, out_idx=[-1])


@settings(max_examples=12, deadline=None)
@given(kind=st.sampled_from(["idx", "xor", "down", "up"]), nt=st.sampled_from([32, 64, 96]),
       width=st.sampled_from([1, 2, 4, 8, 16, 32]), arg=st.integers(0, 40))
def test_shuffles_match_the_cuda_rules(kind, nt, width, arg):
    a = np.random.default_rng(arg).standard_normal((2, nt)).astype(np.float32)
    out = _kernel(kind, nt, width, arg)(a)
    for b in range(2):
        np.testing.assert_array_equal(out[b], _model(a[b], kind, arg, width))


def test_per_thread_source_lane_and_butterfly_sum():
    """tvm_warp_shuffle with a per-thread source lane; an xor butterfly leaves every lane the warp's sum."""

    @T.prim_func
    def k(A: T.Tensor((64,), "int32"), R: T.Tensor((64,), "int32"), S: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            R[tx] = T.tvm_warp_shuffle(0xFFFFFFFF, A[tx], 31 - tx % 32, 32, 32)
            acc = T.alloc_var("int32")
            acc = A[tx]
            for i in T.serial(5):
                acc = acc + T.shfl_xor(acc, 1 << i)
            S[tx] = acc

    a = np.arange(64, dtype=np.int32) * 3
    r, s = tilelang.compile(k, out_idx=[1, 2])(a)
    lanes = np.arange(64)
    np.testing.assert_array_equal(r, a[(lanes // 32) * 32 + 31 - lanes % 32])
    np.testing.assert_array_equal(s, np.repeat([a[:32].sum(), a[32:].sum()], 32))


def test_shuffle_errors():
    @T.prim_func
    def in_parallel(A: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(32):
                A[i] = T.shfl_xor(A[i], 1)

    with pytest.raises(tilelang.KernelSyntaxError, match="outside per-thread code"):
        tilelang.compile(in_parallel)

    @T.prim_func
    def bad_width(A: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            A[tx] = T.shfl_down(A[tx], 1, width=12)

    with pytest.raises(tilelang.KernelTypeError, match="power of two"):
        tilelang.compile(bad_width)

    @T.prim_func
    def fine(A: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            A[tx] = T.shfl_down(A[tx], 1)

    assert "T.shfl_down" in tilelang.compile(fine).get_kernel_source()
    with pytest.raises(tilelang.KernelError, match="warp shuffles"):
        compile_cuda(fine)   # the CUDA backend refuses them (target="cuda" without a GPU runs the interpreter)


def test_shuffle_is_costed_by_the_simulator():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            A[tx] = T.shfl_down(A[tx], 1)

    report = tilelang.compile(k).simulate()
    assert report is not None and "dram read" in str(report)
