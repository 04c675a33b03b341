"""Interpreter semantics shown on a core kernel. (Every core kernel against NumPy, batched and serial,
is ``tests/test_registry_kernels.py`` on the ``interp-batched``/``interp-serial`` executors.)"""

import numpy as np
import pytest

from tests import core_kernels as K
from tilesim import dtypes as dt
from tilesim.testing.strategies import random_array


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float8_e4m3fn"])
def test_gemm_narrow_inputs_use_full_precision_products(dtype):
    """Products of narrow inputs are exact in fp32, so a K=1 GEMM equals the float64 outer product."""
    rng = np.random.default_rng(1)
    a, b = random_array(rng, (40, 1), dtype), random_array(rng, (1, 24), dtype)
    out = K.matmul_relu(40, 24, 1, 16, 16, 16, dtype=dtype)(a, b)
    ref = np.maximum(a.astype(np.float64) @ b.astype(np.float64), 0)
    assert np.array_equal(out.astype(np.float64), ref.astype(np.float32).astype(np.float64))
    assert dt.canon(out.dtype) == "float32"
