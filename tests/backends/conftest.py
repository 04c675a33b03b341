"""Fixtures of the CUDA backend's tests."""

import pytest


@pytest.fixture
def mma_sync_lowering(monkeypatch):
    """Keep tensor-core gemms on ``mma.sync`` (``TILESIM_CUDA_WGMMA=0``) for tests that pin that lowering's code.

    ``wgmma`` is the backend's default on Hopper since the twelfth session; ``mma.sync`` stays the lowering of every
    gemm ``wgmma`` cannot take (and of GPUs other than sm_90), so its tests keep running — on the GPU too. The
    ``wgmma`` lowering's own tests are ``test_wgmma.py``; the registry's GPU checks run the default."""
    monkeypatch.setenv("TILESIM_CUDA_WGMMA", "0")
