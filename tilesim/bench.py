"""CPU benchmarks (``tilesim bench [--targets interp,cpu]``): ratios to NumPy measured in one run.

Each target (``interp``: the NumPy interpreter; ``cpu``: the compiled CPU target; ``tiered``: what
``target="auto"`` runs without a GPU, the interpreter until a long call has it compiled in the background)
gets a fresh kernel: its first call (compilation included) and the median of its warm calls (for
``tiered``, once a compilation its first call started has ended) are printed, with the ratio of the warm
time to the NumPy reference timed in the same run, alternating with it call by call (the reference's
median over those calls is printed beside the ratio).

When JAX is installed, the ``gemm`` and ``attention`` rows add a ``pallas-interpret`` column (the same kernels
written in JAX Pallas, run by its interpret mode: :mod:`tilesim.bench_pallas`); when Triton and torch are, a
``triton-interpret`` column (Triton's CPU interpreter: :mod:`tilesim.bench_triton`). Both run in child
processes; their warm times are medians in the child, set against the reference's median in this process
(not paired call by call).

* ``gemm``: a 512×512×512 fp32 GEMM with 64×64×32 tiles against ``numpy.matmul`` on the same arrays.
* ``attention``: causal flash-attention forward (1 head, 256 tokens, d=64, 64×64 tiles) against a
  NumPy reference attention (scores, mask, softmax, weighted sum).
* ``attention-large``: causal forward with 8 heads × 4096 tokens (d=64): wall time and peak memory
  (``tracemalloc`` peak of NumPy allocations, and the process's peak RSS).

Each timing is the median of several runs after a warm-up. Nothing here asserts a time.

Layer: app (see :mod:`tilesim.hw`).
"""

from __future__ import annotations

import resource
import statistics
import time
import tracemalloc

import numpy as np

from .backends import get_target
from .bench_pallas import column as pallas_column
from .bench_triton import column as triton_column
from .examples import flash_attention, matmul
from .kernel import JITKernel


def _median_time(fn, reps=5, warmup=1):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def _paired_times(fn, ref, reps=15, warmup=1):
    """Medians of ``fn`` and ``ref`` timed alternately (call of one, call of the other, ``reps`` times): on a
    shared machine whose speed drifts, a ratio of times taken minutes apart measures the drift too."""
    for _ in range(warmup):
        fn()
        ref()
    ts, tr = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        ref()
        ts.append(t1 - t0)
        tr.append(time.perf_counter() - t1)
    return statistics.median(ts), statistics.median(tr)


def _ref_attention(q, k, v, causal=True):
    """NumPy attention on (B, S, H, D) arrays, float32 math, its products through BLAS (``matmul`` on
    (B, H, S, D) copies: ``einsum`` without ``optimize`` runs its own loops, several times slower, which
    would flatter every ratio against it)."""
    q, k, v = (np.ascontiguousarray(x.transpose(0, 2, 1, 3), dtype=np.float32) for x in (q, k, v))
    s = (q @ k.transpose(0, 1, 3, 2)) * np.float32(1 / np.sqrt(q.shape[-1]))
    if causal:
        n = q.shape[2]
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return (p @ v).transpose(0, 2, 1, 3)


def _on(kernel, target):
    """A fresh ``JITKernel`` of ``kernel``'s program for ``target`` (nothing compiled yet)."""
    return JITKernel(kernel.prim_func, out_idx=kernel.out_idx, target=target)


def _await_tier_up(kernel) -> None:
    """``tiered`` (what ``target="auto"`` runs without a GPU): let a compilation its first call started end,
    so the warm timings are of the code later calls run."""
    wait = getattr(kernel.program, "wait", None)
    if wait is not None:
        wait()


