"""``summary.json`` and ``summary.md``.

Contract: :func:`render_markdown` reads nothing but the summary dict (the parsed ``summary.json``).
Every number it prints is a string stored in the JSON under a ``"display"`` key, so a test can check
that each number in the Markdown comes from the JSON.
"""

from __future__ import annotations

from .devices import fmt_time


def tflops(x):
    return "—" if not x else f"{x / 1e12:,.2f}"


def tbps(x):
    return "—" if not x else f"{x / 1e12:,.3f}"


def pct(x):
    return "—" if x is None else f"{100 * x:.0f}%"


def display_point(p: dict) -> dict:
    """Formatted strings of a point's numbers (stored beside the raw numbers in the JSON)."""
    d = {"time": fmt_time(p["time_s"]), "tflops": tflops(p.get("flops_per_s")),
         "tbps": tbps(p.get("bytes_per_s")), "roofline": pct(p.get("fraction_of_roofline")),
         "roofline_time": fmt_time(p["roofline_time_s"]) if p.get("roofline_time_s") else "—"}
    m = p.get("measured")
    if m:
        d["measured_time"] = fmt_time(m["time_s"])
        d["sim_error"] = f"{100 * (p['time_s'] / m['time_s'] - 1):+.0f}%"
    return d


def display_device(dev: dict) -> dict:
    return {k: (tflops(v) if k.startswith("peak_") else tbps(v) if k.endswith("bytes_per_s") else
                f"{v:.0f}" if k.startswith("ridge") and v else str(v))
            for k, v in dev.items() if isinstance(v, (int, float)) and v is not None}


def render_markdown(summary: dict) -> str:
    out = ["# tilesim report", "",
           f"Generated {summary['generated']} by tilesim {summary['tilesim_version']} "
           f"(lowering profile per device: {', '.join(f'{d} → {p}' for d, p in summary['profiles'].items())}).",
           "Times are **simulated** by tilesim's cycle-approximate model unless marked measured; see "
           "`docs/simulator.md` for the model and its validation.", ""]
    out += ["## Devices", "", "| device | fp16/bf16 TFLOP/s | fp8 TFLOP/s | fp32 TFLOP/s | DRAM TB/s | ridge (fp16) FLOP/B |",
            "|---|---|---|---|---|---|"]
    for dev in summary["devices"]:
        d = dev["display"]
        out.append(f"| {dev['name']} | {d.get('peak_float16', '—')} | {d.get('peak_float8', '—')} | "
                   f"{d.get('peak_float32', '—')} | {d.get('dram_bytes_per_s', '—')} | {d.get('ridge_float16', '—')} |")
    out.append("")
    for dev in summary["devices"]:
        pts = [p for p in summary["points"] if p["device"] == dev["name"]]
        if not pts:
            continue
        out += [f"## {dev['name']}", "", "| kernel | shape | time | TFLOP/s | TB/s | % of roofline | bound | measured |",
                "|---|---|---|---|---|---|---|---|"]
        for p in pts:
            d = p["display"]
            meas = f"{d['measured_time']} ({d['sim_error']})" if "measured_time" in d else ""
            out.append(f"| {p['kernel']} | {p['shape']} | {d['time']} | {d['tflops']} | {d['tbps']} | "
                       f"{d['roofline']} | {p['bound']} | {meas} |")
        out.append("")
        out.append("What limits each kernel:")
        out.append("")
        seen = set()
        for p in pts:
            if p["kernel"] in seen:
                continue
            seen.add(p["kernel"])
            out.append(f"- **{p['kernel']}**: {p['limits']}")
        out.append("")
    if summary.get("failures"):
        out += ["## Failures", "", "| kernel | shape | device | error |", "|---|---|---|---|"]
        for f in summary["failures"]:
            out.append(f"| {f['kernel']} | {f['shape']} | {f['device']} | {f['error'].splitlines()[0]} |")
        out.append("")
    if summary.get("unsupported"):
        out += ["## Not run: the device lacks the data type", ""]
        seen = {}
        for u in summary["unsupported"]:
            seen.setdefault((u["kernel"], u["device"]), u["error"].splitlines()[0])
        for (k, d), err in seen.items():
            out.append(f"- {k} on {d}: {err}")
        out.append("")
    out += ["## Seed claims", "",
            "Each numeric claim of the two seed articles (`shared/seeds/`) beside what the hardware models, the "
            "simulator and the H200 measurements say.", "",
            "| # | claim | verdict | evidence |", "|---|---|---|---|"]
    for i, c in enumerate(summary.get("claims", []), start=1):
        out.append(f"| {i} | {c['claim']} | **{c['verdict']}** | {c['evidence']} |")
    out.append("")
    return "\n".join(out)
