"""``numba_tc`` against the H200 rows of the eleventh session's lowering (2026-12-02, issue 14 item 6): the drift table.

Contract
--------
* :data:`ROWS` names every row this session timed of the Numba backend's tensor-core lowering after AQ's integer forms
  (``emitter.INT_FORMS``) and AP's ``wgmma`` K loop (``tilesim.cuda_wgmma``), with the file it comes from and the
  lowering it ran: ``mma`` (the default ``mma.sync`` path, new integer forms), ``mma-old`` (the same kernels with
  ``INT_FORMS=False``: yesterday's code, which §6c's fit describes), ``wgmma`` (AP's in-flight K loop, the switch on),
  ``wgmma-am`` (AM's first ``wgmma`` loop, 13:00 UTC, superseded). Measured seconds are read from the JSON files
  (``reports/measurements/``), never typed in.
* ``split`` of each row: ``train`` (today's lowering: the rows the profile may be fitted on, fixed before fitting,
  docs/simulator.md §6d) or ``ref`` (an older lowering: shown, never fitted).
* ``simulate(profile)``: each row's library kernel rebuilt (``numba_tc_profile_check.build``) and simulated on
  ``h200_sxm_141gb``; ``wgmma`` rows with the profile's ``wgmma`` mode when it has one (``numba_tc_wgmma``), else
  ``numba_tc`` as it is (what ``tilesim simulate`` gave before this change).

    python benchmarks/numba_tc_drift.py [--profile numba_tc] [--json OUT] [--fit]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

F_TC = "numba_h200_20261202T152916Z.json"
F_FINAL = "numba_h200_20261202T1556Z_final.json"
F_AP = "numba_h200_20261202T152617Z.json"
F_AM = "numba_h200_20261202T130008Z.json"

GEMM4K = [4096, 4096, 4096]
FA2K = [2, 2048, 16, 128]
FA4K = [1, 4096, 32, 128]


def _c(bm, bn, bk, st, th):
    return dict(block_M=bm, block_N=bn, block_K=bk, num_stages=st, threads=th)


def _fa(bm, bn, th, st):
    return dict(block_M=bm, block_N=bn, threads=th, num_stages=st)


#: (label, kind, shape, config, lowering, split, file, selector) — the selector finds the measured row in the file
ROWS = [
    ("bf16 GEMM 128x128x32/128/s2 sync", "gemm_bf16", GEMM4K, _c(128, 128, 32, 2, 128), "mma-sync", "train", F_TC,
     ("bench", "gemm_bf16_4096_tc 128x128x32/128/s2/sync")),
    ("bf16 GEMM 128x128x32/128/s3", "gemm_bf16", GEMM4K, _c(128, 128, 32, 3, 128), "mma", "train", F_TC,
     ("bench", "gemm_bf16_4096_tc 128x128x32/128/s3")),
    ("bf16 GEMM 128x128x32/128/s4 Square", "gemm_bf16", GEMM4K, _c(128, 128, 32, 4, 128), "mma", "train", F_TC,
     ("ab", "Square", True)),
    ("bf16 GEMM 128x128x32/128/s4 Square (final run)", "gemm_bf16", GEMM4K, _c(128, 128, 32, 4, 128), "mma", "train",
     F_FINAL, ("final", "gemm_bf16_4096_mma_sync 128x128x32/128/s4")),
    ("fp8 GEMM 128x128x64/256/s3", "gemm_fp8", GEMM4K, _c(128, 128, 64, 3, 256), "mma", "train", F_TC,
     ("bench", "gemm_fp8_e4m3_4096_tc 128x128x64/256/s3")),
    ("fp8 GEMM 128x128x128/256/s3", "gemm_fp8", GEMM4K, _c(128, 128, 128, 3, 256), "mma", "train", F_TC,
     ("bench", "gemm_fp8_e4m3_4096_tc 128x128x128/256/s3")),
    ("causal FA (2,2048,16,128) 64x64/t128/s1", "flash_attn", FA2K, _fa(64, 64, 128, 1), "mma", "train", F_TC,
     ("bench", "flash_attn_fwd_bf16_causal_tc 64x64/t128/s1")),
    ("causal FA (2,2048,16,128) 64x64/t128/s2", "flash_attn", FA2K, _fa(64, 64, 128, 2), "mma", "train", F_TC,
     ("ab", "(2, 16, 2048, 128)", True)),
    ("causal FA (1,4096,32,128) 64x64/t128/s2", "flash_attn", FA4K, _fa(64, 64, 128, 2), "mma", "train", F_TC,
     ("ab", "(1, 32, 4096, 128)", True)),
    ("causal FA (1,4096,32,128) 64x64/t128/s2 (final sweep)", "flash_attn", FA4K, _fa(64, 64, 128, 2), "mma", "train",
     F_FINAL, ("final", "sweep flash_attn_fwd_bf16_causal_tc 64x64/t128/s2 S4096H32B1")),
    ("causal FA (1,4096,32,128) 64x32/t128/s2", "flash_attn", FA4K, _fa(64, 32, 128, 2), "mma", "train", F_FINAL,
     ("final", "sweep flash_attn_fwd_bf16_causal_tc 64x32/t128/s2 S4096H32B1")),
    ("causal FA (1,4096,32,128) 64x32/t128/s3", "flash_attn", FA4K, _fa(64, 32, 128, 3), "mma", "train", F_FINAL,
     ("final", "sweep flash_attn_fwd_bf16_causal_tc 64x32/t128/s3 S4096H32B1")),
    ("causal FA (1,4096,32,128) 128x64/t256/s2", "flash_attn", FA4K, _fa(128, 64, 256, 2), "mma", "train", F_FINAL,
     ("final", "sweep flash_attn_fwd_bf16_causal_tc 128x64/t256/s2 S4096H32B1")),
    # yesterday's integer forms, same process (INT_FORMS=False): what §6c's fit describes
    ("bf16 GEMM 128x128x32/128/s4 Square, old forms", "gemm_bf16", GEMM4K, _c(128, 128, 32, 4, 128), "mma-old", "ref",
     F_TC, ("ab", "Square", False)),
    ("causal FA (2,2048,16,128) 64x64/t128/s2, old forms", "flash_attn", FA2K, _fa(64, 64, 128, 2), "mma-old", "ref",
     F_TC, ("ab", "(2, 16, 2048, 128)", False)),
    ("causal FA (1,4096,32,128) 64x64/t128/s2, old forms", "flash_attn", FA4K, _fa(64, 64, 128, 2), "mma-old", "ref",
     F_TC, ("ab", "(1, 32, 4096, 128)", False)),
    # AP's wgmma K loop (one group in flight), the switch on
    ("wgmma bf16 GEMM 128x128x64/128/s3 inflight (final)", "gemm_bf16", GEMM4K, _c(128, 128, 64, 3, 128), "wgmma",
     "train", F_FINAL, ("final", "gemm_bf16_4096_wgmma 128x128x64/128/s3/inflight")),
    ("wgmma bf16 GEMM 128x128x64/128/s3 inflight", "gemm_bf16", GEMM4K, _c(128, 128, 64, 3, 128), "wgmma", "train",
     F_AP, ("bench", "gemm_bf16_4096_wgmma 128x128x64/128/s3/inflight")),
    ("wgmma bf16 GEMM 128x128x64/256/s4 inflight", "gemm_bf16", GEMM4K, _c(128, 128, 64, 4, 256), "wgmma", "train",
     F_AP, ("bench", "gemm_bf16_4096_wgmma 128x128x64/256/s4/inflight")),
    ("wgmma bf16 GEMM 128x128x32/128/s5 inflight", "gemm_bf16", GEMM4K, _c(128, 128, 32, 5, 128), "wgmma", "train",
     F_AP, ("bench", "gemm_bf16_4096_wgmma 128x128x32/128/s5/inflight")),
    ("wgmma fp8 GEMM 128x128x128/128/s3 inflight (final)", "gemm_fp8", GEMM4K, _c(128, 128, 128, 3, 128), "wgmma",
     "train", F_FINAL, ("final", "gemm_fp8_e4m3_4096_wgmma 128x128x128/128/s3/inflight")),
    ("wgmma fp8 GEMM 128x128x128/256/s4 inflight (final)", "gemm_fp8", GEMM4K, _c(128, 128, 128, 4, 256), "wgmma",
     "train", F_FINAL, ("final", "gemm_fp8_e4m3_4096_wgmma 128x128x128/256/s4/inflight")),
    # AM's first wgmma loop (wait_group 0 after each gemm, 64-bit chunk addresses): superseded by AP's
    ("wgmma bf16 GEMM 128x128x64/128/s3 (AM, 13:00)", "gemm_bf16", GEMM4K, _c(128, 128, 64, 3, 128), "wgmma-am", "ref",
     F_AM, ("bench", "gemm_bf16_4096_wgmma 128x128x64/128/s3")),
    ("wgmma bf16 GEMM 128x128x64/256/s4 (AM, 13:00)", "gemm_bf16", GEMM4K, _c(128, 128, 64, 4, 256), "wgmma-am", "ref",
     F_AM, ("bench", "gemm_bf16_4096_wgmma 128x128x64/256/s4")),
    ("wgmma fp8 GEMM 128x128x128/128/s3 (AM, 13:00)", "gemm_fp8", GEMM4K, _c(128, 128, 128, 3, 128), "wgmma-am", "ref",
     F_AM, ("bench", "gemm_fp8_e4m3_4096_wgmma 128x128x128/128/s3")),
    ("wgmma fp8 GEMM 128x128x128/256/s4 (AM, 13:00)", "gemm_fp8", GEMM4K, _c(128, 128, 128, 4, 256), "wgmma-am", "ref",
     F_AM, ("bench", "gemm_fp8_e4m3_4096_wgmma 128x128x128/256/s4")),
]


def measured(fname: str, sel) -> float:
    """Median seconds of the selected row (the mean of the A/B's repeats for ``ab`` rows)."""
    d = json.load(open(os.path.join(ROOT, "reports", "measurements", fname)))
    if sel[0] == "bench":
        return next(r["ours_median_s"] for r in d["bench"] if r["name"] == sel[1])
    if sel[0] == "final":
        return next(r["ours_ms"] for r in d["bench"] if r["name"] == sel[1]) * 1e-3
    hits = [r["median_s"] for r in d["int_forms_ab"] if sel[1] in r["name"] and r["int_forms"] is sel[2]]
    if not hits:
        raise KeyError(sel)
    return statistics.mean(hits)


def kernel(kind, shape, cfg):
    from benchmarks.numba_tc_profile_check import build
    return build(kind, shape, cfg)


def simulate_row(row, profile: str):
    """(simulated seconds, registers, blocks per SM) of one row under ``profile`` (a name)."""
    import dataclasses

    from tilesim.analysis.profiles import get_profile
    from tilesim.sim import simulate
    label, kind, shape, cfg, low, _split, _f, _sel = row
    prof = get_profile(profile)
    if low.startswith("wgmma") and "numba_tc_wgmma" in _profiles() and profile == "numba_tc":
        prof = get_profile("numba_tc_wgmma")
    if low == "mma-sync":
        prof = dataclasses.replace(prof, async_copy=False)
    rep = simulate(kernel(kind, shape, cfg).prim_func, "h200_sxm_141gb", prof)
    return rep.time_s, rep.launches[0].get("registers_per_thread"), rep.blocks_per_core


def fit(grid=None) -> float:
    """``mma_matrix_fraction`` minimising the summed |log(sim/meas)| of the ``mma`` TRAIN rows (nothing else fitted:
    the ``wgmma`` mode has no fitted value); prints the loss per grid value."""
    import dataclasses
    import math

    from tilesim.analysis.profiles import get_profile
    from tilesim.sim import simulate
    rows = [r for r in ROWS if r[5] == "train" and r[4] in ("mma", "mma-sync")]
    ks = [(kernel(r[1], r[2], r[3]), measured(r[6], r[7]), r[4]) for r in rows]
    base = get_profile("numba_tc")
    grid = grid or [x / 40 for x in range(12, 41)]
    best = None
    for f in grid:
        loss = 0.0
        for k, meas, low in ks:
            p = dataclasses.replace(base, mma_matrix_fraction=f, async_copy=low != "mma-sync")
            loss += abs(math.log(simulate(k.prim_func, "h200_sxm_141gb", p).time_s / meas))
        print(f"mma_matrix_fraction={f:.3f}: summed |log(sim/meas)| {loss:.3f}")
        if best is None or loss < best[1]:
            best = (f, loss)
    print(f"fitted on the mma TRAIN rows ({len(ks)}): mma_matrix_fraction={best[0]} (loss {best[1]:.3f})")
    return best[0]


def _profiles():
    from tilesim.analysis.profiles import PROFILES
    return PROFILES


def table(profile: str = "numba_tc", splits=("train", "ref")) -> list[dict]:
    out = []
    for row in ROWS:
        if row[5] not in splits:
            continue
        meas = measured(row[6], row[7])
        sim, regs, blk = simulate_row(row, profile)
        out.append(dict(label=row[0], lowering=row[4], split=row[5], file=row[6], measured_s=meas, simulated_s=sim,
                        ratio=sim / meas, regs=regs, blocks=blk))
    return out


def summary(rows, lowering_prefix: str, split: str = "train") -> str:
    errs = [abs(r["ratio"] - 1) for r in rows if r["lowering"].startswith(lowering_prefix) and r["split"] == split]
    if not errs:
        return f"{lowering_prefix}/{split}: no rows"
    return (f"{lowering_prefix}/{split}: {len(errs)} rows, median |error| {100 * statistics.median(errs):.1f}%, "
            f"worst {100 * max(errs):.1f}%")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="numba_tc")
    ap.add_argument("--json")
    ap.add_argument("--fit", action="store_true", help="fit mma_matrix_fraction on the mma TRAIN rows")
    a = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    if a.fit:
        fit()
        return 0
    rows = table(a.profile)
    print(f"{'row':58s} {'lowering':8s} {'split':5s} {'measured':>9s} {'simulated':>9s} {'sim/meas':>8s} regs blk")
    for r in rows:
        print(f"{r['label']:58s} {r['lowering']:8s} {r['split']:5s} {r['measured_s'] * 1e3:7.3f}ms "
              f"{r['simulated_s'] * 1e3:7.3f}ms {r['ratio']:8.2f} {r['regs']!s:>4s} {r['blocks']}")
    for pre, sp in (("mma", "train"), ("mma-old", "ref"), ("wgmma", "train"), ("wgmma-am", "ref")):
        print(summary(rows, pre, sp))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(profile=a.profile, rows=rows), f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
