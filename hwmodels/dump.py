"""Write a :class:`~hwmodels.model.HardwareModel` back to TOML, and walk its fields.

Contract
--------
* ``load_raw(tomllib.loads(dumps(m)), f) == m`` for every valid model ``m`` (tested with
  Hypothesis): numbers are written as ``{ value = ..., source = "..." }`` with the source from
  ``m.sources`` (numbers without a source are not written), unknowns as ``{ source = "unknown: ..." }``.
* :func:`iter_fields` yields every text and number of a model in file order as
  ``(dotted key, value, unit, source)``; ``hw show`` prints it.
* Layout and key names come from the field metadata in :mod:`hwmodels.schema`, as for the loader.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import fields
from pathlib import Path

from tilesim.atomic_io import write_text

from .model import toml_key
from .schema import ModelData
from .units import unit_of

__all__ = ["dumps", "dump", "iter_fields", "numeric_keys"]


def _schema(obj: object):
    return [f for f in fields(obj) if "kind" in f.metadata]


def _str(text: str) -> str:
    # JSON escapes are valid TOML basic-string escapes; TOML also forbids a raw DEL.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _num(value: float | int) -> str:
    return repr(value) if isinstance(value, float) else str(int(value))


def _leaf(value: float | None, source: str) -> str:
    if value is None:
        return f"{{ source = {_str(source)} }}"
    return f"{{ value = {_num(value)}, source = {_str(source)} }}"


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _table(obj: object, header: str, key: str, sources: Mapping[str, str], out: list[str],
           array: bool = False) -> None:
    """Append ``obj`` (a dataclass) as a TOML table with ``header`` (dotted TOML path)."""
    body: list[str] = []
    later: list[tuple[dict, object, str, str]] = []  # (metadata, value, toml header, dotted key)
    for f in _schema(obj):
        md, tkey, val = f.metadata, toml_key(f), getattr(obj, f.name)
        fkey = _join(key, tkey)
        kind = md["kind"]
        if kind == "text" and val:
            body.append(f"{tkey} = {_str(val)}")
        elif kind == "texts" and val:
            body.append(f"{tkey} = [{', '.join(_str(v) for v in val)}]")
        elif kind == "flag" and val:
            body.append(f"{tkey} = true")
        elif kind == "num" and fkey in sources:
            body.append(f"{tkey} = {_leaf(val, sources[fkey])}")
        elif kind in ("sub", "dtype_map", "named_map", "array", "variants"):
            later.append((md, val, _join(header, tkey), fkey))
    if header:
        out.append(f"\n[[{header}]]" if array else f"\n[{header}]")
    out.extend(body)
    for md, val, sub_header, fkey in later:
        kind = md["kind"]
        if kind == "sub" and val is not None:
            has_sources = any(k.startswith(fkey + ".") for k in sources)
            if has_sources or not (md.get("empty") and val == md["cls"]()):
                _table(val, sub_header, fkey, sources, out)  # an all-empty optional table is left out
        elif kind in ("dtype_map", "named_map"):
            items = [(k, v) for k, v in val.items() if _join(fkey, k) in sources]
            if items:
                out.append(f"\n[{sub_header}]")
                out.extend(f"{k} = {_leaf(v, sources[_join(fkey, k)])}" for k, v in items)
        elif kind == "array":
            for item in val:
                _table(item, sub_header, _join(fkey, item.name), sources, out, array=True)
        elif kind == "variants":
            for var in val:
                out.append(f"\n[variants.{var.name}]")
                if var.description:
                    out.append(f"description = {_str(var.description)}")
                for ov in var.overrides:
                    rhs = _str(ov.value) if isinstance(ov.value, str) else _leaf(ov.value, ov.source)
                    out.append(f"{_str(ov.key)} = {rhs}")


def dumps(model: ModelData) -> str:
    """The TOML text of ``model`` (loadable by :func:`hwmodels.load`)."""
    out = [f"# hardware model {_str(model.name)}, written by hwmodels.dump"]
    _table(model, "", "", model.sources, out)
    return "\n".join(out).lstrip("\n") + "\n"


def dump(model: ModelData, path: str | Path) -> None:
    """Write ``model`` to ``path`` as TOML."""
    write_text(path, dumps(model))  # atomic: a failed write leaves no half-written model


def iter_fields(obj: object, key: str = "", sources: Mapping[str, str] | None = None
                ) -> Iterator[tuple[str, object, str, str]]:
    """Yield ``(dotted key, value, unit, source)`` for every text and number, in file order.

    Numbers without a source (optional keys the file leaves out) are skipped; texts have unit
    and source ``""``; lists of texts are joined with ``", "``.
    """
    if sources is None:
        sources = getattr(obj, "sources", {})
    for f in _schema(obj):
        md, val = f.metadata, getattr(obj, f.name)
        fkey = _join(key, toml_key(f))
        kind = md["kind"]
        if kind == "text" and val:
            yield fkey, val, "", ""
        elif kind == "texts" and val:
            yield fkey, ", ".join(val), "", ""
        elif kind == "flag" and val:
            yield fkey, True, "", ""
        elif kind == "num" and fkey in sources:
            yield fkey, val, unit_of(f.name) or "", sources[fkey]
        elif kind == "sub" and val is not None:
            yield from iter_fields(val, fkey, sources)
        elif kind in ("dtype_map", "named_map"):
            for k, v in val.items():
                if _join(fkey, k) in sources:
                    unit = unit_of(f.name) if kind == "dtype_map" else unit_of(k)
                    yield _join(fkey, k), v, unit or "", sources[_join(fkey, k)]
        elif kind == "array":
            for item in val:
                yield from iter_fields(item, _join(fkey, item.name), sources)
        elif kind == "variants":
            for var in val:
                for ov in var.overrides:
                    unit = "" if isinstance(ov.value, str) else unit_of(ov.key.rsplit(".", 1)[-1]) or ""
                    yield f"variants.{var.name}: {ov.key}", ov.value, unit, ov.source


def numeric_keys(obj: object, key: str = "") -> Iterator[tuple[str, object, str]]:
    """Yield ``(dotted key, value, unit)`` for every number field the structure of ``obj`` has
    (whether or not it has a source); map entries only for keys present. For building sources."""
    for f in _schema(obj):
        md, val = f.metadata, getattr(obj, f.name)
        fkey = _join(key, toml_key(f))
        if md["kind"] == "num":
            yield fkey, val, unit_of(f.name) or ""
        elif md["kind"] == "sub" and val is not None:
            yield from numeric_keys(val, fkey)
        elif md["kind"] in ("dtype_map", "named_map"):
            for k, v in val.items():
                yield _join(fkey, k), v, unit_of(f.name if md["kind"] == "dtype_map" else k) or ""
        elif md["kind"] == "array":
            for item in val:
                yield from numeric_keys(item, _join(fkey, item.name))

