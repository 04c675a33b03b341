"""Check a quoted "X TFLOPS, Y TB/s" figure for a device against its hardware model.

Contract
--------
* :func:`check_claim(model_or_name, tflops=None, tbps=None)` compares the claim with every figure
  the model knows: its own dense per-dtype peaks and DRAM bandwidth, and the ``reference_figures``
  of its file (datasheet peaks, sparse peaks, sibling SKUs, superseded and third-party numbers).
  It returns a frozen :class:`ClaimCheck` naming the nearest figure for each half of the claim and
  a verdict. No figure lives here: all come from the data files.
* A claim **matches** when its TFLOP/s is within ``tolerance`` of the model's dense FP16/BF16 peak
  and its TB/s within ``tolerance`` of the model's DRAM bandwidth (halves given as None are not
  checked). Otherwise the summary says what the numbers look like instead ("756 TFLOP/s is the
  H100 PCIe dense FP16/BF16 tensor peak"; "it looks like INT8 TOPS").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import load
from .model import HardwareModel, HardwareQueryError

__all__ = ["Figure", "FigureMatch", "ClaimCheck", "check_claim", "figures"]

_DTYPE_WORD = {"float16": "FP16", "bfloat16": "BF16", "float32": "FP32", "tf32": "TF32",
               "float8": "FP8", "float64": "FP64", "int16": "INT16", "int8": "INT8", "int4": "INT4"}


@dataclass(frozen=True)
class Figure:
    """A figure a claim can be compared with (FLOP/s or bytes/s)."""

    label: str
    value: float
    unit: str  # "flops_per_s" or "bytes_per_s"
    sku: str
    source: str
    dtype: str = ""
    sparse: bool = False
    from_model: bool = False  # the model's own derived peak / DRAM bandwidth, not a quoted figure


@dataclass(frozen=True)
class FigureMatch:
    """The figure nearest to one half of a claim."""

    claimed: float  # FLOP/s or bytes/s
    figure: Figure
    ratio: float  # claimed / figure.value
    close: bool  # within tolerance
    text: str


@dataclass(frozen=True)
class ClaimCheck:
    """Result of :func:`check_claim`."""

    device: str
    tflops: float | None
    tbps: float | None
    expected_flops: float | None  # the model's dense FP16/BF16 peak, FLOP/s
    expected_bytes_per_s: float  # the model's DRAM bandwidth
    compute: FigureMatch | None
    bandwidth: FigureMatch | None
    matches: bool
    verdict: str  # "matches" or "does not match"
    summary: str


def figures(model: HardwareModel) -> list[Figure]:
    """Every figure of ``model``: its dense peaks, DRAM bandwidth and reference figures."""
    out: list[Figure] = []
    for ref in model.reference_figures:
        value, unit = (ref.flops_per_s, "flops_per_s") if ref.flops_per_s else (ref.bytes_per_s, "bytes_per_s")
        if value:
            out.append(Figure(ref.label, value, unit, ref.sku or model.name,
                              model.sources.get(f"reference_figures.{ref.name}.{unit}", ""),
                              ref.dtype, ref.sparse))
    for dtype in model.supported_dtypes():
        word = _DTYPE_WORD[dtype]
        est = " (rests on an estimate)" if model.peak_is_estimated(dtype) else ""
        out.append(Figure(f"{model.name} dense {word} peak from the model{est}", model.peak_flops(dtype),
                          "flops_per_s", model.name, "derived: count x flops_per_cycle x clock",
                          dtype, False, True))
    est = " (an estimate)" if model.is_estimated("memory.bandwidth_bytes_per_s") else ""
    out.append(Figure(f"{model.name} {model.memory.kind or 'DRAM'} bandwidth from the model{est}",
                      model.dram_bandwidth, "bytes_per_s", model.name,
                      model.sources.get("memory.bandwidth_bytes_per_s", ""), from_model=True))
    return out


def _nearest(claimed: float, cands: list[Figure], tolerance: float) -> tuple[Figure, float, bool]:
    # Nearest on a log scale; on ties prefer quoted figures (they carry the vendor's label).
    best = min(cands, key=lambda f: (round(abs(math.log(claimed / f.value)), 9), f.from_model))
    ratio = claimed / best.value
    return best, ratio, abs(ratio - 1) <= tolerance


def _fmt(value: float, unit: str, dtype: str = "") -> str:
    if unit == "bytes_per_s":
        return f"{value / 1e12:.4g} TB/s"
    return f"{value / 1e12:.4g} " + ("TOPS" if dtype.startswith("int") else "TFLOP/s")


def _compute_text(claimed: float, fig: Figure, ratio: float, close: bool, like_for_like: bool,
                  sibling_bw: float | None) -> str:
    head = f"{claimed / 1e12:g} TFLOP/s"
    value = _fmt(fig.value, fig.unit, fig.dtype)
    if not close:
        return (f"{head} matches no figure within tolerance; nearest is the {fig.label} "
                f"({value}, claim is {ratio:.2f}x)")
    if like_for_like:
        return f"{head} matches the {fig.label} ({value})"
    text = f"{head} is the {fig.label} ({value})"
    word = _DTYPE_WORD.get(fig.dtype, fig.dtype)
    if fig.dtype.startswith("int"):
        text += f": it looks like {word} TOPS, not dense FP16/BF16 TFLOP/s"
    elif fig.sparse:
        text += ": a sparse (2:4) figure, not a dense one"
    elif fig.dtype not in ("float16", "bfloat16"):
        text += f": a {word} figure, not FP16/BF16"
    elif sibling_bw:
        text += f": another SKU, whose bandwidth is {_fmt(sibling_bw, 'bytes_per_s')}"
    return text


def check_claim(model_or_name: HardwareModel | str, tflops: float | None = None,
                tbps: float | None = None, *, tolerance: float = 0.02) -> ClaimCheck:
    """Compare a claimed compute (TFLOP/s) and memory bandwidth (TB/s) with a model's figures.

    Args:
        model_or_name: a :class:`HardwareModel` or anything :func:`hwmodels.load` accepts.
        tflops: claimed peak in TFLOP/s (read as dense FP16/BF16), or None.
        tbps: claimed DRAM bandwidth in TB/s (decimal), or None.
        tolerance: relative difference still counted as the same figure.

    Returns:
        A frozen :class:`ClaimCheck`; ``summary`` is a readable paragraph.
    """
    model = load(model_or_name)
    figs = figures(model)
    peaks = []
    for dt in ("float16", "bfloat16"):
        try:
            peaks.append(model.peak_flops(dt))
        except HardwareQueryError:
            pass
    expected = max(peaks) if peaks else None
    compute = bandwidth = None
    ok = True
    if tflops is not None:
        claimed = tflops * 1e12
        fig, ratio, close = _nearest(claimed, [f for f in figs if f.unit == "flops_per_s"], tolerance)
        good = expected is not None and abs(claimed / expected - 1) <= tolerance
        like = good and close and fig.dtype in ("float16", "bfloat16") and not fig.sparse
        sibling = None if fig.from_model or fig.sku == model.name else next(
            (f.value for f in figs if f.unit == "bytes_per_s" and f.sku == fig.sku and not f.from_model), None)
        text = _compute_text(claimed, fig, ratio, close, like, sibling)
        compute = FigureMatch(claimed, fig, ratio, close, text)
        ok = ok and good
    if tbps is not None:
        claimed = tbps * 1e12
        fig, ratio, close = _nearest(claimed, [f for f in figs if f.unit == "bytes_per_s"], tolerance)
        good = abs(claimed / model.dram_bandwidth - 1) <= tolerance
        if close and good:
            text = f"{tbps:g} TB/s matches the {fig.label} ({_fmt(fig.value, fig.unit)})"
        elif close:
            text = f"{tbps:g} TB/s is the {fig.label} ({_fmt(fig.value, fig.unit)})"
        else:
            text = (f"{tbps:g} TB/s matches no figure within tolerance; it is {ratio:.2f}x the "
                    f"{fig.label} ({_fmt(fig.value, fig.unit)})")
        bandwidth = FigureMatch(claimed, fig, ratio, close, text)
        ok = ok and good
    verdict = "matches" if ok else "does not match"
    lines = [f"{model.name}: claim {verdict}."]
    lines += [f"- {m.text}" for m in (compute, bandwidth) if m is not None]
    if compute and bandwidth and compute.close and bandwidth.close and \
            compute.figure.sku != bandwidth.figure.sku and not ok:
        lines.append(f"- the two numbers come from different SKUs or dates "
                     f"({compute.figure.sku}; {bandwidth.figure.sku})")
    exp = "n/a" if expected is None else _fmt(expected, "flops_per_s")
    lines.append(f"- model: dense FP16/BF16 {exp}, DRAM {_fmt(model.dram_bandwidth, 'bytes_per_s')}")
    return ClaimCheck(model.name, tflops, tbps, expected, model.dram_bandwidth, compute, bandwidth,
                      ok, verdict, "\n".join(lines))
