"""The test-kernel registry's own invariants: every kernel of ``tests/core_kernels.py`` is registered, the
executor lists and the CUDA name lists are derived from the entries."""

import dataclasses

from tests import core_kernels, registry


def test_every_core_kernel_is_registered():
    factories = [n for n, v in vars(core_kernels).items()
                 if callable(v) and getattr(v, "__module__", "") == core_kernels.__name__]
    assert len(factories) == 8, factories
    for f in factories:
        assert any(n == f or n.startswith(f + "_") for n in registry.REGISTRY), f


def test_executors_follow_the_entry():
    tk = registry.REGISTRY["softmax"]
    assert tk.executors == registry.EXECUTORS
    assert dataclasses.replace(tk, toy=None).executors == ("interp-batched", "interp-serial", "cpu", "gpu")
    assert dataclasses.replace(tk, toy=None, gpu=None).executors == ("interp-batched", "interp-serial")


def test_cuda_cases_are_derived():
    assert [c.name for c in registry.cuda_cases("toy")] == registry.names("cudasim")
    assert [c.name for c in registry.cuda_cases("gpu")] == registry.names("gpu")
    assert registry.names() == list(registry.REGISTRY)
