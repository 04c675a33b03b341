"""On a real CUDA GPU: every core and library kernel against the interpreter, and the in-place torch path.
Skipped without a GPU (``benchmarks/gpu_run.py`` runs the same checks on the H200 in one go)."""

import numpy as np
import pytest

from ._util import core_module, have_numba_cuda


def _gpu():
    if not have_numba_cuda():
        return False
    from tilesim.backends.cuda import available

    return available()


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not _gpu(), reason="needs a CUDA GPU")]


def _cases():
    if not _gpu():
        return []
    from tilesim.backends.cuda.check import core_cases, library_cases

    cases = core_cases(core_module(), "gpu")
    try:
        from kernels.registry import all_specs

        cases += library_cases(all_specs())
    except Exception:  # noqa: BLE001
        pass
    return cases


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c.name)
def test_kernel_on_gpu_matches_interpreter(case):
    from tilesim.backends.cuda.check import run_case

    assert case.kernel is not None, getattr(case, "error", "")
    r = run_case(case, np.random.default_rng())
    assert r["ok"], r


def test_torch_tensors_run_in_place():
    torch = pytest.importorskip("torch")
    from tilesim.backends.cuda.check import cuda_twin, interp_twin, rel_err

    ck = core_module()
    k = ck.softmax(300, 257)
    x = torch.randn(300, 257, device="cuda")
    y = cuda_twin(k)(x)
    assert isinstance(y, torch.Tensor) and y.is_cuda
    ref = interp_twin(k)(x.cpu().numpy())
    assert rel_err(y.cpu().numpy(), ref) < 1e-5
