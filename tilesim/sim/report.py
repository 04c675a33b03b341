"""``SimReport``: the frozen result of one simulation, its JSON form and a readable summary."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ..atomic_io import write_text

__all__ = ["SimReport", "format_summary"]


def _freeze(d) -> Mapping:
    return MappingProxyType(dict(d or {}))


@dataclass(frozen=True)
class SimReport:
    """What the simulator predicts for one kernel call on one hardware model.

    Attributes:
        kernel, hw, profile: what was simulated.
        time_s: simulated time of the whole program (all launches, launch latency included).
        roofline_s: the roofline bound: the largest of each unit's FLOPs over its datasheet peak and
            the compulsory DRAM bytes over the datasheet bandwidth (``time_s`` is never below it).
        roofline_limit: which ceiling gives ``roofline_s``.
        bound: the bounding resource in words ("DRAM bandwidth", "tensor core", "exp2 on SFU",
            "latency/occupancy", "launch overhead").
        busy_s: per engine, the busy time of an average core (seconds).
        flops: FLOPs by ``"unit:dtype"``; ``total_flops`` their sum.
        bytes: bytes by level (``"dram read"``, ``"dram write"``, ``"l2"``, ``"global->shared"``, ...).
        achieved_flops_per_s, achieved_dram_bytes_per_s: totals over ``time_s``.
        blocks, blocks_per_core, occupancy_limit, waves: the device schedule (first launch's
            occupancy; blocks summed over launches).
        launches: per launch, a small dict (time, blocks, waves, occupancy, tail, registers granted and
            wanted per thread, registers spilled in the hot loop).
        notes: assumptions made (unknown hardware numbers, hints used).
        trace: a Chrome-trace JSON object of one core's timeline, when asked for.
    """

    kernel: str
    hw: str
    profile: str
    time_s: float
    roofline_s: float
    roofline_limit: str
    bound: str
    busy_s: Mapping = field(default_factory=dict)
    flops: Mapping = field(default_factory=dict)
    total_flops: float = 0.0
    bytes: Mapping = field(default_factory=dict)
    achieved_flops_per_s: float = 0.0
    achieved_dram_bytes_per_s: float = 0.0
    blocks: int = 0
    blocks_per_core: int = 0
    occupancy_limit: str = ""
    waves: float = 0.0
    launches: tuple = ()
    notes: tuple = ()
    trace: Mapping | None = None

    def __post_init__(self):
        for name in ("busy_s", "flops", "bytes"):
            object.__setattr__(self, name, _freeze(getattr(self, name)))

    @property
    def time_ms(self) -> float:
        return self.time_s * 1e3

    @property
    def dram_bytes(self) -> float:
        return self.bytes.get("dram read", 0.0) + self.bytes.get("dram write", 0.0)

    @property
    def intensity(self) -> float:
        """FLOPs per DRAM byte (the roofline x coordinate)."""
        return self.total_flops / self.dram_bytes if self.dram_bytes else float("inf")

    def to_dict(self, with_trace: bool = False) -> dict:
        d = {
            "kernel": self.kernel, "hw": self.hw, "profile": self.profile, "time_s": self.time_s,
            "roofline_s": self.roofline_s, "roofline_limit": self.roofline_limit, "bound": self.bound,
            "busy_s": dict(self.busy_s), "flops": dict(self.flops), "total_flops": self.total_flops,
            "bytes": dict(self.bytes), "achieved_flops_per_s": self.achieved_flops_per_s,
            "achieved_dram_bytes_per_s": self.achieved_dram_bytes_per_s, "intensity": self.intensity,
            "blocks": self.blocks, "blocks_per_core": self.blocks_per_core,
            "occupancy_limit": self.occupancy_limit, "waves": self.waves,
            "launches": [dict(x) for x in self.launches], "notes": list(self.notes),
        }
        if with_trace and self.trace is not None:
            d["trace"] = dict(self.trace)
        return d

    def __str__(self) -> str:
        return self.summary()

    def summary(self) -> str:
        return format_summary(self)

    def write_trace(self, path) -> None:
        """Write the Chrome trace (open it in https://ui.perfetto.dev)."""
        if self.trace is None:
            raise ValueError("this report has no trace: simulate with trace=True")
        write_text(path, json.dumps(dict(self.trace)))  # atomic: no half-written trace on failure


def _si(x: float, unit: str) -> str:
    for p, s in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= p:
            return f"{x / p:,.2f} {s}{unit}"
    return f"{x:,.2f} {unit}"


def _t(s: float) -> str:
    if s >= 1e-3:
        return f"{s * 1e3:,.3f} ms"
    return f"{s * 1e6:,.2f} µs"


def format_summary(r: SimReport) -> str:
    lines = [
        f"{r.kernel} on {r.hw} ({r.profile} profile)",
        f"  time            {_t(r.time_s)}   (roofline bound {_t(r.roofline_s)}: {r.roofline_limit}; "
        f"{r.time_s / r.roofline_s if r.roofline_s else float('inf'):.2f}× above)",
        f"  bound by        {r.bound}",
        f"  achieved        {_si(r.achieved_flops_per_s, 'FLOP/s')}, DRAM {_si(r.achieved_dram_bytes_per_s, 'B/s')}",
        f"  blocks          {r.blocks:,} = {r.waves:.2f} waves of {r.blocks_per_core} per core "
        f"(occupancy limited by {r.occupancy_limit})",
    ]
    if r.flops:
        lines.append("  FLOPs           " + ", ".join(f"{k} {_si(v, '')}" for k, v in r.flops.items()))
    if r.bytes:
        lines.append("  bytes           " + ", ".join(f"{k} {_si(v, 'B')}" for k, v in r.bytes.items() if v))
    if r.busy_s:
        lines.append("  busy per core   " + ", ".join(f"{k} {_t(v)}" for k, v in
                                                      sorted(r.busy_s.items(), key=lambda x: -x[1])))
    for n in r.notes:
        lines.append(f"  note: {n}")
    return "\n".join(lines)
