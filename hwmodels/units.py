"""Units, dtypes, scopes and source forms that hardware data files may use.

Contract
--------
* Every numeric key ends in a unit from :data:`UNITS` (or *is* the unit, like ``count`` or
  ``bytes``); :func:`unit_of` returns it, or None. :func:`unit_problem` explains a key that has no
  known unit ("missing unit suffix" vs "unknown unit suffix '_gb_per_s'").
* Per-dtype tables (``flops_per_cycle``, ``matrix_fraction``) are keyed by :data:`DTYPES`;
  :func:`canonical_dtype` maps common spellings (``fp16``, ``half``, ``float8_e4m3fn``) onto them.
* A source is a URL (``http://``/``https://`` followed by optional notes) or one of the prefixes in
  :data:`SOURCE_KINDS`; :func:`source_kind` classifies one and returns None for anything else.
"""

from __future__ import annotations

__all__ = [
    "UNITS", "UNIT_SYMBOLS", "DTYPES", "SCOPES", "UNIT_KINDS", "DEVICE_KINDS", "SOURCE_KINDS",
    "unit_of", "unit_problem", "canonical_dtype", "source_kind",
]

#: Unit suffix → short symbol used in printed tables. Longest suffix wins when several match.
UNIT_SYMBOLS: dict[str, str] = {
    "bytes_per_cycle": "B/cycle",
    "bytes_per_s": "B/s",
    "bytes": "B",
    "flops_per_cycle": "FLOP/cycle",
    "flops_per_s": "FLOP/s",
    "hz": "Hz",
    "cycles": "cycles",
    "s": "s",
    "count": "",
    "fraction": "",
    "w": "W",
}
UNITS: tuple[str, ...] = tuple(sorted(UNIT_SYMBOLS, key=len, reverse=True))

#: Units whose values must be whole numbers.
INTEGRAL_UNITS = frozenset({"count", "bytes"})

#: Per-dtype keys of ``flops_per_cycle`` and efficiency tables. ``float8`` covers E4M3 and E5M2;
#: integer rates count integer operations (TOPS) in the same FLOP fields.
DTYPES: tuple[str, ...] = (
    "float64", "float32", "tf32", "float16", "bfloat16", "float8", "int16", "int8", "int4",
)

_DTYPE_ALIASES = {
    "fp64": "float64", "double": "float64", "f64": "float64",
    "fp32": "float32", "float": "float32", "f32": "float32",
    "fp16": "float16", "half": "float16", "f16": "float16",
    "bf16": "bfloat16",
    "fp8": "float8", "float8_e4m3fn": "float8", "float8_e4m3": "float8", "float8_e5m2": "float8",
    "e4m3": "float8", "e5m2": "float8", "fp8_e4m3": "float8", "fp8_e5m2": "float8",
    "float8_e4m3fnuz": "float8", "float8_e5m2fnuz": "float8",
}

#: Tile scopes (``T.alloc_shared`` / ``T.alloc_fragment`` / ``T.alloc_local``) a buffer may serve.
SCOPES: tuple[str, ...] = ("shared", "fragment", "local")
#: Kinds of compute unit.
UNIT_KINDS: tuple[str, ...] = ("matrix", "vector", "sfu")
#: Kinds of device.
DEVICE_KINDS: tuple[str, ...] = ("gpu", "npu")
#: Source prefixes other than URLs.
SOURCE_KINDS: tuple[str, ...] = ("derived", "measured", "estimated", "unknown")

# Tokens that look like a unit but are not one of ours, with the fix to suggest.
_NEAR_UNITS = {
    "kb": "bytes", "mb": "bytes", "gb": "bytes", "tb": "bytes", "kib": "bytes", "mib": "bytes",
    "gib": "bytes", "byte": "bytes", "mhz": "hz", "ghz": "hz", "khz": "hz", "ms": "s", "us": "s",
    "ns": "s", "sec": "s", "seconds": "s", "cycle": "cycles", "tflops": "flops_per_s",
    "gflops": "flops_per_s", "flops": "flops_per_s or flops_per_cycle", "tops": "flops_per_s",
    "percent": "fraction", "pct": "fraction", "watts": "w", "kw": "w", "bits": "bytes",
}


def unit_of(key: str) -> str | None:
    """The unit a key carries: the longest :data:`UNITS` entry it equals or ends with.

    ``x_per_s`` carries no unit (``per_s`` alone is not one: say ``bytes_per_s`` or ``flops_per_s``).
    """
    for unit in UNITS:
        if key == unit or key.endswith("_" + unit):
            return None if key[: -len(unit)].endswith("per_") else unit
    return None


def unit_problem(key: str) -> str:
    """Why ``key`` has no usable unit, with the fix (for keys where :func:`unit_of` is None)."""
    parts = key.lower().split("_")
    known = ", ".join("_" + u for u in UNITS)
    for i, part in enumerate(parts):
        if part in _NEAR_UNITS or part == "per":
            tail = "_".join(parts[i:])
            near = "bytes_per_s or flops_per_s" if part == "per" else _NEAR_UNITS[part]
            if "per" in parts[i:] and part != "per":
                near = {"bytes": "bytes_per_s", "cycles": "bytes_per_cycle"}.get(near, near)
            return f"unknown unit suffix '_{tail}' (convert the value and use _{near}); known units: {known}"
    return f"missing unit suffix: numeric keys must end in a unit, one of {known}"


def canonical_dtype(dtype: object) -> str:
    """The :data:`DTYPES` name for ``dtype`` (a string or anything with a string form).

    Raises:
        ValueError: ``dtype`` names no known dtype.
    """
    name = getattr(dtype, "tilesim_dtype", None) or getattr(dtype, "name", None) or str(dtype)
    key = str(name).strip().lower()
    key = _DTYPE_ALIASES.get(key, key)
    if key not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; hardware models know {', '.join(DTYPES)}")
    return key


def source_kind(source: object) -> str | None:
    """``"url"``, one of :data:`SOURCE_KINDS`, or None when ``source`` is not a valid source."""
    if not isinstance(source, str):
        return None
    text = source.strip()
    if text.startswith(("http://", "https://")) and len(text.split()[0]) > len("https://"):
        return "url"
    head, sep, rest = text.partition(":")
    if sep and head.strip() in SOURCE_KINDS and rest.strip():
        return head.strip()
    return None
