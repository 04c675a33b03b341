"""The argument contract (tilesim.binding) and the target registry, seen from a kernel call."""

from types import SimpleNamespace

import numpy as np
import pytest

import tilesim
import tilesim.language as T
from tilesim import binding
from tilesim.backends import get_target, registered
from tilesim.examples import matmul
from tilesim.ir import nodes as N
from tilesim.testing import compare_arrays


def _ab(m=20, n=9, k=12):
    rng = np.random.default_rng(0)
    return rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)


def test_inputs_by_name_match_positional():
    a, b = _ab()
    k = matmul(20, 9, 12, 16, 16, 16, dtype="float32")
    want = k(a, b)
    np.testing.assert_array_equal(k(A=a, B=b), want)
    np.testing.assert_array_equal(k(a, B=b), want)


@pytest.mark.parametrize("call, text", [
    (lambda k, a, b: k(a, Z=b), "has no parameter 'Z'"),
    (lambda k, a, b: k(a, A=b), "'A' of main is given twice"),
    (lambda k, a, b: k(a, C=b), "'C' of main is an output"),
    (lambda k, a, b: k(a), "takes 2 argument(s) (A, B), got 1"),
    (lambda k, a, b: k(a, b, a), "takes 2 argument(s) (A, B), got 3"),
    (lambda k, a, b: k(A=a), "takes 2 argument(s) (A, B), got 0 positional and 1 keyword"),
])
def test_call_errors_name_the_arguments(call, text):
    a, b = _ab()
    k = matmul(20, 9, 12, 16, 16, 16, dtype="float32")
    with pytest.raises(tilesim.KernelRuntimeError) as info:
        call(k, a, b)
    assert text in str(info.value)


def test_targets_are_registered_and_looked_up():
    assert {"interp", "cuda"} <= set(registered())
    assert get_target("numpy").name == get_target("INTERP").name == "interp"
    assert get_target("cpu").name == "cpu"
    assert get_target("cuda -arch=sm_90").name == "cuda"
    assert get_target(None).name in registered()
    with pytest.raises(tilesim.KernelTypeError) as info:
        get_target("tpu")
    err = str(info.value)
    assert "unknown target 'tpu'" in err and "'interp'" in err and "'cuda'" in err


def test_unknown_target_when_compiling():
    k = matmul(20, 9, 12, 16, 16, 16, dtype="float32")
    with pytest.raises(tilesim.KernelTypeError, match="unknown target 'llvm -mcpu=x'"):  # not a GPU kind:
        tilesim.compile(k.prim_func, out_idx=[-1], target="llvm -mcpu=x")            # no interpreter fallback


def _dyn_add():
    n = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.serial(n):
                C[i] = A[i] + B[i] + bx

    return tilesim.compile(main, out_idx=[-1], target="interp")


def test_symbolic_dims_bound_checked_and_used_for_outputs():
    k = _dyn_add()
    a = np.arange(10, dtype=np.float32)
    np.testing.assert_array_equal(k(a, np.ones(10, np.float32)), a + 1)
    with pytest.raises(tilesim.KernelRuntimeError) as info:
        k(a, np.ones(4, np.float32))
    assert "argument 'B' of main: dimension 0 (n) is 4 but another argument set n = 10" in str(info.value)
    with pytest.raises(tilesim.KernelRuntimeError) as info:
        k(a, np.ones((10, 1), np.float32))
    assert "argument 'B' of main: expected 1 dimension(s) (n), got shape (10, 1)" in str(info.value)


def test_dims_given_by_expressions_are_evaluated_like_the_interpreter():
    n = N.Var("n", "int32", kind="dynamic")
    half = N.Binary("floordiv", n, N.Const(2, "int32"), "int32")
    neg = N.Binary("div", N.Unary("neg", n, "int32"), N.Const(4, "int32"), "int32")  # truncating: -7/4 -> -1
    scalars = {n.uid: 7}
    assert binding.eval_dim(half, scalars) == 3 and binding.eval_dim(neg, scalars) == -1
    pf = SimpleNamespace(name="main")
    p = SimpleNamespace(name="B", shape=(n, half), loc=None)
    binding.check_derived(pf, p, (7, 3), scalars)
    with pytest.raises(tilesim.KernelRuntimeError, match=r"argument 'B' of main: dimension 1 must be 3, got shape \(7, 4\)"):
        binding.check_derived(pf, p, (7, 4), scalars)


def test_dynamic_dim_conflict_names_both_sides():
    from tests.core_kernels import matmul_dynamic
    k = matmul_dynamic(block_M=16, block_N=16, block_K=8, threads=32)
    a = np.zeros((20, 13), np.float16)
    with pytest.raises(tilesim.KernelRuntimeError) as info:
        k(a, np.zeros((12, 18), np.float16))
    assert "argument 'B' of main: dimension 0 (k) is 12 but another argument set k = 13" in str(info.value)


def test_scalar_parameter_rejects_a_tensor():
    @T.prim_func
    def main(A: T.Tensor((8,), "float32"), s: T.float32):
        with T.Kernel(1) as bx:
            for i in T.Parallel(8):
                A[i] = A[i] * s + bx

    k = tilesim.compile(main, target="interp")
    a = np.ones(8, np.float32)
    k(a, 3)
    np.testing.assert_array_equal(a, np.full(8, 3, np.float32))
    with pytest.raises(tilesim.KernelRuntimeError, match="argument 's' of main is a scalar float32, got a tensor"):
        k(a, np.ones(2, np.float32))


def test_unusable_objects_are_refused():
    with pytest.raises(tilesim.KernelRuntimeError, match="cannot use a list as a tensor"):
        binding.to_host([1.0, 2.0])


def test_torch_round_trip_through_binding():
    torch = pytest.importorskip("torch")
    t = torch.arange(6, dtype=torch.bfloat16).reshape(2, 3)
    h = binding.to_host(t)
    assert h.kind == "torch" and binding.framework(t) == "torch" and not binding.is_device(t)
    assert binding.dtype_name(h.array.dtype) == "bfloat16"
    back = binding.numpy_to_torch(h.array)
    assert back.dtype == torch.bfloat16 and torch.equal(back, t)
    # a non-contiguous tensor is copied, and written back by finish()
    nc = torch.zeros(3, 2).t()
    hn = binding.to_host(nc)
    assert hn.copy_back
    hn.array[...] = 7
    hn.finish()
    assert float(nc.sum()) == 42.0
    assert compare_arrays(t, h.array.astype(np.float64)) is None
