"""Toy sizes under numba's CUDA simulator, compared with the interpreter (fp32/fp16: the simulator has no
bf16/fp8). ``NUMBA_ENABLE_CUDASIM`` must be set before ``numba.cuda`` is imported: one subprocess."""

import json
import os
import subprocess
import sys

import pytest

from ._util import ROOT, have_numba_cuda

pytestmark = [pytest.mark.cudasim, pytest.mark.skipif(not have_numba_cuda(), reason="numba-cuda is not installed")]

LIBRARY = ["rmsnorm", "softmax", "gelu", "flash_attention_fwd"]


@pytest.fixture(scope="module")
def sim_results():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "backends", "sim_runner.py"), "--library", *LIBRARY],
                       capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    assert rows, p.stderr[-3000:]
    return {r["name"]: r for r in rows}


def _names():
    sys.path.append(os.path.join(ROOT, "tests"))
    return ["matmul_relu", "matmul_dynamic_NN", "matmul_dynamic_NT", "matmul_dynamic_TN", "matmul_dynamic_TT",
            "matmul_splitk", "elementwise_add", "softmax", "rms_norm", "rms_norm_vec", "softmax_vec",
            "flash_attention_causal", "flash_attention_full"]


@pytest.mark.parametrize("name", _names())
def test_core_kernel_matches_interpreter_in_simulator(sim_results, name):
    r = sim_results.get(name)
    assert r is not None, sorted(sim_results)
    assert r["ok"], r


@pytest.mark.parametrize("name", LIBRARY)
def test_library_kernel_matches_interpreter_in_simulator(sim_results, name):
    hits = [r for k, r in sim_results.items() if k == name or k.startswith(name + " ")]
    assert hits, sorted(sim_results)
    for r in hits:
        assert r["ok"], r
