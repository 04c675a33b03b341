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

__all__ = ["column"]


def column(which: str, inputs: tuple, reps: int = 5):
    """``(first_s, warm_s, result)`` of the Triton-interpreted ``which`` (``"gemm"``/``"attention"``) on
    ``inputs``, or ``None`` without triton and torch."""
    if importlib.util.find_spec("triton") is None or importlib.util.find_spec("torch") is None:
        return None
    with tempfile.TemporaryDirectory(prefix="tilesim_triton_") as tmp:
        src, dst = Path(tmp) / "in.npz", Path(tmp) / "out.npz"
        np.savez(src, *inputs)
        env = dict(os.environ, TRITON_INTERPRET="1")
        proc = subprocess.run([sys.executable, "-m", "tilesim.bench_triton_child", which, str(src), str(dst), str(reps)],
                              env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"the Triton column ({which}) failed: {last}")
        with np.load(dst) as out:
            return float(out["first"]), float(out["warm"]), out["result"]


