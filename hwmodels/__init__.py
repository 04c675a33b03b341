"""Hardware models: typed, sourced descriptions of GPUs and NPUs for the simulator and reports.

No hardware number lives anywhere but the TOML files in ``hwmodels/data/`` (or a user's file).

API (contract)
--------------
``load(name_or_path, variant=None) -> HardwareModel``
    A built-in name (``"h100_sxm5_80gb"``, an alias such as ``"h100"``, a variant such as
    ``"ascend_910b3"``), a path to a ``.toml`` file, or ``"path.toml:variant"``. The result is
    frozen and validated; built-ins are cached. Raises ``HardwareModelError`` (from
    ``tilesim.errors``; message ``"<file>: key '<dotted.key>': <problem>"``).
``builtin_names() -> tuple[str, ...]``
    Every built-in model, variants included.
``HardwareModelError``, ``HardwareQueryError``
    A bad file; a question the model cannot answer (unsupported dtype, unknown number).

What the simulator reads (all numbers in the unit their name ends with; None = unknown):

* per core kind ``core = model.core_kind("sm")`` (or ``model.core_kinds``, ``model.primary_core``):
  ``core.count``, ``model.unit_clock_hz(core, unit)``, ``unit.flops_per_cycle[dtype]`` for
  ``unit in core.units`` (``unit.kind`` is ``matrix``/``vector``/``sfu``), ``core.buffers``
  (``buf.bytes``, ``buf.block_bytes``, ``buf.read_bytes_per_cycle``, ``buf.write_bytes_per_cycle``,
  ``buf.latency_cycles``, ``buf.scopes``), ``core.data_paths`` (``src``, ``dst``,
  ``bytes_per_cycle``, ``latency_cycles``), ``core.occupancy`` (``max_threads_count``,
  ``max_warps_count``, ``max_blocks_count``, ``registers_count``, ``warp_size_count``, ...).
* device: ``model.dram_bandwidth``, ``model.memory_latency_cycles``, ``model.l2`` (``bytes``,
  ``bandwidth_bytes_per_s``), ``model.overheads`` (``kernel_launch_latency_s``,
  ``block_launch_cycles``, ``sync_cycles``), ``model.clocks["core_hz"]``.
* derived: ``model.peak_flops(dtype, unit=None)`` (dense, device-wide FLOP/s),
  ``model.bandwidth(level)``, ``model.machine_balance(dtype)``,
  ``model.ridge_point(dtype, level="dram", achievable=False)``,
  ``model.buffer_for_scope(scope, core_kind=None)``,
  ``model.efficiency("matrix"|"vector"|"dram"|"l2", dtype=None, default=None)``.
* provenance: ``model.source(key)``, ``model.is_estimated(key)``, ``model.sources``.

Other modules: :mod:`hwmodels.schema` (dataclasses), :mod:`hwmodels.dump` (model → TOML),
:mod:`hwmodels.claims` (check a quoted figure against the models), :mod:`hwmodels.cli`
(``tilesim hw list|show``). File format: ``docs/hardware-models.md``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from tilesim.errors import HardwareModelError

from .loader import load_file, read_toml
from .model import HardwareModel, HardwareQueryError
from .units import DTYPES, SCOPES, canonical_dtype

__all__ = [
    "load", "builtin_names", "HardwareModel", "HardwareModelError", "HardwareQueryError",
    "DATA_DIR", "DTYPES", "SCOPES", "canonical_dtype",
]

#: Where the built-in data files live.
DATA_DIR = Path(__file__).resolve().parent / "data"


def _norm(name: str) -> str:
    return re.sub(r"[\s\-]+", "_", name.strip().lower())


@lru_cache(maxsize=1)
def _scan() -> tuple[tuple[Path, dict], ...]:
    """Every built-in file with its parsed TOML (read once; never modified)."""
    return tuple((path, read_toml(path)) for path in sorted(DATA_DIR.glob("*.toml")))


@lru_cache(maxsize=1)
def _index() -> dict[str, tuple[Path, str | None]]:
    """Normalised built-in name/alias/variant → (file, variant or None)."""
    index: dict[str, tuple[Path, str | None]] = {}
    for path, raw in _scan():
        index.setdefault(_norm(path.stem), (path, None))
        index.setdefault(_norm(str(raw.get("name", path.stem))), (path, None))
        for alias in raw.get("aliases", []):
            index.setdefault(_norm(str(alias)), (path, None))
        for variant in raw.get("variants", {}):
            index.setdefault(_norm(variant), (path, variant))
    return index


def builtin_names() -> tuple[str, ...]:
    """Names of every built-in model: each file's ``name``, then its variants."""
    names: list[str] = []
    for path, raw in _scan():
        names.append(str(raw.get("name", path.stem)))
        names.extend(raw.get("variants", {}))
    return tuple(names)


@lru_cache(maxsize=None)
def _load_builtin(path: Path, variant: str | None) -> HardwareModel:
    return load_file(path, variant)


def load(name_or_path: str | Path, variant: str | None = None) -> HardwareModel:
    """Load a hardware model by built-in name, alias or variant, or from a TOML file.

    Args:
        name_or_path: ``"h200_sxm_141gb"``, ``"h100"``, ``"ascend_910b3"``, ``"my_gpu.toml"`` or
            ``"my_npu.toml:my_variant"``.
        variant: a variant of the file's device (alternative to the ``:variant`` suffix).

    Returns:
        The frozen, validated :class:`HardwareModel`.

    Raises:
        HardwareModelError: unknown name, unreadable or invalid file (names file and key).
    """
    if isinstance(name_or_path, HardwareModel):
        return name_or_path
    text = str(name_or_path)
    path_part, sep, var_part = text.rpartition(":")
    if sep and path_part.endswith(".toml") and "/" not in var_part and "\\" not in var_part:
        text, variant = path_part, variant or var_part
    path = Path(text).expanduser()
    if text.endswith(".toml") or path.is_file():
        return load_file(path, variant)
    hit = _index().get(_norm(text))
    if hit is None:
        raise HardwareModelError(text, "name", "no built-in hardware model has this name; built-ins: "
                                 + ", ".join(builtin_names()) + " (or give a path to a .toml file)")
    file, builtin_variant = hit
    return _load_builtin(file, variant or builtin_variant)
