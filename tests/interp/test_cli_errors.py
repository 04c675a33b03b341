"""Issue 16: every bad ``tilesim`` command line is one error line and a non-zero exit, never a traceback.

One table of bad command lines, run in-process through ``tilesim.cli.main`` (``{d}`` is a folder of
small files: a good factory, a file with a syntax error, one that raises on import, one that is not
UTF-8, a hardware file that is not UTF-8). Each case gives the expected exit status and a piece of
the message. A few run as real subprocesses too, so the process exit status and stderr are checked.
"""

import json
import subprocess
import sys

import pytest

from tilesim.cli import main

GOOD = '''
import tilesim as tilelang
import tilesim.language as T

@tilelang.jit(out_idx=[-1])
def copyk(M, N, block_M=16, block_N=16):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            s = T.alloc_shared((block_M, block_N), "float32")
            T.copy(A[by * block_M, bx * block_N], s)
            T.copy(s, B[by * block_M, bx * block_N])
    return main

NOT_A_KERNEL = 42

def bad_return(M=4):
    return "hello"

def raises(M=4):
    raise RuntimeError("user code failed")
'''


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    (root / "good.py").write_text(GOOD)
    (root / "syntax.py").write_text("def f(:\n    pass\n")
    (root / "raises.py").write_text("raise RuntimeError('boom at import')\n")
    (root / "binary.py").write_bytes(b"\xff\xfe\x00bad")
    (root / "bad.toml").write_bytes(b"\xff\xfe name = 1")
    (root / "ro").mkdir()
    return root


G = "{d}/good.py::copyk"
MN = ["--args", "M=64", "N=48"]


def c(id_, argv, text, rc=2):
    return pytest.param(argv, text, rc, id=id_)


