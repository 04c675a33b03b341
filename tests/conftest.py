"""Test-suite configuration: the deterministic Hypothesis profile and the ``executor`` fixture.

``executor``: a test that takes it runs once per executor of ``tests.registry.EXECUTORS``
(``interp-batched``, ``interp-serial``, ``cudasim``, ``gpu``), or of those named by
``@pytest.mark.executors(...)``. If the test also takes

* ``test_kernel``: it is generated for every registered test kernel (``tests/registry.py``) on every
  executor that kernel supports (``TestKernel.executors``) — unsupported pairs are not generated;
* ``library_kernel``: for every library kernel name (``kernels.registry``) each CUDA executor checks
  (``tests.executors.library_names``).

The fixture value is a ``tests.executors`` executor; it skips, with the reason, where the executor cannot
run here (no numba-cuda, no GPU). ``cudasim`` and ``gpu`` cases carry the ``cudasim``/``gpu`` marks.

``TILESIM_TIER_UP_S`` defaults to ``off`` here: ``target="auto"`` kernels stay on the interpreter, so a
result never depends on whether a background compilation ended first (the tiered target's own tests,
``tests/backends/test_cpu_tiered.py``, set it per test; set it in the environment to run the suite tiered).
"""

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True,
                          max_examples=10, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=25)
settings.load_profile(os.environ.get("TILESIM_HYPOTHESIS_PROFILE", "ci"))
os.environ.setdefault("TILESIM_TIER_UP_S", "off")

_MARKS = {"cudasim": [pytest.mark.cudasim], "gpu": [pytest.mark.gpu]}


def pytest_configure(config):
    config.addinivalue_line("markers", "executors(*names): the executors a test taking `executor` runs on")


def pytest_generate_tests(metafunc):
    if "executor" not in metafunc.fixturenames:
        return
    from tests import executors as ex
    from tests import registry

    marker = metafunc.definition.get_closest_marker("executors")
    allowed = marker.args if marker else registry.EXECUTORS
    unknown = set(allowed) - set(registry.EXECUTORS)
    if unknown:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: unknown executor(s) {sorted(unknown)}")
    if "test_kernel" in metafunc.fixturenames:
        pairs = [(e, tk) for e in registry.EXECUTORS if e in allowed
                 for tk in registry.REGISTRY.values() if e in tk.executors]
        metafunc.parametrize("executor,test_kernel",
                             [pytest.param(e, tk, marks=_MARKS.get(e, ()), id=f"{e}-{tk.name}") for e, tk in pairs],
                             indirect=["executor"])
    elif "library_kernel" in metafunc.fixturenames:
        pairs = [(e, n) for e in registry.EXECUTORS if e in allowed for n in ex.library_names(e)]
        metafunc.parametrize("executor,library_kernel",
                             [pytest.param(e, n, marks=_MARKS.get(e, ()), id=f"{e}-{n}") for e, n in pairs],
                             indirect=["executor"])
    else:
        metafunc.parametrize("executor", [pytest.param(e, marks=_MARKS.get(e, ())) for e in allowed], indirect=True)


@pytest.fixture
def executor(request):
    from tests import executors as ex

    e = ex.get(request.param)
    reason = e.unavailable()
    if reason:
        pytest.skip(f"executor {e.name}: {reason}")
    return e
