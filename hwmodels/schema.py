"""The hardware-model schema: frozen dataclasses shared by GPUs and NPUs.

Contract
--------
* A :class:`HardwareModel` is built only by :func:`hwmodels.load` (validated) or by tests/dumpers
  that construct one by hand. All classes are frozen; per-dtype and per-name tables are read-only
  mappings.
* Numeric attributes are plain ``float``/``int`` values in the unit their name ends with
  (``bytes``, ``bytes_per_s``, ``hz``, ``cycles``, ...), or ``None`` when the file says the number
  is unknown or leaves an optional key out. The source of each number is in
  ``HardwareModel.sources`` under its dotted key (``memory.bandwidth_bytes_per_s``,
  ``core_kinds.sm.units.tensor.flops_per_cycle.float16``); arrays are addressed by ``name``.
* The field metadata below *is* the file format: the loader (``hwmodels.loader``) and the dumper
  (``hwmodels.dump``) walk it, so a field added here is read and written everywhere.
  Metadata ``kind`` is one of ``text``, ``texts``, ``flag``, ``num``, ``sub``, ``array``,
  ``dtype_map`` (dtype → number, unit from the field name), ``named_map`` (key with a unit suffix →
  number) and ``variants``.
* Derived quantities (peaks, bandwidths, ridge points, scope → buffer) live in
  :mod:`hwmodels.model` as methods of :class:`HardwareModel`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = [
    "ComputeUnit", "Buffer", "DataPath", "Occupancy", "CoreKind", "Cache", "Memory", "Overheads",
    "Efficiency", "Interconnect", "ReferenceFigure", "Override", "Variant", "ModelData",
    "frozen_map",
]


def frozen_map(items: Mapping | None = None) -> Mapping:
    """A read-only copy of ``items`` (an empty mapping for None)."""
    return MappingProxyType(dict(items or {}))


def _text(*, required: bool = False, choices: tuple[str, ...] = (), toml: str | None = None):
    return field(default="", metadata={"kind": "text", "required": required, "choices": choices,
                                       "toml": toml})


def _texts(*, choices: tuple[str, ...] = ()):
    return field(default=(), metadata={"kind": "texts", "choices": choices})


def _flag():
    return field(default=False, metadata={"kind": "flag"})


def _num(*, required: bool = False):
    return field(default=None, metadata={"kind": "num", "required": required})


def _sub(cls: type, *, required: bool = False, toml: str | None = None, empty: bool = False):
    # empty=True: an absent table reads as cls() (all None), so callers never test for None.
    meta = {"kind": "sub", "cls": cls, "required": required, "toml": toml, "empty": empty}
    if empty:
        return field(default_factory=cls, metadata=meta)
    return field(default=None, metadata=meta)


def _array(cls: type, *, required: bool = False):
    return field(default=(), metadata={"kind": "array", "cls": cls, "required": required})


def _dtype_map(*, required: bool = False):
    return field(default_factory=frozen_map, hash=False,
                 metadata={"kind": "dtype_map", "required": required})


def _named_map(unit: str | None, *, required: tuple[str, ...] = ()):
    return field(default_factory=frozen_map, hash=False,
                 metadata={"kind": "named_map", "unit": unit, "required": required})


@dataclass(frozen=True)
class ComputeUnit:
    """One kind of execution unit inside a core (all copies of it in that core counted together).

    ``flops_per_cycle[dtype]`` is the dense rate of one core (2 per multiply-accumulate; integer
    rates count integer ops; ``sfu`` rates count results). A missing dtype is unsupported; a dtype
    whose value is None is supported but its rate is unknown. ``clock`` names a key of
    ``HardwareModel.clocks`` (empty: the core kind's clock).
    """

    name: str = _text(required=True)
    kind: str = _text(required=True, choices=("matrix", "vector", "sfu"))
    clock: str = _text()
    description: str = _text()
    flops_per_cycle: Mapping[str, float | None] = _dtype_map(required=True)


@dataclass(frozen=True)
class Buffer:
    """An on-chip buffer of one core (``bytes`` per core) and the tile scopes it holds.

    ``block_bytes`` is the most one thread block may use (GPU shared-memory opt-in limit).
    """

    name: str = _text(required=True)
    description: str = _text()
    scopes: tuple[str, ...] = _texts(choices=("shared", "fragment", "local"))
    bytes: int | None = _num(required=True)
    block_bytes: int | None = _num()
    read_bytes_per_cycle: float | None = _num()
    write_bytes_per_cycle: float | None = _num()
    latency_cycles: float | None = _num()


@dataclass(frozen=True)
class DataPath:
    """A per-core data mover (Ascend MTE pipes, a GPU's TMA/cp.async path) between two levels.

    ``src``/``dst`` name ``dram``, a cache (``l2``) or a buffer of the same core kind.
    """

    name: str = _text(required=True)
    description: str = _text()
    src: str = _text(required=True)
    dst: str = _text(required=True)
    bytes_per_cycle: float | None = _num()
    latency_cycles: float | None = _num()


@dataclass(frozen=True)
class Occupancy:
    """Per-core residency limits (GPUs); counts of threads, warps, blocks and 32-bit registers."""

    max_threads_count: int | None = _num()
    max_threads_per_block_count: int | None = _num()
    max_warps_count: int | None = _num()
    max_blocks_count: int | None = _num()
    registers_count: int | None = _num()
    max_registers_per_thread_count: int | None = _num()
    #: registers are granted to a thread in multiples of this (a warp's allocation unit / warp size)
    register_alloc_unit_count: int | None = _num()
    warp_size_count: int | None = _num()


@dataclass(frozen=True)
class CoreKind:
    """A kind of core (``sm``, ``aic``, ``aiv``, ``ipu``): how many, their clock, units, buffers.

    ``paired_with`` names another core kind these cores are grouped with (Ascend: two AIV per
    AIC); ``cores_per_cluster_count`` is the cluster size where cores are clustered (MLU).
    """

    name: str = _text(required=True)
    description: str = _text()
    clock: str = _text()
    paired_with: str = _text()
    count: int | None = _num(required=True)
    cores_per_cluster_count: int | None = _num()
    units: tuple[ComputeUnit, ...] = _array(ComputeUnit)
    buffers: tuple[Buffer, ...] = _array(Buffer, required=True)
    data_paths: tuple[DataPath, ...] = _array(DataPath)
    occupancy: Occupancy | None = _sub(Occupancy)


@dataclass(frozen=True)
class Cache:
    """A shared level between cores and DRAM (``l2``; MLU cluster SRAM).

    ``bytes`` and ``bandwidth_bytes_per_s`` are per instance; ``count`` instances (absent: one).
    ``core_kind`` names the core kind one instance serves (empty: every core of the device).
    """

    name: str = _text(required=True)
    description: str = _text()
    core_kind: str = _text()
    bytes: int | None = _num()
    count: int | None = _num()
    bandwidth_bytes_per_s: float | None = _num()
    latency_cycles: float | None = _num()


@dataclass(frozen=True)
class Memory:
    """Off-chip memory (HBM, LPDDR). Latencies in ``clocks.core_hz`` cycles or in seconds."""

    kind: str = _text()
    capacity_bytes: int | None = _num(required=True)
    bandwidth_bytes_per_s: float | None = _num(required=True)
    latency_cycles: float | None = _num()
    latency_s: float | None = _num()
    #: the latency a load sees while the memory runs near its bandwidth (queueing), core cycles
    loaded_latency_cycles: float | None = _num()


@dataclass(frozen=True)
class Overheads:
    """Fixed costs: per kernel launch (seconds), per block launch and per barrier (core cycles).

    ``timed_launch_overhead_s``: what one kernel timed alone between two events (``do_bench``) costs
    beyond ``kernel_launch_latency_s`` (ramp-up of the first wave, drain of the last, timestamps).
    """

    kernel_launch_latency_s: float | None = _num()
    timed_launch_overhead_s: float | None = _num()
    block_launch_cycles: float | None = _num()
    sync_cycles: float | None = _num()


@dataclass(frozen=True)
class Efficiency:
    """Calibrated achievable fractions of peak (each with a source in the file)."""

    dram_fraction: float | None = _num()
    l2_fraction: float | None = _num()
    matrix_fraction: Mapping[str, float | None] = _dtype_map()
    vector_fraction: Mapping[str, float | None] = _dtype_map()


@dataclass(frozen=True)
class Interconnect:
    """A link to other devices or the host, with the bandwidth the vendor states."""

    name: str = _text(required=True)
    description: str = _text()
    bandwidth_bytes_per_s: float | None = _num()


@dataclass(frozen=True)
class ReferenceFigure:
    """A published figure kept for comparisons (this SKU's datasheet peaks, sibling SKUs,
    superseded or third-party numbers). Exactly one of ``flops_per_s``/``bytes_per_s`` is set."""

    name: str = _text(required=True)
    label: str = _text(required=True)
    sku: str = _text()
    dtype: str = _text()
    sparse: bool = _flag()
    flops_per_s: float | None = _num()
    bytes_per_s: float | None = _num()


@dataclass(frozen=True)
class Override:
    """One key a variant replaces: a number with its source, or a text (``source`` empty)."""

    key: str
    value: float | str | None
    source: str = ""


@dataclass(frozen=True)
class Variant:
    """A named variant of a device (Ascend 910B1/B3/B4) given as overrides of the base file."""

    name: str
    description: str = ""
    overrides: tuple[Override, ...] = ()


@dataclass(frozen=True)
class ModelData:
    """The data of a hardware model, exactly as its file states it (after validation).

    ``HardwareModel`` (in :mod:`hwmodels.model`) adds the derived quantities on top.
    """

    name: str = _text(required=True)
    vendor: str = _text(required=True)
    kind: str = _text(required=True, choices=("gpu", "npu"))
    description: str = _text()
    #: the instruction-set name compilers target (NVIDIA: ``sm_90``; empty when the file does not say)
    arch: str = _text()
    variant_of: str = _text()
    aliases: tuple[str, ...] = _texts()
    clocks: Mapping[str, float | None] = _named_map("hz", required=("core_hz",))
    tdp_w: float | None = _num()
    core_kinds: tuple[CoreKind, ...] = _array(CoreKind, required=True)
    caches: tuple[Cache, ...] = _array(Cache)
    memory: Memory | None = _sub(Memory, required=True)
    overheads: Overheads = _sub(Overheads, empty=True)
    efficiencies: Efficiency = _sub(Efficiency, toml="efficiency", empty=True)
    interconnects: tuple[Interconnect, ...] = _array(Interconnect)
    reference_figures: tuple[ReferenceFigure, ...] = _array(ReferenceFigure)
    calibration: Mapping[str, float | None] = _named_map(None)
    variants: tuple[Variant, ...] = field(default=(), metadata={"kind": "variants"})
    #: dotted key → source text of every number the file states (not part of the file layout).
    sources: Mapping[str, str] = field(default_factory=frozen_map, hash=False)
    #: dotted keys whose value is estimated or derived from an estimate (computed by the loader).
    estimated_keys: frozenset[str] = field(default=frozenset(), compare=False)
    #: where the model was read from (not compared).
    file: str = field(default="", compare=False)
