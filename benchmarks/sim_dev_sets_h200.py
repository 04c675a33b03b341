"""The sealed sets of issue 15 that have been unsealed (now development data) against the current model.

Contract
--------
* For each of ``fresh``, ``third``, ``fourth``, ``fifth``, ``sixth``, ``seventh`` (``benchmarks/tilelang_h200_fresh_configs.py``): builds
  every configuration with tilesim, simulates it on ``h200_sxm_141gb`` with the ``tensorcore`` profile (fields
  overridden with ``--set FIELD=VALUE``, a what-if) and compares with that set's committed H200 measurements
  (``MEASURED`` below; the first file with a timed record of an id wins, as ``--compare`` does).
* Prints per set the median / p90 / worst of ``|predicted / measured - 1|`` and, with ``--kinds``, per kind;
  ``--rows`` prints every point; ``--json PATH`` writes rows and summaries; ``--calibration FIT.json`` simulates with
  the hardware values of a ``sim_holdout_h200.py --fit`` output instead of the data file's. No GPU.

Run: ``PYTHONPATH=. python benchmarks/sim_dev_sets_h200.py [--set chain_latency=True] [--kinds] [--rows]``
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MEAS = ROOT / "reports" / "measurements"

#: the measurement files of each unsealed set (docs/simulator.md §3e–§3k)
MEASURED = {
    "fresh": ["tilelang_h200_fresh_20261202T0154Z.json", "tilelang_h200_fresh_rest_20261202T0322Z.json"],
    "third": ["tilelang_h200_third_20261202T0323Z.json", "tilelang_h200_third_rest_20261202T0440Z.json"],
    "fourth": ["tilelang_h200_fourth_20261202T0545Z.json"],
    "fifth": ["tilelang_h200_fifth_20261202T0830Z.json"],
    "sixth": ["tilelang_h200_sixth_20261202T1506Z.json"],
    "seventh": ["tilelang_h200_seventh_20261202T1805Z.json"],
}


def _validation():
    spec = importlib.util.spec_from_file_location("bench_tilelang_h200_validation",
                                                  ROOT / "benchmarks" / "tilelang_h200_validation.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def profile_with(sets: list[str]):
    """The ``tensorcore`` profile with ``FIELD=VALUE`` overrides (bools: true/false)."""
    from tilesim.analysis import get_profile
    prof = get_profile("tensorcore")

    def conv(k, v):
        if not hasattr(prof, k):
            raise SystemExit(f"--set {k}: the profile has no such field")
        cur = getattr(prof, k)
        if isinstance(cur, bool):
            return v.lower() in ("1", "true", "yes")
        return type(cur)(v)
    return dataclasses.replace(prof, **{k: conv(k, v) for k, v in (x.split("=", 1) for x in sets)})


def evaluate(names, prof, hw="h200_sxm_141gb") -> dict:
    """{set: compare-result} with predictions from ``prof`` (a ``LoweringProfile``) on ``hw`` (a name or a model)."""
    import time

    from tilesim.sim import simulate
    v = _validation()
    th, _ = v._helpers()
    out = {}
    for name in names:
        preds = []
        for cfg in v.config_set(name):
            kern, hints, _ = v.build(cfg, "tilesim", th)
            t0 = time.perf_counter()
            rep = simulate(kern.prim_func, hw, prof, name=cfg["id"], **hints)
            preds.append({"id": cfg["id"], "kind": cfg["kind"], "predicted_s": rep.time_s,
                          "predicted_registers": max((x.get("registers_at_launch") or x["registers_per_thread"] or 0)
                                                     for x in rep.launches) or None,
                          "sim_wall_s": time.perf_counter() - t0})
        tmp = Path("/tmp") / f"sim_dev_{name}_pred.json"
        tmp.write_text(json.dumps({"results": preds}))
        out[name] = v.compare([MEAS / f for f in MEASURED[name]], [tmp])
        out[name]["max_sim_wall_s"] = max(p["sim_wall_s"] for p in preds)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="*", default=list(MEASURED), choices=list(MEASURED))
    ap.add_argument("--set", nargs="*", default=[], metavar="FIELD=VALUE", help="override tensorcore profile fields")
    ap.add_argument("--kinds", action="store_true", help="per-kind summaries")
    ap.add_argument("--rows", action="store_true", help="every point")
    ap.add_argument("--json")
    ap.add_argument("--calibration", metavar="JSON", help="hardware values of a sim_holdout_h200.py --fit output")
    a = ap.parse_args(argv)
    hw = "h200_sxm_141gb"
    if a.calibration:
        import hwmodels
        from tilesim.sim.validation import apply_overrides
        hw = apply_overrides(hwmodels.load(hw), json.loads(Path(a.calibration).read_text())["calibration"])
    res = evaluate(a.sets, profile_with(a.set), hw)
    for name, r in res.items():
        if a.rows:
            for row in sorted(r["rows"], key=lambda x: x["ratio"]):
                print(f"  {row['id']:46s} {row['kind']:17s} {row['measured_s'] * 1e6:9.1f} {row['predicted_s'] * 1e6:9.1f} "
                      f"{row['ratio']:6.2f} {row['registers'] or '-':>4} {row['predicted_registers'] or '-':>4}")
        if a.kinds:
            for k, s in r["per_kind"].items():
                print(f"  {name:6s} {k:17s} {s['points']:3d}  median {s['median_error'] * 100:5.1f}%  "
                      f"p90 {s['p90_error'] * 100:5.1f}%  worst {s['worst_error'] * 100:5.1f}%")
        o = r["overall"]
        print(f"{name:6s}: {o['points']} points, median {o['median_error'] * 100:.1f}%, p90 {o['p90_error'] * 100:.1f}%, "
              f"worst {o['worst_error'] * 100:.1f}%, max sim {r['max_sim_wall_s']:.2f} s")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
