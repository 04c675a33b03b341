"""Every registered test kernel (``tests/registry.py``) against its NumPy reference on every executor it
supports (``executor`` fixture, ``tests/conftest.py``), and the library kernels on the CUDA executors.

On the interpreters shapes are drawn by Hypothesis (tiles do not divide them); the CUDA executors run each
kernel once at its fixed size. Besides the reference, every executor other than the batched interpreter
must agree with the batched interpreter on the same inputs (serial: ``serial_tol``; CUDA: the relative
norm error of ``tilesim.backends.cuda.check.REL_TOL``), and the batched run checks the verifier is clean.
"""

import pytest
from hypothesis import given, settings

from tests import executors as ex
from tests.registry import SEEDS
from tilesim.ir.verify import verify
from tilesim.testing import assert_matches_reference

BATCHED = ex.get("interp-batched")


def check(executor, tk, p, seed):
    inputs, outs = executor.run(tk, p, seed)
    repro = (f"from tests import executors, registry\ntk = registry.REGISTRY[{tk.name!r}]\n"
             f"inputs, outs = executors.get({executor.name!r}).run(tk, {p!r}, {seed})")
    assert_matches_reference(lambda *_: outs, inputs, lambda *x: tk.reference(p, *x), **tk.tol(p),
                             name=f"{tk.name} on {executor.name}", repro=repro)
    if executor is BATCHED:
        assert verify(tk.build(p).prim_func) == []
        return
    for i, (o, b) in enumerate(zip(outs, BATCHED.call(tk, p, inputs), strict=True)):
        problem = executor.agrees(tk, o, b)
        assert problem is None, f"{tk.name} output {i} (p={p!r}, seed={seed}): {problem}"


def test_kernel_matches_reference(executor, test_kernel):
    tk = test_kernel
    if not executor.drawn:
        check(executor, tk, tk.sizes(executor.name), tk.seed())
        return

    @settings(max_examples=tk.examples)
    @given(tk.shapes, SEEDS)
    def drawn(p, seed):
        check(executor, tk, p, seed)

    drawn()


@pytest.mark.executors("cudasim", "gpu")
def test_library_kernel_matches_interpreter(executor, library_kernel):
    r = executor.library(library_kernel)
    assert r["ok"], r
