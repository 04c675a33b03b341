"""``hw list`` / ``hw show`` / ``hw check`` and ``python -m hwmodels``."""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

import hwmodels
from hwmodels.cli import add_subcommands, format_quantity, main
from hwmodels.dump import dumps

# A user's file: the H100 model renamed, written out by the dumper.
BASE = dumps(dataclasses.replace(hwmodels.load("h100"), name="toy"))


def test_list_prints_a_row_per_device(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in hwmodels.builtin_names():
        assert name in out
    assert "989.4" in out and "1978.9" in out and "4.80" in out  # H100/H200 peaks, H200 TB/s
    assert "24 aic + 48 aiv" in out and "64 ipu*" in out


def test_list_with_user_file(tmp_path, capsys):
    path = tmp_path / "toy.toml"
    path.write_text(BASE, encoding="utf-8")
    assert main(["list", "--hw", str(path)]) == 0
    assert "toy " in capsys.readouterr().out


def test_show_prints_value_unit_and_source(capsys):
    assert main(["show", "h200"]) == 0
    out = capsys.readouterr().out
    assert "memory.bandwidth_bytes_per_s" in out and "4.8 TB/s" in out
    assert "https://www.nvidia.com/en-us/data-center/h200/" in out
    assert "measured: hwmodels/microbench.py" in out
    assert "peak float16" in out


def test_show_reports_a_bad_file(tmp_path, capsys):
    path = tmp_path / "bad.toml"
    path.write_text(BASE.replace("count = {", "count_hz = {"), encoding="utf-8")
    assert main(["show", str(path)]) == 2
    assert f"{path}: key 'core_kinds.sm.count_hz'" in capsys.readouterr().err


def test_check_exit_status(capsys):
    assert main(["check", "h100", "--tflops", "756", "--tbps", "3.0"]) == 1
    assert "H100 PCIe" in capsys.readouterr().out
    assert main(["check", "h100", "--tflops", "989.4", "--tbps", "3.35"]) == 0


def test_add_subcommands_wires_into_a_parent_parser(capsys):
    parser = argparse.ArgumentParser(prog="tilesim")
    add_subcommands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["hw", "show", "ascend_910b4"])
    assert args.fn(args) == 0
    assert "ascend_910b4" in capsys.readouterr().out


def test_format_quantity():
    assert format_quantity(4.8e12, "bytes_per_s") == "4.8 TB/s"
    assert format_quantity(1.83e9, "hz") == "1830 MHz"
    assert format_quantity(233472, "bytes") == "228 KiB"
    assert format_quantity(None, "bytes") == "unknown"


def test_tilesim_cli_runs_hw_commands(capsys):
    tilesim_cli = pytest.importorskip("tilesim.cli")
    assert tilesim_cli.main(["hw", "list"]) == 0
    assert "h200_sxm_141gb" in capsys.readouterr().out


def test_python_dash_m():
    root = Path(hwmodels.__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-m", "hwmodels", "list"], cwd=root, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "mlu370_x8" in done.stdout
