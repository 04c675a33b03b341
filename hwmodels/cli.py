"""``tilesim hw list|show|check``: print hardware models from the command line.

Contract
--------
* :func:`add_subcommands(subparsers)` adds an ``hw`` command (with ``list``, ``show``, ``check``)
  to an ``argparse`` sub-parser set; each leaf parser sets ``fn`` (the ``tilesim.cli``
  convention) to a callable ``(args) -> int`` (exit status) that prints to stdout.
* :func:`main(argv)` runs the same commands without the ``hw`` prefix (``python -m hwmodels``).
* ``list`` prints one row per built-in model (plus ``--hw FILE`` models): cores, dense peaks
  (TFLOP/s, ``—`` unsupported, ``?`` unknown, ``*`` resting on an estimate), DRAM TB/s and the
  FP16 ridge point. ``show NAME_OR_PATH`` prints every field with value, unit and source, then the
  derived peaks. ``check NAME --tflops T --tbps B`` checks a quoted figure (see
  :mod:`hwmodels.claims`). Errors in a model file print the ``HardwareModelError`` and return 2.
"""

from __future__ import annotations

import argparse
import sys

from tilesim.errors import HardwareModelError

from . import builtin_names, load
from .claims import check_claim
from .dump import iter_fields
from .model import HardwareModel, HardwareQueryError
from .units import UNIT_SYMBOLS

__all__ = ["add_subcommands", "register", "main", "list_table", "show_text", "format_quantity"]

_LIST_DTYPES = ("float16", "bfloat16", "float8", "float32")


def format_quantity(value: object, unit: str) -> str:
    """A value in a readable unit: ``4.8 TB/s``, ``1830 MHz``, ``228 KiB``, ``unknown``."""
    if value is None:
        return "unknown"
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return str(value)
    scaled = {
        "bytes_per_s": (1e12, "TB/s") if value >= 1e12 else (1e9, "GB/s"),
        "flops_per_s": (1e12, "TFLOP/s"),
        "hz": (1e6, "MHz"),
        "s": (1e-6, "us") if value < 1e-3 else (1.0, "s"),
        "bytes": (2**20, "MiB") if value >= 2**20 else (2**10, "KiB") if value >= 2**10 else (1, "B"),
    }.get(unit)
    if scaled:
        return f"{value / scaled[0]:.6g} {scaled[1]}"
    return f"{value:.6g} {UNIT_SYMBOLS.get(unit, unit)}".rstrip()


def _peak_cell(model: HardwareModel, dtype: str) -> str:
    try:
        peak = model.peak_flops(dtype)
    except HardwareQueryError:
        return "?" if model.supports(dtype) else "—"
    return f"{peak / 1e12:.1f}" + ("*" if model.peak_is_estimated(dtype) else "")


def _cores(model: HardwareModel) -> str:
    return " + ".join(f"{c.count} {c.name}" + ("*" if model.is_estimated(f"core_kinds.{c.name}.count") else "")
                      for c in model.core_kinds)


def _row(model: HardwareModel) -> list[str]:
    bw_est = model.is_estimated("memory.bandwidth_bytes_per_s")
    ridge_dtype = next((d for d in ("float16", "bfloat16") if d in model.supported_dtypes()), None)
    if ridge_dtype:
        est = bw_est or model.peak_is_estimated(ridge_dtype)
        ridge = f"{model.machine_balance(ridge_dtype):.0f}" + ("*" if est else "")
    else:
        ridge = "—"
    return [model.name, _cores(model), *(_peak_cell(model, d) for d in _LIST_DTYPES),
            f"{model.dram_bandwidth / 1e12:.2f}" + ("*" if bw_est else ""), ridge]


