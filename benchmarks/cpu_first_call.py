"""Where the compiled CPU target's first call goes (issue 19): each kernel in a fresh process with an empty
kernel cache.

    python benchmarks/cpu_first_call.py [--runs 3] [--kernels gemm,attention] [--opt N]

For each run and kernel a child process (``TILESIM_CACHE_DIR`` a new temporary directory, so the generated
module and its machine code are not on disk; the helper modules' own Numba cache, ``prelude*.py``, is
whatever this machine has) reports, in thread CPU seconds (the machine is shared; wall time is printed too):

* ``numba init``: importing the CPU target's helpers (``prelude``: SciPy's BLAS module preloaded, ``blas.py``)
  and Numba's first compilation in a process (a one-line function): its registries are loaded then;
* ``first call``: the kernel's first call after that (code generation, Numba's typing and lowering, LLVM's
  optimisation passes and machine-code emission, the disk-cache write, and one run), with ``llvm passes``
  and ``llvm codegen`` (time inside llvmlite's pass managers, and in ``emit_object``/``finalize_object``) and ``front end`` (the
  rest: Numba's Python side);
* ``warm``: the median of 7 later calls (wall).

The kernels are ``tilesim bench``'s: GEMM 512³ fp32 (64×64 tiles, K step 32) and causal attention (1 head,
256 tokens, d=64, 64×64 tiles). ``--opt`` sets ``NUMBA_OPT`` in the children. Prints medians over runs.
Nothing asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r'''
import json, statistics, sys, time
import numpy as np
from llvmlite.binding import executionengine as ee, newpassmanagers as npm, targets
acc = {"passes": 0.0, "codegen": 0.0}
def wrap(cls, meth, key):
    orig = getattr(cls, meth)
    def timed(*a, **k):
        t = time.thread_time()
        try:
            return orig(*a, **k)
        finally:
            acc[key] += time.thread_time() - t
    setattr(cls, meth, timed)
wrap(npm.ModulePassManager, "run", "passes")
wrap(npm.FunctionPassManager, "run", "passes")
wrap(ee.ExecutionEngine, "finalize_object", "codegen")
wrap(targets.TargetMachine, "emit_object", "codegen")
import numba  # after the wrapping: Numba keeps references to llvmlite's methods
from tilesim.examples import flash_attention, matmul
from tilesim.kernel import JITKernel

t0, w0 = time.thread_time(), time.perf_counter()
import tilesim.backends.cpu.prelude  # noqa: F401 - as a kernel's first call: before Numba's first compilation
numba.njit(lambda x: x + 1)(1)
init, init_wall = time.thread_time() - t0, time.perf_counter() - w0
rng = np.random.default_rng(0)
if sys.argv[1] == "gemm":
    k = matmul(512, 512, 512, 64, 64, 32, dtype="float32")
    args = tuple(rng.standard_normal((512, 512), dtype=np.float32) for _ in range(2))
else:
    k = flash_attention(1, 1, 256, 64, dtype="float32")
    args = tuple(rng.standard_normal((1, 256, 1, 64), dtype=np.float32) for _ in range(3))
for key in acc:
    acc[key] = 0.0
t0, w0 = time.thread_time(), time.perf_counter()
kc = JITKernel(k.prim_func, out_idx=k.out_idx, target="cpu")
kc(*args)
first, first_wall = time.thread_time() - t0, time.perf_counter() - w0
warm = []
for _ in range(7):
    w0 = time.perf_counter()
    kc(*args)
    warm.append(time.perf_counter() - w0)
print(json.dumps({"init": init, "init_wall": init_wall, "first": first, "first_wall": first_wall,
                  "passes": acc["passes"], "codegen": acc["codegen"], "warm": statistics.median(warm),
                  "lines": len(kc.get_kernel_source().splitlines())}))
'''


def run_child(kernel: str, opt: str | None) -> dict:
    env = dict(os.environ, TILESIM_CACHE_DIR=tempfile.mkdtemp(prefix="tilesim_first_call_"),
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    if opt is not None:
        env["NUMBA_OPT"] = opt
    out = subprocess.run([sys.executable, "-c", _CHILD, kernel], env=env, capture_output=True, text=True,
                         check=True, cwd=str(ROOT))
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--kernels", default="gemm,attention")
    ap.add_argument("--opt", default=None, help="NUMBA_OPT for the children (default: Numba's, 3)")
    args = ap.parse_args(argv)
    for kernel in args.kernels.split(","):
        rows = [run_child(kernel, args.opt) for _ in range(args.runs)]
        med = {key: statistics.median(r[key] for r in rows) for key in rows[0]}
        front = med["first"] - med["passes"] - med["codegen"]
        print(f"{kernel:9s} ({int(med['lines'])} generated lines), medians of {args.runs} fresh processes, thread CPU s: "
              f"numba init {med['init']:.2f} (wall {med['init_wall']:.2f}) | first call {med['first']:.2f} "
              f"(wall {med['first_wall']:.2f}) = front end {front:.2f} + llvm passes {med['passes']:.2f} + "
              f"llvm codegen {med['codegen']:.2f} | init + first call {med['init'] + med['first']:.2f} | "
              f"warm {med['warm'] * 1e3:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
