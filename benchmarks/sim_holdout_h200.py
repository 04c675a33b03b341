"""Held-out error of the ``tensorcore`` simulator on every real-TileLang H200 point we have.

Contract
--------
* Reads a split file (``reports/measurements/sim_split_h200_<date>.json``: ``points`` with ``id``,
  ``source`` (a measurements file name), ``kind``, ``split`` and, for registry records, ``kernel`` (the record's kernel name when ``id`` differs) ``"train"``/``"test"``), declared before
  any fitting, and the measurement files it names (``tilelang_h200_*.json``: the kernels of
  ``benchmarks/tilelang_h200.py``; ``registry_tilelang_h200_*.json``: library kernels at their record's
  ``params``; ``tilelang_h200_validation_*.json``: the configurations of
  ``benchmarks/tilelang_h200_validation.py``, a record counted when ``median_ms`` is set and ``mismatch`` null).
* Simulates each point on ``h200_sxm_141gb`` (the data file as it is now, calibration included) with the
  ``tensorcore`` profile and prints, per split, the number of points and kinds, the median and p90 of
  ``|simulated / measured - 1|`` and the points the simulator refused (counted as errors of 100%:
  real TileLang ran them). ``--json PATH`` writes the rows.
* ``--split-file`` picks another split; ``--only test`` restricts the table.

* ``--fit OUT.json`` runs ``tilesim.sim.validation.calibrate`` on the ``train`` points only and writes
  the fitted hardware-model values; ``--calibration OUT.json`` evaluates with them (the data file's
  values otherwise).

Run: ``python benchmarks/sim_holdout_h200.py [--json out.json]`` (no GPU needed).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MEAS = ROOT / "reports" / "measurements"
DEFAULT_SPLIT = MEAS / "sim_split_h200_2026-12-02.json"


def _tilelang_h200():
    spec = importlib.util.spec_from_file_location("bench_tilelang_h200", ROOT / "benchmarks" / "tilelang_h200.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _validation():
    spec = importlib.util.spec_from_file_location("bench_tilelang_h200_validation",
                                                  ROOT / "benchmarks" / "tilelang_h200_validation.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _records(name: str) -> dict:
    """Timed, checked records by id: ``correct`` true, or (validation set) ``mismatch`` null."""
    doc = json.loads((MEAS / name).read_text())
    checked = (lambda r: r.get("mismatch") is None) if doc.get("kind") == "tilelang_h200_validation" else \
        (lambda r: r.get("correct", False))
    out = {}
    for r in doc["results"]:
        if r.get("median_ms") is None or not checked(r):
            continue
        out[r.get("id") or r["kernel"]] = r
    return out


def build_point(point: dict, rec: dict, th):
    """(kernel, simulator keywords) of one point, built by tilesim from the measured source."""
    if point["source"].startswith("tilelang_h200_validation"):
        v = _validation()
        cfg = next(c for c in v.CONFIGS if c["id"] == point["id"])
        kern, hints, _ = v.build(cfg, "tilesim", th)
        return kern, hints
    if point["source"].startswith("registry_"):
        import kernels.registry as reg
        spec = reg.get(point.get("kernel", point["id"]))
        params = spec.params({}, **rec["params"])
        return spec.build(**params), (spec.data_hints(**params) if spec.data_hints else {})
    cfg = next(c for c in th.ALL_CONFIGS if c["id"] == point["id"])
    return th.build(cfg, "tilesim"), th.sim_shapes(cfg)


def measurements(split_file=DEFAULT_SPLIT) -> list:
    """Every point as a ``tilesim.sim.validation.Measurement`` (for ``calibrate``)."""
    from tilesim.sim.validation import Measurement
    th = _tilelang_h200()
    cache: dict = {}
    out = []
    for p in json.loads(Path(split_file).read_text())["points"]:
        rec = cache.setdefault(p["source"], _records(p["source"]))[p.get("kernel", p["id"])]
        kern, kw = build_point(p, rec, th)
        out.append(Measurement(id=p["id"], family=p["kind"], split=p["split"], kernel=kern, shapes=kw,
                               measured_s=rec["median_ms"] * 1e-3))
    return out


def simulate_point(point: dict, rec: dict, hw, th, profile="tensorcore"):
    """(simulated seconds or None, refusal text or None, registers per thread or None)."""
    from tilesim.errors import KernelError
    from tilesim.sim import simulate
    try:
        kern, hints = build_point(point, rec, th)
        rep = simulate(kern.prim_func, hw, profile, name=point["id"], **hints)
        return rep.time_s, None, max((x.get("registers_at_launch") or x["registers_per_thread"] or 0) for x in rep.launches) or None
    except KernelError as exc:
        return None, str(exc).splitlines()[0][:200], None


def evaluate(split_file=DEFAULT_SPLIT, hw="h200_sxm_141gb", profile="tensorcore", only=None,
             overrides=None) -> list[dict]:
    import hwmodels
    from tilesim.sim.validation import apply_overrides
    th = _tilelang_h200()
    model = apply_overrides(hwmodels.load(hw), overrides or {})
    split = json.loads(Path(split_file).read_text())
    cache: dict = {}
    rows = []
    for p in split["points"]:
        if only and p["split"] != only:
            continue
        recs = cache.setdefault(p["source"], _records(p["source"]))
        rec = recs[p.get("kernel", p["id"])]
        t0 = time.perf_counter()
        sim, refused, regs = simulate_point(p, rec, model, th, profile)
        meas = rec["median_ms"] * 1e-3
        ratio = sim / meas if sim else None
        rows.append({**p, "measured_s": meas, "simulated_s": sim, "ratio": ratio,
                     "error": abs(ratio - 1.0) if ratio else 1.0, "refused": refused, "registers": regs,
                     "sim_wall_s": time.perf_counter() - t0})
    return rows


def summarise(rows, split, source_prefix=""):
    sel = [r for r in rows if r["split"] == split and r["source"].startswith(source_prefix)]
    e = np.array([r["error"] for r in sel])
    return {"split": split, "points": len(sel), "kinds": len({r["kind"] for r in sel}),
            "median_error": float(np.median(e)), "p90_error": float(np.percentile(e, 90)),
            "worst_error": float(np.max(e)), "refused": [r["id"] for r in sel if r["refused"]]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split-file", default=str(DEFAULT_SPLIT))
    ap.add_argument("--hw", default="h200_sxm_141gb")
    ap.add_argument("--only", choices=["train", "test"])
    ap.add_argument("--json", help="write the rows and summaries here")
    ap.add_argument("--set", nargs="*", default=[], metavar="FIELD=VALUE",
                    help="override fields of the tensorcore profile (a what-if; fitting uses --only train)")
    ap.add_argument("--fit", metavar="JSON", help="calibrate on the train split (tilesim.sim.validation.calibrate) "
                    "and write the fitted values here")
    ap.add_argument("--calibration", metavar="JSON", help="evaluate with these fitted values (a --fit output)")
    a = ap.parse_args(argv)
    import dataclasses
    if a.fit:
        import hwmodels
        from tilesim.sim.validation import calibrate
        t0 = time.perf_counter()
        cal = calibrate(measurements(a.split_file), hwmodels.load(a.hw))
        Path(a.fit).write_text(json.dumps({"kind": "sim_calibration_h200", "split_file": Path(a.split_file).name,
                                           "calibration": cal, "fit_wall_s": time.perf_counter() - t0,
                                           "command": "python benchmarks/sim_holdout_h200.py --fit " + a.fit},
                                          indent=1) + "\n")
        print(json.dumps(cal, indent=1))
        return 0
    overrides = json.loads(Path(a.calibration).read_text())["calibration"] if a.calibration else None

    from tilesim.analysis import get_profile
    prof = get_profile("tensorcore")
    if a.set:
        def conv(k, v):
            cur = getattr(prof, k)
            if isinstance(cur, bool):
                return v.lower() in ("1", "true", "yes")
            return type(cur)(v)
        prof = dataclasses.replace(prof, **{k: conv(k, v) for k, v in (x.split("=", 1) for x in a.set)})
    rows = evaluate(a.split_file, a.hw, prof, a.only, overrides)
    print(f"{'id':46s} {'kind':22s} {'split':5s} {'meas us':>9s} {'sim us':>9s} {'ratio':>6s} regs")
    for r in rows:
        if a.only and r["split"] != a.only:
            continue
        sim = f"{r['simulated_s'] * 1e6:9.1f}" if r["simulated_s"] else "  REFUSED"
        rat = f"{r['ratio']:6.2f}" if r["ratio"] else "     -"
        print(f"{r['id']:46s} {r['kind']:22s} {r['split']:5s} {r['measured_s'] * 1e6:9.1f} {sim} {rat} "
              f"{r['registers'] or '-'}")
    sums = [summarise(rows, s) for s in ("train", "test") if not a.only or s == a.only]
    sums += [dict(summarise(rows, s, "tilelang_h200_validation"), subset="tilelang_h200_validation")
             for s in ("train", "test") if not a.only or s == a.only]
    sums = [s for s in sums if s["points"]]
    for s in sums:
        tag = " (validation set)" if s.get("subset") else ""
        print(f"{s['split']:5s}{tag}: {s['points']} points, {s['kinds']} kinds, median {s['median_error'] * 100:.1f}%, "
              f"p90 {s['p90_error'] * 100:.1f}%, worst {s['worst_error'] * 100:.1f}%, refused {s['refused']}")
    if a.json:
        Path(a.json).write_text(json.dumps({"split_file": Path(a.split_file).name, "summaries": sums, "rows": rows},
                                           indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
