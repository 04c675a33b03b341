"""The simulator's ``numba`` profile against the Numba CUDA backend's H200 measurements (CPU only).

Rebuilds each benchmarked kernel of ``reports/measurements/numba_h200_*.json`` (the last run) with the
same factory and configuration ``benchmarks/gpu_run.py`` used, simulates it on ``h200_sxm_141gb`` with
``profile="numba"``, and prints simulated / measured per kernel with the median and worst error. The
profile is not calibrated on these points: this is a check, not a fit.

    python benchmarks/numba_profile_validation.py [--git-rev REV]
"""

from __future__ import annotations

import glob
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build(name, shape, cfg):
    from kernels import attention as A
    from kernels import fp8_cast, norms
    from kernels import gemm as G
    if name.startswith("gemm_fp32"):
        M, N, K = shape
        return G.matmul(M, N, K, dtype="float32", out_dtype="float32", **cfg)
    if name.startswith("rmsnorm"):
        return norms.rms_norm(*shape, dtype="bfloat16", eps=1e-6, **cfg)
    if name.startswith("softmax"):
        return norms.softmax(*shape, dtype="bfloat16", **cfg)
    if name.startswith("fp8_cast_per_token"):
        return fp8_cast.per_token_cast(*shape, group_size=128, in_dtype="bfloat16", **cfg)
    if name.startswith("flash_attn"):
        B, S, H, D = shape
        return A.flash_attention_fwd(B, H, S, D, is_causal=True, dtype="bfloat16", **cfg)
    raise KeyError(name)


def main():
    sys.path.insert(0, ROOT)
    from tilesim.sim import simulate
    path = sorted(glob.glob(os.path.join(ROOT, "reports", "measurements", "numba_h200_*.json")))[-1]
    doc = json.load(open(path))
    rows = []
    for r in doc["bench"]:
        try:
            k = build(r["name"], r["shape"], r["config"])
        except (KeyError, TypeError) as e:
            print(f"skip {r['name']}: {e}")
            continue
        rep = simulate(k.prim_func, "h200_sxm_141gb", "numba")
        ratio = rep.time_s / r["ours_median_s"]
        rows.append((r["name"], r["ours_median_s"], rep.time_s, ratio, rep.bound))
    print(f"{os.path.basename(path)}: simulated (numba profile) vs measured (Numba backend on the H200)")
    print(f"{'kernel':44s} {'measured':>10s} {'simulated':>10s} {'sim/meas':>8s}  bound")
    for n, m, s, q, b in rows:
        print(f"{n:44s} {m * 1e6:8.1f}us {s * 1e6:8.1f}us {q:8.2f}  {b}")
    errs = [abs(q - 1) for *_, q, _ in rows]
    print(f"{len(rows)} points: median error {100 * statistics.median(errs):.0f}%, worst "
          f"{max(max(q, 1 / q) for *_, q, _ in rows):.2f}x off")


if __name__ == "__main__":
    main()
