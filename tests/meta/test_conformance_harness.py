"""The conformance harness's verdicts and size overrides (``benchmarks/tilelang_examples.py``), without the mirror.

A failed check inside a program's own comparison helper (``assert_tensors_similar``: ``assert False``) is
``wrong`` (so a listed program bug reads ``program-bug``), other assertions stay ``fail``; a ``SMALL_MAIN``
entry ``(name, kwargs)`` calls that entry function of the unchanged program, a plain dict calls ``main``; a program written to fail is
``expected-error`` only when its error line matches the recorded one, and never a pass; a program passing
``target="cuda"`` gets numba's CUDA simulator; programs of ``FLA_AT`` get the fla checkout they cite first on
their PYTHONPATH (staged from a git mirror), every other program the installed fla.
"""

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
te = pytest.importorskip("tilelang_examples")


def _tb(func, code, error="AssertionError"):
    return ("Traceback (most recent call last):\n"
            '  File "/tmp/run/x/prog.py", line 9, in test_prog\n'
            "    check(a, b)\n"
            f'  File "/tmp/run/x/utils.py", line 73, in {func}\n'
            f"    {code}\n"
            f"{error}\n")


@pytest.mark.parametrize("func, code, verdict", [
    ("assert_tensors_similar", "assert False  # noqa: B011", "wrong"),
    ("assert_close_enough", "assert ok", "wrong"),
    ("prepare_inputs", "assert x.is_contiguous()", "fail"),  # a precondition, not a comparison
])
def test_a_failed_check_in_a_comparison_helper_is_wrong(func, code, verdict):
    assert te.verdict_of(1, _tb(func, code))[0] == verdict


def test_program_bugs_and_small_main_entries_name_real_programs():
    for rel, why in te.PROGRAM_BUGS.items():
        assert rel.endswith(".py") and len(why) > 40
    for rel, spec in te.SMALL_MAIN.items():
        entry, kwargs = spec if isinstance(spec, tuple) else ("main", spec)
        assert rel.endswith(".py") and entry.isidentifier() and isinstance(kwargs, dict)


def test_small_main_entry_function_is_called_with_its_kwargs(tmp_path, monkeypatch):
    staging = tmp_path / "staged"
    (staging / "demo").mkdir(parents=True)
    (staging / "demo" / "prog.py").write_text(
        "import sys\n"
        "def test_prog(n=10**9):\n"
        "    assert n == 3, n\n"
        "    print('ran', n)\n"
        "if __name__ == '__main__':\n"
        "    test_prog()\n")
    monkeypatch.setitem(te.SMALL_MAIN, "demo/prog.py", ("test_prog", {"n": 3}))
    row = te.run_one("demo/prog.py", staging, tmp_path, {"PATH": "/usr/bin:/bin"}, timeout=60)
    assert row["verdict"] == "pass" and row["argv"] == ["test_prog(**{'n': 3})"]
    assert "ran 3" in row["stdout_tail"]


def _buggy_stderr(error_line):
    return ("Traceback (most recent call last):\n  File \"/tmp/x/autodd/tilelang_buggy.py\", line 151, in main\n"
            "    T.gemm(A_shared, B_shared, C_local)\n" + error_line + "\n")


def test_written_to_fail_program_gets_its_own_verdict():
    rel = "autodd/tilelang_buggy.py"
    v, e = te.verdict_of(1, _buggy_stderr("tilesim.errors.KernelTypeError: T.gemm: reduction dims differ: K 32 vs 128"))
    assert (v, te.expected_error(rel, v, e)[0]) == ("fail", "expected-error")
    other = te.verdict_of(1, _buggy_stderr("tilesim.errors.KernelSyntaxError: unknown primitive T.foo"))
    assert te.expected_error(rel, *other)[0] == "fail"  # another error stays a failure
    assert te.expected_error(rel, "pass", "")[0] == "pass"
    assert te.expected_error("gemm/example_gemm.py", *other)[0] == "fail"


