"""Roofline chart of one device: a pure function of the device model and the points to draw.

A point is a dict with at least ``label`` (text for the legend), ``intensity`` (FLOP per DRAM byte),
``flops_per_s`` (achieved); optionally ``measured_flops_per_s`` and ``measured_intensity`` (a GPU
measurement of the same kernel and shape, drawn hollow and joined to the simulated point).

Ceilings: DRAM and L2 bandwidth diagonals, and one horizontal line per compute unit and dtype the
device has (fp32 CUDA cores / vector, fp16-bf16 tensor or cube, fp8 where present, ...). Points are
numbered on the chart and named in a side legend, so labels never overlap.
"""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

#: Dtypes drawn as compute ceilings, in legend order, and how they are called on the chart.
CEILING_DTYPES = (("float8", "fp8"), ("int8", "int8"), ("float16", "fp16/bf16"), ("tf32", "tf32"),
                  ("float32", "fp32"))


def ceilings(model) -> list[dict]:
    """Compute ceilings (FLOP/s) per unit and dtype, and bandwidth ceilings (bytes/s), from the model."""
    out = []
    for ck in model.core_kinds:
        for unit in ck.units:
            if unit.kind == "sfu":
                continue
            for dtype, label in CEILING_DTYPES:
                if unit.flops_per_cycle.get(dtype) is None:
                    continue
                try:
                    peak = model.peak_flops(dtype, unit.name)
                except Exception:  # noqa: BLE001 - unit unsupported for this dtype
                    continue
                if not peak:
                    continue
                same = next((c for c in out if abs(c["value"] - peak) <= 1e-6 * peak and c["unit"] == unit.name), None)
                if same is not None:  # e.g. fp8 and int8 share a rate: one line, both names
                    same["names"].append(label)
                    continue
                out.append({"kind": "compute", "names": [label], "value": peak, "dtype": dtype,
                            "unit": unit.name, "core": ck.name})
    for c in out:
        c["label"] = f"{'/'.join(c.pop('names'))} {c['unit']} ({c.pop('core')})"
    out.append({"kind": "bandwidth", "label": "DRAM", "value": model.dram_bandwidth})
    l2 = getattr(model, "l2", None)
    if l2 is not None and getattr(l2, "bandwidth_bytes_per_s", None):
        out.append({"kind": "bandwidth", "label": "L2", "value": l2.bandwidth_bytes_per_s})
    return out


def roofline_figure(model, points: list[dict], title: str | None = None):
    """The roofline chart of ``model`` with ``points`` (see the module docstring)."""
    ceils = ceilings(model)
    comp = [c for c in ceils if c["kind"] == "compute"]
    bws = [c for c in ceils if c["kind"] == "bandwidth"]
    xs = [p["intensity"] for p in points if p.get("intensity")] + \
        [p["measured_intensity"] for p in points if p.get("measured_intensity")]
    xmin = min([0.05] + [x / 3 for x in xs])
    xmax = max([1e4] + [x * 3 for x in xs])
    peak = max(c["value"] for c in comp) if comp else 1e15
    ys = [p["flops_per_s"] for p in points if p.get("flops_per_s")]
    ymin = min([peak / 1e5] + [y / 3 for y in ys if y > 0])

    fig, ax = plt.subplots(figsize=(11, 6.5))
    grid = [xmin * (xmax / xmin) ** (i / 200) for i in range(201)]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for c in sorted(comp, key=lambda c: -c["value"]):
        ax.axhline(c["value"], color="0.55", lw=0.8, ls="--")
        # left end: above the bandwidth diagonals nothing can be plotted, so labels stay clear of points
        ax.text(xmin * 1.15, c["value"] * 1.06, f"{c['label']}: {c['value'] / 1e12:,.1f} TFLOP/s", ha="left",
                va="bottom", fontsize=7.5, color="0.3")
    top = peak
    for k, b in enumerate(bws):
        line = [min(top, b["value"] * x) for x in grid]
        ax.plot(grid, line, color="0.2" if b["label"] == "DRAM" else "0.6", lw=1.4 if b["label"] == "DRAM" else 1.0)
        # label the diagonal just below where it meets the top ceiling, clear of the points below it
        x_lab = xmin * 1.3 * (2.2 ** k)
        ax.text(x_lab, b["value"] * x_lab * 1.25, f"{b['label']} {b['value'] / 1e12:.2f} TB/s", ha="left",
                va="bottom",
                fontsize=7.5, color="0.25", bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5})
    handles = []
    placed: list[tuple[float, float]] = []
    lx0, lx1, ly0, ly1 = math.log10(xmin), math.log10(xmax), math.log10(ymin), math.log10(peak * 2.5)
    for n, p in enumerate(points, start=1):
        color = colors[(n - 1) % len(colors)]
        if p.get("intensity") and p.get("flops_per_s"):
            h = ax.scatter([p["intensity"]], [p["flops_per_s"]], s=36, color=color, zorder=3,
                           label=f"{n}: {p['label']}")
            fx = (math.log10(p["intensity"]) - lx0) / (lx1 - lx0)
            fy = (math.log10(p["flops_per_s"]) - ly0) / (ly1 - ly0)
            dx, dy = _free_offset(fx, fy, placed)
            ax.annotate(str(n), (p["intensity"], p["flops_per_s"]), textcoords="offset points", xytext=(dx, dy),
                        fontsize=7.5, color=color, ha="center", va="center",
                        arrowprops={"arrowstyle": "-", "color": color, "lw": 0.5} if abs(dx) + abs(dy) > 14 else None)
            handles.append(h)
        if p.get("measured_flops_per_s") and p.get("measured_intensity"):
            ax.scatter([p["measured_intensity"]], [p["measured_flops_per_s"]], s=40, facecolors="none",
                       edgecolors=color, zorder=3, marker="D")
            ax.plot([p["intensity"], p["measured_intensity"]], [p["flops_per_s"], p["measured_flops_per_s"]],
                    color=color, lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(xmin, xmax)
    ax.set_ylim(ymin, peak * 2.5)
    ax.set_xlabel("arithmetic intensity (FLOP per DRAM byte)")
    ax.set_ylabel("performance (FLOP/s)")
    ax.set_title(title or f"Roofline: {model.name} (simulated ●, measured ◇)")
    ax.grid(True, which="major", lw=0.3, alpha=0.5)
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False,
                  title="kernel @ shape", title_fontsize=8)
    fig.tight_layout()
    return fig


#: Candidate label offsets in points, nearest first.
_OFFSETS = [(7, 6), (-7, 6), (7, -6), (-7, -6), (0, 10), (0, -10), (12, 0), (-12, 0), (14, 14), (-14, 14),
            (14, -14), (-14, -14), (0, 20), (0, -20), (22, 8), (-22, 8), (22, -8), (-22, -8)]
_PT = 1 / 560  # one typographic point as a fraction of the plot width (figure ~11 in, axes ~7.8 in)


def _free_offset(fx, fy, placed):
    """A label offset whose box does not overlap labels already placed (axes-fraction coordinates)."""
    best, best_d = _OFFSETS[0], None
    for dx, dy in _OFFSETS:
        cx, cy = fx + dx * _PT, fy + dy * _PT * 1.4
        d = min((abs(cx - px) / 0.018 + abs(cy - py) / 0.028 for px, py in placed), default=9.0)
        if d >= 2.0:
            best = (dx, dy)
            break
        if best_d is None or d > best_d:
            best, best_d = (dx, dy), d
    placed.append((fx + best[0] * _PT, fy + best[1] * _PT * 1.4))
    return best
