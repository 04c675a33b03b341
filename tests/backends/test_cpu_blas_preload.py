"""``tilesim/backends/cpu/blas.py``: SciPy's ``cython_blas`` loaded without the ``scipy.linalg`` package before
Numba's first compilation; Numba's ``np.dot`` (``prelude.mm``) works through it, and SciPy still imports."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tilesim.backends.cpu import available

pytestmark = pytest.mark.skipif(not available(), reason="numba and scipy are not installed")

ROOT = Path(__file__).resolve().parents[2]

_CHILD = r"""
import sys
import numba
import numpy as np
from tilesim.backends.cpu import prelude
assert numba.njit(lambda x: x + 1)(1) == 2  # Numba's first compilation: its registries load (and check BLAS)
a = np.arange(12, dtype=np.float32).reshape(3, 4)
got = prelude.mm(a, a, False, True)
assert "scipy.linalg" not in sys.modules, "scipy.linalg was imported"
assert "scipy.linalg.cython_blas" in sys.modules
np.testing.assert_array_equal(got, a @ a.T)
import scipy.linalg
import scipy.linalg.cython_blas as cb
assert cb is sys.modules["scipy.linalg.cython_blas"]
np.testing.assert_allclose(scipy.linalg.solve(np.eye(2) * 2, np.ones(2)), [0.5, 0.5])
print("ok")
"""


def test_numba_blas_without_the_scipy_linalg_package():
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, cwd=str(ROOT),
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("ok")


def test_preload_leaves_an_imported_scipy_linalg_alone():
    import scipy.linalg  # noqa: F401

    from tilesim.backends.cpu import blas
    before = sys.modules.get(blas.NAME)
    assert blas.preload() is False
    assert sys.modules.get(blas.NAME) is before
