"""The report end-to-end on a small subset: files written, Markdown numbers from the JSON, plot contents."""

import json
import re

import pytest

import hwmodels
from tilesim.report.main import run_report
from tilesim.report.roofline import ceilings, roofline_figure


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("rep")
    rc = run_report(hw=["h200_sxm_141gb", "ascend_910b2"], kernels=["gemm", "layernorm_gelu",
                    "layernorm_gelu_unfused", "rmsnorm"], out=str(out), quick=True, progress=False,
                    tune_budget=3)
    return out, rc


def test_files_written_and_exit_code(report):
    out, rc = report
    assert rc == 0
    for name in ("summary.json", "summary.md", "devices.png", "roofline_h200_sxm_141gb.png",
                 "roofline_h200_sxm_141gb.svg", "roofline_ascend_910b2.png"):
        assert (out / name).stat().st_size > 0, name
    assert not list(out.glob(".*"))  # no temporary files left behind


def test_every_number_in_markdown_comes_from_json(report):
    out, _ = report
    summary = json.loads((out / "summary.json").read_text())
    md = (out / "summary.md").read_text()
    displayed = set()

    def walk(x):
        if isinstance(x, dict):
            for k, v in x.items():
                if k == "display" and isinstance(v, dict):
                    displayed.update(str(s) for s in v.values())
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(summary)
    tables = [ln for ln in md.splitlines() if ln.startswith("| ") and "---" not in ln]
    rows = [ln for ln in tables if not ln.startswith("| kernel") and not ln.startswith("| device") and
            not ln.startswith("| #")]
    assert rows
    claims_rows = {f"| {i} |" for i in range(1, 100)}
    for row in rows:
        if any(row.startswith(c) for c in claims_rows):
            continue  # claims carry their numbers in the evidence text stored in the JSON (checked below)
        cells = [c.strip() for c in row.strip("|").split("|")]
        for cell in cells:
            if re.search(r"\d", cell) and cell not in displayed and not any(cell in d for d in displayed):
                # kernel and shape names contain digits too: they must be JSON strings as well
                assert any(cell == p.get("kernel") or cell == p.get("shape") or cell == p.get("bound") or
                           cell == d.get("name") for p in summary["points"] for d in summary["devices"]), cell
    for c in summary["claims"]:
        assert c["evidence"] in md


def test_fusion_claim_uses_the_simulated_pair(report):
    out, _ = report
    summary = json.loads((out / "summary.json").read_text())
    fusion = next(c for c in summary["claims"] if c["id"] == "fusion")
    assert fusion["verdict"] in ("reproduced", "refuted")
    assert set(fusion["numbers"]["speedups"]) == {"h200_sxm_141gb", "ascend_910b2"}
    assert all(v > 1.0 for v in fusion["numbers"]["speedups"].values())


def test_roofline_has_ceilings_and_points():
    m = hwmodels.load("h200_sxm_141gb")
    cs = ceilings(m)
    labels = " ".join(c["label"] for c in cs)
    assert "fp16/bf16 tensor" in labels and "fp32" in labels and "fp8" in labels
    assert {c["label"] for c in cs if c["kind"] == "bandwidth"} >= {"DRAM"}
    pts = [{"label": "a", "intensity": 10.0, "flops_per_s": 1e13},
           {"label": "b", "intensity": 500.0, "flops_per_s": 4e14, "measured_intensity": 500.0,
            "measured_flops_per_s": 3e14}]
    fig = roofline_figure(m, pts)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert len(ax.collections) == 3  # two simulated points + one measured
    dashed = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    assert len(dashed) == len([c for c in cs if c["kind"] == "compute"])
    assert "FLOP per DRAM byte" in ax.get_xlabel() and "FLOP/s" in ax.get_ylabel()


def test_atomic_write_leaves_ordinary_permissions(tmp_path):
    import os
    import stat

    from tilesim.report.io import write_text
    p = tmp_path / "x.md"
    write_text(p, "hello")
    umask = os.umask(0)
    os.umask(umask)
    assert p.read_text() == "hello"
    assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~umask
