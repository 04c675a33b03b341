"""The executors one kernel suite runs on: the interpreter (batched and serial), the CUDA backend under
numba's CUDA simulator, and the CUDA backend on a real GPU.

Contract
--------
:func:`get(name)` returns the (cached) executor named in ``tests.registry.EXECUTORS``. An executor has

* ``name``; ``drawn`` — True where the suite draws shapes with Hypothesis (the interpreter), False where
  each kernel runs once at its fixed size (``TestKernel.toy`` / ``.gpu``);
* ``unavailable() -> str | None`` — why it cannot run here (the fixture skips with that reason);
* ``run(tk, p, seed) -> (inputs, outputs)`` — fresh inputs from ``seed`` and the kernel's outputs (the
  returned ones, then the inputs written in place), inputs left untouched;
* ``agrees(tk, out, base) -> str | None`` — compares one output with the batched interpreter's on the
  same inputs (``None`` when they agree): the serial interpreter within ``tk.serial_tol``, the CUDA
  executors within ``tilesim.backends.cuda.check.REL_TOL`` (relative norm error by output dtype);
* ``library(spec_name) -> dict`` (CUDA executors) — a registered library kernel run against the
  interpreter (``check.run_case``'s row: ``name``, ``ok``, ``rel_err``/``error``).

The CUDA simulator needs ``NUMBA_ENABLE_CUDASIM=1`` before ``numba.cuda`` is imported, so its executor
runs every simulator case in one subprocess (``tests/backends/sim_runner.py``) on first use and serves
the saved inputs/outputs afterwards; its ``run`` accepts only the kernel's ``toy`` size.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import zlib

import numpy as np

import tilesim
from tests import registry
from tilesim.kernel import JITKernel
from tilesim.testing import compare_arrays

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: registered library kernels (``kernels.registry``) small enough for the CUDA simulator (fp32/fp16 runs)
LIBRARY_CUDASIM = ("rmsnorm", "softmax", "gelu", "flash_attention_fwd")


def have_numba_cuda() -> bool:
    return importlib.util.find_spec("numba") is not None and importlib.util.find_spec("numba_cuda") is not None


def outputs_of(res, inputs, inplace) -> list:
    """The kernel's outputs: what the call returned, then the inputs it wrote in place."""
    outs = [] if res is None else list(res) if isinstance(res, (list, tuple)) else [res]
    return outs + [inputs[i] for i in inplace]


def _copies(inputs):
    return [x.copy() if isinstance(x, np.ndarray) else x for x in inputs]


def library_names(executor: str) -> list[str]:
    """Library kernels each CUDA executor checks against the interpreter (none on the interpreters)."""
    if executor == "cudasim":
        return list(LIBRARY_CUDASIM)
    if executor == "gpu":
        try:
            from kernels.registry import all_specs
        except ImportError:
            return []
        return [s.name for s in all_specs()]
    return []


class Interp:
    drawn = True

    def __init__(self, name, options=None):
        self.name, self.options = name, options

    def unavailable(self):
        return None

    def call(self, tk, p, inputs) -> list:
        args = _copies(inputs)
        if tk.eager is not None and self.options is None:
            return outputs_of(tk.eager(*args), args, tk.inplace)
        k = tk.build(p)
        res = k(*args) if self.options is None else k.run(*args, options=self.options)
        return outputs_of(res, args, tk.inplace)

    def run(self, tk, p, seed):
        inputs = tk.inputs(np.random.default_rng(seed), p)
        return inputs, self.call(tk, p, inputs)

    def agrees(self, tk, out, base):
        return compare_arrays(out, base, name=f"{self.name} vs interp-batched", **tk.serial_tol)


class _Cuda:
    drawn = False

    def agrees(self, tk, out, base):
        from tilesim import dtypes as dt
        from tilesim.backends.cuda.check import REL_TOL, rel_err

        base = np.asarray(base)
        dname = dt.canon(base.dtype) if base.dtype.kind != "V" else "float32"
        if dt.is_int(dname) or dname == "bool":
            good = np.array_equal(np.asarray(out), base)
            return None if good else f"{self.name} vs interp-batched: integer outputs differ"
        e, tol = rel_err(out, base), REL_TOL.get(dname, 0.0)
        return None if e <= tol else f"{self.name} vs interp-batched: relative norm error {e:.3g} > {tol} ({dname})"


