"""The conformance harness's environment emulation (benchmarks/tilelang_examples.py): its SHIM as a
sitecustomize gives Triton's CPU interpreter a driver, GPU-exact bfloat16 and libdevice, and SMALL_CALL
programs run with their test function's sizes replaced.

Each check runs a child Python with the shim on PYTHONPATH and TRITON_INTERPRET=1 (as the harness does);
skipped where torch or triton is not installed (the optional ``conformance`` extra).
"""

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import tilelang_examples as te  # noqa: E402

needs_triton = pytest.mark.skipif(not (importlib.util.find_spec("torch") and importlib.util.find_spec("triton")),
                                  reason="torch and triton (the conformance extra) are not installed")


def run_child(tmp_path: Path, source: str, *, cwd: Path | None = None, argv=()) -> str:
    shim = tmp_path / "shim"
    shim.mkdir(exist_ok=True)
    (shim / "sitecustomize.py").write_text(te.SHIM)
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.pathsep.join([str(shim), str(ROOT)]))
    script = tmp_path / "child.py"   # a file: Triton's interpreter rewrites kernels from their source
    script.write_text(textwrap.dedent(source))
    proc = subprocess.run([sys.executable, str(script), *argv], cwd=cwd or tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@needs_triton
def test_triton_is_imported_lazily(tmp_path):
    out = run_child(tmp_path, "import sys, torch; print('triton' in sys.modules)")
    assert out.strip() == "False"


@needs_triton
def test_cpu_driver_autotune_and_do_bench(tmp_path):
    out = run_child(tmp_path, """
        import torch, triton, triton.language as tl
        from triton.testing import do_bench
        drv = triton.runtime.driver.active
        t = drv.get_current_target()
        print("target", t.backend, t.arch, t.warp_size)
        print("sms", drv.utils.get_device_properties(0)["multiprocessor_count"])

        @triton.autotune(configs=[triton.Config({"B": 16}, num_warps=4), triton.Config({"B": 16}, num_warps=8),
                                  triton.Config({"B": 32}, num_warps=4)], key=["n"])
        @triton.jit
        def add(x, y, o, n, B: tl.constexpr):
            r = tl.program_id(0) * B + tl.arange(0, B)
            tl.store(o + r, tl.load(x + r, mask=r < n) + tl.load(y + r, mask=r < n), mask=r < n)

        x, y = torch.randn(100, device="cuda"), torch.randn(100, device="cuda")
        o = torch.empty_like(x)
        add[lambda m: (triton.cdiv(100, m["B"]),)](x, y, o, 100)
        print("exact", bool(torch.equal(o, x + y)), "tried", len(add.configs_timings))
        print("bench", do_bench(lambda: x + y) > 0)
    """)
    assert "target cuda 90 32" in out and "sms 132" in out
    # the two B=16 configs differ only in num_warps, which the interpreter ignores: tried once
    assert "exact True tried 2" in out
    assert "bench True" in out


@needs_triton
def test_interpreter_bf16_is_gpu_exact(tmp_path):
    out = run_child(tmp_path, """
        import ml_dtypes, numpy as np, torch, triton, triton.language as tl

        @triton.jit
        def k(a_ptr, b_ptr, f_ptr, o1, o2, o3, o4, s, N: tl.constexpr):
            r = tl.arange(0, N)
            i = r[:, None] * N + r[None, :]
            a, b = tl.load(a_ptr + i), tl.load(b_ptr + i)
            tl.store(o1 + i, a * s + b)                      # bf16 arithmetic, a bf16 constant
            tl.store(o2 + i, tl.dot(a, b))                   # fp32 accumulation of bf16 products
            tl.store(o3 + r, tl.max(a, axis=1))              # compares of (negative) bf16 values
            tl.store(o4 + r, tl.load(f_ptr + r).to(tl.bfloat16))   # fp32 -> bf16 rounds to nearest even

        N = 16
        g = torch.Generator().manual_seed(0)
        a = torch.randn(N, N, generator=g).bfloat16()
        b = torch.randn(N, N, generator=g).bfloat16()
        f = torch.tensor([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 3 * 2**-8), 3.0] + [0.5] * (N - 4))
        o1, o2 = torch.empty_like(a), torch.empty(N, N)
        o3, o4 = torch.empty(N, dtype=torch.bfloat16), torch.empty(N, dtype=torch.bfloat16)
        k[(1,)](a, b, f, o1, o2, o3, o4, 0.3, N=N)
        bf = ml_dtypes.bfloat16
        an, bn = a.float().numpy().astype(bf), b.float().numpy().astype(bf)
        want1 = (an * np.array(0.3, dtype=bf)) + bn            # each op rounded to bf16
        print("mul_add", np.array_equal(o1.float().numpy(), want1.astype(np.float32)))
        print("dot", bool(torch.allclose(o2, a.float() @ b.float(), rtol=1e-6, atol=1e-5)))
        print("max", bool(torch.equal(o3, a.max(dim=1).values)))
        print("rtne", bool(torch.equal(o4, f.bfloat16())))
    """)
    assert out.split() == ["mul_add", "True", "dot", "True", "max", "True", "rtne", "True"]


@needs_triton
def test_interpreter_libdevice(tmp_path):
    out = run_child(tmp_path, """
        import math, torch, triton, triton.language as tl
        import triton.language.extra.libdevice as ld

        @triton.jit
        def k(x_ptr, o, N: tl.constexpr):
            r = tl.arange(0, N)
            x = tl.load(x_ptr + r)
            tl.store(o + r, ld.exp2(x))
            tl.store(o + N + r, ld.fast_expf(x))
            tl.store(o + 2 * N + r, ld.tanh(x))
            tl.store(o + 3 * N + r, ld.round(x))
            tl.store(o + 4 * N + r, ld.log1p(tl.abs(x)))

        @triton.jit
        def bad_type(x_ptr, N: tl.constexpr):
            ld.exp2(tl.load(x_ptr + tl.arange(0, N)).to(tl.bfloat16))

        @triton.jit
        def missing(x_ptr, N: tl.constexpr):
            ld.j0(tl.load(x_ptr + tl.arange(0, N)))

        x = torch.tensor([-2.5, -0.5, 0.5, 2.5, 1.25, -3.0, 0.0, 0.75])
        o = torch.empty(5, 8)
        k[(1,)](x, o, N=8)
        want = torch.stack([torch.exp2(x), torch.exp(x), torch.tanh(x),
                            torch.tensor([math.copysign(math.floor(abs(v) + 0.5), v) for v in x.tolist()]),
                            torch.log1p(x.abs())])
        print("values", bool(torch.allclose(o, want, rtol=1e-6, atol=1e-6)))
        for kernel in (bad_type, missing):
            try:
                kernel[(1,)](x, N=8)
            except Exception as e:
                cause = e.__cause__ or e
                print(type(cause).__name__, str(cause))
    """)
    lines = out.splitlines()
    assert lines[0] == "values True"
    assert lines[1].startswith("TypeError") and "fp32 or fp64" in lines[1]
    assert lines[2].startswith("NotImplementedError") and "libdevice.j0" in lines[2]


@needs_triton
def test_interpreter_loop_variables_and_scalar_bounds(tmp_path):
    out = run_child(tmp_path, """
        import torch, triton, triton.language as tl

        maximum = tl.maximum                             # a builtin under a global name (fla does this)

        @triton.jit
        def k(o, n_ptr, N: tl.constexpr):
            n = maximum(tl.load(n_ptr), 0)               # a scalar tensor as a range bound (__index__)
            acc = tl.zeros([N], dtype=tl.int64)
            for i in range(0, n):                        # a tensor loop variable, as compiled
                acc += i.to(tl.int64) * (1 << 33)
            for j in tl.range(2):
                acc += j.to(tl.int64)
            for s in tl.static_range(2):                 # stays a constexpr
                acc += tl.full([N], s, tl.int64)
            tl.store(o + tl.arange(0, N), acc)

        o = torch.empty(4, dtype=torch.int64)
        k[(1,)](o, torch.tensor([3], dtype=torch.int32), N=4)
        print(o.tolist())
    """)
    want = (0 + 1 + 2) * (1 << 33) + 1 + 1
    assert out.strip() == str([want] * 4)


def test_small_call_replaces_the_sizes_main_passes(tmp_path):
    (tmp_path / "prog.py").write_text(textwrap.dedent("""
        import sys
        def run_test(B, S, H, dtype):
            print(B, S, H, dtype, __name__ != "__main__")
        def main():
            run_test(B=4, S=8192, H=64, dtype="bfloat16")
        if __name__ == "__main__":
            sys.exit("must not run as __main__")
    """))
    src = te.small_call_command("prog.py", "run_test", {"S": 256, "H": 2})
    proc = subprocess.run([sys.executable, "-c", src], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["4", "256", "2", "bfloat16", "True"]


def test_small_call_entries_name_run_test_and_chunk_multiples():
    for rel, (function, sizes) in te.SMALL_CALL.items():
        assert rel.endswith(".py") and function == "run_test"
        assert sizes["S"] % 64 == 0 and set(sizes) <= {"B", "S", "H"}


def test_missing_optional_names_absent_modules(monkeypatch):
    monkeypatch.setattr(te, "OPTIONAL", {"numpy": "numpy", "no_such_module_xyz": "absent"})
    assert te.missing_optional() == ["no_such_module_xyz"]


def test_conformance_extra_never_pulls_torch():
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["conformance"]
    names = [req.split("=")[0].split(">")[0].split("<")[0].split("[")[0].strip() for req in extra]
    assert "torch" not in names and {"triton", "fla-core"} <= set(names)


def test_small_consts_replaces_the_constants_of_main(tmp_path):
    (tmp_path / "prog.py").write_text(textwrap.dedent("""
        import sys
        def main():
            M, N, K = 8192, 8192, 8192
            print(M, N, K, 8192, __name__ != "__main__", sys.argv[1:])
        if __name__ == "__main__":
            sys.exit("must not run as __main__")
    """))
    src = te.small_consts_command("prog.py", {(8192, 8192, 8192): (256, 8192, 256)}, ["--x"])
    proc = subprocess.run([sys.executable, "-c", src], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["256", "8192", "256", "8192", "True", "['--x']"]
    missing = te.small_consts_command("prog.py", {(1, 2): (3, 4)})
    proc = subprocess.run([sys.executable, "-c", missing], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "main() has no constant [(1, 2)]" in proc.stderr
