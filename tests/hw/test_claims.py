"""The seed-table check of shared/HARDWARE.md section B.6, reproduced from the data files."""

from __future__ import annotations

import dataclasses

import pytest

import hwmodels
from hwmodels.claims import check_claim

# The three lines of the seed's hardware table: (device as written, TFLOPS, TB/s).
SEED = [("H100", 756, 3.0), ("Ascend 910B", 640, 2.4), ("MLU370", 512, 1.8)]


def test_h100_seed_line_mixes_pcie_compute_with_launch_bandwidth():
    result = check_claim("H100", tflops=756, tbps=3.0)
    assert result.verdict == "does not match" and not result.matches
    assert result.compute.close and result.compute.figure.sku == "H100 PCIe"
    assert result.compute.figure.dtype == "float16" and not result.compute.figure.sparse
    assert "756 TFLOP/s is the H100 PCIe dense FP16/BF16" in result.compute.text
    assert "2 TB/s" in result.compute.text  # the PCIe card's own bandwidth
    assert result.bandwidth.close and "first announced" in result.bandwidth.figure.label
    assert "different SKUs" in result.summary
    assert result.expected_flops == pytest.approx(989.4e12, rel=1e-3)


def test_ascend_seed_line_is_an_int8_figure_and_unsupported_bandwidth():
    result = check_claim("Ascend 910B", tflops=640, tbps=2.4)
    assert result.verdict == "does not match"
    assert result.compute.close and result.compute.figure.dtype == "int8"
    assert "looks like INT8 TOPS" in result.compute.text
    assert not result.bandwidth.close and result.bandwidth.figure.from_model
    assert "an estimate" in result.bandwidth.figure.label
    assert result.expected_flops == pytest.approx(354e12, rel=0.01)


def test_mlu370_seed_line_is_the_int4_figure_and_overstated_bandwidth():
    result = check_claim("MLU370", tflops=512, tbps=1.8)
    assert result.verdict == "does not match"
    assert result.compute.close and result.compute.figure.dtype == "int4"
    assert "MLU370-X8 INT4" in result.compute.text and "INT4 TOPS" in result.compute.text
    assert not result.bandwidth.close
    assert result.bandwidth.ratio == pytest.approx(1.8e12 / 614.4e9)


@pytest.mark.parametrize("device, tflops, tbps", SEED)
def test_no_seed_line_is_like_for_like(device, tflops, tbps):
    assert not check_claim(device, tflops, tbps).matches


@pytest.mark.parametrize("name", ["h100_sxm5_80gb", "h200_sxm_141gb", "a100_sxm4_80gb", "mlu370_x8"])
def test_datasheet_figures_match(name):
    model = hwmodels.load(name)
    result = check_claim(model, model.peak_flops("bfloat16") / 1e12, model.dram_bandwidth / 1e12)
    assert result.matches and result.verdict == "matches", result.summary


def test_sparse_and_half_claims():
    assert "sparse" in check_claim("h200", tflops=1979).compute.text
    only_bw = check_claim("h200", tbps=4.8)
    assert only_bw.matches and only_bw.compute is None


def test_result_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        check_claim("h100", 989.4).verdict = "matches"
