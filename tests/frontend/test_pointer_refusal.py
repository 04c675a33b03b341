"""``T.ptr`` / ``T.make_tensor`` (tensors reached through raw pointer tables) are refused with a located error
naming the construct, also where Python evaluates the annotation (a ``@T.prim_func`` signature)."""

import pytest

import tilesim as tilelang
import tilesim.language as T
from tilesim.errors import KernelError


def test_ptr_in_a_prim_func_signature_is_refused_at_the_annotation():
    with pytest.raises(KernelError, match="T.ptr is not supported by tilesim") as ei:
        @T.prim_func
        def kernel(A_ptrs: T.Tensor([4], T.ptr)):  # <- here
            with T.Kernel(1) as bx:
                pass
    loc = ei.value.loc
    assert loc is not None and loc.file == __file__
    with open(__file__) as fh:
        line = fh.read().splitlines()[loc.line - 1]
    assert "# <- here" in line and line[loc.col:].startswith("T.Tensor")


def test_make_tensor_is_refused_naming_it():
    @T.prim_func
    def kernel(A: T.Tensor((4,), "int64"), B: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            X = T.make_tensor(A[0], (4,), "float32")
            B[0] = X[0]

    with pytest.raises(KernelError, match="T.make_tensor is not supported by tilesim") as ei:
        tilelang.compile(kernel)
    assert ei.value.loc is not None and ei.value.loc.line > 0
