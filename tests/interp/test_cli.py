"""The command line: help, ir, kernels list, run (OK and a clear error), attention-cost."""

import subprocess
import sys

from tilesim.cli import main, parse_kv


def run(*args):
    return subprocess.run([sys.executable, "-m", "tilesim", *args], capture_output=True, text=True, timeout=120)


def test_help_lists_subcommands():
    r = run("--help")
    assert r.returncode == 0
    for cmd in ("report", "sim", "hw", "kernels", "run", "ir", "bench"):
        assert cmd in r.stdout


def test_ir_prints_the_tile_ir(capsys):
    assert main(["ir", "tests/core_kernels.py::softmax", "--args", "M=16", "N=40"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("@T.prim_func") and "T.reduce_max" in out


def test_kernels_list_and_run(capsys):
    assert main(["kernels", "list"]) == 0
    listing = capsys.readouterr().out
    assert "gemm" in listing and "flash_attention_fwd" in listing
    assert main(["run", "gemm", "--shape", "M=33", "N=20", "K=17"]) == 0
    assert "OK" in capsys.readouterr().out


def test_run_with_a_bad_parameter_is_a_clear_error():
    r = run("run", "gemm", "--shape", "bogus=1")
    assert r.returncode == 2
    assert "has no parameter bogus" in r.stderr and "Traceback" not in r.stderr


def test_parse_kv_types():
    assert parse_kv(["a=1", "b=2.5", "c=true", "d=float16"]) == {"a": 1, "b": 2.5, "c": True, "d": "float16"}


def test_cuda_target_without_a_gpu_runs_on_the_interpreter_with_a_warning():
    from tilesim.backends.cuda import available
    if available():
        return  # on a GPU machine the run uses the GPU; tests/backends/test_gpu.py covers it
    r = run("run", "rmsnorm", "--target", "cuda")
    assert r.returncode == 0, r.stderr
    assert "TargetFallbackWarning: target 'cuda' does not run on this machine" in r.stderr
    assert "no usable CUDA GPU" in r.stderr and "Traceback" not in r.stderr


def test_every_subcommand_has_help():
    for cmd in ("report", "sim", "hw", "kernels", "run", "tune", "lint", "ir", "bench", "attention-cost"):
        r = run(cmd, "-h")
        assert r.returncode == 0 and r.stdout.startswith(f"usage: tilesim {cmd}"), (cmd, r.stdout, r.stderr)


def test_sim_loads_a_library_module_once(capsys):
    """kernels/norms.py registers kernels at import: loading it by path must not register them twice."""
    assert main(["sim", "kernels/norms.py::rms_norm", "--profile", "numba",
                 "--args", "M=256", "N=512", "block_N=512", "threads=128"]) == 0
    out = capsys.readouterr().out
    assert "numba profile" in out and "bound by" in out
