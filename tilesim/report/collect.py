"""Simulator points for the report: every registered kernel × its LLM shapes × every device.

A point is a plain dict (it goes into ``summary.json`` as is):

``kernel, family, shape (label), params, device, profile, time_s, flops (useful work from the registry),
dram_bytes (simulated DRAM traffic), min_bytes (compulsory bytes from the registry), intensity
(flops / min_bytes), flops_per_s, bytes_per_s, roofline_time_s, fraction_of_roofline, bound, limits,
measured (or None)``.

A kernel that fails to build or simulate becomes a ``failure`` record; the rest still run. The work is
split into one group per (kernel, device) that any :mod:`tilesim.sweep` executor can run.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import traceback

from .. import __version__
from ..errors import TilesimError
from ..sim import default_profile, simulate
from ..sweep import Outcome
from ..tune import tune_spec

#: The lowering profile each device kind is simulated with by default.
DEFAULT_PROFILE = {"gpu": "tensorcore", "npu-ascend": "ascend", "npu-mlu": "mlu"}


def device_profile(model, override: str | None) -> str:
    if override:
        return override
    return default_profile(model)


def _limits_text(rep, point) -> str:
    parts = [f"bound by {rep.bound}"]
    if rep.roofline_limit:
        parts.append(f"roofline limit: {rep.roofline_limit}")
    parts.append(f"{rep.blocks_per_core} block(s)/core limited by {rep.occupancy_limit or '—'}, "
                 f"{rep.waves:.1f} waves")
    frac = point.get("fraction_of_roofline")
    if frac is not None:
        parts.append(f"{100 * frac:.0f}% of its roofline bound")
    return "; ".join(parts)


def simulate_point(spec, shape: dict, model, profile: str, config: dict | None = None) -> dict:
    """Simulate one registered kernel at one shape on one device; return the point dict."""
    params = spec.params(shape, **(config or {}))
    kernel = spec.build(**params)
    hints = spec.data_hints(**params) if spec.data_hints else {}
    rep = simulate(kernel.prim_func, model, profile, name=spec.name, **hints)
    flops = float(spec.flops(**params))
    min_bytes = float(spec.bytes(**params))
    dram = float(rep.bytes.get("dram read", 0.0) + rep.bytes.get("dram write", 0.0))
    point = {
        "kernel": spec.name, "family": spec.family, "shape": shape.get("label", ""),
        "params": {k: v for k, v in params.items() if isinstance(v, (int, float, str, bool))},
        "device": model.name, "profile": profile, "time_s": rep.time_s, "flops": flops,
        "dram_bytes": dram, "min_bytes": min_bytes,
        "intensity": flops / min_bytes if min_bytes else None,
        "flops_per_s": flops / rep.time_s if rep.time_s else None,
        "bytes_per_s": dram / rep.time_s if rep.time_s else None,
        "roofline_time_s": rep.roofline_s,
        "fraction_of_roofline": rep.roofline_s / rep.time_s if rep.time_s else None,
        "device_dram_bytes_per_s": model.dram_bandwidth,
        "bound": rep.bound, "waves": rep.waves, "blocks": rep.blocks, "measured": None,
        "config": {k: params[k] for k in spec.tunables if k in params},
    }
    point["limits"] = _limits_text(rep, point)
    return point


def load_measurements(folder: str) -> list[dict]:
    """Measurement records from ``folder/*.json`` that name a registered kernel, its params and a device.

    Records may sit at the top level of a file (a list) or under ``"results"``/``"records"``. Each needs
    ``kernel``, ``device`` (a hardware-model name), ``params`` (dict) and ``median_ms`` or ``time_s``.
    """
    out = []
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, json.JSONDecodeError):
            continue
        recs = data if isinstance(data, list) else data.get("results", data.get("records", []))
        for r in recs if isinstance(recs, list) else []:
            if not isinstance(r, dict) or "kernel" not in r or "params" not in r:
                continue
            t = r.get("time_s") or (r["median_ms"] / 1e3 if r.get("median_ms") else None)
            if t and r.get("device") and r.get("registry", True):
                out.append({"kernel": r["kernel"], "device": r["device"], "params": r["params"], "time_s": t,
                            "source": os.path.basename(path)})
    return out


def attach_measurements(points: list[dict], measurements: list[dict]) -> None:
    for p in points:
        for m in measurements:
            if m["kernel"] == p["kernel"] and m["device"] == p["device"] and all(
                    p["params"].get(k) == v for k, v in m["params"].items()):
                p["measured"] = {"time_s": m["time_s"], "source": m["source"],
                                 "flops_per_s": p["flops"] / m["time_s"]}
                break


def collect_group(spec, model, prof: str, shapes, tune_budget: int = 0):
    """One kernel on one device: tune at its first shape (when asked), then simulate every shape.

    Returns ``(points, failures, unsupported)`` of this group; the unit of work a sweep executor runs.
    """
    points, failures, unsupported = [], [], []
    config = None
    for k, shape in enumerate(shapes):
        try:
            if k == 0 and tune_budget and spec.tunables:
                try:
                    config = tune_spec(spec, shape, model, prof, budget=tune_budget).best.config
                except TilesimError:
                    pass  # nothing fits: the default configuration's own error is reported below
            try:
                points.append(simulate_point(spec, shape, model, prof, config))
            except TilesimError:
                if not (tune_budget and spec.tunables):
                    raise
                # the configuration tuned at the first shape does not fit this one: tune here
                cfg = tune_spec(spec, shape, model, prof, budget=tune_budget).best.config
                points.append(simulate_point(spec, shape, model, prof, cfg))
        except TilesimError as e:
            rec = {"kernel": spec.name, "shape": shape.get("label", ""), "device": model.name,
                   "error": f"{type(e).__name__}: {e}"}
            (unsupported if _is_unsupported(e) else failures).append(rec)
        except Exception as e:  # noqa: BLE001 - one kernel's bug must not lose the rest of the report
            failures.append({"kernel": spec.name, "shape": shape.get("label", ""), "device": model.name,
                             "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc(limit=6)})
    return points, failures, unsupported


def group_key(spec, model, prof: str, shapes, tune_budget: int) -> str:
    """What a group's result depends on, hashed: a checkpointed result is reused only for the same key."""
    text = repr((__version__, spec.name, repr(model), prof, [sorted(s.items()) for s in shapes], tune_budget))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def collect(specs, models, profile_override=None, shapes_per_kernel=None, progress=None, tune_budget=0,
            executor=None, checkpoint=None):
    """Simulate ``specs`` × their shapes × ``models``. Returns (points, failures, unsupported).

    With ``tune_budget > 0`` each kernel is first tuned per device at its first report shape
    (``tilesim.tune``, simulator oracle) and every shape on that device uses the tuned configuration
    — the per-device adaptive tiling of the seeds.

    The work is one group per (kernel, device) (:func:`collect_group`), run on ``executor``
    (:mod:`tilesim.sweep`; ``None``: in this process, one group after another). The result is in the
    same order whatever executor ran it. ``checkpoint`` (a :class:`~tilesim.report.checkpoint.Checkpoint`)
    supplies groups finished by an earlier, interrupted run and records each group as it completes.
    """
    groups = []
    for model in models:
        prof = device_profile(model, profile_override)
        for spec in specs:
            shapes = list(spec.shapes[:shapes_per_kernel] if shapes_per_kernel else spec.shapes)
            groups.append((spec, model, prof, shapes, tune_budget))
    keys = [group_key(*g) for g in groups]
    done = checkpoint.load() if checkpoint else {}
    todo = [k for k, key in enumerate(keys) if key not in done]
    results = {k: done[key] for k, key in enumerate(keys) if key in done}

    last = [""]

    def record(outcome):
        k = todo[outcome.index]
        last[0] = f"{groups[k][1].name}: {groups[k][0].name}" + ("" if outcome.ok else " (lost)")
        if outcome.ok:
            results[k] = outcome.value
            if checkpoint:
                checkpoint.add(keys[k], outcome.value)
        else:  # the executor lost the group (a worker died): every shape of it is a failure, not retried here
            spec, model = groups[k][0], groups[k][1]
            results[k] = ([], [{"kernel": spec.name, "shape": s.get("label", ""), "device": model.name,
                                "error": outcome.error} for s in groups[k][3]], [])

    if executor is None:
        for n, k in enumerate(todo):
            spec, model = groups[k][0], groups[k][1]
            if progress:
                progress(len(results), len(groups), f"{model.name}: {spec.name}")
            record(Outcome(n, collect_group(*groups[k])))
    else:
        executor.run(collect_group, [groups[k] for k in todo], chunk=1, on_result=record,
                     progress=(lambda i, n, what: progress(len(results), len(groups), last[0] or what)) if progress else None)
    if progress:
        progress(len(groups), len(groups), "done")
    points, failures, unsupported = [], [], []
    for k in range(len(groups)):
        p, f, u = results[k]
        points += p
        failures += f
        unsupported += u
    return points, failures, unsupported


def _is_unsupported(e) -> bool:
    """The device lacks the kernel's data type (e.g. fp8 on an A100): not a failure of the kernel or tool."""
    return "has no known rate" in str(e)
