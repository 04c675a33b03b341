"""Cross-reference checks on a built model (the per-key checks happen while reading).

Contract
--------
:func:`validate` raises :class:`tilesim.errors.HardwareModelError` (file, dotted key, problem) for
the first problem found:

* a clock named by a core kind or unit that ``[clocks]`` lacks;
* a core kind named by ``paired_with`` or a cache's ``core_kind`` that does not exist;
* a tile scope (``shared``, ``fragment``, ``local``) mapped to no buffer, or to two buffers of one
  core kind;
* a data path whose ``src``/``dst`` is not ``dram``, a cache, or a buffer of its core kind;
* an efficiency for a dtype no unit of that kind runs;
* occupancy limits that contradict each other, a block limit above the buffer size;
* a reference figure without exactly one of ``flops_per_s``/``bytes_per_s``, or with a bad dtype.
"""

from __future__ import annotations

from tilesim.errors import HardwareModelError

from .model import HardwareModel
from .units import DTYPES, SCOPES

__all__ = ["validate"]


def validate(model: HardwareModel) -> None:
    """Check the cross-references of ``model``; raise on the first problem."""

    def fail(key: str, problem: str):
        raise HardwareModelError(model.file or model.name, key, problem)

    clocks = ", ".join(model.clocks) or "none"
    core_names = [c.name for c in model.core_kinds]
    cache_names = [c.name for c in model.caches]
    mapped: set[str] = set()
    for core in model.core_kinds:
        at = f"core_kinds.{core.name}"
        if core.clock and core.clock not in model.clocks:
            fail(f"{at}.clock", f"unknown clock '{core.clock}' (clocks: {clocks})")
        if core.paired_with and core.paired_with not in core_names:
            fail(f"{at}.paired_with", f"unknown core kind '{core.paired_with}' "
                                       f"(core kinds: {', '.join(core_names)})")
        for unit in core.units:
            if unit.clock and unit.clock not in model.clocks:
                fail(f"{at}.units.{unit.name}.clock", f"unknown clock '{unit.clock}' (clocks: {clocks})")
        seen: dict[str, str] = {}
        buffer_names = [b.name for b in core.buffers]
        for buf in core.buffers:
            for scope in buf.scopes:
                if scope in seen:
                    fail(f"{at}.buffers.{buf.name}.scopes",
                         f"scope '{scope}' is already mapped to buffer '{seen[scope]}' of this core kind")
                seen[scope] = buf.name
            if buf.block_bytes is not None and buf.bytes is not None and buf.block_bytes > buf.bytes:
                fail(f"{at}.buffers.{buf.name}.block_bytes", "is larger than the buffer's bytes")
        mapped.update(seen)
        levels = ["dram", *cache_names, *buffer_names]
        for path in core.data_paths:
            for end in ("src", "dst"):
                level = getattr(path, end)
                if level not in levels:
                    fail(f"{at}.data_paths.{path.name}.{end}",
                         f"unknown level '{level}' (levels: {', '.join(levels)})")
        occ = core.occupancy
        if occ is not None and None not in (occ.max_threads_count, occ.max_warps_count,
                                             occ.warp_size_count):
            if occ.max_warps_count * occ.warp_size_count != occ.max_threads_count:
                fail(f"{at}.occupancy.max_threads_count",
                     "must equal max_warps_count × warp_size_count")
    for scope in SCOPES:
        if scope not in mapped:
            fail(f"scopes.{scope}", f"scope '{scope}' is mapped to no buffer; list it in some "
                                    "buffer's scopes = [...]")
    for cache in model.caches:
        if cache.core_kind and cache.core_kind not in core_names:
            fail(f"caches.{cache.name}.core_kind", f"unknown core kind '{cache.core_kind}' "
                                                   f"(core kinds: {', '.join(core_names)})")
    for kind in ("matrix", "vector"):
        table = getattr(model.efficiencies, f"{kind}_fraction")
        for dt in table:
            if not any(dt in u.flops_per_cycle for _, u in model.units(kind)):
                fail(f"efficiency.{kind}_fraction.{dt}", f"no {kind} unit runs {dt}")
    for ref in model.reference_figures:
        at = f"reference_figures.{ref.name}"
        if sum(f"{at}.{k}" in model.sources for k in ("flops_per_s", "bytes_per_s")) != 1:
            fail(at, "give exactly one of flops_per_s or bytes_per_s")
        if ref.dtype and ref.dtype not in DTYPES:
            fail(f"{at}.dtype", f"unknown dtype '{ref.dtype}'; known: {', '.join(DTYPES)}")

