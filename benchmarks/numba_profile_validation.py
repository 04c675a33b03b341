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
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: the first dataset: runs 1-3 (2026-11-29), kernels of commit 64ce150
LEGACY_RUNS = ("numba_h200_20261129T231949Z.json", "numba_h200_20261129T233020Z.json",
               "numba_h200_20261129T233747Z.json")
LEGACY_TRAIN = {"gemm_fp32_4096 128x128x16/256", "rmsnorm_bf16 bm1/t512", "softmax_bf16 bm1/t512",
                "fp8_cast_per_token bm32/t128", "flash_attn_fwd_bf16_causal 64x32/t128"}
#: the default dataset: run 5b (2026-11-30, `gpu_run.py --sweep`), today's kernels, 39 points with the
#: driver's registers/occupancy per kernel. TRAIN (fixed before fitting): the first variant of each family
#: as gpu_run.py lists them, plus the chunked RMSNorm (a second code shape of the row kernels).
RUNS = ("numba_h200_20261130T010421Z.json",)
TRAIN = {"gemm_fp32_4096 128x128x16/256", "rmsnorm_bf16 bm1/bnrow/t512", "rmsnorm_bf16 bm1/t512",
         "softmax_bf16 bm1/bnrow/t512", "fp8_cast_per_token bm32/t128", "flash_attn_fwd_bf16_causal 64x32/t128"}


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


def points(runs):
    """{name: (shape, config, [measured seconds per run], resources of the last run)} over ``runs``."""
    out: dict = {}
    for f in runs:
        for r in json.load(open(os.path.join(ROOT, "reports", "measurements", f)))["bench"]:
            e = out.setdefault(r["name"], [r["shape"], r["config"], [], None])
            e[2].append(r["ours_median_s"])
            e[3] = (r.get("resources") or [None])[0]
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


def _loss(rows):
    return sum(abs(math.log(q)) for *_, q in rows)


def fit(prof, pts, kern, run, hw, simulate):
    """Fit on TRAIN only: the register overhead to the driver's register counts, then the timing
    parameters to the measured times (mean |log(sim/meas)|), by coordinate-wise grid search."""
    train = sorted(TRAIN)
    if all(pts[n][3] for n in train):
        def reg_err(ov):
            p = dataclasses.replace(prof, register_overhead_per_thread=ov)
            errs = [abs(simulate(kern[n].prim_func, hw, p).launches[0]["registers_per_thread"]
                        - pts[n][3]["regs_per_thread"]) for n in train]
            return statistics.median(errs), ov
        prof = dataclasses.replace(prof, register_overhead_per_thread=min(reg_err(ov) for ov in range(0, 41, 4))[1])
    grids = {"gemm_issue_fraction": [x / 100 for x in range(60, 101, 4)],
             "element_slot_factor": [x / 4 for x in range(4, 33)],
             "reduce_step_cycles": [float(x) for x in range(0, 161, 10)]}
    for _ in range(2):
        for field_, values in grids.items():
            scored = [(_loss(run(dataclasses.replace(prof, **{field_: v}), train)), v) for v in values]
            prof = dataclasses.replace(prof, **{field_: min(scored)[1]})
    print(f"fitted on TRAIN: register_overhead_per_thread={prof.register_overhead_per_thread}, "
          f"gemm_issue_fraction={prof.gemm_issue_fraction}, element_slot_factor={prof.element_slot_factor}, "
          f"reduce_step_cycles={prof.reduce_step_cycles}")
    return prof


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fit", action="store_true")
    ap.add_argument("--legacy", action="store_true",
                    help="the first dataset (runs 1-3, kernels rebuilt from commit 64ce150)")
    args = ap.parse_args()
    global TRAIN
    runs = RUNS
    if args.legacy:
        old_kernels("64ce150")
        runs, TRAIN = LEGACY_RUNS, LEGACY_TRAIN
    sys.path.insert(1, ROOT)
    from hwmodels import load
    from tilesim.analysis.profiles import get_profile
    from tilesim.sim import simulate
    hw = load("h200_sxm_141gb")
    pts = points(runs)
    kern = {n: build(n, sh, cfg) for n, (sh, cfg, _, _) in pts.items()}
    base = get_profile("numba")

    def run(prof, names, detail=None):
        out = []
        for n in names:
            meas = statistics.median(pts[n][2])
            rep = simulate(kern[n].prim_func, hw, prof)
            if detail is not None:
                detail[n] = rep
            out.append((n, pts[n][2], meas, rep.time_s / meas))
        return out

    prof = base
    if args.fit:
        prof = fit(prof, pts, kern, run, hw, simulate)
    print("simulated (numba profile) vs measured (Numba backend on the H200, median of the runs)")
    print("regs: registers/thread, model estimate / driver; blk: resident blocks per SM, model / driver")
    print(f"{'kernel':40s} {'runs (us)':>16s} {'measured':>9s} {'simulated':>10s} {'sim/meas':>8s} "
          f"{'regs':>8s} {'blk':>6s}  bound")
    for split, names in (("TRAIN", sorted(TRAIN)), ("TEST", sorted(set(pts) - TRAIN))):
        detail: dict = {}
        rows = run(prof, names, detail)
        print(f"-- {split}")
        for n, runs_, m, q in rows:
            rs = "/".join(f"{x * 1e6:.0f}" for x in runs_)
            rep, res = detail[n], pts[n][3] or {}
            er = rep.launches[0].get("registers_per_thread")
            bpc = rep.blocks_per_core
            regs = f"{er:.0f}/{res.get('regs_per_thread')}" if er is not None else f"-/{res.get('regs_per_thread')}"
            blk = f"{bpc}/{res.get('blocks_per_sm')}"
            print(f"{n:40s} {rs:>16s} {m * 1e6:7.1f}us {m * q * 1e6:8.1f}us {q:8.2f} {regs:>8s} {blk:>6s}  "
                  f"{getattr(rep, 'bound', '')}")
        print(f"{split}: {summary(rows)}")


if __name__ == "__main__":
    main()
