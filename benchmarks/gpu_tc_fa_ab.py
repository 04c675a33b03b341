"""Causal flash attention bf16 at issue 14's shape (1, 32, 4096, 128): lowering variants timed by turns against
``F.scaled_dot_product_attention`` in one process (brief AU). Needs the H200 (sm_90a for the ``wgmma`` rows).

Contract
--------
Each variant is (tile config of ``kernels.attention.flash_attention_fwd``, switches): ``wgmma`` (``Q @ K^T`` on
``wgmma``: ``tilesim.cuda_wgmma``), ``reg_a`` (``P @ V`` on register-A ``wgmma``: :mod:`tilesim.backends.cuda.
wgmma_reg_a`), ``fast`` (``ex2.approx.ftz`` and FMA contraction: :mod:`tilesim.backends.cuda.fast_math`),
``minblocks`` (launch bounds: ``runtime.MIN_BLOCKS_PER_SM``). Every variant is compiled with its switches set
(restored afterwards), run once and checked against a float64 SDPA of the same inputs (relative norm error),
then all variants and SDPA are timed in ``--turns`` rotations (each a ``gpu_run.gpu_time`` of 3 x 3 calls); the
row's time is the median over turns, its ratio SDPA's median over it. Variants are compiled in the order listed
until ``--budget`` seconds have passed (the rest are recorded as skipped). Last, ``--edge-check`` compiles the
first ``reg_a`` variant at (2, 4, 1000, 128) (no tile divides the sequence) and checks it against float64.

Output: ``<out>/fa_ab.json`` (rows, errors, environment) and the log on stdout.
Run: ``python3 benchmarks/gpu_tc_fa_ab.py --out $OUT [--turns 7] [--budget 150]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

T64 = dict(block_M=64, block_N=64, threads=128, num_stages=2)
T128 = dict(block_M=128, block_N=64, threads=256, num_stages=2)
WRF = dict(wgmma=True, reg_a=True, fast=True)

#: (name, tile config, switches, predicted ms) in order of priority (the budget may cut the tail)
VARIANTS = [
    ("mma 128x64/t256/s2 (today's best)", T128, {}, (0.66, 0.70)),
    ("mma+fast 128x64/t256/s2", T128, dict(fast=True), (0.58, 0.66)),
    ("wgmma+regA+fast 64x64/t128/s2", T64, WRF, (0.36, 0.55)),
    ("wgmma+regA+fast 64x32/t128/s2", dict(T64, block_N=32), WRF, (0.36, 0.55)),
    ("wgmma+regA 64x64/t128/s2", T64, dict(wgmma=True, reg_a=True), (0.40, 0.60)),
    ("wgmma+regA+fast 128x64/t256/s2", T128, WRF, (0.38, 0.58)),
    ("wgmma+regA+fast 64x32/t128/s3", dict(T64, block_N=32, num_stages=3), WRF, (0.36, 0.55)),
    ("wgmma(S only) 64x64/t128/s2", T64, dict(wgmma=True), (0.55, 0.75)),
    ("mma+fast 64x64/t128/s2", T64, dict(fast=True), (0.60, 0.70)),
    ("wgmma+regA+fast 128x128/t256/s2", dict(T128, block_N=128), WRF, (0.38, 0.62)),
    ("wgmma+regA+fast 64x128/t128/s2", dict(T64, block_N=128), WRF, (0.40, 0.65)),
    ("wgmma+regA+fast 64x64/t128/s3", dict(T64, num_stages=3), WRF, (0.40, 0.60)),
    ("mma+fast 128x64/t256/s2 minblocks2", T128, dict(fast=True, minblocks=2), (0.55, 0.75)),
]
SHAPE = (1, 32, 4096, 128)
RES: dict = {"rows": [], "errors": [], "shape": list(SHAPE)}


def log(*a):
    print(*a, flush=True)


class switches:
    """Set the lowering switches of a variant for the duration of a ``with`` block."""

    def __init__(self, sw: dict):
        self.sw = sw

    def __enter__(self):
        from tilesim.backends.cuda import fast_math as FM
        from tilesim.backends.cuda import runtime as RT
        from tilesim.backends.cuda import wgmma_reg_a as WRA

        self.keep = (FM.FAST_EXP2, FM.FMA_CONTRACT, WRA.REG_A, RT.MIN_BLOCKS_PER_SM)
        fast = bool(self.sw.get("fast"))
        FM.FAST_EXP2 = FM.FMA_CONTRACT = fast
        WRA.REG_A = bool(self.sw.get("reg_a"))
        RT.MIN_BLOCKS_PER_SM = int(self.sw.get("minblocks", 0))
        return self

    def __exit__(self, *exc):
        from tilesim.backends.cuda import fast_math as FM
        from tilesim.backends.cuda import runtime as RT
        from tilesim.backends.cuda import wgmma_reg_a as WRA

        FM.FAST_EXP2, FM.FMA_CONTRACT, WRA.REG_A, RT.MIN_BLOCKS_PER_SM = self.keep
        return False


def build(R, A, shape, cfg, sw, qkv, ref):
    """Compile + run once + check: (run, err, resources, source facts)."""
    import torch

    B, H, S, D = shape
    with switches(sw):
        kern = A.flash_attention_fwd(B, H, S, D, is_causal=True, dtype="bfloat16", **cfg)
        kc, run, (o, _lse) = R.prepared(kern, *qkv, tensor_cores=True, wgmma=bool(sw.get("wgmma")))
        run()
        torch.cuda.synchronize()
    src = kc.get_kernel_source()
    facts = {"wgmma_S": "_wgmma_bf16" in src, "wgmma_regA": "_wgmma_ra_" in src, "ex2ftz": "_ex2ftz" in src,
             "ffma": "_ffma" in src}
    try:
        res = R.resources(kc)
    except Exception as ex:  # noqa: BLE001
        res = repr(ex)[:200]
    return run, R.relnorm(o, ref), res, facts


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--turns", type=int, default=7)
    ap.add_argument("--budget", type=float, default=150.0)
    ap.add_argument("--edge-check", action="store_true")
    a = ap.parse_args(argv)
    import torch
    import torch.nn.functional as F

    from benchmarks import gpu_run as R
    from kernels import attention as A

    t0 = time.time()
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "fa_ab.json")

    def save():
        with open(path, "w") as f:
            json.dump(RES, f, indent=1, default=str)

    RES["env"] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    torch.manual_seed(0)
    B, H, S, D = SHAPE
    q, k_, v_ = (torch.randn(B, S, H, D, device="cuda").to(torch.bfloat16) for _ in range(3))
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k_, v_))
    sdpa = lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=True)  # noqa: E731
    ref = F.scaled_dot_product_attention(qt.double(), kt.double(), vt.double(), is_causal=True).transpose(1, 2)
    RES["sdpa_err"] = R.relnorm(sdpa().transpose(1, 2), ref)
    RES["sdpa_first_s"] = R.gpu_time(sdpa, reps=3, rounds=3)[0]
    built = []
    for name, cfg, sw, pred in VARIANTS:
        row = {"name": name, "config": cfg, "switches": sw, "predicted_ms": list(pred)}
        if time.time() - t0 > a.budget:
            row["skipped"] = "compile budget spent"
            RES["rows"].append(row)
            continue
        tc = time.time()
        try:
            run, err, res, facts = build(R, A, SHAPE, cfg, sw, (q, k_, v_), ref)
            row.update(rel_err=err, resources=res, source=facts, compile_s=time.time() - tc, times=[])
            row["first_time_s"] = R.gpu_time(run, reps=3, rounds=3)[0]  # kept if a later variant poisons the context
            built.append((row, run))
            log(f"built {name}: err {err:.2e} first {row['first_time_s'] * 1e3:.3f} ms {facts} {res} "
                f"({time.time() - tc:.0f} s)")
        except Exception as ex:  # noqa: BLE001
            row["error"] = f"{type(ex).__name__}: {ex}"[:1500]
            RES["errors"].append(f"{name}: " + traceback.format_exc()[-1500:])
            log(f"FAILED {name}: {row['error'][:400]}")
        RES["rows"].append(row)
        save()
    sd = []
    try:
        for _turn in range(a.turns):
            sd.append(R.gpu_time(sdpa, reps=3, rounds=3)[0])
            for row, run in built:
                row["times"].append(R.gpu_time(run, reps=3, rounds=3)[0])
    except Exception:  # noqa: BLE001
        RES["errors"].append("timing turns: " + traceback.format_exc()[-1500:])
        log("timing turns failed", traceback.format_exc()[-800:])
        built = [(row, run) for row, run in built if row["times"]]
    RES["sdpa_times"] = sd = sd or [RES["sdpa_first_s"]]
    med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
    RES["sdpa_median_s"] = t_ref = med(sd)
    for row, _run in built:
        t = med(row["times"])
        row.update(median_s=t, ratio_vs_sdpa=t_ref / t)
        lo, hi = row["predicted_ms"]
        log(f"{row['name']:<40} {t * 1e3:7.3f} ms  {t_ref / t:.3f}x SDPA ({t_ref * 1e3:.3f} ms)  err {row['rel_err']:.2e}"
            f"  predicted {lo:.2f}-{hi:.2f} ms")
    save()
    if a.edge_check:
        first = next(((n, c, s) for n, c, s, _p in VARIANTS if s.get("reg_a")), None)
        if first is not None:
            try:
                shp = (2, 4, 1000, 128)
                q2, k2, v2 = (torch.randn(shp[0], shp[2], shp[1], shp[3], device="cuda").to(torch.bfloat16)
                              for _ in range(3))
                r2 = F.scaled_dot_product_attention(*(x.transpose(1, 2).double() for x in (q2, k2, v2)),
                                                    is_causal=True).transpose(1, 2)
                _run, err, _res, facts = build(R, A, shp, first[1], first[2], (q2, k2, v2), r2)
                RES["edge_check"] = {"name": first[0], "shape": list(shp), "rel_err": err, "source": facts}
                log(f"edge check {first[0]} at {shp}: err {err:.2e} {facts}")
            except Exception:  # noqa: BLE001
                RES["errors"].append("edge check: " + traceback.format_exc()[-1500:])
                log("edge check failed", traceback.format_exc()[-800:])
    RES["total_s"] = time.time() - t0
    save()


if __name__ == "__main__":
    main()
