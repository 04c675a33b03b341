"""Every kernel is lowered and compiled for compute capability 9.0 with ``numba.cuda.compile_ptx``
(no GPU and no driver: only numba-cuda and the pip NVVM compiler)."""

import pytest

from ._util import can_compile_ptx, core_module, needs_numba_cuda

pytestmark = [needs_numba_cuda]


def _core():
    ck = core_module()
    return [
        ("matmul_relu", lambda: ck.matmul_relu(1000, 777, 515)),
        ("matmul_dynamic", lambda: ck.matmul_dynamic()),
        ("matmul_dynamic_tt", lambda: ck.matmul_dynamic(trans_A=True, trans_B=True)),
        ("matmul_splitk", lambda: ck.matmul_splitk(333, 290, 1000)),
        ("elementwise_add", lambda: ck.elementwise_add.compile(M=1000, N=999)),
        ("softmax", lambda: ck.softmax(1000, 777)),
        ("rms_norm", lambda: ck.rms_norm(1001, 515)),
        ("flash_attention", lambda: ck.flash_attention(2, 3, 300, 64)),
        ("flash_attention_full", lambda: ck.flash_attention(1, 2, 300, 64, is_causal=False)),
    ]


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


@pytest.mark.parametrize("name,make", _core(), ids=[n for n, _ in _core()])
def test_core_kernel_compiles_for_sm90(name, make):
    _check(make())


@pytest.mark.parametrize("spec", _specs(), ids=[s.name for s in _specs()])
def test_library_kernel_compiles_for_sm90(spec):
    from tilesim.backends.cuda.check import library_cases

    cases = library_cases([spec])
    assert cases, spec.name
    c = cases[0]
    assert c.kernel is not None, getattr(c, "error", "")
    _check(c.kernel)
