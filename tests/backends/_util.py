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


def _nvidia_bin(tool: str):
    """Path of ``tool`` (ptxas, cuobjdump) shipped in Triton's package, or None."""
    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "backends", "nvidia", "bin", tool)
    return path if os.path.exists(path) else None


def sass_of(ptx: str, tmp_path) -> tuple[str, str]:
    """Assemble ``ptx`` for sm_90 with ptxas (-v) and disassemble it: (ptxas -v output, SASS text).

    ptxas: the one on PATH (CUDA 13 reads NVVM's PTX 9.0), else Triton's (CUDA 12.8: the ``.version`` line
    is lowered to 8.7, enough for every instruction the backend emits); cuobjdump: Triton's. Skips the test
    when they are not installed."""
    import re
    import shutil
    import subprocess

    ptxas, objdump = shutil.which("ptxas"), _nvidia_bin("cuobjdump")
    if ptxas is None:
        ptxas = _nvidia_bin("ptxas")
        ptx = re.sub(r"^\.version 9\.\d+", ".version 8.7", ptx, flags=re.M)
    if ptxas is None or objdump is None:
        pytest.skip("ptxas/cuobjdump (CUDA toolkit or Triton's package) are not installed")
    src, cubin = os.path.join(tmp_path, "k.ptx"), os.path.join(tmp_path, "k.cubin")
    with open(src, "w") as f:
        f.write(ptx)
    r = subprocess.run([ptxas, "-arch=sm_90", "-v", src, "-o", cubin], capture_output=True, text=True, check=True)
    d = subprocess.run([objdump, "--dump-sass", cubin], capture_output=True, text=True, check=True)
    return r.stdout + r.stderr, d.stdout
