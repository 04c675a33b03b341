"""Valid models survive model -> TOML (hwmodels.dump) -> load unchanged; the formula evaluator.

The strategy builds valid models by construction: every scope is mapped, clocks and core kinds
referenced exist, occupancy limits agree, efficiencies name dtypes some unit runs, and each number
gets a source of a random form (URL, measured, estimated, derived, unknown for absent values).
"""

from __future__ import annotations

import dataclasses
import math
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hwmodels
from hwmodels.dump import dumps, numeric_keys
from hwmodels.formula import FormulaError, evaluate, references
from hwmodels.loader import load_raw
from hwmodels.model import HardwareModel
from hwmodels.schema import (
    Buffer,
    Cache,
    ComputeUnit,
    CoreKind,
    DataPath,
    Efficiency,
    Interconnect,
    Memory,
    Occupancy,
    Overheads,
    Override,
    ReferenceFigure,
    Variant,
    frozen_map,
)
from hwmodels.units import DTYPES, SCOPES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CI = settings(derandomize=True, database=None, deadline=None, max_examples=60,
              suppress_health_check=[HealthCheck.too_slow])

names = st.builds(lambda head, tail: head + tail, st.sampled_from("abcxyz"),
                  st.text("abc019_", max_size=6))
texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
label = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=12).filter(lambda s: s.strip())
pos = st.floats(min_value=1e-6, max_value=1e16, allow_nan=False, allow_infinity=False)
count = st.integers(min_value=1, max_value=10**6)
frac = st.floats(min_value=1e-3, max_value=1.0)
maybe = lambda s: st.none() | s  # noqa: E731


def unique(strategy, n_min, n_max):
    return st.lists(strategy, min_size=n_min, max_size=n_max, unique_by=lambda x: x.name)


@st.composite
def units(draw, clocks):
    dts = draw(st.lists(st.sampled_from(DTYPES), min_size=1, max_size=4, unique=True))
    rates = {d: draw(maybe(pos)) for d in dts}
    rates[dts[0]] = draw(pos)  # at least one known rate
    return ComputeUnit(name=draw(names), kind=draw(st.sampled_from(["matrix", "vector", "sfu"])),
                       clock=draw(st.sampled_from(["", *clocks])), description=draw(texts),
                       flops_per_cycle=frozen_map(rates))


@st.composite
def core_kind(draw, clocks, scopes_here, caches):
    n_buf = draw(st.integers(1, 3))
    buf_names = draw(st.lists(names, min_size=n_buf, max_size=n_buf, unique=True))
    where = {s: draw(st.sampled_from(buf_names)) for s in scopes_here}
    buffers = []
    for name in buf_names:
        size = draw(count)
        buffers.append(Buffer(
            name=name, description=draw(texts), scopes=tuple(s for s in SCOPES if where.get(s) == name),
            bytes=size, block_bytes=draw(maybe(st.integers(1, size))),
            read_bytes_per_cycle=draw(maybe(pos)), write_bytes_per_cycle=draw(maybe(pos)),
            latency_cycles=draw(maybe(pos))))
    levels = ["dram", *caches, *buf_names]
    paths = draw(unique(st.builds(DataPath, name=names, description=texts, src=st.sampled_from(levels),
                                  dst=st.sampled_from(levels), bytes_per_cycle=maybe(pos),
                                  latency_cycles=maybe(pos)), 0, 2))
    occupancy = None
    if draw(st.booleans()):
        warps, size = draw(count), draw(count)
        occupancy = Occupancy(max_threads_count=warps * size, max_warps_count=warps, warp_size_count=size,
                              max_blocks_count=draw(maybe(count)), registers_count=draw(maybe(count)),
                              max_threads_per_block_count=draw(maybe(count)))
    return CoreKind(name=draw(names), description=draw(texts), clock=draw(st.sampled_from(["", *clocks])),
                    count=draw(count), cores_per_cluster_count=draw(maybe(count)),
                    units=tuple(draw(unique(units(clocks), 1, 3))), buffers=tuple(buffers),
                    data_paths=tuple(paths), occupancy=occupancy)


def source_for(draw, key: str, value) -> str:
    if value is None:
        return "unknown: " + draw(label).strip()
    form = draw(st.sampled_from(["https://example.org/", "measured: ", "estimated: "]))
    return form + draw(label).strip() if form != "https://example.org/" else form + draw(names)