def list_table(models: list[HardwareModel]) -> str:
    """The ``hw list`` table for ``models`` (plain text, aligned columns)."""
    head = ["device", "cores", "fp16", "bf16", "fp8", "fp32", "DRAM TB/s", "ridge FLOP/B"]
    rows = [head] + [_row(m) for m in models]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append("")
    lines.append("Peaks: dense TFLOP/s (int: TOPS) device-wide; ridge = dense fp16 (else bf16) peak / DRAM "
                 "bandwidth. — unsupported, ? unknown, * rests on an estimate (see `hw show`).")
    return "\n".join(lines)


def show_text(model: HardwareModel) -> str:
    """Every field of ``model`` with value, unit and source, then its derived peaks."""
    out = [f"{model.name}: {model.description}", f"file: {model.file}", ""]
    rows = [(k, format_quantity(v, u), s) for k, v, u, s in iter_fields(model)]
    width = max(len(r[0]) for r in rows)
    vwidth = min(28, max(len(r[1]) for r in rows))
    out += [f"{k.ljust(width)}  {v.ljust(vwidth)}  {s}".rstrip() for k, v, s in rows]
    out += ["", "derived (dense, device-wide):"]
    for dtype in model.supported_dtypes():
        star = " (rests on an estimate)" if model.peak_is_estimated(dtype) else ""
        out.append(f"  peak {dtype:<9} {model.peak_flops(dtype) / 1e12:10.2f} TFLOP/s  "
                   f"machine balance {model.machine_balance(dtype):8.1f} FLOP/B{star}")
    out.append(f"  DRAM bandwidth  {format_quantity(model.dram_bandwidth, 'bytes_per_s')}")
    if model.l2_bandwidth is not None:
        out.append(f"  L2 bandwidth    {format_quantity(model.l2_bandwidth, 'bytes_per_s')}")
    return "\n".join(out)


def _cmd_list(args: argparse.Namespace) -> int:
    models = [load(n) for n in builtin_names()] + [load(p) for p in (args.hw or [])]
    print(list_table(models))
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    print(show_text(load(args.name)))
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    result = check_claim(args.name, tflops=args.tflops, tbps=args.tbps)
    print(result.summary)
    return 0 if result.matches else 1


def _guarded(fn):
    def run(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except HardwareModelError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    return run


def register(subparsers) -> None:
    """Add ``list``, ``show`` and ``check`` parsers to ``subparsers``."""
    p = subparsers.add_parser("list", help="table of built-in hardware models")
    p.add_argument("--hw", action="append", metavar="FILE", help="also list this TOML model (repeatable)")
    p.set_defaults(fn=_guarded(_cmd_list))
    p = subparsers.add_parser("show", help="every field of a model with value, unit and source")
    p.add_argument("name", metavar="NAME_OR_PATH", help="built-in name/alias/variant or a .toml path")
    p.set_defaults(fn=_guarded(_cmd_show))
    p = subparsers.add_parser("check", help="check a quoted TFLOP/s and TB/s figure against a model")
    p.add_argument("name", metavar="NAME_OR_PATH")
    p.add_argument("--tflops", type=float, help="claimed TFLOP/s")
    p.add_argument("--tbps", type=float, help="claimed memory bandwidth, TB/s")
    p.set_defaults(fn=_guarded(_cmd_check))


def add_subcommands(subparsers) -> argparse.ArgumentParser:
    """Register ``hw list|show|check`` on an argparse sub-parser set; returns the ``hw`` parser.

    Example:
        >>> parser = argparse.ArgumentParser(prog="tilesim")
        >>> sub = parser.add_subparsers(dest="command", required=True)
        >>> _ = add_subcommands(sub)
        >>> args = parser.parse_args(["hw", "list"]); status = args.fn(args)  # doctest: +SKIP
    """
    hw = subparsers.add_parser("hw", help="hardware models (list, show, check)")
    register(hw.add_subparsers(dest="hw_command", required=True))
    return hw


def main(argv: list[str] | None = None) -> int:
    """``python -m hwmodels list|show NAME|check NAME ...``; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m hwmodels", description="tilesim hardware models")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.fn(args)
