"""Shared helpers of the CUDA-backend tests."""

import functools
import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTS = os.path.join(ROOT, "tests")
if TESTS not in sys.path:
    sys.path.append(TESTS)


def have_numba_cuda() -> bool:
    return importlib.util.find_spec("numba") is not None and importlib.util.find_spec("numba_cuda") is not None


needs_numba_cuda = pytest.mark.skipif(not have_numba_cuda(), reason="numba-cuda is not installed")


@functools.lru_cache(maxsize=None)
def can_compile_ptx() -> bool:
    """numba-cuda with the NVVM compiler (pip cuda-toolkit[nvvm]) can compile without a GPU."""
    if not have_numba_cuda():
        return False
    try:
        from numba import types

        from tilesim.backends.cuda.caps import cuda_module

        cuda = cuda_module()

        def k(a):
            a[0] = 1.0

        cuda.compile_ptx(k, (types.float32[::1],), cc=(9, 0))
        return True
    except Exception:  # noqa: BLE001
        return False


def core_module():
    import core_kernels

    return core_kernels
