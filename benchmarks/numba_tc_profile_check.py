"""The simulator's ``numba_tc`` profile against the TRAIN rows of its split (CPU only); ``--fit`` refits it on them.

Contract
--------
* TRAIN is ``benchmarks/numba_tc_holdout.TRAIN_FILES`` (rows of ``reports/measurements/numba_h200_*.json``, fixed
  2026-12-02 before fitting; the HELD-OUT set is that module's ``CONFIGS``). Each row's kernel is rebuilt from the
  library with the row's configuration and simulated on ``h200_sxm_141gb`` with ``numba_tc`` (rows timed with
  ``cp.async`` off — names ending ``/sync`` — with the profile's ``async_copy`` off). Prints per row: measured,
  simulated, ``sim/meas``, the model's registers per thread and blocks per SM beside the driver's; then the median
  |error| and the worst row.
* ``--fit``: first the register overhead of mma.sync gemms (``mma_register_overhead_per_thread``, 0..120 by 4) to the driver's register
  counts of the TRAIN tensor-core rows (median |difference|), then ``warp_cpi`` (1.0..12.0 by 0.25) to the TRAIN
  times (mean |log(sim/meas)|); prints the values to put in ``tilesim/analysis/profiles.py`` (``TC_WARP_CPI``,
  ``TC_REGISTER_OVERHEAD``). Nothing else is fitted: every other ``numba_tc`` value is a SASS count or ``numba``'s.

    python benchmarks/numba_tc_profile_check.py [--fit]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import sys
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def build(name, shape, cfg):
    """The library kernel of a TRAIN row (names as ``benchmarks/gpu_run.py`` writes them)."""
    from kernels import attention as A
    from kernels import fp8_cast, norms
    from kernels import gemm as G
    from kernels.fp8_gemm import fp8_matmul
    cfg = dict(cfg)
    if name.startswith("gemm_bf16"):
        return G.matmul(*shape, dtype="bfloat16", out_dtype="float32", **cfg)
    if name.startswith("gemm_fp8"):
        return fp8_matmul(*shape, **cfg)
    if name.startswith("flash_attn"):
        B, S, H, D = shape
        return A.flash_attention_fwd(B, H, S, D, is_causal=True, dtype="bfloat16", **cfg)
    if name.startswith("rmsnorm"):
        return norms.rms_norm(*shape, dtype="bfloat16", eps=1e-6, **cfg)
    if name.startswith("softmax_bf16"):
        return norms.softmax(*shape, dtype="bfloat16", **cfg)
    if name.startswith("fp8_cast_per_token"):
        return fp8_cast.per_token_cast(*shape, group_size=128, in_dtype="bfloat16", **cfg)
    if name.startswith("softmax_plain"):
        from tests.core_kernels import softmax_plain
        return softmax_plain(*shape, **cfg)
    raise KeyError(name)


def train_rows():
    """``[(file:name, kernel, measured s, driver resources, synchronous copies)]`` of the TRAIN split."""
    from benchmarks.numba_tc_holdout import TRAIN_FILES
    out = []
    for f, names in TRAIN_FILES.items():
        for r in json.load(open(os.path.join(ROOT, "reports", "measurements", f)))["bench"]:
            if names is not None and r["name"] not in names:
                continue
            out.append((f"{f}:{r['name']}", build(r["name"], r["shape"], r["config"]), r["ours_median_s"],
                        (r.get("resources") or [{}])[0], r["name"].endswith("/sync")))
    return out


def holdout1_rows():
    """The first HELD-OUT set, measured on the H200 (2026-12-02 12:22 UTC): TRAIN rows of the second fit."""
    from benchmarks import numba_tc_holdout as H
    meas = {r["name"]: r for r in json.load(open(os.path.join(ROOT, "reports", "measurements", HOLDOUT1)))["bench"]}
    return [(f"{HOLDOUT1}:{c['name']}", H.build(c), meas[c["name"]]["ours_median_s"], meas[c["name"]]["resources"][0],
             False) for c in H.CONFIGS]


HOLDOUT1 = "numba_tc_holdout_h200_20261202T1225Z.json"


#: the lowering every fit row was timed on (before main's cp.async fast path for static in-bounds tiles and before
#: AQ's integer forms: the SASS counts of docs/simulator.md §6c, no HMMA turns)
OLD_LOWERING = dict(ldsm_extra_instr=4.0, loop_iter_instr=90.0, mma_matrix_fraction=0.0,
                    cp_async_inside_chunk_instr=0.0, cp_async_tile_check_instr=0.0)


def simulate_rows(rows, prof):
    from tilesim.sim import simulate
    prof = dataclasses.replace(prof, **OLD_LOWERING)
    out = []
    for name, k, meas, res, sync in rows:
        p = dataclasses.replace(prof, async_copy=False) if sync else prof
        rep = simulate(k.prim_func, "h200_sxm_141gb", p)
        out.append((name, meas, rep, res))
    return out


def report(sims, title="TRAIN"):
    errs = []
    print(f"{'row':75s} {'measured':>10s} {'simulated':>10s} {'sim/meas':>8s} {'regs m/d':>9s} {'blk m/d':>7s}")
    for name, meas, rep, res in sims:
        q = rep.time_s / meas
        errs.append(abs(q - 1))
        regs = rep.launches[0].get("registers_per_thread")
        print(f"{name:75s} {meas * 1e3:8.4f}ms {rep.time_s * 1e3:8.4f}ms {q:8.2f} "
              f"{regs:4.0f}/{res.get('regs_per_thread')!s:>4s} {rep.blocks_per_core}/{res.get('blocks_per_sm')}")
    print(f"{title}: {len(errs)} rows, median |error| {100 * statistics.median(errs):.1f}%, "
          f"worst {100 * max(errs):.1f}%")
    return errs


def fit(rows, prof):
    tc = [r for r in rows if "_tc" in r[0] or (HOLDOUT1 in r[0] and r[3].get("regs_per_thread", 0) > 100)]

    def reg_err(ov):
        p = dataclasses.replace(prof, mma_register_overhead_per_thread=ov)
        return statistics.median(abs(rep.launches[0]["registers_per_thread"] - min(255, res["regs_per_thread"]))
                                 for _, _, rep, res in simulate_rows(tc, p))
    ov = min(range(0, 121, 4), key=lambda v: (reg_err(v), v))
    prof = dataclasses.replace(prof, mma_register_overhead_per_thread=ov)

    def loss(cpi, issue):
        p = dataclasses.replace(prof, warp_cpi=cpi, warp_issue_cycles=issue)
        return sum(abs(math.log(rep.time_s / meas)) for _, meas, rep, _ in simulate_rows(rows, p))
    if prof.warp_issue_cycles:  # the second fit: per-warp chain and per-instruction scheduler time
        grid = [(c0 / 4, c1 / 4) for c0 in range(4, 33) for c1 in range(1, 13) if c1 <= c0]
    else:
        grid = [(c0 / 4, 0.0) for c0 in range(4, 49)]
    cpi, issue = min(grid, key=lambda g: loss(*g))
    print(f"fitted on TRAIN: mma_register_overhead_per_thread={ov} (median |regs - driver| {reg_err(ov):.0f}), "
          f"warp_cpi={cpi}, warp_issue_cycles={issue}")
    return dataclasses.replace(prof, warp_cpi=cpi, warp_issue_cycles=issue)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", action="store_true")
    ap.add_argument("--train", default="2", choices=("1", "2"),
                    help="1: the first fit's TRAIN (run 9 + 5 memory-bound rows) with the first model (warp_cpi only); "
                         "2 (default): TRAIN + the first HELD-OUT set, the second model (docs/simulator.md §6c)")
    a = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    from tilesim.analysis.profiles import get_profile
    prof = get_profile("numba_tc")
    rows = train_rows()
    if a.train == "1":
        prof = dataclasses.replace(prof, warp_cpi=8.0, warp_issue_cycles=0.0, mma_phase_locked=False,
                                   mma_register_overhead_per_thread=28)
    else:
        rows += holdout1_rows()
    if a.fit:
        prof = fit(rows, prof)
    report(simulate_rows(rows, prof), "TRAIN" if a.train == "1" else "TRAIN (run 9 + memory rows + HELD-OUT set 1)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
