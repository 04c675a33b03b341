"""Cycle-approximate simulator: schedules the cost analysis on a hardware model.

API
---
``simulate(prim_func, hw="h200_sxm_141gb", profile=None, *, trace=False, name=None, **shapes)``
    → :class:`SimReport`. ``hw``: a built-in name, a TOML path or a loaded model; ``profile``:
    ``tensorcore`` / ``numba`` / ``ascend`` / ``mlu`` (default: the device's natural one);
    ``shapes``: values of dynamic dimensions, tensors for data-dependent loops (by parameter name)
    and ``hints={...}`` (see ``tilesim.analysis.cost``).
``simulate_kernel(kernel, hw=..., profile=..., **shapes)`` — the same for a compiled ``JITKernel``
    (``kernel.simulate(...)`` calls it).
``simulate_programs(programs, hw, profile, ...)`` — schedule already analysed launches (calibration
    re-simulates one analysis under many hardware-model variants).
``load_hw(hw)`` — the model ``hw`` denotes (:func:`tilesim.hw.resolve`, the core's one seam to the
    ``hwmodels`` package: a loaded model passes through, a name or path is resolved on first use).

Model, parameters and blind spots: ``docs/simulator.md``.
"""

from __future__ import annotations

import math

from ..analysis import analyze, default_profile, get_profile
from ..hw import Hardware
from ..hw import resolve as load_hw
from ..ir import nodes as N
from .device import simulate_launch
from .machine import Machine, hw_dtype
from .report import SimReport, format_summary
from .trace import chrome_trace

__all__ = ["simulate", "simulate_kernel", "simulate_programs", "SimReport", "format_summary", "load_hw",
           "default_profile"]


def _roofline(hw, machine, results):
    best, limit = 0.0, "nothing to do"
    flops: dict = {}
    for r in results:
        for (unit, dtype), v in r.flops.items():
            flops[(unit, dtype)] = flops.get((unit, dtype), 0.0) + v
    for (unit, dtype), v in flops.items():
        peak = None
        for c, u in hw.units(unit):
            peak = hw.unit_peak_flops(c, u, hw_dtype(dtype)) or hw.unit_peak_flops(c, u, "float32")
            if peak:
                break
        if not peak:
            continue
        t = v / peak
        if t > best:
            best, limit = t, f"{unit} {dtype} peak"
    dram = sum(r.dram_compulsory for r in results)
    t = dram / hw.dram_bandwidth
    if t > best:
        best, limit = t, "DRAM bandwidth (compulsory bytes)"
    return best, limit


def _bound(machine, results, total):
    launch = sum(r.launch_s for r in results)
    if total <= 0:
        return "nothing to do"
    if launch > 0.5 * total:
        return "launch overhead"
    busy: dict = {}
    for r in results:
        for k, v in r.busy_s.items():
            busy[k] = busy.get(k, 0.0) + v
    if not busy:
        return "latency/occupancy"
    key, val = max(busy.items(), key=lambda x: x[1])
    if val >= 0.75 * (total - launch):
        sfu_top = None
        if key == "sfu":
            funcs: dict = {}
            for r in results:
                for f, v in r.sfu.items():
                    funcs[f] = funcs.get(f, 0.0) + v
            sfu_top = max(funcs.items(), key=lambda x: x[1])[0] if funcs else None
        return machine.resource_name(key, sfu_top)
    return "latency/occupancy"


def simulate_programs(programs, hw: Hardware | str, profile, *, name="kernel", trace=False) -> SimReport:
    """Schedule analysed launches (``tilesim.analysis.analyze``) on ``hw``."""
    hw = load_hw(hw)
    prof = get_profile(profile)
    machine = Machine(hw, prof)
    results = [simulate_launch(p, machine, name, trace=trace and i == 0) for i, p in enumerate(programs)]
    total = sum(r.time_s for r in results)
    roof, limit = _roofline(hw, machine, results)
    busy: dict = {}
    flops: dict = {}
    xfer: dict = {}
    for r in results:
        for k, v in r.busy_s.items():
            busy[machine.resource_name(k)] = busy.get(machine.resource_name(k), 0.0) + v
        for (u, d), v in r.flops.items():
            flops[f"{u}:{d}"] = flops.get(f"{u}:{d}", 0.0) + v
        for k, v in r.xfer.items():
            xfer[k] = xfer.get(k, 0.0) + v
    by = {"dram read": sum(r.dram_read for r in results), "dram write": sum(r.dram_write for r in results),
          "l2": sum(r.l2_bytes for r in results)}
    by.update(xfer)
    total_flops = sum(flops.values())
    notes = list(dict.fromkeys(machine.assumptions + [n for r in results for n in r.notes]))
    trace_obj = None
    if trace:
        trace_obj = chrome_trace(results, machine, name)
    first = results[0]
    return SimReport(
        kernel=name, hw=hw.name, profile=prof.name, time_s=total, roofline_s=roof, roofline_limit=limit,
        bound=_bound(machine, results, total), busy_s=busy, flops=flops, total_flops=total_flops, bytes=by,
        achieved_flops_per_s=total_flops / total if total else 0.0,
        achieved_dram_bytes_per_s=(by["dram read"] + by["dram write"]) / total if total else 0.0,
        blocks=sum(r.blocks for r in results), blocks_per_core=first.blocks_per_core,
        occupancy_limit=first.occupancy_limit, waves=sum(r.waves for r in results),
        launches=tuple({"time_s": r.time_s, "blocks": r.blocks, "waves": r.waves,
                        "blocks_per_core": r.blocks_per_core, "occupancy_limit": r.occupancy_limit,
                        "fluid_s": r.fluid_s, "wave_quantisation_s": r.quantisation_s, "launch_s": r.launch_s,
                        "block_critical_path_s": r.block_time_s,
                        "registers_per_thread": r.registers_per_thread, "registers_demand": r.registers_demand,
                        "registers_at_launch": r.registers_at_launch,
                        "spill_registers_per_thread": r.spill_registers_per_thread} for r in results),
        notes=tuple(notes), trace=trace_obj)


def simulate(prim_func: N.PrimFunc, hw: Hardware | str = "h200_sxm_141gb", profile=None, *, trace=False,
             name=None, **shapes) -> SimReport:
    """Simulate ``prim_func`` on ``hw`` under a lowering ``profile`` (see the module docstring)."""
    hwm = load_hw(hw)
    prof = get_profile(profile if profile is not None else default_profile(hwm))
    programs = analyze(prim_func, hwm, prof, **shapes)
    return simulate_programs(programs, hwm, prof, name=name or prim_func.name, trace=trace)


def simulate_kernel(kernel, hw: Hardware | str = "h200_sxm_141gb", profile=None, *, trace=False,
                    **shapes) -> SimReport:
    """Simulate a compiled kernel (``JITKernel``) — ``kernel.simulate(...)`` calls this."""
    pf = kernel.prim_func if hasattr(kernel, "prim_func") else kernel
    name = getattr(getattr(kernel, "prim_func", None), "name", None) or getattr(pf, "name", "kernel")
    return simulate(pf, hw, profile, trace=trace, name=name, **shapes)


_ = math
