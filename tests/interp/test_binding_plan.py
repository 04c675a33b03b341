"""Per-signature host binding plans (``tilesim.binding_plan``): a repeated call binds as ``bind_host`` would, a
changed signature re-checks, and every error ``bind_host`` raises is still raised."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim as tilelang
import tilesim.language as T
from tilesim.errors import KernelError


@tilelang.jit(out_idx=[-1])
def scaled_rows(block=16, N=6):
    """C[i, j] = A[i, j] * s + n, M rows (dynamic), N columns; tiles do not divide M."""
    M = T.dynamic("m")

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), s: T.float32, n: T.int32, C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
            for i, j in T.Parallel(block, N):
                if bx * block + i < M:
                    C[bx * block + i, j] = A[bx * block + i, j] * s + T.cast(n, "float32")
    return main


@pytest.fixture(params=["interp", "cpu"])
def kern(request):
    from tilesim.kernel import JITKernel

    if request.param == "cpu":
        pytest.importorskip("numba")
    k = scaled_rows()
    return JITKernel(k.prim_func, out_idx=k.out_idx, target=request.param)


def _plans(k):
    return k._host_plans._plans


@settings(max_examples=10, deadline=None)
@given(m=st.integers(1, 40), s=st.floats(-4, 4, width=32), c=st.integers(-5, 5))
def test_repeated_calls_equal_fresh_binding(m, s, c):
    """Second and third calls (plan hits) give the first call's result; a changed shape misses and is right."""
    from tilesim.kernel import JITKernel

    k0 = scaled_rows()
    k = JITKernel(k0.prim_func, out_idx=k0.out_idx, target="interp")
    a = np.random.default_rng(m).standard_normal((m, 6)).astype(np.float32)
    want = a * np.float32(s) + np.float32(c)
    for _ in range(3):
        np.testing.assert_array_equal(k(a, np.float32(s), c), want)
    assert len(_plans(k)) == 1
    b = np.ones((m + 1, 6), np.float32)
    np.testing.assert_array_equal(k(b, np.float32(s), c), b * np.float32(s) + np.float32(c))
    assert len(_plans(k)) == 2


def test_outputs_are_fresh_arrays_each_call(kern):
    a = np.arange(18, dtype=np.float32).reshape(3, 6)
    c1 = kern(a, 2.0, 1)
    c2 = kern(a, 2.0, 1)
    assert c1 is not c2 and not np.shares_memory(c1, c2)
    np.testing.assert_array_equal(c1, a * 2 + 1)
    np.testing.assert_array_equal(c2, c1)


def test_scalar_value_is_part_of_the_signature(kern):
    a = np.ones((5, 6), np.float32)
    np.testing.assert_array_equal(kern(a, 2.0, 1), np.full((5, 6), 3, np.float32))
    np.testing.assert_array_equal(kern(a, 2.0, 7), np.full((5, 6), 9, np.float32))  # not the first call's plan
    np.testing.assert_array_equal(kern(a, 0.5, 7), np.full((5, 6), 7.5, np.float32))


def test_errors_are_raised_after_a_plan_exists(kern):
    a = np.ones((7, 6), np.float32)
    kern(a, 1.0, 0)
    kern(a, 1.0, 0)
    assert _plans(kern)
    with pytest.raises(KernelError, match="float32"):
        kern(a.astype(np.float64), 1.0, 0)  # wrong dtype: a miss, checked
    with pytest.raises(KernelError):
        kern(np.ones((6,), np.float32), 1.0, 0)  # wrong rank
    with pytest.raises(KernelError):
        kern(np.ones((7, 5), np.float32), 1.0, 0)  # wrong column count
    with pytest.raises(KernelError):
        kern(a)  # missing arguments: split_call's error


def test_copied_arguments_are_not_planned(kern):
    """A strided view is bound as a copy (bind_host's contract): never planned, always right."""
    big = np.arange(60, dtype=np.float32).reshape(5, 12)
    view = big[:, ::2]
    for _ in range(2):
        np.testing.assert_array_equal(kern(view, 1.0, 0), view)
    assert not _plans(kern)


def test_torch_tensors_are_not_planned(kern):
    torch = pytest.importorskip("torch")
    x = torch.ones(4, 6)
    for _ in range(2):
        out = kern(x, 2.0, 0)
        assert isinstance(out, torch.Tensor)
        assert torch.equal(out, torch.full((4, 6), 2.0))
    assert not _plans(kern)


def test_plans_are_bounded(kern):
    from tilesim.binding_plan import MAX_PLANS

    for m in range(1, MAX_PLANS + 4):
        kern(np.ones((m, 6), np.float32), 1.0, 0)
    assert len(_plans(kern)) == MAX_PLANS
