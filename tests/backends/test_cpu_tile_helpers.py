"""The CPU target's whole-tile helpers (``tilesim/backends/cpu/prelude_tiles.py``): a tile of an n-D tensor
(rows and columns along any two of its dims, edge tiles partly outside, fixed dims possibly out of range),
fill, gemm with accumulation, row max/min/sum folded or cleared, on-chip copies and the store back, against
the interpreter on shapes no tile divides."""

import importlib.util

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim as tilelang
import tilesim.language as T
from tilesim.backends.cpu import available
from tilesim.kernel import JITKernel

pytestmark = pytest.mark.skipif(not available(), reason="numba and scipy are not installed")


_TEMPLATE = """
import tilesim as tilelang
import tilesim.language as T


@tilelang.jit(out_idx=[-2, -1])
def tile_walk(dtype, bm=8, bn=4):
    dims = tuple(T.dynamic(f"d{{i}}") for i in range({nd}))

    @T.prim_func
    def main(A: T.Tensor(dims, dtype), W: T.Tensor((bn, bn), dtype), C: T.Tensor(dims, dtype),
             R: T.Tensor((dims[{rd}], 3), dtype)):
        with T.Kernel(T.ceildiv(dims[{rd}], bm), T.ceildiv(dims[{cd}], bn), threads=128) as (bx, by):
            t = T.alloc_shared((bm, bn), dtype)
            u = T.alloc_shared((bm, bn), dtype)
            w = T.alloc_shared((bn, bn), dtype)
            f = T.alloc_fragment((bm, bn), dtype)
            mx = T.alloc_fragment((bm,), dtype)
            mn = T.alloc_fragment((bm,), dtype)
            sm = T.alloc_fragment((bm,), dtype)
            T.copy(A[{idx}], t)
            T.copy(W[0:bn, 0:bn], w)
            T.copy(t, u)
            T.fill(f, 0.5)
            T.gemm(u, w, f)
            T.fill(mx, 1.0)
            T.reduce_max(f, mx, dim=1, clear=False)
            T.fill(mn, 0.25)
            T.reduce_min(f, mn, dim=1, clear=False)
            T.reduce_sum(f, sm, dim=1)
            T.copy(f, C[{idx}])
            if by == 0:
                for i in T.Parallel(bm):
                    R[bx * bm + i, 0] = mx[i]
                    R[bx * bm + i, 1] = mn[i]
                    R[bx * bm + i, 2] = sm[i]
    return main
"""


def tile_walk(tmp_path_factory, nd, rd, cd, dtype):
    """The kernel for a tile whose rows run along dim ``rd`` and columns along ``cd`` of an ``nd``-D tensor (the
    other dims at index 1): written out as a module, the frontend reads kernel source from files."""
    idx = ", ".join("bx * bm:(bx + 1) * bm" if d == rd else "by * bn:(by + 1) * bn" if d == cd else "1"
                    for d in range(nd))
    path = tmp_path_factory.mktemp("kernels") / f"tile_walk_{nd}_{rd}_{cd}.py"
    path.write_text(_TEMPLATE.format(nd=nd, rd=rd, cd=cd, idx=idx))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.tile_walk(dtype)


_KERNELS: dict = {}


def _kernel(tmp_path_factory, *key):
    if key not in _KERNELS:
        _KERNELS[key] = tile_walk(tmp_path_factory, *key)
    return _KERNELS[key]


CASES = [(2, 0, 1, "float32"), (3, 0, 2, "float64"), (4, 1, 3, "float32"), (5, 2, 4, "float32"),
         (5, 0, 3, "float64"), (3, 1, 2, "float32")]


@pytest.mark.parametrize("nd, rd, cd, dtype", CASES)
@settings(max_examples=6, deadline=None)
@given(data=st.data())
def test_tile_helpers_match_the_interpreter(tmp_path_factory, nd, rd, cd, dtype, data):
    k = _kernel(tmp_path_factory, nd, rd, cd, dtype)
    kc = JITKernel(k.prim_func, out_idx=k.out_idx, target="cpu")
    ki = JITKernel(k.prim_func, out_idx=k.out_idx, target="interp")
    assert kc.program.fallback is None
    src = kc.get_kernel_source()
    for helper in ("tile_in(", "tile_out(", "fill_all(", "mm_acc(", "copy_all(", "row_max(", "row_min(",
                   "row_sum("):
        assert helper in src, helper
    shape = [data.draw(st.integers(1, 3)) for _ in range(nd)]  # dims outside the tile: index 1 may be out of range
    shape[rd] = data.draw(st.integers(1, 21))
    shape[cd] = data.draw(st.integers(1, 11))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    a = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal((4, 4)).astype(dtype)
    c_cpu, r_cpu = kc(a, w)
    c_int, r_int = ki(a, w)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(c_cpu, c_int, rtol=tol, atol=tol)  # gemm: BLAS sums in another order
    np.testing.assert_allclose(r_cpu, r_int, rtol=tol, atol=tol)


def test_partial_regions_keep_the_element_loops():
    """A copy into part of a tile is not a whole-tile helper call (the fp32 tile stored into fp16 is:
    ``enc_all``, one rounding, tested in ``test_cpu_half_tiles.py``)."""
    @tilelang.jit(out_idx=[-1])
    def part(dtype="float32"):
        M = T.dynamic("m")

        @T.prim_func
        def main(A: T.Tensor((M, 8), dtype), C: T.Tensor((M, 8), "float16")):
            with T.Kernel(T.ceildiv(M, 4), threads=32) as bx:
                t = T.alloc_shared((4, 8), dtype)
                T.fill(t, 0)
                T.copy(A[bx * 4, 0:4], t[0, 0:4])
                T.copy(t, C[bx * 4, 0])
        return main

    k = part()
    kc = JITKernel(k.prim_func, out_idx=k.out_idx, target="cpu")
    src = kc.get_kernel_source()
    assert "tile_in" not in src and "fill_all(" in src and "enc_all(" in src
    a = np.random.default_rng(1).standard_normal((10, 8)).astype(np.float32)
    ki = JITKernel(k.prim_func, out_idx=k.out_idx, target="interp")
    np.testing.assert_array_equal(kc(a).view(np.uint16), ki(a).view(np.uint16))
