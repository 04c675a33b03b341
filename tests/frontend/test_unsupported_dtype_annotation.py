"""A TileLang dtype tilesim cannot compute with (a ``types._UnsupportedDType``; none of TileLang's has no meaning
today: ``T.float4_e2m1_unpacked`` computes as ``float4_e2m1fn``) is refused with a located error naming
it, also where Python evaluates the annotation (a ``@T.prim_func`` signature). ``T.ptr`` and ``T.make_tensor``
have a meaning now: tests/interp/test_make_tensor.py."""

import pytest

import tilesim as tilelang
import tilesim.language as T
from tilesim.errors import KernelError
from tilesim.language.types import _UnsupportedDType

FLOAT_X = _UnsupportedDType("float_x", "a dtype without a meaning here")


def test_unsupported_dtype_in_a_prim_func_signature_is_refused_at_the_annotation():
    with pytest.raises(KernelError, match="T.float_x is not supported by tilesim: a dtype without a meaning here") as ei:
        @T.prim_func
        def kernel(A: T.Tensor([4], FLOAT_X)):  # <- here
            with T.Kernel(1) as bx:
                pass
    loc = ei.value.loc
    assert loc is not None and loc.file == __file__
    with open(__file__) as fh:
        line = fh.read().splitlines()[loc.line - 1]
    assert "# <- here" in line and line[loc.col:].startswith("T.Tensor")


def test_ptr_annotation_is_accepted_as_a_64_bit_address():
    @T.prim_func
    def kernel(A_ptrs: T.Tensor([4], T.ptr)):
        with T.Kernel(1) as bx:
            pass

    params = tilelang.compile(kernel).prim_func.params
    assert [(b.name, b.dtype, b.shape) for b in params] == [("A_ptrs", "int64", (4,))]
