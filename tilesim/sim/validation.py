"""Calibration and validation of the simulator against measured kernels.

Contract
--------
* A :class:`Measurement` is one timed kernel: the tilesim kernel built from the same source text,
  its shapes, the measured median time, its family and its split (``"train"`` / ``"test"``).
* ``calibrate(measurements, hw, profile="tensorcore") -> dict`` fits, on the ``train`` split only,
  the hardware model's efficiency fields and the two numbers of the GPU's bulk-copy data path the
  data files leave unknown, the memory's loaded latency and an event-timed launch's fixed overhead.
  Keys are dotted hardware-model keys (``"efficiency.l2_fraction"``,
  ``"efficiency.matrix_fraction.float16"``, ``"core_kinds.sm.data_paths.tma.latency_cycles"``...);
  values are what the data file should say. The fit is a coordinate descent on a log grid that
  minimises the mean squared log error of simulated vs measured time.
* ``validate(measurements, hw, calibration, profile="tensorcore", split="test") -> dict`` simulates
  every measurement of ``split`` with the calibrated model (:func:`apply_overrides`) and reports
  each point's error and the median and worst ``|sim/measured - 1|``. With ``executor=`` (a
  :mod:`tilesim.sweep` executor) the points are simulated there, with the same result; a point that
  fails there raises ``RuntimeError`` naming it (a validation with a hole in it would mislead).
* :func:`apply_overrides` returns a copy of a hardware model with dotted keys replaced; the
  simulator then reads the new numbers like any other (no number lives in this module except the
  search grids' bounds).

Layer: app (see :mod:`tilesim.hw`): it edits ``hwmodels`` data classes by their TOML keys, so it imports
``hwmodels``; the simulator package itself does not import this module.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

import hwmodels
from hwmodels.model import toml_key
from hwmodels.schema import frozen_map

from ..analysis import analyze, get_profile
from . import simulate_programs

__all__ = ["Measurement", "calibrate", "validate", "apply_overrides", "format_validation", "PARAMETERS"]


@dataclass
class Measurement:
    id: str
    family: str
    split: str
    kernel: object
    shapes: dict
    measured_s: float
    _programs: dict = field(default_factory=dict, repr=False)

    def programs(self, hw, profile):
        key = (hw.name, profile)
        if key not in self._programs:
            pf = self.kernel.prim_func if hasattr(self.kernel, "prim_func") else self.kernel
            self._programs[key] = analyze(pf, hw, profile, **self.shapes)
        return self._programs[key]


def apply_overrides(hw, overrides: Mapping):
    """A copy of hardware model ``hw`` with dotted keys replaced by new values."""

    def put(obj, parts, value):
        if not parts:
            return value
        head, rest = parts[0], parts[1:]
        if dataclasses.is_dataclass(obj):
            for f in dataclasses.fields(obj):
                if toml_key(f) == head and "kind" in f.metadata:
                    return dataclasses.replace(obj, **{f.name: put(getattr(obj, f.name), rest, value)})
            raise KeyError(head)
        if isinstance(obj, Mapping):
            d = dict(obj)
            d[head] = put(d.get(head), rest, value)
            return frozen_map(d)
        if isinstance(obj, tuple):
            out, hit = [], False
            for x in obj:
                if getattr(x, "name", None) == head:
                    out.append(put(x, rest, value))
                    hit = True
                else:
                    out.append(x)
            if not hit:
                raise KeyError(head)
            return tuple(out)
        raise KeyError(head)

    out = hw
    for key, value in overrides.items():
        try:
            out = put(out, key.split("."), value)
        except KeyError:
            continue  # a key this model does not have (another device's data path)
    return out


def _gpu_copy_path(hw) -> str | None:
    core = hw.primary_core
    for dp in core.data_paths:
        if dp.src in ("dram", "l2"):
            return f"core_kinds.{core.name}.data_paths.{dp.name}"
    return None


def parameters(hw) -> list[tuple[str, float, float, float]]:
    """(key, start value, low bound, high bound) of every fitted number."""
    eff = hw.efficiencies
    # no kernel streams faster than the measured device-to-device copy: it bounds the DRAM fraction
    copy = (getattr(hw, "calibration", None) or {}).get("copy_bytes_per_s")
    dram_hi = min(1.0, copy / hw.dram_bandwidth) if copy and hw.dram_bandwidth else 1.0
    out = [
        ("efficiency.matrix_fraction.float16", eff.matrix_fraction.get("float16") or 0.8, 0.3, 1.0),
        ("efficiency.matrix_fraction.tf32", eff.matrix_fraction.get("tf32") or 0.8, 0.2, 1.0),
        ("efficiency.vector_fraction.float32", eff.vector_fraction.get("float32") or 0.8, 0.2, 1.0),
        ("efficiency.dram_fraction", min(eff.dram_fraction or 0.9, dram_hi), 0.5, dram_hi),
        ("efficiency.l2_fraction", eff.l2_fraction or 0.9, 0.3, 1.0),
    ]
    path = _gpu_copy_path(hw)
    if path:
        dp = next(d for d in hw.primary_core.data_paths if path.endswith("." + d.name))
        lat0 = dp.latency_cycles or (hw.memory_latency_cycles or 600.0)
        bpc0 = dp.bytes_per_cycle or 64.0
        out.append((f"{path}.latency_cycles", lat0, 100.0, 4000.0))
        out.append((f"{path}.bytes_per_cycle", bpc0, 4.0, 512.0))
    # issue 15: the loaded DRAM latency of synchronous loads (Little's law) and the fixed cost of an
    # event-timed launch beyond the back-to-back launch latency
    lat = hw.memory_latency_cycles or 600.0
    out.append(("memory.loaded_latency_cycles", hw.memory.loaded_latency_cycles or lat, lat, 8 * lat))
    out.append(("overheads.timed_launch_overhead_s", hw.overheads.timed_launch_overhead_s or 1e-6, 1e-7, 2e-5))
    return out


def _round(key: str, v: float) -> float:
    if "fraction" in key:
        return round(v, 3)
    if key.endswith("_s"):
        return float(f"{v:.3g}")
    return round(v, 1)


PARAMETERS = parameters


def _expand(values: dict) -> dict:
    """Tie bf16 to fp16 (one 16-bit tensor-core efficiency)."""
    out = dict(values)
    if "efficiency.matrix_fraction.float16" in out:
        out["efficiency.matrix_fraction.bfloat16"] = out["efficiency.matrix_fraction.float16"]
    return out


def simulate_measured(prim_func, shapes: dict, hw, profile: str, name: str) -> float:
    """Simulated time of one measured kernel (a sweep task: everything it needs travels with it)."""
    return simulate_programs(analyze(prim_func, hw, profile, **shapes), hw, profile, name=name).time_s


def _sim_times(ms, hw, profile, executor=None):
    if executor is not None:
        tasks = [(m.kernel.prim_func if hasattr(m.kernel, "prim_func") else m.kernel, m.shapes, hw, profile, m.id)
                 for m in ms]
        outs = executor.run(simulate_measured, tasks)
        bad = [(m.id, o.error) for m, o in zip(ms, outs) if not o.ok]
        if bad:
            raise RuntimeError(f"{len(bad)} validation point(s) failed on {executor.describe()}: "
                               + "; ".join(f"{i}: {e}" for i, e in bad[:3]))
        return np.array([o.value for o in outs])
    out = []
    for m in ms:
        progs = m.programs(hw, profile)
        out.append(simulate_programs(progs, hw, profile, name=m.id).time_s)
    return np.array(out)


def _loss(sim, meas) -> float:
    e = np.log(sim / meas)
    return float(np.mean(e * e))


def calibrate(measurements, hw, profile: str = "tensorcore", *, sweeps: int = 3, points: int = 9) -> dict:
    """Fit efficiency fields (and unknown copy-path numbers) on the ``train`` split; see module docs."""
    hw = hwmodels.load(hw)
    get_profile(profile)
    train = [m for m in measurements if m.split == "train"]
    if not train:
        raise ValueError("no measurement in the train split")
    meas = np.array([m.measured_s for m in train])
    params = parameters(hw)
    values = {k: v for k, v, _, _ in params}
    best = _loss(_sim_times(train, apply_overrides(hw, _expand(values)), profile), meas)
    for sweep in range(sweeps):
        span = 1.0 / (2 ** sweep)
        for key, _, lo, hi in params:
            cur = values[key]
            grid = np.exp(np.linspace(math.log(max(lo, cur * 2 ** (-2 * span))), math.log(min(hi, cur * 2 ** (2 * span))),
                                      points))
            for v in grid:
                trial = dict(values)
                trial[key] = float(v)
                loss = _loss(_sim_times(train, apply_overrides(hw, _expand(trial)), profile), meas)
                if loss < best - 1e-12:
                    best, values = loss, trial
    out = _expand(values)
    return {k: _round(k, v) for k, v in out.items()}


def validate(measurements, hw, calibration: Mapping | None = None, profile: str = "tensorcore",
             split: str = "test", executor=None) -> dict:
    """Error of the calibrated simulator on one split (see module docs)."""
    hw = hwmodels.load(hw)
    model = apply_overrides(hw, calibration or {})
    pts = [m for m in measurements if split in (None, "all") or m.split == split]
    sims = _sim_times(pts, model, profile, executor)
    rows = []
    for m, s in zip(pts, sims):
        rows.append({"id": m.id, "family": m.family, "split": m.split, "measured_s": m.measured_s,
                     "simulated_s": float(s), "ratio": float(s / m.measured_s),
                     "error": float(abs(s / m.measured_s - 1.0))})
    errs = np.array([r["error"] for r in rows]) if rows else np.array([np.nan])
    ratios = np.array([r["ratio"] for r in rows]) if rows else np.array([np.nan])
    return {"split": split, "points": len(rows), "median_error": float(np.median(errs)),
            "worst_error": float(np.max(errs)), "worst_ratio": float(max(np.max(ratios), 1.0 / np.min(ratios))),
            "within_2x": bool(np.all((ratios <= 2.0) & (ratios >= 0.5))), "rows": rows,
            "calibration": dict(calibration or {})}


def format_validation(res: dict, calibration: Mapping | None = None) -> str:
    lines = [f"{'id':48s} {'split':5s} {'measured':>10s} {'simulated':>10s} {'ratio':>6s}"]
    for r in res["rows"]:
        lines.append(f"{r['id']:48s} {r['split']:5s} {r['measured_s'] * 1e3:9.4f}ms {r['simulated_s'] * 1e3:9.4f}ms "
                     f"{r['ratio']:6.2f}")
    lines.append(f"{res['split']} split: {res['points']} points, median error {res['median_error'] * 100:.1f}%, "
                 f"worst {res['worst_error'] * 100:.1f}% (worst ratio {res['worst_ratio']:.2f}×)")
    if calibration:
        lines.append("calibrated values:")
        for k, v in calibration.items():
            lines.append(f"  {k} = {v}")
    return "\n".join(lines)