@st.composite
def models(draw):
    clocks = {"core_hz": draw(pos)}
    clocks.update({k: draw(pos) for k in draw(st.lists(st.sampled_from(["tensor_hz", "vector_hz"]), unique=True))})
    cache_names = draw(st.lists(names, max_size=2, unique=True))
    n_core = draw(st.integers(1, 3))
    cores = [draw(core_kind(list(clocks), SCOPES if i == 0 else draw(st.sets(st.sampled_from(SCOPES))),
                            cache_names)) for i in range(n_core)]
    cores = [c for i, c in enumerate(cores) if c.name not in {d.name for d in cores[:i]}]
    core_names = [c.name for c in cores]
    if len(cores) > 1 and draw(st.booleans()):
        cores[1] = dataclasses.replace(cores[1], paired_with=core_names[0])
    caches = [Cache(name=n, description=draw(texts), core_kind=draw(st.sampled_from(["", *core_names])),
                    bytes=draw(count), count=draw(maybe(count)), bandwidth_bytes_per_s=draw(maybe(pos)),
                    latency_cycles=draw(maybe(pos))) for n in cache_names]
    run = {kind: sorted({d for c in cores for u in c.units if u.kind == kind for d in u.flops_per_cycle})
           for kind in ("matrix", "vector")}
    eff = Efficiency(dram_fraction=draw(maybe(frac)), l2_fraction=draw(maybe(frac)),
                     matrix_fraction=frozen_map({d: draw(frac) for d in run["matrix"] if draw(st.booleans())}),
                     vector_fraction=frozen_map({d: draw(frac) for d in run["vector"] if draw(st.booleans())}))
    refs = []
    for name in draw(st.lists(names, max_size=3, unique=True)):
        flops = draw(st.booleans())
        refs.append(ReferenceFigure(name=name, label=draw(label), sku=draw(texts),
                                    dtype=draw(st.sampled_from(["", *DTYPES])) if flops else "",
                                    sparse=draw(st.booleans()), flops_per_s=draw(pos) if flops else None,
                                    bytes_per_s=None if flops else draw(pos)))
    memory = Memory(kind=draw(texts), capacity_bytes=draw(count), bandwidth_bytes_per_s=draw(pos),
                    latency_cycles=draw(maybe(pos)), latency_s=draw(maybe(pos)))
    calibration = {"twice_bw_bytes_per_s": 2 * memory.bandwidth_bytes_per_s} if draw(st.booleans()) else {}
    variants = ()
    if draw(st.booleans()):
        variants = (Variant(name=draw(names), description=draw(texts), overrides=(
            Override("memory.capacity_bytes", draw(count), "estimated: " + draw(label).strip()),
            Override("memory.kind", draw(texts)))),)
    model = HardwareModel(
        name=draw(label), vendor=draw(label), kind=draw(st.sampled_from(["gpu", "npu"])),
        description=draw(texts), aliases=tuple(draw(st.lists(texts, max_size=2))),
        clocks=frozen_map(clocks), tdp_w=draw(maybe(pos)), core_kinds=tuple(cores), caches=tuple(caches),
        memory=memory, overheads=draw(st.builds(Overheads, maybe(pos), maybe(pos), maybe(pos))),
        efficiencies=eff, interconnects=tuple(draw(unique(st.builds(
            Interconnect, name=names, description=texts, bandwidth_bytes_per_s=maybe(pos)), 0, 2))),
        reference_figures=tuple(refs), calibration=frozen_map(calibration), variants=variants)
    sources = {}
    for key, value, _unit in numeric_keys(model):
        in_map = ".flops_per_cycle." in key or key.startswith(("efficiency.matrix", "efficiency.vector"))
        if value is not None or in_map or draw(st.booleans()):
            sources[key] = source_for(draw, key, value)
    if calibration:
        sources["calibration.twice_bw_bytes_per_s"] = "derived: memory.bandwidth_bytes_per_s * 2  # test"
    for ref in refs:  # exactly one of flops_per_s / bytes_per_s is in the file
        sources.pop(f"reference_figures.{ref.name}.{'bytes_per_s' if ref.flops_per_s else 'flops_per_s'}", None)
    return dataclasses.replace(model, sources=frozen_map(sources))


@CI
@given(models())
def test_model_survives_dump_and_load(model):
    text = dumps(model)
    loaded = load_raw(tomllib.loads(text), "generated.toml")
    assert loaded == model, text


@pytest.mark.parametrize("name", hwmodels.builtin_names())
def test_builtin_survives_dump_and_load(name, tmp_path):
    model = hwmodels.load(name)
    path = tmp_path / f"{name}.toml"
    path.write_text(dumps(model), encoding="utf-8")
    again = hwmodels.load(path)
    assert again == model and again.estimated_keys == model.estimated_keys


@CI
@given(st.floats(-1e6, 1e6), st.floats(1e-3, 1e6))
def test_formula_arithmetic(a, b):
    values = {"x.a": a, "y.b_count": b}
    assert evaluate("x.a * y.b_count + 2", values.__getitem__) == pytest.approx(a * b + 2)
    assert evaluate("max(x.a, y.b_count) / (1 + 1)  # note", values.__getitem__) == pytest.approx(max(a, b) / 2)
    assert math.isclose(evaluate("-x.a ** 1", values.__getitem__), -a)


@pytest.mark.parametrize("bad", ["open('x')", "x.a[0]", "'s'", "lambda: 1", "x.a if 1 else 2", "x.a.__class__()",
                                 "1 +", "min()"])
def test_formula_rejects_anything_but_arithmetic(bad):
    with pytest.raises(FormulaError):
        evaluate(bad, lambda key: 1.0)


def test_formula_references():
    assert references("a.b * (c - c) / d.e_count  # c") == ["a.b", "c", "d.e_count"]
