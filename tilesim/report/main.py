"""``tilesim report``: simulate the kernel library on every device and write the reports.

Writes into ``--out`` (default ``reports/``): ``roofline_<device>.png`` and ``.svg`` (one point per
kernel at its first report shape, measured points beside them), ``devices.png``, ``summary.json``
(every number, and the display strings the Markdown uses) and ``summary.md``. A kernel that fails is
listed under Failures and the rest of the report still completes; the exit code is then 1. The
simulations run on a :mod:`tilesim.sweep` executor (``--executor``), one task per (kernel, device);
finished tasks are checkpointed in ``OUT/.partial/report.jsonl`` for ``--resume`` (see ``run_report``).

Layer: app (see :mod:`tilesim.hw`).
"""

from __future__ import annotations

import datetime as _dt
import os
import sys

import matplotlib.pyplot as plt  # the backend is Agg: .roofline and .devices select it before any figure

import hwmodels
from kernels.registry import all_specs, get

from .. import __version__
from ..sweep import Progress, executor_from_args
from . import io
from .checkpoint import Checkpoint
from .claims import all_claims
from .collect import attach_measurements, collect, device_profile, load_measurements
from .devices import devices_figure
from .roofline import roofline_figure
from .summary import display_device, display_point, render_markdown

#: Devices of ``--hw all``: one per built-in data file (variants such as ascend_910b3 only by name).
ALL_DEVICES = ("a100_sxm4_80gb", "h100_sxm5_80gb", "h200_sxm_141gb", "ascend_910b2", "mlu370_x8")


def device_summary(model) -> dict:
    d = {"name": model.name, "description": getattr(model, "description", "")}
    for dtype in ("float16", "float8", "float32", "tf32", "int8"):
        try:
            d[f"peak_{dtype}"] = model.peak_flops(dtype)
        except Exception:  # noqa: BLE001 - the device lacks this dtype
            d[f"peak_{dtype}"] = None
    d["dram_bytes_per_s"] = model.dram_bandwidth
    try:
        d["ridge_float16"] = model.ridge_point("float16")
    except Exception:  # noqa: BLE001
        d["ridge_float16"] = None
    d["display"] = display_device({k: v for k, v in d.items() if v is not None})
    return d


def build_summary(points, failures, models, profiles, claims) -> dict:
    for p in points:
        p["display"] = display_point(p)
        p["row"] = f"{p['kernel']} @ {p['shape']}"
    return {"generated": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "tilesim_version": __version__, "profiles": profiles,
            "devices": [device_summary(m) for m in models], "points": points, "failures": failures,
            "claims": claims}


def _short_label(text: str, n: int = 44) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def write_figures(summary, models, out) -> list[str]:
    written = []
    for m in models:
        pts, seen = [], set()
        for p in summary["points"]:
            if p["device"] == m.name and p["kernel"] not in seen:
                seen.add(p["kernel"])
                q = {"label": f"{p['kernel']} ({_short_label(p['shape'])})", "intensity": p["intensity"],
                     "flops_per_s": p["flops_per_s"]}
                if p.get("measured"):
                    q["measured_flops_per_s"] = p["measured"]["flops_per_s"]
                    q["measured_intensity"] = p["intensity"]
                pts.append(q)
        fig = roofline_figure(m, pts, title=f"Roofline: {m.name} — simulated ● (one point per kernel at its first "
                                             f"report shape), measured ◇")
        written += io.save_figure(fig, os.path.join(out, f"roofline_{m.name}"), ("png", "svg"))
        plt.close(fig)
    rows = [{"row": p["row"], "device": p["device"], "time_s": p["time_s"], "bound": p["bound"]}
            for p in summary["points"]]
    first = {}
    for p in summary["points"]:
        first.setdefault(p["kernel"], p["shape"])
    rows = [r for r in rows if r["row"].split(" @ ", 1)[1] == first[r["row"].split(" @ ", 1)[0]]]
    fig = devices_figure(rows, [m.name for m in models])
    written += io.save_figure(fig, os.path.join(out, "devices"), ("png",))
    plt.close(fig)
    return written


def run_report(hw=("all",), kernels=("all",), profile=None, out="reports", quick=False, progress=True,
               tune_budget=12, executor=None, resume=False) -> int:
    """Simulate, check the claims and write the report into ``out``; see the module docs.

    ``executor`` (:mod:`tilesim.sweep`) runs the (kernel, device) groups; ``None`` runs them here. Each
    finished group is recorded in ``out/.partial/report.jsonl``; ``resume=True`` reuses the groups an
    interrupted run recorded (same tilesim version, kernel, device model, shapes and budget), otherwise
    the run starts afresh. The checkpoint is removed once the report is written.
    """
    names = list(ALL_DEVICES) if "all" in hw else list(hw)
    models = [hwmodels.load(n) for n in names]
    specs = all_specs() if "all" in kernels else [get(k) for k in kernels]
    prog = Progress() if progress else None
    ckpt = Checkpoint(os.path.join(out, ".partial", "report.jsonl"))
    if not resume:
        ckpt.discard()
    elif prog and ckpt.load():
        print(f"tilesim report: resuming: {len(ckpt.load())} finished group(s) in {ckpt.path}", file=sys.stderr)
    try:
        points, failures, unsupported = collect(specs, models, profile, shapes_per_kernel=1 if quick else None,
                                                progress=prog, tune_budget=tune_budget, executor=executor,
                                                checkpoint=ckpt)
    except BaseException:
        ckpt.close()
        if os.path.exists(ckpt.path):
            print(f"tilesim report: interrupted; finished groups are kept in {ckpt.path}: run again with "
                  "--resume to continue (nothing else in the output folder was changed)", file=sys.stderr)
        raise
    attach_measurements(points, load_measurements(os.path.join(out, "measurements")))
    profiles = {m.name: device_profile(m, profile) for m in models}
    claims = all_claims(points, {m.name: m for m in models}, os.path.join(out, "measurements"))
    summary = build_summary(points, failures, models, profiles, claims)
    summary["unsupported"] = unsupported
    os.makedirs(out, exist_ok=True)
    io.write_json(os.path.join(out, "summary.json"), summary)
    io.write_text(os.path.join(out, "summary.md"), render_markdown(summary))
    files = write_figures(summary, models, out)
    ckpt.discard()
    print(f"tilesim report: {len(points)} simulated points on {len(models)} devices, {len(failures)} failure(s); "
          f"wrote {os.path.join(out, 'summary.md')}, summary.json and {len(files)} figure files")
    for f in failures:
        print(f"  FAILED {f['kernel']} @ {f['shape']} on {f['device']}: {f['error'].splitlines()[0]}", file=sys.stderr)
    return 1 if failures else 0


def main(args) -> int:
    executor = executor_from_args(args)
    try:
        return run_report(hw=args.hw, kernels=args.kernels, profile=args.profile, out=args.out, quick=args.quick,
                          tune_budget=args.tune_budget, executor=executor, resume=getattr(args, "resume", False))
    finally:
        if executor is not None:
            executor.close()
