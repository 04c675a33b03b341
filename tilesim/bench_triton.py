"""The Triton-interpreter column of ``tilesim bench``: the same GEMM and causal attention, written in Triton
and run by Triton's own CPU interpreter (``TRITON_INTERPRET=1``), timed in the same run.

Contract
--------
* :func:`column` (called by :mod:`tilesim.bench`) returns ``None`` when ``triton`` or ``torch`` is not
  installed (Triton's interpreter takes torch CPU tensors); otherwise it runs ``python -m
  tilesim.bench_triton_child`` in a child process with ``TRITON_INTERPRET=1`` (Triton reads it when it is
  imported: library functions such as ``tl.sum`` are compiled for the interpreter only then), passing the
  bench's inputs through a temporary ``.npz``, and returns ``(first_s, warm_s, result)``: the first call,
  the median of ``reps`` warm calls after one warm-up, and the result, so its error is checked like every
  other column's.
* Kernels: 64×64×32 GEMM tiles; 64×64 attention tiles on contiguous (B, S, H, D) tensors, causal; fp32
  throughout and ``input_precision="ieee"`` dots (no TF32), so the results equal NumPy's within fp32
  rounding. A child that fails is a ``RuntimeError`` carrying its last stderr line.

Layer: app (see :mod:`tilesim.hw`).
"""

import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

__all__ = ["column", "run_child"]


def column(which: str, inputs: tuple, reps: int = 5):
    """``(first_s, warm_s, result)`` of the Triton-interpreted ``which`` (``"gemm"``/``"attention"``) on
    ``inputs``, or ``None`` without triton and torch."""
    if importlib.util.find_spec("triton") is None or importlib.util.find_spec("torch") is None:
        return None
    return run_child("tilesim.bench_triton_child", "Triton", which, inputs, reps, {"TRITON_INTERPRET": "1"})


def run_child(module: str, name: str, which: str, inputs: tuple, reps: int, env: dict):
    """Run ``python -m <module> WHICH IN.npz OUT.npz REPS`` with ``env`` added to this process's environment,
    the inputs passed through a temporary ``.npz``; ``(first_s, warm_s, result)`` from its output file. A child
    that fails is a ``RuntimeError`` naming the column (``name``) and carrying its last stderr line."""
    with tempfile.TemporaryDirectory(prefix="tilesim_column_") as tmp:
        src, dst = Path(tmp) / "in.npz", Path(tmp) / "out.npz"
        np.savez(src, *inputs)
        proc = subprocess.run([sys.executable, "-m", module, which, str(src), str(dst), str(reps)],
                              env=dict(os.environ, **env), capture_output=True, text=True)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"the {name} column ({which}) failed: {last}")
        with np.load(dst) as out:
            return float(out["first"]), float(out["warm"]), out["result"]
