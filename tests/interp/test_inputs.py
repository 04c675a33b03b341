"""Inputs beyond NumPy arrays: objects with ``__array__``, ``__dlpack__`` producers, torch CPU tensors."""

import numpy as np
import pytest

from tilesim.examples import matmul


class ArrayLike:
    """Only ``__array__``: tilesim must accept it like NumPy does."""

    def __init__(self, a):
        self.a = a

    def __array__(self, dtype=None, copy=None):
        return self.a


def test_array_protocol_inputs():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((20, 12)).astype(np.float32)
    b = rng.standard_normal((12, 9)).astype(np.float32)
    k = matmul(20, 9, 12, 16, 16, 16, dtype="float32")
    np.testing.assert_allclose(k(ArrayLike(a), ArrayLike(b)), a @ b, rtol=1e-5, atol=1e-5)


def test_torch_cpu_tensors_in_and_out():
    torch = pytest.importorskip("torch")
    a = torch.randn(40, 20, dtype=torch.bfloat16)
    b = torch.randn(20, 30, dtype=torch.bfloat16)
    c = matmul(40, 30, 20, 16, 16, 16, dtype="bfloat16")(a, b)
    assert isinstance(c, torch.Tensor) and c.dtype == torch.float32
    assert float((c - a.float() @ b.float()).abs().max()) < 1e-4


def test_torch_outputs_written_in_place():
    torch = pytest.importorskip("torch")
    from tests.core_kernels import matmul_splitk
    a = torch.randn(32, 64, dtype=torch.float16)
    b = torch.randn(64, 16, dtype=torch.float16)
    c = torch.zeros(32, 16, dtype=torch.float32)
    matmul_splitk(32, 16, 64, 32, 16, 16, split_k=2)(a, b, c)
    assert float((c - a.float() @ b.float()).abs().max()) < 1e-3


class DLPackOnly:
    """Only the DLPack protocol (no __array__): tilesim imports it with numpy.from_dlpack."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, *args, **kwargs):
        return self.a.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_dlpack_inputs():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((17, 12)).astype(np.float32)
    b = rng.standard_normal((12, 9)).astype(np.float32)
    k = matmul(17, 9, 12, 16, 16, 16, dtype="float32")
    np.testing.assert_allclose(k(DLPackOnly(a), DLPackOnly(b)), a @ b, rtol=1e-5, atol=1e-5)
