"""Built-in hardware models: they load, and their derived numbers equal the sourced figures.

Expected values are the vendor (or derived) figures of shared/HARDWARE.md, Part B.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import hwmodels
from hwmodels import HardwareQueryError
from hwmodels.units import SCOPES, source_kind

BUILTINS = hwmodels.builtin_names()

# (model, dtype, dense TFLOP/s) — HARDWARE.md B.1–B.4 and B.7.
PEAKS = [
    ("a100_sxm4_80gb", "float16", 312), ("a100_sxm4_80gb", "bfloat16", 312),
    ("a100_sxm4_80gb", "float32", 19.5), ("a100_sxm4_80gb", "tf32", 156), ("a100_sxm4_80gb", "int8", 624),
    ("h100_sxm5_80gb", "float16", 989.4), ("h100_sxm5_80gb", "bfloat16", 989.4),
    ("h100_sxm5_80gb", "float8", 1978.9), ("h100_sxm5_80gb", "int8", 1978.9),
    ("h100_sxm5_80gb", "float32", 66.9), ("h100_sxm5_80gb", "tf32", 494.7),
    ("h200_sxm_141gb", "float16", 989.4), ("h200_sxm_141gb", "bfloat16", 989.4),
    ("h200_sxm_141gb", "float8", 1978.9), ("h200_sxm_141gb", "float32", 66.9), ("h200_sxm_141gb", "tf32", 494.7),
    ("ascend_910b2", "float16", 354), ("ascend_910b2", "int8", 708), ("ascend_910b2", "float32", 88),
    ("ascend_910b3", "float16", 295), ("ascend_910b4", "float16", 295),
    ("mlu370_x8", "float16", 96), ("mlu370_x8", "bfloat16", 96), ("mlu370_x8", "float32", 32),
    ("mlu370_x8", "int8", 256), ("mlu370_x8", "int4", 512),
]

# (model, DRAM TB/s) — datasheets; Ascend is the flagged 4 x 409.6 GB/s estimate.
BANDWIDTH = [("a100_sxm4_80gb", 2.039), ("h100_sxm5_80gb", 3.35), ("h200_sxm_141gb", 4.8),
             ("ascend_910b2", 1.6384), ("mlu370_x8", 0.6144)]


def near(actual: float, expected: float, rel: float = 0.01) -> bool:
    return abs(actual - expected) <= rel * abs(expected)


@pytest.mark.parametrize("name", BUILTINS)
def test_every_builtin_loads_with_a_source_per_number(name):
    model = hwmodels.load(name)
    assert model.name == name
    assert model.sources, "a model without sourced numbers"
    for key, source in model.sources.items():
        assert source_kind(source) is not None, (key, source)
    for scope in SCOPES:
        assert model.buffer_for_scope(scope).bytes > 0


@pytest.mark.parametrize("name, dtype, tflops", PEAKS)
def test_derived_dense_peaks_match_the_sourced_figures(name, dtype, tflops):
    assert near(hwmodels.load(name).peak_flops(dtype), tflops * 1e12)


@pytest.mark.parametrize("name, tbps", BANDWIDTH)
def test_dram_bandwidth(name, tbps):
    assert near(hwmodels.load(name).dram_bandwidth, tbps * 1e12)


def test_fp8_is_unsupported_on_a100_and_ascend():
    for name in ("a100_sxm4_80gb", "ascend_910b2", "mlu370_x8"):
        model = hwmodels.load(name)
        assert not model.supports("float8_e4m3fn")
        with pytest.raises(HardwareQueryError, match="not supported"):
            model.peak_flops("fp8")
    with pytest.raises(HardwareQueryError, match="unknown rate"):
        hwmodels.load("h100").peak_flops("float64")


def test_clocks_per_unit_on_hopper():
    model = hwmodels.load("h100_sxm5_80gb")
    sm = model.core_kind("sm")
    tensor = next(u for u in sm.units if u.name == "tensor")
    cuda = next(u for u in sm.units if u.name == "cuda")
    assert model.unit_clock_hz(sm, tensor) == 1.83e9 and model.unit_clock_hz(sm, cuda) == 1.98e9
    assert tensor.flops_per_cycle["float16"] == 4096 and cuda.flops_per_cycle["float32"] == 256
    assert model.peak_flops("float32", unit="vector") == model.peak_flops("float32")
    assert model.peak_flops("float32", unit="sfu") == 132 * 16 * 1.98e9


def test_gpu_occupancy_and_buffers():
    model = hwmodels.load("h200")
    sm = model.primary_core
    occ = sm.occupancy
    assert (occ.max_threads_count, occ.max_warps_count, occ.max_blocks_count, occ.registers_count,
            occ.warp_size_count) == (2048, 64, 32, 65536, 32)
    smem = model.buffer_for_scope("shared")
    assert (smem.name, smem.bytes, smem.block_bytes, smem.read_bytes_per_cycle) == ("smem", 233472, 232448, 128)
    assert model.buffer_for_scope("fragment").name == model.buffer_for_scope("local").name == "registers"
    assert model.l2.bytes == 62914560 and model.l2_bandwidth > model.dram_bandwidth
    assert model.memory_latency_cycles > 0 and model.overheads.kernel_launch_latency_s > 0


def test_h200_efficiencies_come_from_measurements():
    """The H200's simulator efficiencies are fitted to TileLang measurements; its raw ceilings are measured."""
    import json
    model = hwmodels.load("h200_sxm_141gb")
    fit = json.loads((hwmodels.DATA_DIR.parents[1] / "reports" / "measurements" /
                      "sim_calibration_h200_2026-12-02_z.json").read_text())["calibration"]
    assert near(model.efficiency("dram"), fit["efficiency.dram_fraction"])
    assert model.memory.loaded_latency_cycles is None and "memory.loaded_latency_cycles" not in fit  # unloaded used
    assert near(model.primary_core.data_paths[0].latency_cycles, fit["core_kinds.sm.data_paths.tma.latency_cycles"])
    assert near(model.efficiency("matrix", "bf16"), fit["efficiency.matrix_fraction.bfloat16"])
    assert near(model.efficiency("vector", "float32"), fit["efficiency.vector_fraction.float32"])
    assert near(model.efficiency("l2"), fit["efficiency.l2_fraction"])
    refit = json.loads((hwmodels.DATA_DIR.parents[1] / "reports" / "measurements" /
                        "sim_calibration_h200_2026-12-02.json").read_text())["calibration"]
    assert near(model.overheads.timed_launch_overhead_s, refit["overheads.timed_launch_overhead_s"])
    assert model.source("efficiency.dram_fraction").startswith("measured: fitted by tilesim.sim.validation")
    assert near(model.efficiency("matrix", "float8_e4m3fn"), 1428 / 1978.9)  # not refitted: torch-measured
    assert near(model.calibration["copy_bytes_per_s"], 4.28e12)
    assert model.source("calibration.copy_bytes_per_s").startswith("measured:")
    other = hwmodels.load("h100_sxm5_80gb")
    assert other.source("efficiency.matrix_fraction.bfloat16").startswith("estimated:")
    assert other.is_estimated("efficiency.dram_fraction")
    assert other.efficiency("l2") == model.efficiency("l2") and other.is_estimated("efficiency.l2_fraction")


