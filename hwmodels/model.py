"""``HardwareModel``: the validated data of one device plus the quantities derived from it.

Contract
--------
* Peaks are **dense** and device-wide: ``core count × flops_per_cycle × clock of the unit``.
  ``peak_flops(dtype)`` is the best unit for that dtype; ``peak_flops(dtype, unit)`` restricts to a
  unit name (``"tensor"``, ``"cube"``) or a unit kind (``"matrix"``, ``"vector"``, ``"sfu"``).
* Bandwidths are bytes/s: ``dram_bandwidth``, ``l2_bandwidth``, ``bandwidth(level)``.
* ``machine_balance(dtype)`` = peak FLOP/s ÷ DRAM bytes/s; ``ridge_point(dtype, level,
  achievable)`` is the same ratio for any level, optionally with both ceilings scaled by the
  calibrated efficiencies.
* Questions the model cannot answer (an unsupported dtype, an unknown number, a scope with no
  buffer) raise :class:`HardwareQueryError`, which names the model file and the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, is_dataclass

from tilesim.errors import HardwareModelError

from .schema import Buffer, Cache, ComputeUnit, CoreKind, ModelData, ReferenceFigure
from .units import DTYPES, canonical_dtype

__all__ = ["HardwareModel", "HardwareQueryError", "resolve", "toml_key"]


class HardwareQueryError(HardwareModelError):
    """A question the model cannot answer (unsupported dtype, unknown value, unmapped scope)."""


def toml_key(f) -> str:
    """The key a dataclass field has in the data file."""
    return f.metadata.get("toml") or f.name


def resolve(obj: object, key: str) -> object:
    """The value at dotted ``key`` inside ``obj`` (arrays by element name).

    Raises:
        KeyError: no such key.
    """
    cur = obj
    for part in key.split("."):
        if is_dataclass(cur):
            match = [f for f in fields(cur) if toml_key(f) == part and "kind" in f.metadata]
            if not match:
                raise KeyError(key)
            cur = getattr(cur, match[0].name)
        elif isinstance(cur, Mapping):
            if part not in cur:
                raise KeyError(key)
            cur = cur[part]
        elif isinstance(cur, tuple):
            named = [x for x in cur if getattr(x, "name", None) == part]
            if not named:
                raise KeyError(key)
            cur = named[0]
        else:
            raise KeyError(key)
    return cur


@dataclass(frozen=True)
class HardwareModel(ModelData):
    """A validated hardware model; see :mod:`hwmodels` for the full API."""

    # ------------------------------------------------------------------ lookups
    def _fail(self, key: str, problem: str) -> HardwareQueryError:
        return HardwareQueryError(self.file or self.name, key, problem)

    def get(self, key: str) -> object:
        """The value at a dotted key, e.g. ``get("memory.bandwidth_bytes_per_s")``."""
        try:
            return resolve(self, key)
        except KeyError:
            raise self._fail(key, "no such key in this model") from None

    def source(self, key: str) -> str:
        """The source text of the number at dotted ``key``."""
        if key not in self.sources:
            raise self._fail(key, "no number with a source at this key")
        return self.sources[key]

    def is_estimated(self, key: str) -> bool:
        """Whether the number at ``key`` is estimated or derived from an estimate."""
        return key in self.estimated_keys

    def core_kind(self, name: str) -> CoreKind:
        """The core kind called ``name`` (``"sm"``, ``"aic"``, ``"aiv"``, ``"ipu"``)."""
        for core in self.core_kinds:
            if core.name == name:
                return core
        known = ", ".join(c.name for c in self.core_kinds)
        raise self._fail(f"core_kinds.{name}", f"no core kind '{name}' (this model has {known})")

    @property
    def primary_core(self) -> CoreKind:
        """The first core kind listed (the SM on GPUs, the cube core on Ascend)."""
        return self.core_kinds[0]

    def clock_hz(self, clock: str = "core_hz") -> float:
        """The frequency of a named clock (a key of ``clocks``)."""
        value = self.clocks.get(clock)
        if value is None:
            raise self._fail(f"clocks.{clock}", "clock is not given or unknown")
        return value

    def unit_clock_hz(self, core: CoreKind, unit: ComputeUnit | None = None) -> float:
        """The clock a unit of ``core`` runs at (unit's, else core's, else ``core_hz``)."""
        return self.clock_hz((unit.clock if unit else "") or core.clock or "core_hz")

    def cache(self, name: str) -> Cache:
        """The cache level called ``name`` (``"l2"``)."""
        for cache in self.caches:
            if cache.name == name:
                return cache
        raise self._fail(f"caches.{name}", f"no cache level '{name}'")

    def reference(self, name: str) -> ReferenceFigure:
        """The reference figure called ``name``."""
        for ref in self.reference_figures:
            if ref.name == name:
                return ref
        raise self._fail(f"reference_figures.{name}", "no such reference figure")

    # ------------------------------------------------------------------ compute
    def units(self, unit: str | None = None) -> tuple[tuple[CoreKind, ComputeUnit], ...]:
        """(core kind, unit) pairs whose unit name or kind equals ``unit`` (all when None)."""
        return tuple((c, u) for c in self.core_kinds for u in c.units
                     if unit is None or unit in (u.name, u.kind))

    def supports(self, dtype: object, unit: str | None = None) -> bool:
        """Whether some unit (matching ``unit``) lists ``dtype`` (its rate may be unknown)."""
        dt = canonical_dtype(dtype)
        return any(dt in u.flops_per_cycle for _, u in self.units(unit))

    def supported_dtypes(self, unit: str | None = None) -> tuple[str, ...]:
        """Dtypes with a known rate on some unit matching ``unit``, in canonical order."""
        have = {d for _, u in self.units(unit) for d, v in u.flops_per_cycle.items() if v}
        return tuple(d for d in DTYPES if d in have)

    def unit_peak_flops(self, core: CoreKind, unit: ComputeUnit, dtype: object) -> float | None:
        """Device-wide dense FLOP/s of one unit kind: count × flops_per_cycle × clock (or None)."""
        rate = unit.flops_per_cycle.get(canonical_dtype(dtype))
        if rate is None:
            return None
        return core.count * rate * self.unit_clock_hz(core, unit)

    def peak_flops(self, dtype: object, unit: str | None = None) -> float:
        """Dense device-wide peak FLOP/s (integer ops/s for int dtypes) for ``dtype``.

        Args:
            dtype: a dtype name (``"float16"``, ``"bf16"``, ``"float8_e4m3fn"``, ``"int8"``...).
            unit: a unit name or kind to restrict to; None takes the fastest unit.

        Raises:
            HardwareQueryError: no unit supports ``dtype`` or its rate is unknown.
        """
        dt = canonical_dtype(dtype)
        peaks = [p for c, u in self.units(unit) if (p := self.unit_peak_flops(c, u, dt))]
        if peaks:
            return max(peaks)
        where = f" on unit '{unit}'" if unit else ""
        have = ", ".join(self.supported_dtypes(unit)) or "none"
        state = "has an unknown rate" if self.supports(dt, unit) else "is not supported"
        raise self._fail(f"flops_per_cycle.{dt}", f"{dt}{where} {state} (known: {have})")

    def peak_is_estimated(self, dtype: object, unit: str | None = None) -> bool:
        """Whether ``peak_flops(dtype, unit)`` rests on an estimate that no published figure
        confirms (a dense reference figure with a URL source within 1% confirms it)."""
        dt = canonical_dtype(dtype)
        peak = self.peak_flops(dt, unit)
        for ref in self.reference_figures:
            key = f"reference_figures.{ref.name}.flops_per_s"
            if (ref.dtype == dt and not ref.sparse and ref.flops_per_s
                    and abs(ref.flops_per_s - peak) <= 0.01 * peak
                    and self.sources.get(key, "").startswith("http")):
                return False
        core, unit_ = next((c, u) for c, u in self.units(unit) if self.unit_peak_flops(c, u, dt) == peak)
        clock = unit_.clock or core.clock or "core_hz"
        keys = (f"core_kinds.{core.name}.count", f"clocks.{clock}",
                f"core_kinds.{core.name}.units.{unit_.name}.flops_per_cycle.{dt}")
        return any(self.is_estimated(k) for k in keys)

    # ------------------------------------------------------------------ memory
    @property
    def dram_bandwidth(self) -> float:
        """Off-chip memory bandwidth in bytes/s (the datasheet figure)."""
        return self.bandwidth("dram")

    @property
    def l2(self) -> Cache | None:
        """The ``l2`` cache level, or None."""
        return next((c for c in self.caches if c.name == "l2"), None)

    @property
    def l2_bandwidth(self) -> float | None:
        """L2 bandwidth in bytes/s, or None when the model has no L2 or the figure is unknown."""
        return self.l2.bandwidth_bytes_per_s if self.l2 else None

    @property
    def memory_latency_cycles(self) -> float | None:
        """DRAM latency in ``core_hz`` cycles (from ``latency_cycles`` or ``latency_s``)."""
        mem = self.memory
        if mem.latency_cycles is not None:
            return mem.latency_cycles
        return None if mem.latency_s is None else mem.latency_s * self.clock_hz()

    def bandwidth(self, level: str = "dram") -> float:
        """Bytes/s of ``"dram"`` or of a cache level (``"l2"``), device-wide.

        Raises:
            HardwareQueryError: no such level, or its bandwidth is unknown.
        """
        if level == "dram":
            value, key = self.memory.bandwidth_bytes_per_s, "memory.bandwidth_bytes_per_s"
        else:
            cache = self.cache(level)
            count = cache.count or 1
            value = None if cache.bandwidth_bytes_per_s is None else cache.bandwidth_bytes_per_s * count
            key = f"caches.{level}.bandwidth_bytes_per_s"
        if value is None:
            raise self._fail(key, "bandwidth is unknown")
        return value

    def machine_balance(self, dtype: object) -> float:
        """Peak dense FLOP/s over DRAM bytes/s for ``dtype`` (FLOP/byte)."""
        return self.peak_flops(dtype) / self.dram_bandwidth

    def ridge_point(self, dtype: object, level: str = "dram", achievable: bool = False) -> float:
        """Arithmetic intensity (FLOP/byte) where the compute and ``level`` roofs meet.

        With ``achievable=True`` both roofs are scaled by the model's efficiency fractions (the
        best matching ``matrix``/``vector`` fraction for ``dtype``; ``dram``/``l2`` fraction);
        a missing fraction counts as 1.
        """
        flops, bw = self.peak_flops(dtype), self.bandwidth(level)
        if achievable:
            dt = canonical_dtype(dtype)
            kind = self._best_kind(dt)
            if kind in ("matrix", "vector"):
                flops *= self.efficiency(kind, dt, default=1.0)
            if level in ("dram", "l2"):
                bw *= self.efficiency(level, default=1.0)
        return flops / bw

    def _best_kind(self, dtype: str) -> str | None:
        best = max(((self.unit_peak_flops(c, u, dtype) or 0.0, u.kind) for c, u in self.units()),
                   default=(0.0, None))
        return best[1] if best[0] else None

    # ------------------------------------------------------------------ buffers
    def buffer_for_scope(self, scope: str, core_kind: str | None = None) -> Buffer:
        """The buffer that holds tiles of ``scope`` (``shared``/``fragment``/``local``).

        Args:
            scope: tile scope name.
            core_kind: which core kind's buffers to search; None searches core kinds in order.

        Raises:
            HardwareQueryError: no buffer (of that core kind) is mapped to ``scope``.
        """
        cores = self.core_kinds if core_kind is None else (self.core_kind(core_kind),)
        for core in cores:
            for buf in core.buffers:
                if scope in buf.scopes:
                    return buf
        where = f"core kind '{core_kind}'" if core_kind else "any core kind"
        raise self._fail(f"scopes.{scope}", f"no buffer of {where} is mapped to scope '{scope}'")

    # ------------------------------------------------------------------ calibration
    def efficiency(self, what: str, dtype: object = None, default: float | None = None
                   ) -> float | None:
        """A calibrated achievable fraction of peak, or ``default`` when the file gives none.

        Args:
            what: ``"dram"``, ``"l2"``, ``"matrix"`` or ``"vector"``.
            dtype: required for ``matrix``/``vector``.
            default: returned when the model has no such fraction (None, or 1.0 for "ideal").
        """
        eff = self.efficiencies
        if what in ("dram", "l2"):
            value = getattr(eff, f"{what}_fraction")
        elif what in ("matrix", "vector"):
            if dtype is None:
                raise self._fail(f"efficiency.{what}_fraction", "a dtype is needed")
            value = getattr(eff, f"{what}_fraction").get(canonical_dtype(dtype))
        else:
            raise self._fail(f"efficiency.{what}", "use 'dram', 'l2', 'matrix' or 'vector'")
        return default if value is None else value
