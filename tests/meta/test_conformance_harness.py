"""The conformance harness's verdicts (``benchmarks/tilelang_examples.py``): a program written to fail is
``expected-error`` only when its error line matches the recorded one, and never a pass."""

import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "tilelang_examples.py"


@pytest.fixture(scope="module")
def harness():
    spec = importlib.util.spec_from_file_location("tilelang_examples_harness", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _stderr(error_line):
    return ("Traceback (most recent call last):\n  File \"/tmp/x/autodd/tilelang_buggy.py\", line 151, in main\n"
            "    T.gemm(A_shared, B_shared, C_local)\n" + error_line + "\n")


def test_written_to_fail_program_gets_its_own_verdict(harness):
    rel = "autodd/tilelang_buggy.py"
    v, e = harness.verdict_of(1, _stderr("tilesim.errors.KernelTypeError: T.gemm: reduction dims differ: K 32 vs 128"))
    assert (v, harness.expected_error(rel, v, e)[0]) == ("fail", "expected-error")
    other = harness.verdict_of(1, _stderr("tilesim.errors.KernelSyntaxError: unknown primitive T.foo"))
    assert harness.expected_error(rel, *other)[0] == "fail"  # another error stays a failure
    assert harness.expected_error(rel, "pass", "")[0] == "pass"
    assert harness.expected_error("gemm/example_gemm.py", *other)[0] == "fail"


def test_expected_errors_count_as_run_not_passed(harness):
    rows = [{"program": "a.py", "verdict": "pass", "seconds": 1.0},
            {"program": "autodd/tilelang_buggy.py", "verdict": "expected-error", "seconds": 1.0}]
    s = harness.summarise(rows)
    assert s["programs_run"] == 2 and s["pass_pct"] == 50.0


def test_small_main_entries_name_a_function(harness):
    for rel, entry in harness.SMALL_MAIN.items():
        fn, kw = entry if isinstance(entry, tuple) else ("main", entry)
        assert isinstance(fn, str) and fn.isidentifier() and isinstance(kw, dict), rel