def test_roofline_quantities():
    model = hwmodels.load("h200")
    assert near(model.machine_balance("float16"), 989.4e12 / 4.8e12)
    assert model.ridge_point("float16") == model.machine_balance("float16")
    achievable = model.ridge_point("float16", achievable=True)
    assert near(achievable, 989.4e12 * model.efficiency("matrix", "float16") / (4.8e12 * model.efficiency("dram")))
    assert near(model.ridge_point("float16", level="l2"), 989.4e12 / model.l2_bandwidth)


def test_ascend_split_design():
    model = hwmodels.load("ascend_910b2")
    aic, aiv = model.core_kind("aic"), model.core_kind("aiv")
    assert (aic.count, aiv.count, aiv.paired_with) == (24, 48, "aic")
    assert {b.name: b.bytes for b in aic.buffers} == {
        "l1": 512 * 1024, "l0a": 64 * 1024, "l0b": 64 * 1024, "l0c": 128 * 1024,
        "bias_table": 1024, "fixpipe_buffer": 7 * 1024}
    assert model.buffer_for_scope("shared", "aiv").name == "ub"
    assert model.buffer_for_scope("fragment", "aic").name == "l0c"
    paths = {(p.name, p.src, p.dst): (p.bytes_per_cycle, p.latency_cycles) for p in aic.data_paths}
    assert paths[("mte2", "dram", "l1")] == (87, 347)
    assert paths[("mte1_l0a", "l1", "l0a")] == (256, 9)
    assert {(p.src, p.dst) for p in aiv.data_paths} == {("dram", "ub"), ("ub", "dram")}
    # cube <-> vector only through global memory: no path joins an AIC buffer to an AIV buffer
    aic_bufs = {b.name for b in aic.buffers}
    assert all(p.src not in aic_bufs and p.dst not in aic_bufs for p in aiv.data_paths)
    assert model.is_estimated("memory.bandwidth_bytes_per_s")
    with pytest.raises(HardwareQueryError, match="no buffer"):
        model.buffer_for_scope("local", "aic")


