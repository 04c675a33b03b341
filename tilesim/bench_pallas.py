"""The JAX Pallas column of ``tilesim bench``: the same GEMM and causal attention, written in Pallas and run by
its interpret mode (``pallas_call(..., interpret=True)``: traced once, compiled by XLA for the CPU), timed in
the same run.

Contract
--------
* :func:`column` (called by :mod:`tilesim.bench`) returns ``None`` when ``jax`` is not installed (``pip install
  "jax[cpu]"``, or the ``bench`` extra); otherwise it runs ``python -m tilesim.bench_pallas_child`` in a child
  process (JAX's runtime and threads stay out of the benchmarking process) and returns ``(first_s, warm_s,
  result)`` as :func:`tilesim.bench_triton.column` does: the first call (tracing and XLA compilation included),
  the median of ``reps`` warm calls after one warm-up, and the result, checked like every other column.
* Kernels (:mod:`tilesim.bench_pallas_child`): 64×64×32 GEMM tiles; 64×64 causal attention tiles; fp32 with
  ``precision=HIGHEST`` dots, so results equal NumPy's within fp32 rounding. Shapes must be multiples of the
  tiles (the bench's are). A child that fails is a ``RuntimeError`` carrying its last stderr line.

Layer: app (see :mod:`tilesim.hw`).
"""

import importlib.util

from .bench_triton import run_child

__all__ = ["column"]


def column(which: str, inputs: tuple, reps: int = 5):
    """``(first_s, warm_s, result)`` of the Pallas-interpreted ``which`` (``"gemm"``/``"attention"``) on
    ``inputs``, or ``None`` without jax."""
    if importlib.util.find_spec("jax") is None:
        return None
    return run_child("tilesim.bench_pallas_child", "Pallas", which, inputs, reps, {})
