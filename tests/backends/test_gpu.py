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


@pytest.mark.executors("gpu")
def test_call_plans_launch_raw_and_match_the_full_path(executor):
    """Repeated calls run a stored plan with the raw launcher (``tilesim/backends/cuda/plans.py``): the same
    bits as the full path, a new shape gets its own plan, errors stay, a side stream takes the full path."""
    torch = pytest.importorskip("torch")
    from tilesim import KernelRuntimeError
    from tilesim.backends.cuda.check import cuda_twin, interp_twin, rel_err

    tk = REGISTRY["matmul_dynamic_NN"]
    k = tk.build({**tk.toy, "dtype": "bfloat16"})
    kc, full = cuda_twin(k), cuda_twin(k)
    full._cuda.call_plans = False
    b = torch.randn(13, 18, device="cuda").to(torch.bfloat16)
    for m in (20, 20, 20, 37, 37):  # no tile divides 20, 37, 13 or 18
        a = torch.randn(m, 13, device="cuda").to(torch.bfloat16)
        c = kc(a, b)
        assert torch.equal(c, full(a, b))
    ref = interp_twin(k)(a.cpu(), b.cpu())
    assert rel_err(c.cpu().numpy(), ref.numpy()) < 1e-3
    plans = [p for p in kc._cuda.plans.plans.values() if p]
    assert [p.note for p in plans] == ["", ""]
    assert len(plans) == 2 and all(type(p.launcher).__name__ == "RawLauncher" and p.launcher.proven for p in plans)
    assert kc._cuda.plans.stats["hits"] == 3
    with pytest.raises(KernelRuntimeError, match="expected dtype bfloat16, got float32"):
        kc(a.float(), b)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        c = kc(a, b)
    torch.cuda.synchronize()
    assert torch.equal(c, full(a, b))
    assert kc._cuda.plans.stats["refused"] == 1
