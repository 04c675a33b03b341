"""On a real CUDA GPU: the in-place torch path. (Every registered test kernel and library kernel runs on
the GPU through the ``gpu`` executor, ``tests/test_registry_kernels.py``; ``benchmarks/gpu_run.py`` runs the
same checks on the H200 in one go.) Skipped without a GPU."""

import pytest

from tests.registry import REGISTRY


@pytest.mark.executors("gpu")
def test_torch_tensors_run_in_place(executor):
    torch = pytest.importorskip("torch")
    from tilesim.backends.cuda.check import cuda_twin, interp_twin, rel_err

    k = REGISTRY["softmax"].build({"M": 300, "N": 257})
    x = torch.randn(300, 257, device="cuda")
    y = cuda_twin(k)(x)
    assert isinstance(y, torch.Tensor) and y.is_cuda
    ref = interp_twin(k)(x.cpu().numpy())
    assert rel_err(y.cpu().numpy(), ref) < 1e-5
