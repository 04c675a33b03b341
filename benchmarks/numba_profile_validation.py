"""The simulator's ``numba`` profile against the Numba CUDA backend's H200 measurements (CPU only).

Points: every benchmark record (name + config) of the three runs ``reports/measurements/numba_h200_*.json``
(run 1's correctness checks were void, its timings are real); a point's measured time is the median of
the runs that timed it (run-to-run spread is printed). Kernels are rebuilt from the library as it was
when they were measured (``--git-rev``, default ``64ce150``: the norms/softmax factories changed after
the runs) with the configuration ``benchmarks/gpu_run.py`` used, and simulated on ``h200_sxm_141gb``
with ``profile="numba"``.

Split (chosen before fitting): TRAIN = one variant per family (the five configurations of the latest
run's first variant: GEMM 128x128x16/256, RMSNorm bm1/t512, softmax bm1/t512, FP8 cast bm32/t128,
flash attention 64x32/t128); TEST = every other variant (other thread counts / tile shapes).
``--fit`` grid-searches the profile's free parameters (``gemm_issue_fraction``,
``element_slot_factor`` jointly, then ``sync_load_bytes_in_flight_per_thread`` — the Little's-law
DRAM bound — in a 1-D scan with those fixed) on TRAIN, minimising the mean |log(sim/meas)|; without
it the values in ``tilesim/analysis/profiles.py`` are used.

    python benchmarks/numba_profile_validation.py [--fit] [--git-rev REV]
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = {"gemm_fp32_4096 128x128x16/256", "rmsnorm_bf16 bm1/t512", "softmax_bf16 bm1/t512",
         "fp8_cast_per_token bm32/t128", "flash_attn_fwd_bf16_causal 64x32/t128"}


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


def points():
    """{name: (shape, config, [measured seconds per run])} over all runs."""
    out: dict = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "reports", "measurements", "numba_h200_*.json"))):
        for r in json.load(open(path))["bench"]:
            out.setdefault(r["name"], (r["shape"], r["config"], []))[2].append(r["ours_median_s"])
    return out


def old_kernels(rev):
    """Extract ``kernels/`` at ``rev`` into a temporary directory and put it first on sys.path."""
    d = tempfile.mkdtemp(prefix="numba_val_")
    arc = subprocess.run(["git", "-C", ROOT, "archive", rev, "kernels"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", d], input=arc, check=True)
    sys.path.insert(0, d)


def summary(rows):
    errs = [abs(q - 1) for *_, q in rows]
    worst = max(max(q, 1 / q) for *_, q in rows)
    return f"{len(rows)} points: median error {100 * statistics.median(errs):.0f}%, worst {worst:.2f}x off"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fit", action="store_true")
    ap.add_argument("--git-rev", default="64ce150")
    args = ap.parse_args()
    old_kernels(args.git_rev)
    sys.path.insert(1, ROOT)
    from hwmodels import load
    from tilesim.analysis.profiles import get_profile
    from tilesim.sim import simulate
    hw = load("h200_sxm_141gb")
    pts = points()
    kern = {n: build(n, sh, cfg) for n, (sh, cfg, _) in pts.items()}
    base = get_profile("numba")

    def run(prof, names):
        out = []
        for n in names:
            meas = statistics.median(pts[n][2])
            out.append((n, pts[n][2], meas, simulate(kern[n].prim_func, hw, prof).time_s / meas))
        return out

    prof = base
    if args.fit:
        best = None
        for g in [x / 100 for x in range(40, 101, 2)]:
            for e in [x / 20 for x in range(20, 61)]:
                p = dataclasses.replace(base, gemm_issue_fraction=g, element_slot_factor=e)
                loss = sum(abs(math.log(q)) for *_, q in run(p, sorted(TRAIN)))
                if best is None or loss < best[0]:
                    best = (loss, p)
        prof = best[1]
        scan = []
        for b in (None, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 16, 24, 32):
            p = dataclasses.replace(prof, sync_load_bytes_in_flight_per_thread=b)
            scan.append((sum(abs(math.log(q)) for *_, q in run(p, sorted(TRAIN))), b is None, b or 0, p))
        prof = min(scan, key=lambda x: x[:3])[3]
        print(f"fitted on TRAIN: gemm_issue_fraction={prof.gemm_issue_fraction}, "
              f"element_slot_factor={prof.element_slot_factor}, "
              f"sync_load_bytes_in_flight_per_thread={prof.sync_load_bytes_in_flight_per_thread}")
    print("simulated (numba profile) vs measured (Numba backend on the H200, median of the runs)")
    print(f"{'kernel':44s} {'runs (us)':>22s} {'measured':>9s} {'simulated':>10s} {'sim/meas':>8s}")
    for split, names in (("TRAIN", sorted(TRAIN)), ("TEST", sorted(set(pts) - TRAIN))):
        rows = run(prof, names)
        print(f"-- {split}")
        for n, runs, m, q in rows:
            rs = "/".join(f"{x * 1e6:.0f}" for x in runs)
            print(f"{n:44s} {rs:>22s} {m * 1e6:7.1f}us {m * q * 1e6:8.1f}us {q:8.2f}")
        print(f"{split}: {summary(rows)}")


if __name__ == "__main__":
    main()
