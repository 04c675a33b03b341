"""Every kernel is lowered and compiled for compute capability 9.0 with ``numba.cuda.compile_ptx``
(no GPU and no driver: only numba-cuda and the pip NVVM compiler): the test kernels the registry marks
``ptx`` (at their GPU size) and every library kernel."""

import pytest

from tests.registry import REGISTRY

from ._util import can_compile_ptx, needs_numba_cuda

pytestmark = [needs_numba_cuda]


def _specs():
    try:
        from kernels.registry import all_specs

        return all_specs()
    except Exception:  # noqa: BLE001
        return []


def _check(kernel):
    from tilesim.backends.cuda.runtime import CudaProgram

    if not can_compile_ptx():
        pytest.skip("numba-cuda cannot compile here (no NVVM)")
    prog = CudaProgram(kernel.prim_func, sim=False)
    ptx = prog.compile_ptx((9, 0))
    assert len(ptx) == len(prog.kernels) >= 1
    for name, text in ptx:
        assert ".target sm_90" in text and f"{name}" in text


@pytest.mark.parametrize("name", [n for n, tk in REGISTRY.items() if tk.ptx])
def test_core_kernel_compiles_for_sm90(name):
    tk = REGISTRY[name]
    _check(tk.build(tk.gpu))


@pytest.mark.parametrize("spec", _specs(), ids=[s.name for s in _specs()])
def test_library_kernel_compiles_for_sm90(spec):
    from tilesim.backends.cuda.check import library_cases

    cases = library_cases([spec])
    assert cases, spec.name
    c = cases[0]
    assert c.kernel is not None, getattr(c, "error", "")
    _check(c.kernel)
