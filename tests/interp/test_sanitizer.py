"""The sanitizer (tilesim.sanitize, ``InterpOptions(oob="check", races=True)``, ``tilesim check``).

Every planted bug of ``tests/sanitizer_cases.py`` (out of bounds through explicit indices,
uninitialised memory read directly, through comparisons and casts, races between plain stores, tile
copies and atomics) is found in batched and in serial mode, with a one-line finding; every correct
look-alike (edge tiles of the README GEMM, masked ``T.Parallel`` edges, atomics of one kind) gives none.
"""

import numpy as np
import pytest

import tilesim
from tilesim.cli import main
from tilesim.sanitize import check_kernel

from ..sanitizer_cases import CASES

BUGS = [p for p in CASES if p[1] != "correct"]
GOOD = [p for p in CASES if p[1] == "correct"]


def test_catalogue_size():
    assert len(BUGS) >= 30 and len(GOOD) >= 20
    assert {k for _, k, _, _ in BUGS} == {"oob", "uninit", "race"}


WORDS = {"oob": "out-of-bounds", "uninit": "uninitialised", "race": "(a race"}


@pytest.mark.parametrize("mode", ["batched", "serial"])
@pytest.mark.parametrize("name, kind, build, inputs", BUGS, ids=[p[0] for p in BUGS])
def test_planted_bug_is_found(name, kind, build, inputs, mode):
    ins = inputs(np.random.default_rng(0)) if inputs else None
    rep = check_kernel(build(), ins, modes=(mode,))
    assert not rep.ok
    assert WORDS[kind] in rep.findings[0], rep.findings
    assert all("\n" not in f for f in rep.findings)
    if kind == "oob" and "global" in rep.findings[0]:
        assert "at index (" in rep.findings[0] and "sanitizer_cases.py:" in rep.findings[0]
    if kind == "uninit":  # the shadow mask names the element and the line, not an output
        assert "sanitizer_cases.py:" in rep.findings[0], rep.findings
        f = rep.findings[0]
        assert "at index (" in f or "never written" in f or "var buffer" in f, rep.findings


@pytest.mark.parametrize("mode", ["batched", "serial"])
@pytest.mark.parametrize("name, kind, build, inputs", GOOD, ids=[p[0] for p in GOOD])
def test_correct_kernel_has_no_finding(name, kind, build, inputs, mode):
    ins = inputs(np.random.default_rng(0)) if inputs else None
    rep = check_kernel(build(), ins, modes=(mode,))
    assert rep.ok, rep.findings


def test_check_mode_keeps_tilelang_edge_semantics():
    """oob="check" gives the same values as the default on a legal kernel with edge tiles."""
    from tilesim.examples import matmul
    k = matmul(100, 70, 30)
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((100, 30)).astype("float16"), rng.standard_normal((30, 70)).astype("float16")
    want = k(a, b)
    got = k.run(a, b, options=tilesim.InterpOptions(oob="check", races=True))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(tilesim.KernelRuntimeError, match="out-of-bounds"):  # "error" refuses edge tiles
        k.run(a, b, options=tilesim.InterpOptions(oob="error"))


def test_check_command(capsys):
    assert main(["check", "tests/sanitizer_cases.py::shift", "--args", "N=10", "off=1"]) == 1
    out = capsys.readouterr().out
    assert "out-of-bounds read of global buffer A (10) at index (10,)" in out
    assert main(["check", "tests/sanitizer_cases.py::shift", "--args", "N=10", "off=0", "--mode", "both"]) == 0
    assert "no findings" in capsys.readouterr().out
    assert main(["check", "tests/sanitizer_cases.py::cols", "--args", "M=37", "N=21"]) == 1
    assert "output B: 37 of 777 element(s) are never written, first at (0, 20)" in capsys.readouterr().out
    assert main(["check", "tests/sanitizer_cases.py::shift"]) == 2  # missing factory arguments
    assert "missing a required argument" in capsys.readouterr().err
