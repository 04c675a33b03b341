"""The CUDA runtime's device path (arguments already in GPU memory) binds arguments by the same contract
as the host path: same results, same error messages. Run under numba's CUDA simulator, whose device
arrays take the device path; ``NUMBA_ENABLE_CUDASIM`` must be set before ``numba.cuda`` is imported:
one subprocess."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from ._util import ROOT, have_numba_cuda

pytestmark = [pytest.mark.cudasim, pytest.mark.skipif(not have_numba_cuda(), reason="numba-cuda is not installed")]

SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path.append("tests")
    import numpy as np
    import tilesim
    import core_kernels as ck
    from tilesim.backends.cuda.caps import cuda_module

    cuda = cuda_module()
    out = {}

    def err(fn, *args, **kw):
        try:
            fn(*args, **kw)
        except tilesim.KernelRuntimeError as e:
            return e.message
        return None

    rng = np.random.default_rng(0)
    k = ck.matmul_dynamic(block_M=16, block_N=16, block_K=8, threads=32)
    kc = tilesim.compile(k.prim_func, out_idx=k.out_idx, target="cuda")
    a = rng.standard_normal((20, 13)).astype(np.float16)
    b = rng.standard_normal((13, 18)).astype(np.float16)
    c = kc(cuda.to_device(a), B=cuda.to_device(b))
    out["device_output"] = type(c).__module__.split(".")[0]
    out["max_diff"] = float(np.abs(c.copy_to_host() - k(a, b)).max())
    bad_b = np.zeros((12, 18), np.float16)
    out["conflict"] = [err(k, a, bad_b), err(kc, cuda.to_device(a), cuda.to_device(bad_b))]
    bad_a = np.zeros((20, 13), np.float32)
    out["dtype"] = [err(k, bad_a, b), err(kc, cuda.to_device(bad_a), cuda.to_device(b))]
    bad_r = np.zeros((20, 13, 1), np.float16)
    out["rank"] = [err(k, bad_r, b), err(kc, cuda.to_device(bad_r), cuda.to_device(b))]
    out["count"] = [err(k, a), err(kc, cuda.to_device(a))]
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def result():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    assert lines, p.stderr[-3000:]
    return json.loads(lines[-1])


def test_device_arguments_run_in_place_and_match_the_interpreter(result):
    assert result["device_output"] == "numba"
    assert result["max_diff"] < 1e-3


@pytest.mark.parametrize("case, text", [
    ("conflict", "argument 'B' of main: dimension 0 (k) is 12 but another argument set k = 13"),
    ("dtype", "argument 'A' of main: expected dtype float16, got float32"),
    ("rank", "argument 'A' of main: expected 2 dimension(s) (m, k), got shape (20, 13, 1)"),
    ("count", "kernel main takes 2 argument(s) (A, B), got 1"),
])
def test_device_and_host_paths_give_the_same_errors(result, case, text):
    host, device = result[case]
    assert host == device, (host, device)
    assert host.startswith(text), host
