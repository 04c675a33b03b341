"""``T.ptr`` pointer tables and ``T.make_tensor(ptr, shape, dtype)``: a global tensor at a device address (here a
host address: NumPy's ``arr.ctypes.data``, torch's ``data_ptr()``), read and written in place; refused with a
clear error by the CUDA backend, left to the interpreter by the compiled CPU target; bad pointers are errors."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim as tilelang
import tilesim.language as T
from tilesim import dtypes as dt
from tilesim.backends.cuda import compile_cuda


def grouped_gemm(sizes, K, N, bM=16, bN=16, bK=16):
    """One kernel over every group: each block finds its group in a tile-offset table, then views that group's
    A (maxM, K), B (K, N) and C (maxM, N) through the pointer tables."""
    n, max_m = len(sizes), max(sizes)
    offsets = [0]
    for s in sizes[:-1]:
        offsets.append(offsets[-1] + math.ceil(s / bM))
    total = sum(math.ceil(s / bM) for s in sizes)

    @T.prim_func
    def k(A_ptrs: T.Tensor([n], T.ptr), B_ptrs: T.Tensor([n], T.ptr), C_ptrs: T.Tensor([n], T.ptr),
          tile_offsets: T.Tensor([n], T.int32)):
        with T.Kernel(total, T.ceildiv(N, bN), threads=32) as (bx, by):
            A_s = T.alloc_shared((bM, bK), T.float32)
            B_s = T.alloc_shared((bK, bN), T.float32)
            C_l = T.alloc_fragment((bM, bN), T.float32)
            g = T.alloc_var(dtype=T.int32)
            off = T.alloc_var(dtype=T.int32)
            g = 0
            off = 0
            for i in range(n):
                mine = bx >= tile_offsets[i]
                g = T.if_then_else(mine, i, g)
                off = T.if_then_else(mine, tile_offsets[i], off)
            m0 = (bx - off) * bM
            A = T.make_tensor(A_ptrs[g], (max_m, K), T.float32)
            B = T.make_tensor(B_ptrs[g], (K, N), T.float32)
            C = T.make_tensor(C_ptrs[g], (max_m, N), T.float32)
            T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(K, bK), num_stages=1):
                T.copy(A[m0, ko * bK], A_s)
                T.copy(B[ko * bK, by * bN], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[m0, by * bN])

    return k, np.array(offsets, np.int32)


def table(arrays):
    return np.array([a.ctypes.data for a in arrays], np.int64)


@settings(max_examples=8, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=3), st.integers(1, 40), st.integers(1, 40),
       st.integers(0, 2**16))
def test_grouped_gemm_through_pointer_tables(sizes, K, N, seed):
    rng = np.random.default_rng(seed)
    k, offsets = grouped_gemm(sizes, K, N)
    max_m = max(sizes)
    a = [rng.standard_normal((max_m, K)).astype(np.float32) for _ in sizes]
    b = [rng.standard_normal((K, N)).astype(np.float32) for _ in sizes]
    c = [np.full((max_m, N), 7.0, np.float32) for _ in sizes]
    before = [x.copy() for x in a + b]
    tilelang.compile(k, target="interp")(table(a), table(b), table(c), offsets)
    for s, x, y, z in zip(sizes, a, b, c):
        np.testing.assert_allclose(z[:s], x[:s] @ y, rtol=1e-4, atol=1e-4)   # written in place, through C's address
    for x, y in zip(a + b, before):
        np.testing.assert_array_equal(x, y)                                   # inputs untouched


def test_torch_data_ptr_tables_and_the_ir_text():
    torch = pytest.importorskip("torch")
    k, offsets = grouped_gemm([5, 20], 24, 16)
    a = [torch.randn(20, 24) for _ in range(2)]
    b = [torch.randn(24, 16) for _ in range(2)]
    c = [torch.zeros(20, 16) for _ in range(2)]
    ptrs = [torch.tensor([t.data_ptr() for t in ts], dtype=torch.int64) for ts in (a, b, c)]
    kern = tilelang.compile(k)
    kern(*ptrs, torch.from_numpy(offsets))
    for s, x, y, z in zip([5, 20], a, b, c):
        torch.testing.assert_close(z[:s], x[:s] @ y, rtol=1e-4, atol=1e-4)
    src = kern.get_kernel_source()
    assert "T.Tensor((2,), int64)" in src and "A = T.make_tensor(A_ptrs[g], (20, 24), float32)" in src


def test_ptr_is_a_64_bit_address_dtype():
    assert T.ptr == "ptr" and dt.canon(T.ptr) == "int64" and T.ptr.bits == 64


def _single(addr_dtype=T.ptr, strides=None, outside=False):
    @T.prim_func
    def k(P: T.Tensor([1], addr_dtype), Out: T.Tensor([4], T.float32)):
        if outside:
            X = T.make_tensor(P[0], (4,), T.float32)
        with T.Kernel(1, threads=32):
            X = T.make_tensor(P[0], (4,), T.float32, strides)
            for i in T.Parallel(4):
                Out[i] = X[i] * 2

    return k


def test_pointer_errors_are_located():
    with pytest.raises(tilelang.KernelTypeError, match="64-bit pointer, got a int32"):  # traced when compiled
        tilelang.compile(_single(addr_dtype=T.int32))
    with pytest.raises(tilelang.KernelTypeError, match="strides is not supported"):
        tilelang.compile(_single(strides=(1,)))
    with pytest.raises(tilelang.KernelSyntaxError, match="outside `with T.Kernel"):
        tilelang.compile(_single(outside=True))
    kern = tilelang.compile(_single(), out_idx=[-1], target="interp")
    with pytest.raises(tilelang.KernelRuntimeError, match="address 0 is not a valid pointer") as info:
        kern(np.zeros(1, np.int64))
    assert "test_make_tensor.py" in str(info.value)
    x = np.arange(8, dtype=np.float32)
    with pytest.raises(tilelang.KernelRuntimeError, match="not aligned"):
        kern(np.array([x.ctypes.data + 2], np.int64))
    np.testing.assert_array_equal(kern(np.array([x.ctypes.data + 8], np.int64)), [4, 6, 8, 10])


def test_cuda_backend_refuses_and_cpu_target_leaves_it_to_the_interpreter():
    k, offsets = grouped_gemm([3, 17], 8, 8)
    with pytest.raises(tilelang.KernelTypeError, match="T.make_tensor .* is not lowered by the CUDA backend"):
        compile_cuda(k)
    a = [np.ones((17, 8), np.float32), np.full((17, 8), 2, np.float32)]
    b = [np.eye(8, dtype=np.float32)] * 2
    c = [np.zeros((17, 8), np.float32) for _ in range(2)]
    tilelang.compile(k, target="cpu")(table(a), table(b), table(c), offsets)
    np.testing.assert_array_equal(c[0][:3], 1)
    np.testing.assert_array_equal(c[1], 2)