@pytest.mark.parametrize("name, aic, hbm_gb, l2_mb", [
    ("ascend_910b1", 24, 64, 192), ("ascend_910b3", 20, 64, 192), ("ascend_910b4", 20, 32, 168)])
def test_ascend_variants(name, aic, hbm_gb, l2_mb, tmp_path):
    model = hwmodels.load(name)
    assert model.variant_of == "ascend_910b2" and model.variants == ()
    assert (model.core_kind("aic").count, model.core_kind("aiv").count) == (aic, 2 * aic)
    assert model.memory.capacity_bytes == hbm_gb * 1e9 and model.l2.bytes == l2_mb * 2**20
    assert model.is_estimated("clocks.core_hz")
    path = hwmodels.DATA_DIR / "ascend_910b2.toml"
    assert hwmodels.load(f"{path}:{name}") == model == hwmodels.load(path, variant=name)


def test_mlu370_estimates_are_flagged():
    model = hwmodels.load("mlu370")
    ipu = model.core_kind("ipu")
    assert model.is_estimated("core_kinds.ipu.count") and model.is_estimated("clocks.core_hz")
    assert model.is_estimated("core_kinds.ipu.units.tfu.flops_per_cycle.float16")
    assert not model.peak_is_estimated("float16")  # the card-level peak is published
    assert {b.name: b.bytes for b in ipu.buffers} == {"nram": 768 * 1024, "wram": 1024 * 1024}
    sram = model.cache("sram")
    assert sram.bytes == 4 * 2**20 and sram.count == ipu.count // ipu.cores_per_cluster_count
    assert model.l2.bytes is None and "unknown" in model.source("caches.l2.bytes")


def test_aliases_and_names():
    assert hwmodels.load("H100") is hwmodels.load("h100_sxm5_80gb")
    assert hwmodels.load("Ascend 910B").name == "ascend_910b2"
    assert set(BUILTINS) >= {"a100_sxm4_80gb", "h100_sxm5_80gb", "h200_sxm_141gb", "ascend_910b2",
                             "ascend_910b1", "ascend_910b3", "ascend_910b4", "mlu370_x8"}


def test_models_are_frozen():
    model = hwmodels.load("h100")
    with pytest.raises(AttributeError):
        model.name = "x"
    with pytest.raises(TypeError):
        model.primary_core.units[0].flops_per_cycle["float16"] = 1


# unit scales (1e12 -> "T", 2**20 -> MiB), tolerances, rounding digits, column widths, (3, 11)
ALLOWED_CONSTANTS = {0, 1, 2, 3, 9, 10, 11, 20, 28, 0.01, 0.02, 1e-3, 1e-6, 1e6, 1e9, 1e12}


def test_no_hardware_numbers_in_python():
    """Numbers in hwmodels/*.py are only unit scales and formatting widths (habit 14)."""
    root = Path(hwmodels.__file__).parent
    for path in root.glob("*.py"):
        if path.name == "microbench.py":  # benchmark sizes, not hardware facts
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and type(node.value) in (int, float):
                assert node.value in ALLOWED_CONSTANTS, f"{path.name}:{node.lineno}: {node.value}"


def test_docs_example_file_loads(tmp_path):
    """The complete example in docs/hardware-models.md is a valid model."""
    doc = Path(hwmodels.__file__).resolve().parents[1] / "docs" / "hardware-models.md"
    if not doc.exists():
        pytest.skip("docs not present")
    section = doc.read_text(encoding="utf-8").split("## Writing your own file", 1)[1]
    example = section.split("```toml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "my_gpu.toml"
    path.write_text(example, encoding="utf-8")
    model = hwmodels.load(path)
    assert model.name == "my_gpu" and near(model.peak_flops("float16"), 196.6e12)
    assert model.supports("float8") and not model.supported_dtypes().count("float8")