CASES = [
    # sim / lint / ir: the target file
    c("sim-missing-file", ["sim", "{d}/missing.py::f"], "missing.py: no such file"),
    c("sim-syntax-error", ["sim", "{d}/syntax.py::f"], "syntax.py:1: cannot parse it"),
    c("lint-missing-file", ["lint", "{d}/missing.py::f"], "no such file"),
    c("lint-syntax-error", ["lint", "{d}/syntax.py::f"], "cannot parse it"),
    c("ir-import-raises", ["ir", "{d}/raises.py::f"], "raised RuntimeError: boom at import"),
    c("ir-not-utf8", ["ir", "{d}/binary.py::f"], "cannot parse it"),
    c("ir-folder", ["ir", "{d}::f"], "not a file"),
    c("sim-no-separator", ["sim", "{d}/good.py"], "expected FILE.py::NAME"),
    c("ir-no-separator", ["ir", "copyk"], "expected FILE.py::NAME"),
    c("sim-unknown-name", ["sim", "{d}/good.py::nothere"], "has no 'nothere'"),
    c("sim-not-a-kernel", ["sim", "{d}/good.py::NOT_A_KERNEL"], "is a int, not a kernel"),
    c("ir-factory-returns-str", ["ir", "{d}/good.py::bad_return"], "returned a str, not a kernel"),
    c("ir-factory-raises", ["ir", "{d}/good.py::raises"], "raised RuntimeError: user code failed"),
    # factory arguments
    c("sim-no-args", ["sim", G], "missing a required argument: 'M'"),
    c("sim-missing-arg", ["sim", G, "--args", "M=64"], "missing a required argument: 'N'"),
    c("lint-no-args", ["lint", G], "missing a required argument"),
    c("ir-unknown-arg", ["ir", G, *MN, "Q=3"], "unexpected keyword argument 'Q'"),
    c("sim-kv-without-equals", ["sim", G, "--args", "M64"], "expected KEY=VALUE, got 'M64'"),
    c("sim-kv-empty-key", ["sim", G, "--args", "=3"], "expected KEY=VALUE"),
    c("sim-block-zero", ["sim", G, *MN, "block_M=0"], "while tracing the kernel"),
    c("sim-negative-dim", ["sim", G, "--args", "M=-5", "N=64"], "negative dimension -5"),
    c("ir-block-not-int", ["ir", G, *MN, "block_M=x"], "while tracing the kernel"),
    # sim options
    c("sim-unwritable-trace", ["sim", G, *MN, "--trace", "{d}/nofolder/t.json"], "nofolder: no such folder"),
    c("sim-trace-into-folder", ["sim", G, *MN, "--trace", "{d}/ro"], "{d}/ro: is a folder"),
    c("sim-hint-not-a-number", ["sim", G, *MN, "--shapes", "hints.k=abc"], "hint 'k' of main must be a number"),
    c("sim-hint-negative", ["sim", G, *MN, "--shapes", "hints.k=-1"], "must be a number >= 0"),
    c("sim-unknown-shape", ["sim", G, *MN, "--shapes", "Q=abc"], "'Q' is not a dimension"),
    c("sim-unknown-hw", ["sim", G, *MN, "--hw", "nosuchgpu"], "no built-in hardware model"),
    c("sim-hw-not-utf8", ["sim", G, *MN, "--hw", "{d}/bad.toml"], "not UTF-8"),
    c("sim-unknown-profile", ["sim", G, *MN, "--profile", "bogus"], "unknown lowering profile 'bogus'"),
    c("sim-unknown-option", ["sim", G, "--frobnicate"], "unrecognized arguments"),
    # run
    c("run-negative-dim", ["run", "gemm", "--shape", "M=-5"], "M must be a positive integer, got -5"),
    c("run-zero-block", ["run", "gemm", "--shape", "block_M=0"], "block_M must be a positive integer, got 0"),
    c("run-dim-not-int", ["run", "gemm", "--shape", "M=abc"], "M must be a positive integer, got 'abc'"),
    c("run-dim-float", ["run", "gemm", "--shape", "M=2.5"], "M must be a positive integer, got 2.5"),
    c("run-dtype-number", ["run", "gemm", "--shape", "dtype=1"], "dtype must be a name"),
    c("run-unknown-param", ["run", "gemm", "--shape", "bogus=1"], "has no parameter bogus"),
    c("run-unknown-kernel", ["run", "nosuchkernel"], "unknown kernel 'nosuchkernel'"),
    c("run-bad-seed", ["run", "gemm", "--seed", "x"], "invalid int value: 'x'"),
    c("run-unknown-target", ["run", "gemm", "--target", "tpu"], "unknown target 'tpu'"),
    # tune
    c("tune-negative-budget", ["tune", "gemm", "--budget", "-1"], "expected a positive integer, got -1"),
    c("tune-zero-budget", ["tune", "gemm", "--budget", "0"], "expected a positive integer, got 0"),
    c("tune-unknown-hw", ["tune", "gemm", "--hw", "nosuch"], "no built-in hardware model"),
    c("tune-unknown-kernel", ["tune", "nosuch"], "unknown kernel 'nosuch'"),
    c("tune-zero-dim", ["tune", "gemm", "--shape", "M=0"], "M must be a positive integer, got 0"),
    c("tune-unknown-profile", ["tune", "gemm", "--profile", "bogus"], "unknown lowering profile 'bogus'"),
    # attention-cost
    c("attn-negative-context", ["attention-cost", "--context", "-1"], "expected a positive integer, got -1"),
    c("attn-zero-context", ["attention-cost", "--context", "0"], "expected a positive integer, got 0"),
    c("attn-zero-batch", ["attention-cost", "--batch", "0"], "expected a positive integer, got 0"),
    c("attn-context-not-int", ["attention-cost", "--context", "abc"], "got 'abc'"),
    c("attn-unknown-model", ["attention-cost", "--model", "gpt-9"], "unknown model config 'gpt-9'"),
    # check (the sanitizer)
    c("check-missing-file", ["check", "{d}/missing.py::f"], "no such file"),
    c("check-missing-args", ["check", G], "missing a required argument: 'M'"),
    c("check-bad-mode", ["check", G, *MN, "--mode", "bogus"], "invalid choice: 'bogus'"),
    c("check-bad-shapes", ["check", G, *MN, "--shapes", "M"], "expected KEY=VALUE"),
    # report, hw, misc
    c("report-unwritable-out", ["report", "--out", "/proc/tilesim-nope", "--quick"], "/proc/tilesim-nope"),
    c("report-out-is-a-file", ["report", "--out", "{d}/good.py", "--quick"], "good.py"),
    c("report-negative-budget", ["report", "--tune-budget", "-3"], "expected an integer >= 0, got -3"),
    c("report-unknown-kernel", ["report", "--kernels", "nosuch", "--quick", "--out", "{d}/rep"], "unknown kernel"),
    c("hw-show-unknown", ["hw", "show", "nosuch"], "no built-in hardware model"),
    c("hw-show-not-utf8", ["hw", "show", "{d}/bad.toml"], "not UTF-8 text"),
    c("hw-bad-subcommand", ["hw", "bogus"], "invalid choice: 'bogus'"),
    c("kernels-bad-action", ["kernels", "bogus"], "invalid choice: 'bogus'"),
    c("ops-unknown-node", ["ops", "NoSuchNode"], "unknown IR node class 'NoSuchNode'"),
    c("bench-unknown", ["bench", "nosuch"], "invalid choice: 'nosuch'"),
    c("unknown-command", ["frobnicate"], "invalid choice: 'frobnicate'"),
    c("unknown-option", ["--bogus"], "unrecognized arguments: --bogus"),
]


@pytest.mark.parametrize("argv, text, rc", CASES)
def test_bad_command_line(d, capsys, argv, text, rc):
    argv = [a.replace("{d}", str(d)) for a in argv]
    got = main(argv)
    err = capsys.readouterr().err
    assert got == rc, err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    # one error line, the last; anything before it is a TileLangCompatWarning or a progress line
    others = [ln for ln in lines[:-1] if "error" in ln.lower() and "TileLangCompatWarning" not in ln]
    assert not others and lines[-1].startswith("tilesim") or lines[-1].startswith("error:"), err
    assert text.replace("{d}", str(d)) in lines[-1], err


def test_the_table_is_large_enough():
    assert len(CASES) >= 40


def test_good_commands_still_work(d, capsys, tmp_path):
    assert main(["sim", f"{d}/good.py::copyk", *MN, "--trace", str(tmp_path / "t.json")]) == 0
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left behind
    assert main(["ir", f"{d}/good.py::copyk", *MN]) == 0
    assert main(["attention-cost", "--context", "4096"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("argv", [["sim", "{d}/syntax.py::f"], ["run", "gemm", "--shape", "M=-5"],
                                  ["tune", "gemm", "--budget", "-1"]])
def test_bad_command_line_in_a_process(d, argv):
    argv = [a.replace("{d}", str(d)) for a in argv]
    r = subprocess.run([sys.executable, "-m", "tilesim", *argv], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