class Gpu(_Cuda):
    name = "gpu"

    def unavailable(self):
        if not have_numba_cuda():
            return "numba-cuda is not installed"
        from tilesim.backends.cuda import available

        return None if available() else "needs a CUDA GPU (none usable here)"

    def run(self, tk, p, seed):
        from tilesim.backends.cuda.check import cuda_twin

        inputs = tk.inputs(np.random.default_rng(seed), p)
        args = _copies(inputs)
        return inputs, outputs_of(cuda_twin(tk.build(p))(*args), args, tk.inplace)

    def library(self, name):
        from kernels.registry import get
        from tilesim.backends.cuda.check import library_cases, run_case

        cases = library_cases([get(name)])
        assert cases, name
        c = cases[0]
        assert c.kernel is not None, getattr(c, "error", "")
        return run_case(c, np.random.default_rng(zlib.crc32(name.encode())))  # deterministic per kernel


class CudaSim(_Cuda):
    name = "cudasim"

    def unavailable(self):
        return None if have_numba_cuda() else "numba-cuda is not installed"

    @functools.cached_property
    def results(self) -> dict:
        """(kind, name) -> row, kind "kernel" or "library"; kernel rows also carry ``inputs``/``outputs``
        (one subprocess, all cases)."""
        with tempfile.TemporaryDirectory(prefix="tilesim_cudasim_") as out:
            env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1",
                       PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
            p = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "backends", "sim_runner.py"), "--out", out,
                                "--library", *LIBRARY_CUDASIM],
                               capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
            rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
            assert rows, p.stderr[-3000:]
            for r in rows:
                if r.get("npz"):
                    with np.load(r["npz"]) as z:
                        r["inputs"] = [z[f"in{i}"] for i in range(r["n_in"])]
                        r["outputs"] = [z[f"out{i}"] for i in range(r["n_out"])]
        return {("library" if r.get("library") else "kernel", r["name"]): r for r in rows}

    def run(self, tk, p, seed):
        assert p == tk.toy and seed == tk.seed(), "the CUDA simulator runs each kernel at its toy size only"
        r = self.results.get(("kernel", tk.name))
        assert r is not None, sorted(self.results)
        assert r["ok"], r
        return tuple(r["inputs"]), r["outputs"]

    def library(self, name):
        hits = [r for (kind, k), r in self.results.items() if kind == "library" and (k == name or k.startswith(name + " "))]
        assert hits, sorted(self.results)
        bad = [r for r in hits if not r["ok"]]
        return bad[0] if bad else hits[0]


class Cpu(_Cuda):
    """The compiled CPU target (``target="cpu"``) at each kernel's toy size (else its GPU size): a Numba
    compilation per kernel is too slow to draw many shapes; the toy sizes are ones tiles do not divide."""

    name = "cpu"

    def unavailable(self):
        from tilesim.backends.cpu import available

        return None if available() else "numba and scipy are not installed"

    def run(self, tk, p, seed):
        inputs = tk.inputs(np.random.default_rng(seed), p)
        args = _copies(inputs)
        return inputs, outputs_of(cpu_twin(tk.build(p))(*args), args, tk.inplace)


def cpu_twin(kernel):
    """The same program on the compiled CPU target."""
    return JITKernel(kernel.prim_func, out_idx=kernel.out_idx, target="cpu")


@functools.lru_cache(maxsize=None)
def get(name: str):
    if name == "interp-batched":
        return Interp(name)
    if name == "interp-serial":
        return Interp(name, tilesim.InterpOptions(mode="serial"))
    if name == "cudasim":
        return CudaSim()
    if name == "gpu":
        return Gpu()
    if name == "cpu":
        return Cpu()
    raise KeyError(f"unknown executor {name!r}; known: {', '.join(registry.EXECUTORS)}")
