"""Read a TOML hardware file, apply a variant, evaluate ``derived:`` formulas, validate, build.

Contract
--------
* :func:`load_file` is the only way a :class:`~hwmodels.model.HardwareModel` is made from a file.
  Any problem raises :class:`tilesim.errors.HardwareModelError` naming the file, the dotted key
  and what is wrong (malformed TOML names the line).
* Reading is driven by the field metadata of :mod:`hwmodels.schema`; cross-references (clocks,
  scopes, levels, core kinds) are checked by :mod:`hwmodels.validate`.
* A variant is applied to the raw TOML before anything else: its quoted dotted keys replace the
  base's, and every ``derived:`` number it does not override is recomputed from its formula.
"""

from __future__ import annotations

import copy
import math
import re
import sys
from dataclasses import dataclass, fields
from pathlib import Path

from tilesim.errors import HardwareModelError

from .formula import FormulaError, evaluate, references
from .model import HardwareModel, toml_key
from .schema import ModelData, Override, Variant, frozen_map
from .units import DTYPES, INTEGRAL_UNITS, canonical_dtype, source_kind, unit_of, unit_problem
from .validate import validate

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

__all__ = ["read_toml", "apply_variant", "load_file", "load_raw", "iter_raw_leaves"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SOURCE_HELP = ('a URL, or "derived: <formula>", "measured: <what, where, when>", '
                '"estimated: <reason>", "unknown: <reason>"')


def read_toml(path: Path) -> dict:
    """Parse ``path`` as TOML; unreadable, non-UTF-8 and malformed files become ``HardwareModelError``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise HardwareModelError(str(path), "<file>", f"cannot read the file ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise HardwareModelError(str(path), "<file>", f"not UTF-8 text (byte {exc.object[exc.start]:#04x} at "
                                 f"offset {exc.start}); hardware files are UTF-8 TOML") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"line (\d+)", str(exc))
        key = f"<toml line {line.group(1)}>" if line else "<toml>"
        raise HardwareModelError(str(path), key, f"malformed TOML: {exc}") from None


def iter_raw_leaves(raw: object, path: str = ""):
    """Yield ``(dotted key, leaf table)`` for every ``{value, source}`` table in raw TOML data."""
    if isinstance(raw, dict):
        if "source" in raw and not any(isinstance(v, (dict, list)) for v in raw.values()):
            yield path, raw
            return
        for key, val in raw.items():
            if path == "" and key == "variants":
                continue
            yield from iter_raw_leaves(val, f"{path}.{key}" if path else key)
    elif isinstance(raw, list):
        for item in raw:
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                yield from iter_raw_leaves(item, f"{path}.{item['name']}")


def apply_variant(raw: dict, variant: str, file: str) -> dict:
    """The raw data of ``variant``: the base with the variant's overrides applied."""
    table = raw.get("variants", {})
    if not isinstance(table, dict) or not isinstance(table.get(variant), dict):
        names = ", ".join(table) if isinstance(table, dict) else ""
        raise HardwareModelError(file, f"variants.{variant}",
                                 f"no such variant (this file has: {names or 'none'})")
    base = copy.deepcopy({k: v for k, v in raw.items() if k not in ("variants", "aliases")})
    done = set()
    for key, val in table[variant].items():
        where = f"variants.{variant}.{key}"
        if key == "description":
            base["description"] = val
            continue
        cur: object = base
        parts = key.split(".")
        for part in parts[:-1]:
            if isinstance(cur, list):
                cur = next((x for x in cur if isinstance(x, dict) and x.get("name") == part), None)
            else:
                cur = cur.get(part) if isinstance(cur, dict) else None
            if cur is None:
                raise HardwareModelError(file, where, f"overrides '{key}', but the base has no '{part}'")
        if not isinstance(cur, dict):
            raise HardwareModelError(file, where, f"overrides '{key}', which is not a key of a table")
        cur[parts[-1]] = copy.deepcopy(val)
        done.add(key)
    for path, leaf in iter_raw_leaves(base):
        if path not in done and str(leaf.get("source", "")).strip().startswith("derived:"):
            leaf.pop("value", None)  # inherited derived numbers follow the overridden inputs
    base["variant_of"] = raw.get("name", "")
    base["name"] = variant
    return base


@dataclass
class _Leaf:
    value: float | None
    source: str
    unit: str
    kind: str


class _Reader:
    """Walks raw TOML along the schema; pass 1 collects numbers, pass 2 builds the model."""

    def __init__(self, file: str):
        self.file = file
        self.leaves: dict[str, _Leaf] = {}
        self.values: dict[str, float | None] | None = None
        self.estimated: set[str] = set()

    def fail(self, key: str, problem: str):
        raise HardwareModelError(self.file, key or "<top>", problem)

    # -------------------------------------------------------------- tables
    def table(self, cls: type, raw: object, path: str):
        if not isinstance(raw, dict):
            self.fail(path, f"must be a table, got {type(raw).__name__}")
        fmap = {toml_key(f): f for f in fields(cls) if "kind" in f.metadata}
        for key in raw:
            if key not in fmap:
                self.unknown_key(key, raw[key], _join(path, key), sorted(fmap))
        kwargs = {}
        for tkey, f in fmap.items():
            key, md = _join(path, tkey), f.metadata
            if tkey not in raw:
                if md.get("required"):
                    self.fail(key, "required key is missing")
                if md["kind"] == "sub" and md.get("empty"):
                    kwargs[f.name] = md["cls"]()
                continue
            kwargs[f.name] = getattr(self, "_" + md["kind"])(f, raw[tkey], key)
            if self.values is not None and md.get("required") and md["kind"] == "num" and kwargs[f.name] is None:
                self.fail(key, "this number is required but stated as unknown; give an estimate "
                               "(source = \"estimated: <reason>\")")
        return cls(**kwargs)

    def unknown_key(self, key: str, val: object, path: str, known: list[str]):
        looks_numeric = isinstance(val, (int, float)) and not isinstance(val, bool) or (
            isinstance(val, dict) and ("value" in val or "source" in val))
        if looks_numeric and unit_of(key) is None:
            self.fail(path, unit_problem(key))
        self.fail(path, "unknown key here; this table takes: " + ", ".join(known))

    def _text(self, f, raw: object, key: str) -> str:
        if not isinstance(raw, str):
            self.fail(key, f"must be a string, got {type(raw).__name__}")
        choices = f.metadata.get("choices")
        if choices and raw not in choices:
            self.fail(key, f"'{raw}' is not one of: {', '.join(choices)}")
        if f.metadata.get("required") and not raw.strip():
            self.fail(key, "must not be empty")
        return raw

    def _texts(self, f, raw: object, key: str) -> tuple[str, ...]:
        if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
            self.fail(key, "must be a list of strings")
        choices = f.metadata.get("choices")
        for item in raw:
            if choices and item not in choices:
                self.fail(key, f"'{item}' is not one of: {', '.join(choices)}")
        return tuple(raw)

    def _flag(self, f, raw: object, key: str) -> bool:
        if not isinstance(raw, bool):
            self.fail(key, "must be true or false")
        return raw

    def _sub(self, f, raw: object, key: str):
        return self.table(f.metadata["cls"], raw, key)

    def _array(self, f, raw: object, key: str) -> tuple:
        if not isinstance(raw, list) or not all(isinstance(x, dict) for x in raw):
            self.fail(key, "must be an array of tables ([[...]])")
        if f.metadata.get("required") and not raw:
            self.fail(key, "needs at least one entry")
        seen: set[str] = set()
        out = []
        for i, item in enumerate(raw):
            name = item.get("name")
            if not isinstance(name, str) or not _NAME.match(name):
                self.fail(f"{key}[{i}].name", "each entry needs a name made of letters, digits and _")
            if name in seen:
                self.fail(f"{key}.{name}", f"name '{name}' is used twice")
            seen.add(name)
            out.append(self.table(f.metadata["cls"], item, f"{key}.{name}"))
        return tuple(out)

    def _dtype_map(self, f, raw: object, key: str):
        if not isinstance(raw, dict):
            self.fail(key, "must be a table of dtype = { value, source }")
        if f.metadata.get("required") and not raw:
            self.fail(key, "needs at least one dtype")
        out = {}
        for dt, leaf in raw.items():
            if dt not in DTYPES:
                try:
                    hint = f" (write '{canonical_dtype(dt)}')"
                except ValueError:
                    hint = ""
                self.fail(f"{key}.{dt}", f"unknown dtype '{dt}'{hint}; known: {', '.join(DTYPES)}")
            out[dt] = self.number(leaf, f"{key}.{dt}", unit_of(f.name))
        return frozen_map(out)

    def _named_map(self, f, raw: object, key: str):
        if not isinstance(raw, dict):
            self.fail(key, "must be a table of name_<unit> = { value, source }")
        want = f.metadata.get("unit")
        out = {}
        for name, leaf in raw.items():
            if not _NAME.match(name):
                self.fail(f"{key}.{name}", "key must be made of letters, digits and _")
            unit = unit_of(name)
            if unit is None:
                self.fail(f"{key}.{name}", unit_problem(name))
            if want and unit != want:
                self.fail(f"{key}.{name}", f"keys of [{key}] must end in _{want}")
            out[name] = self.number(leaf, f"{key}.{name}", unit)
        for need in f.metadata.get("required", ()):
            if need not in raw:
                self.fail(f"{key}.{need}", "required key is missing")
            if self.values is not None and self.values[f"{key}.{need}"] is None:
                self.fail(f"{key}.{need}", "this number is required but stated as unknown; give an estimate")
        return frozen_map(out)

    def _variants(self, f, raw: object, key: str) -> tuple[Variant, ...]:
        if not isinstance(raw, dict):
            self.fail(key, "must be a table of [variants.<name>] tables")
        out = []
        for name, table in raw.items():
            if not _NAME.match(name) or not isinstance(table, dict):
                self.fail(f"{key}.{name}", "a variant is a [variants.<name>] table; names use letters, digits, _")
            overrides = []
            for okey, val in table.items():
                if okey == "description":
                    continue
                if isinstance(val, str):
                    overrides.append(Override(okey, val))
                    continue
                if not isinstance(val, dict):
                    self.fail(f"{key}.{name}.{okey}", "override must be a string or { value, source }")
                src = val.get("source")
                if source_kind(src) is None:
                    self.fail(f"{key}.{name}.{okey}", f"missing or malformed source; use {_SOURCE_HELP}")
                overrides.append(Override(okey, val.get("value"), src))
            desc = table.get("description", "")
            out.append(Variant(name, desc if isinstance(desc, str) else "", tuple(overrides)))
        return tuple(out)

    # -------------------------------------------------------------- numbers
    def _num(self, f, raw: object, key: str):
        return self.number(raw, key, unit_of(f.name))

    def number(self, raw: object, key: str, unit: str | None):
        if self.values is not None:
            return self.values[key]
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            self.fail(key, f'missing source: write {{ value = {raw!r}, source = "..." }} with {_SOURCE_HELP}')
        if not isinstance(raw, dict):
            self.fail(key, 'expected a number as { value = ..., source = "..." }')
        extra = sorted(set(raw) - {"value", "source"})
        if extra:
            self.fail(key, f"unexpected field(s) {', '.join(extra)}; a number has only value and source")
        src = raw.get("source")
        if src is None:
            self.fail(key, f"missing source; use {_SOURCE_HELP}")
        kind = source_kind(src)
        if kind is None:
            self.fail(key, f"malformed source {src!r}; use {_SOURCE_HELP}")
        value = raw.get("value")
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            self.fail(key, f"value must be a number, got {value!r}")
        if value is not None and not math.isfinite(value):
            self.fail(key, "value must be finite")
        if value is None and kind not in ("unknown", "derived"):
            self.fail(key, "missing value (only 'unknown:' and 'derived:' sources may leave it out)")
        if value is not None and kind == "unknown":
            self.fail(key, "has a value but its source says unknown; use 'estimated: <reason>' for a guess")
        self.leaves[key] = _Leaf(value, src.strip(), unit or "", kind)
        if kind == "estimated":
            self.estimated.add(key)
        return None

    def derive(self) -> None:
        """Evaluate every ``derived:`` number, check stated values, then check every value."""
        self.values = {k: leaf.value for k, leaf in self.leaves.items()}
        for key, leaf in self.leaves.items():  # stated numbers first: a bad input is named, not a formula using it
            if leaf.kind != "derived":
                self.values[key] = self.check_value(key, self.values[key], leaf)
        done: set[str] = set()
        for key in self.leaves:
            self._resolve(key, [], done)
        for key, leaf in self.leaves.items():
            self.values[key] = self.check_value(key, self.values[key], leaf)

    def _resolve(self, key: str, stack: list[str], done: set[str]) -> float | None:
        leaf = self.leaves[key]
        if leaf.kind != "derived" or key in done:
            return self.values[key]
        if key in stack:
            self.fail(key, "derived formula is circular: " + " -> ".join(stack[stack.index(key):] + [key]))
        formula = leaf.source.partition(":")[2].strip()
        try:
            refs = references(formula)
        except FormulaError as exc:
            self.fail(key, f"derived formula does not evaluate: {exc}")
        for ref in refs:
            if ref not in self.leaves:
                self.fail(key, f"derived formula references '{ref}', which is not a number in this file")
            if self._resolve(ref, stack + [key], done) is None:
                self.fail(key, f"derived formula references '{ref}', whose value is unknown")
            if ref in self.estimated:
                self.estimated.add(key)
        try:
            result = evaluate(formula, lambda ref: self.values[ref])
        except FormulaError as exc:
            self.fail(key, f"derived formula does not evaluate: {exc}")
        stated = leaf.value
        if stated is not None and abs(stated - result) > 0.01 * abs(result):
            self.fail(key, f"stated value {stated:g} disagrees with its formula "
                           f"({formula.split('#')[0].strip()} = {result:.6g}; more than 1% apart)")
        if stated is None and leaf.unit in INTEGRAL_UNITS:
            result = round(result)
        self.values[key] = stated if stated is not None else result
        done.add(key)
        return self.values[key]

    def check_value(self, key: str, value: float | None, leaf: _Leaf):
        if value is None:
            return None
        if value <= 0:
            self.fail(key, f"must be positive, got {value:g}")
        if leaf.unit == "fraction" and value > 1:
            self.fail(key, f"a fraction must be in (0, 1], got {value:g}")
        if leaf.unit in INTEGRAL_UNITS:
            if float(value) != int(value):
                self.fail(key, f"must be a whole number of {leaf.unit}, got {value:g}")
            return int(value)
        return value


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def load_raw(raw: dict, file: str) -> HardwareModel:
    """Build and validate a model from already-parsed (and variant-applied) TOML data."""
    reader = _Reader(file)
    reader.table(ModelData, raw, "")
    reader.derive()
    data = reader.table(ModelData, raw, "")
    sources = frozen_map({k: leaf.source for k, leaf in reader.leaves.items()})
    kwargs = {f.name: getattr(data, f.name) for f in fields(ModelData)}
    kwargs.update(sources=sources, estimated_keys=frozenset(reader.estimated), file=file)
    model = HardwareModel(**kwargs)
    validate(model)
    for variant in model.variants:  # check every variant now, naming it in the error
        try:
            load_raw(apply_variant(raw, variant.name, file), file)
        except HardwareModelError as exc:
            key = exc.key if exc.key.startswith("variants.") else f"variants.{variant.name}: {exc.key}"
            raise HardwareModelError(file, key, exc.problem) from None
    return model


def load_file(path: str | Path, variant: str | None = None) -> HardwareModel:
    """Load the model in ``path`` (or one of its variants)."""
    file = str(path)
    raw = read_toml(Path(path))
    if variant:
        raw = apply_variant(raw, variant, file)
    return load_raw(raw, file)
