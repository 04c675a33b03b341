"""Malformed hardware files: each error names the file, the dotted key and what is wrong.

One table (``CASES``) of (id, edit of a small valid file, key, problem text). An edit is
``(old, new)`` text replaced once in ``BASE``, or a string appended to it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import hwmodels
from hwmodels import HardwareModelError

URL = "https://example.com/toy"

BASE = f'''name = "toy"
vendor = "Acme"
kind = "gpu"

[clocks]
core_hz = {{ value = 1.0e9, source = "estimated: toy clock" }}

[[core_kinds]]
name = "sm"
count = {{ value = 4, source = "{URL}" }}

[[core_kinds.units]]
name = "mma"
kind = "matrix"

[core_kinds.units.flops_per_cycle]
float16 = {{ value = 1024, source = "{URL}" }}

[[core_kinds.buffers]]
name = "smem"
scopes = ["shared"]
bytes = {{ value = 65536, source = "{URL}" }}

[[core_kinds.buffers]]
name = "regs"
scopes = ["fragment", "local"]
bytes = {{ value = 65536, source = "{URL}" }}

[memory]
capacity_bytes = {{ value = 8e9, source = "{URL}" }}
bandwidth_bytes_per_s = {{ value = 1e12, source = "{URL}" }}
'''

BW = f'bandwidth_bytes_per_s = {{ value = 1e12, source = "{URL}" }}'
COUNT = f'count = {{ value = 4, source = "{URL}" }}'


def e(id_, edit, key, problem):
    return pytest.param(edit, key, problem, id=id_)


CASES = [
    e("missing-unit", (BW, f'bandwidth = {{ value = 1e12, source = "{URL}" }}'),
      "memory.bandwidth", "missing unit suffix"),
    e("unknown-unit-suffix", (BW, f'bandwidth_gb_per_s = {{ value = 1000, source = "{URL}" }}'),
      "memory.bandwidth_gb_per_s", "unknown unit suffix '_gb_per_s'"),
    e("unknown-unit-mhz", ("core_hz = ", "core_mhz = "), "clocks.core_mhz", "unknown unit suffix '_mhz'"),
    e("negative", (BW, f'bandwidth_bytes_per_s = {{ value = -1e12, source = "{URL}" }}'),
      "memory.bandwidth_bytes_per_s", "must be positive"),
    e("zero", (COUNT, f'count = {{ value = 0, source = "{URL}" }}'), "core_kinds.sm.count", "must be positive"),
    e("not-whole", (COUNT, f'count = {{ value = 4.5, source = "{URL}" }}'), "core_kinds.sm.count",
      "whole number"),
    e("fraction-above-one", f'\n[efficiency]\ndram_fraction = {{ value = 1.2, source = "{URL}" }}\n',
      "efficiency.dram_fraction", "fraction must be in (0, 1]"),
    e("missing-source", (COUNT, "count = { value = 4 }"), "core_kinds.sm.count", "missing source"),
    e("bare-number", (COUNT, "count = 4"), "core_kinds.sm.count", "missing source"),
    e("malformed-source", (COUNT, 'count = { value = 4, source = "wikipedia" }'), "core_kinds.sm.count",
      "malformed source 'wikipedia'"),
    e("empty-reason", (COUNT, 'count = { value = 4, source = "estimated:" }'), "core_kinds.sm.count",
      "malformed source"),
    e("estimate-without-value", (COUNT, 'count = { source = "estimated: four?" }'), "core_kinds.sm.count",
      "missing value"),
    e("unknown-with-value", (COUNT, 'count = { value = 4, source = "unknown: n/p" }'), "core_kinds.sm.count",
      "has a value but its source says unknown"),
    e("derived-syntax", (COUNT, 'count = { value = 4, source = "derived: clocks.core_hz *" }'),
      "core_kinds.sm.count", "does not evaluate"),
    e("derived-call", (COUNT, 'count = { value = 4, source = "derived: __import__(1)" }'),
      "core_kinds.sm.count", "does not evaluate"),
    e("derived-disagrees", (BW, 'bandwidth_bytes_per_s = { value = 1e12, source = '
                                '"derived: memory.capacity_bytes * 2" }'),
      "memory.bandwidth_bytes_per_s", "disagrees with its formula"),
    e("derived-unknown-key", (COUNT, 'count = { value = 4, source = "derived: core_kinds.sm.cores * 1" }'),
      "core_kinds.sm.count", "references 'core_kinds.sm.cores'"),
    e("derived-circular", (COUNT, 'count = { value = 4, source = "derived: core_kinds.sm.count + 0" }'),
      "core_kinds.sm.count", "circular"),
    e("derived-of-unknown", '\n[overheads]\nsync_cycles = { source = "unknown: n/p" }\n'
      'block_launch_cycles = { source = "derived: overheads.sync_cycles * 2" }\n',
      "overheads.block_launch_cycles", "whose value is unknown"),
    e("scope-unmapped", ('scopes = ["fragment", "local"]', 'scopes = ["fragment"]'), "scopes.local",
      "mapped to no buffer"),
    e("scope-unknown", ('scopes = ["shared"]', 'scopes = ["sharde"]'), "core_kinds.sm.buffers.smem.scopes",
      "'sharde' is not one of"),
    e("scope-twice", ('scopes = ["shared"]', 'scopes = ["shared", "local"]'),
      "core_kinds.sm.buffers.regs.scopes", "already mapped"),
    e("unknown-core-kind", f'\n[[caches]]\nname = "l2"\ncore_kind = "tpu"\nbytes = {{ value = 1024, source = "{URL}" }}\n',
      "caches.l2.core_kind", "unknown core kind 'tpu'"),
    e("unknown-paired-core", ('name = "sm"\n', 'name = "sm"\npaired_with = "cube"\n'),
      "core_kinds.sm.paired_with", "unknown core kind 'cube'"),
    e("unknown-clock", ('kind = "matrix"', 'kind = "matrix"\nclock = "tensor_hz"'),
      "core_kinds.sm.units.mma.clock", "unknown clock 'tensor_hz'"),
    e("unknown-dtype", ("float16 = {", "fp16 = {"), "core_kinds.sm.units.mma.flops_per_cycle.fp16",
      "unknown dtype 'fp16' (write 'float16')"),
    e("unknown-unit-kind", ('kind = "matrix"', 'kind = "tensor"'), "core_kinds.sm.units.mma.kind",
      "'tensor' is not one of"),
    e("missing-required", (BW + "\n", ""), "memory.bandwidth_bytes_per_s", "required key is missing"),
    e("duplicate-name", ('name = "regs"', 'name = "smem"'), "core_kinds.sm.buffers.smem", "used twice"),
    e("unknown-level", '\n[[core_kinds.data_paths]]\nname = "tma"\nsrc = "dram"\ndst = "l1"\n',
      "core_kinds.sm.data_paths.tma.dst", "unknown level 'l1'"),
    e("clock-wrong-unit", ("core_hz = ", 'core_hz = { value = 1e9, source = "estimated: x" }\nbase_cycles = '),
      "clocks.base_cycles", "must end in _hz"),
    e("efficiency-unsupported-dtype", f'\n[efficiency.matrix_fraction]\nfloat8 = {{ value = 0.5, source = "{URL}" }}\n',
      "efficiency.matrix_fraction.float8", "no matrix unit runs float8"),
    e("unknown-key", ('vendor = "Acme"', 'vendor = "Acme"\ncolour = "green"'), "colour", "unknown key"),
    e("variant-bad-key", '\n[variants.toy2]\n"memory.speed.x" = { value = 1, source = "estimated: x" }\n',
      "variants.toy2.memory.speed.x", "the base has no 'speed'"),
    e("variant-invalid-value", '\n[variants.toy2]\n"core_kinds.sm.count" = { value = -4, source = "estimated: x" }\n',
      "variants.toy2: core_kinds.sm.count", "must be positive"),
    e("required-but-unknown", (COUNT, 'count = { source = "unknown: not published" }'), "core_kinds.sm.count",
      "required but stated as unknown"),
    e("malformed-toml", (COUNT, "count = { value = 4, "), "<toml line 10>", "malformed TOML"),
]


@pytest.mark.parametrize("edit, key, problem", CASES)
def test_malformed_file_names_file_key_and_problem(tmp_path, edit, key, problem):
    if isinstance(edit, tuple):
        assert edit[0] in BASE, f"test edit does not apply: {edit[0]!r}"
        text = BASE.replace(edit[0], edit[1], 1)
    else:
        text = BASE + edit
    path = tmp_path / "bad_model.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(HardwareModelError) as info:
        hwmodels.load(path)
    message = str(info.value)
    assert message.startswith(f"{path}: key '{key}': "), message
    assert problem in message, message
    assert info.value.file == str(path) and info.value.key == key


def test_base_file_is_valid(tmp_path):
    path = tmp_path / "toy.toml"
    path.write_text(BASE, encoding="utf-8")
    model = hwmodels.load(path)
    assert model.peak_flops("fp16") == 4 * 1024 * 1.0e9
    assert model.is_estimated("clocks.core_hz") and not model.is_estimated("core_kinds.sm.count")


def test_unknown_builtin_name_lists_the_builtins():
    with pytest.raises(HardwareModelError, match="no built-in hardware model") as info:
        hwmodels.load("tpu_v9")
    assert "h200_sxm_141gb" in str(info.value)


def test_unreadable_file(tmp_path):
    with pytest.raises(HardwareModelError, match="cannot read"):
        hwmodels.load(tmp_path / "missing.toml")


def test_file_that_is_not_utf8(tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes(BASE.replace('"Acme"', '"Acmé"').encode("latin-1"))
    with pytest.raises(HardwareModelError, match="not UTF-8 text") as info:
        hwmodels.load(path)
    assert info.value.key == "<file>" and info.value.file == str(path)


@pytest.mark.parametrize("count", [0, -2])
def test_a_bad_count_used_by_a_formula_is_reported_under_its_own_key(tmp_path, count):
    """The H200's SM count feeds derived figures; its own key is named, not the first formula dividing by it."""
    src = Path(hwmodels.__file__).parent / "data" / "h200_sxm_141gb.toml"
    text = src.read_text(encoding="utf-8")
    assert "count = { value = 132," in text
    path = tmp_path / "zero.toml"
    path.write_text(text.replace("count = { value = 132,", f"count = {{ value = {count},", 1), encoding="utf-8")
    with pytest.raises(HardwareModelError) as info:
        hwmodels.load(path)
    assert info.value.key == "core_kinds.sm.count" and "must be positive" in info.value.problem
