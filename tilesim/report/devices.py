"""Cross-device comparison: a heat map of simulated time (kernel × shape rows, device columns).

A pure function of the points: each cell shows the simulated time and the bounding resource's short
name, coloured by time relative to the fastest device on that row.
"""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

SHORT = {"DRAM bandwidth": "DRAM", "L2 bandwidth": "L2", "tensor core": "TC", "cube": "cube", "CUDA cores": "ALU",
         "vector": "vec", "latency/occupancy": "lat", "launch latency": "launch"}


def _short(bound: str) -> str:
    for k, v in SHORT.items():
        if bound.startswith(k):
            return v
    return bound.split()[0][:6] if bound else "?"


def fmt_time(t: float) -> str:
    if t >= 1:
        return f"{t:.2f} s"
    if t >= 1e-3:
        return f"{t * 1e3:.2f} ms"
    return f"{t * 1e6:.1f} µs"


def devices_figure(points: list[dict], devices: list[str]):
    """Heat map of ``points`` (dicts with ``row``, ``device``, ``time_s``, ``bound``)."""
    rows = []
    for p in points:
        if p["row"] not in rows:
            rows.append(p["row"])
    cell = {(p["row"], p["device"]): p for p in points}
    rel = np.full((len(rows), len(devices)), np.nan)
    for i, r in enumerate(rows):
        times = [cell[(r, d)]["time_s"] for d in devices if (r, d) in cell]
        best = min(times) if times else None
        for j, d in enumerate(devices):
            if (r, d) in cell and best:
                rel[i, j] = math.log10(cell[(r, d)]["time_s"] / best)
    fig, ax = plt.subplots(figsize=(2.0 + 1.9 * len(devices), 1.2 + 0.32 * len(rows)))
    im = ax.imshow(rel, cmap="RdYlGn_r", aspect="auto", vmin=0, vmax=max(1.0, np.nanmax(rel) if rows else 1.0))
    for i, r in enumerate(rows):
        for j, d in enumerate(devices):
            p = cell.get((r, d))
            text = "—" if p is None else f"{fmt_time(p['time_s'])}\n{_short(p.get('bound', ''))}"
            ax.text(j, i, text, ha="center", va="center", fontsize=6.5)
    ax.set_xticks(range(len(devices)))
    ax.set_xticklabels(devices, rotation=20, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(rows, fontsize=7)
    ax.set_title("Simulated time per device (colour: log10 of time / fastest device; text: time, bound)", fontsize=9)
    cb = fig.colorbar(im, ax=ax, fraction=0.03)
    cb.set_label("log10(time / fastest)", fontsize=8)
    fig.tight_layout()
    return fig
