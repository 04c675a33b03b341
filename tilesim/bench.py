"""Interpreter benchmarks (``tilesim bench``): ratios to NumPy measured in one run.

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

from .examples import flash_attention, matmul


def _median_time(fn, reps=5, warmup=1):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def _ref_attention(q, k, v, causal=True):
    """NumPy attention on (B, S, H, D) arrays, float32 math."""
    q, k, v = (x.astype(np.float32) for x in (q, k, v))
    s = np.einsum("bqhd,bkhd->bhqk", q, k) / np.float32(np.sqrt(q.shape[-1]))
    if causal:
        n = q.shape[1]
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bhqk,bkhd->bqhd", p, v)


def bench_gemm(out):
    M = N = K = 512
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K), dtype=np.float32)
    b = rng.standard_normal((K, N), dtype=np.float32)
    k = matmul(M, N, K, 64, 64, 32, dtype="float32")
    c = k(a, b)
    err = np.linalg.norm(c - a.astype(np.float64) @ b) / np.linalg.norm(a.astype(np.float64) @ b)
    t_np = _median_time(lambda: np.matmul(a, b), reps=9)
    t_ts = _median_time(lambda: k(a, b), reps=5)
    out(f"gemm 512x512x512 fp32, tiles 64x64x32: interpreter {t_ts * 1e3:8.2f} ms | numpy.matmul "
        f"{t_np * 1e3:8.2f} ms | ratio {t_ts / t_np:6.2f}x | rel err {err:.1e}")
    return {"name": "gemm_512", "interp_s": t_ts, "numpy_s": t_np, "ratio": t_ts / t_np, "rel_err": float(err)}


def bench_attention(out):
    rng = np.random.default_rng(0)
    shape = (1, 256, 1, 64)
    q, k_, v = (rng.standard_normal(shape, dtype=np.float32) for _ in range(3))
    kern = flash_attention(1, 1, 256, 64, dtype="float32")
    o = kern(q, k_, v)
    ref = _ref_attention(q, k_, v)
    err = np.linalg.norm(o - ref) / np.linalg.norm(ref)
    t_np = _median_time(lambda: _ref_attention(q, k_, v), reps=9)
    t_ts = _median_time(lambda: kern(q, k_, v), reps=5)
    out(f"flash-attn fwd causal 1x256, d=64, tiles 64x64: interpreter {t_ts * 1e3:8.2f} ms | numpy reference "
        f"{t_np * 1e3:8.2f} ms | ratio {t_ts / t_np:6.2f}x | rel err {err:.1e}")
    return {"name": "attention_256", "interp_s": t_ts, "numpy_s": t_np, "ratio": t_ts / t_np, "rel_err": float(err)}


def bench_attention_large(out):
    rng = np.random.default_rng(0)
    shape = (1, 4096, 8, 64)
    q, k_, v = (rng.standard_normal(shape, dtype=np.float32).astype(np.float16) for _ in range(3))
    kern = flash_attention(1, 8, 4096, 64, dtype="float16")
    tracemalloc.start()
    t0 = time.perf_counter()
    o = kern(q, k_, v)
    t = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    ref = _ref_attention(q[:, :512], k_[:, :512], v[:, :512])
    err = np.linalg.norm(o[:, :512].astype(np.float32) - ref) / np.linalg.norm(ref)
    out(f"flash-attn fwd causal 8 heads x 4096 tokens, d=64, fp16: {t:6.2f} s | peak NumPy memory "
        f"{peak / 2**30:5.2f} GiB | process peak RSS {rss / 2**30:5.2f} GiB | rel err (first 512 rows) {err:.1e}")
    return {"name": "attention_4096x8", "interp_s": t, "peak_numpy_bytes": peak, "peak_rss_bytes": rss,
            "rel_err": float(err)}


def main(which="all", out=print) -> int:
    results = []
    if which in ("all", "gemm"):
        results.append(bench_gemm(out))
    if which in ("all", "attention"):
        results.append(bench_attention(out))
    if which in ("all", "attention-large"):
        results.append(bench_attention_large(out))
    return 0