def test_expected_errors_count_as_run_not_passed():
    rows = [{"program": "a.py", "verdict": "pass", "seconds": 1.0},
            {"program": "autodd/tilelang_buggy.py", "verdict": "expected-error", "seconds": 1.0}]
    s = te.summarise(rows)
    assert s["programs_run"] == 2 and s["pass_pct"] == 50.0


def test_programs_citing_an_fla_commit_get_that_checkout_first_on_their_path(tmp_path, monkeypatch):
    import subprocess

    repo = tmp_path / "fla-repo"
    (repo / "fla").mkdir(parents=True)
    (repo / "fla" / "__init__.py").write_text("CITED = True\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(git + ["add", "fla"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "fla"], check=True)
    commit = subprocess.run(git + ["rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    monkeypatch.setattr(te, "FLA_AT", {"gdn/": commit})
    assert te.stage_fla(None, tmp_path) == {}  # no mirror: every program keeps the installed fla
    dirs = te.stage_fla(repo / ".git", tmp_path)
    assert (dirs["gdn/"] / "fla" / "__init__.py").read_text() == "CITED = True\n"
    env = {"PYTHONPATH": "shim:repo", "X": "1"}
    got = te.env_for("gdn/example_cumsum.py", env, dirs)
    assert got["PYTHONPATH"] == os.pathsep.join([str(dirs["gdn/"]), "shim:repo"]) and got["X"] == "1"
    assert te.env_for("linear_attention/example_linear_attn_fwd.py", env, dirs) is env


def test_program_bug_errors_apply_to_their_own_error_only():
    for rel, (pattern, why) in te.PROGRAM_BUG_ERRORS.items():
        assert rel.endswith(".py") and len(why) > 80 and pattern
    rel = "gemm_sp/example_gemm_sp.py"
    err = "tilesim.errors.KernelRuntimeError: out-of-bounds read of local buffer nz_idx (256, 2)"
    v, e = te.program_bug_error(rel, "fail", err)
    assert v == "program-bug" and "line 69" in e
    assert te.program_bug_error(rel, "fail", "KernelTypeError: something else")[0] == "fail"
    assert te.program_bug_error(rel, "wrong", err)[0] == "wrong"   # a wrong answer is never excused this way
    assert te.program_bug_error("gemm/example_gemm.py", "fail", err)[0] == "fail"


def test_small_globals_pin_module_level_names_and_keep_the_rest(tmp_path, monkeypatch):
    staging = tmp_path / "staged"
    (staging / "demo").mkdir(parents=True)
    (staging / "demo" / "prog.py").write_text(
        "import argparse\n"
        "M, N = 4096, 8192\n"
        "def deco(n):\n"
        "    return lambda f: (lambda: f(n))\n"
        "@deco(M)\n"
        "def size(n):\n"
        "    return n + N\n"
        "class K:\n"
        "    size = M\n"
        "total = sum(range(1000)) + sum(range(3))\n"
        "if __name__ == '__main__':\n"
        "    args = argparse.ArgumentParser()\n"
        "    args.add_argument('--x', type=int, default=0)\n"
        "    x = args.parse_args().x\n"
        "    assert size() == 8 + N and K.size == 8 and M == 8, (size(), K.size, M)\n"
        "    print('ran', x, total)\n")
    monkeypatch.setitem(te.SMALL_GLOBALS, "demo/prog.py",
                        {"M": 8, "range": "lambda *a: __builtins__.range(2) if a == (1000,) else __builtins__.range(*a)"})
    monkeypatch.setitem(te.SMALL_ARGS, "demo/prog.py", "--x 5")
    row = te.run_one("demo/prog.py", staging, tmp_path, {"PATH": "/usr/bin:/bin"}, timeout=60)
    assert row["verdict"] == "pass", row["stderr_tail"]
    assert "ran 5 4" in row["stdout_tail"]          # N kept, M pinned, range(1000) ran 2 iterations, range(3) 3
    assert row["argv"][:2] == ["--x", "5"] and "module-level" in row["argv"][2]