def _targets_row(kernel, args, targets, ref, out, label, ref_name, check, which=None):
    """One benchmark row. Each target's warm time is paired with the reference ``ref`` (a callable): the two
    are timed alternately (:func:`_paired_times`) and the ratio is of those two medians."""
    t_ref = _median_time(ref, reps=9)
    row = {"ref_s": t_ref}
    parts = []
    for t in targets:
        kt = _on(kernel, t)
        t0 = time.perf_counter()
        res = kt(*args)
        first = time.perf_counter() - t0
        _await_tier_up(kt)
        warm, paired = _paired_times(lambda kt=kt: kt(*args), ref)
        fb = getattr(kt.program, "fallback", None)
        row[t] = {"first_s": first, "warm_s": warm, "ref_paired_s": paired, "ratio": warm / paired,
                  "rel_err": check(res), "fallback": fb}
        parts.append(f"{t}{' (fell back to the interpreter)' if fb else ''}: warm {warm * 1e3:8.2f} ms "
                     f"({warm / paired:5.2f}x {ref_name} {paired * 1e3:.2f} ms) first {first:6.2f} s, "
                     f"rel err {row[t]['rel_err']:.1e}")
    for name, col in (("pallas-interpret", pallas_column), ("triton-interpret", triton_column)):
        got = col(which, args) if which else None
        if got is None:
            continue
        first, warm, res = got
        row[name] = {"first_s": first, "warm_s": warm, "ratio": warm / t_ref, "rel_err": check(res)}
        parts.append(f"{name}: warm {warm * 1e3:8.2f} ms ({warm / t_ref:5.2f}x) first {first:6.2f} s, "
                     f"rel err {row[name]['rel_err']:.1e}")
    out(f"{label} | {ref_name} {t_ref * 1e3:8.2f} ms | " + " | ".join(parts))
    return row


def bench_gemm(out, targets=("interp",)):
    M = N = K = 512
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K), dtype=np.float32)
    b = rng.standard_normal((K, N), dtype=np.float32)
    k = matmul(M, N, K, 64, 64, 32, dtype="float32")
    exact = a.astype(np.float64) @ b
    row = _targets_row(k, (a, b), targets, lambda: np.matmul(a, b), out, "gemm 512x512x512 fp32, tiles 64x64x32", "numpy.matmul",
                       lambda c: float(np.linalg.norm(c - exact) / np.linalg.norm(exact)), which="gemm")
    return {"name": "gemm_512", **row}


def bench_attention(out, targets=("interp",)):
    rng = np.random.default_rng(0)
    shape = (1, 256, 1, 64)
    q, k_, v = (rng.standard_normal(shape, dtype=np.float32) for _ in range(3))
    kern = flash_attention(1, 1, 256, 64, dtype="float32")
    ref = _ref_attention(q, k_, v)
    row = _targets_row(kern, (q, k_, v), targets, lambda: _ref_attention(q, k_, v), out, "flash-attn fwd causal 1x256, d=64, tiles 64x64",
                       "numpy reference", lambda o: float(np.linalg.norm(o - ref) / np.linalg.norm(ref)),
                       which="attention")
    return {"name": "attention_256", **row}


def bench_attention_large(out, targets=("interp",)):
    rng = np.random.default_rng(0)
    shape = (1, 4096, 8, 64)
    q, k_, v = (rng.standard_normal(shape, dtype=np.float32).astype(np.float16) for _ in range(3))
    base = flash_attention(1, 8, 4096, 64, dtype="float16")
    ref = _ref_attention(q[:, :512], k_[:, :512], v[:, :512])
    row = {"name": "attention_4096x8"}
    for t in targets:
        kern = _on(base, t)
        tracemalloc.start()
        t0 = time.perf_counter()
        o = kern(q, k_, v)
        el = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        err = np.linalg.norm(o[:, :512].astype(np.float32) - ref) / np.linalg.norm(ref)
        _await_tier_up(kern)
        warm = _median_time(lambda kern=kern: kern(q, k_, v), reps=3, warmup=0)
        out(f"flash-attn fwd causal 8 heads x 4096 tokens, d=64, fp16, {t}: first call {el:6.2f} s, warm "
            f"(median of 3) {warm:6.2f} s | peak NumPy memory {peak / 2**30:5.2f} GiB | process peak RSS {rss / 2**30:5.2f} GiB | "
            f"rel err (first 512 rows) {err:.1e}")
        row[t] = {"first_s": el, "warm_s": warm, "peak_numpy_bytes": peak, "peak_rss_bytes": rss,
                  "rel_err": float(err)}
    return row


def main(which="all", out=print, targets=("interp",)) -> int:
    for t in targets:
        get_target(t)  # an unknown name is a clear error before any work
    results = []
    if which in ("all", "gemm"):
        results.append(bench_gemm(out, targets))
    if which in ("all", "attention"):
        results.append(bench_attention(out, targets))
    if which in ("all", "attention-large"):
        results.append(bench_attention_large(out, targets))
    return 0
