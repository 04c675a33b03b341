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


def test_only_programs_that_ask_for_target_cuda_get_the_cuda_simulator(tmp_path):
    cases = {
        "compile.py": ('kernel = tilelang.compile(program, out_idx=-1, target="cuda", execution_backend="cython")\n',
                       True),
        "jit.py": ('@tilelang.jit(target="cuda")\ndef f():\n    pass\n', True),
        "auto.py": ('kernel = tilelang.compile(program, out_idx=-1)\n', False),
        "comment.py": ('# @tilelang.jit(target="cuda")\nx = "target=cuda"\n', False),
        "other.py": ('kernel = tilelang.compile(program, target="hip")\n', False),
    }
    for name, (src, want) in cases.items():
        (tmp_path / name).write_text(src)
        assert te.asks_cuda_target(tmp_path / name) is want, name


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
