"""Registers per thread of this project's CUDA backend: ptxas here vs the driver on the H200 vs the model.

Contract
--------
For the kernels of the Numba-backend H200 run (``reports/measurements/numba_h200_20261130T010421Z.json``,
built as ``benchmarks/numba_profile_validation.py`` builds them), compiles each kernel to PTX here
(``CudaProgram.compile_ptx``, compute capability 9.0, no GPU), runs ``ptxas -arch=sm_90 -v`` (Triton's
bundled ptxas, the PTX ISA version lowered to what it reads) and prints per kernel: ptxas's registers and spill bytes, the driver's registers from the
run's record, and the simulator's ``numba``-profile estimate. ``--json PATH`` writes the rows. ``--only
SUBSTR`` restricts the kernels (compiling takes seconds each).

Run: ``python benchmarks/ptxas_registers.py [--only rmsnorm] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def ptxas_path() -> str:
    import triton
    return os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")


def ptxas_registers(ptx: str) -> tuple[int, int]:
    """(registers per thread, spill store bytes) ptxas reports for one PTX module (sm_90)."""
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        # NVVM here writes PTX ISA 9.0; Triton's ptxas reads up to 8.7 (the kernels use nothing newer)
        Path(src).write_text(re.sub(r"^\.version 9\.\d+", ".version 8.7", ptx, count=1, flags=re.M))
        res = subprocess.run([ptxas_path(), "-arch=sm_90", "-v", src, "-o", out], capture_output=True, text=True,
                             timeout=300)
    text = res.stdout + res.stderr
    regs = [int(x) for x in re.findall(r"Used (\d+) registers", text)]
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill stores", text)]
    if not regs:
        raise RuntimeError(f"ptxas gave no register count: {text[-400:]}")
    return max(regs), max(spills or [0])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    spec = importlib.util.spec_from_file_location("numba_val", ROOT / "benchmarks" / "numba_profile_validation.py")
    nv = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nv)
    from tilesim.backends.cuda.runtime import CudaProgram
    from tilesim.sim import simulate
    pts = nv.points(nv.RUNS)
    rows = []
    print(f"{'kernel':42s} {'ptxas':>6s} {'spill B':>8s} {'driver':>7s} {'model':>6s}")
    for name, (shape, cfg, _, res) in sorted(pts.items()):
        if a.only not in name:
            continue
        kern = nv.build(name, shape, cfg)
        ptx = CudaProgram(kern.prim_func).compile_ptx((9, 0))
        regs, spill = max(ptxas_registers(p) for _, p in ptx)
        model = simulate(kern.prim_func, "h200_sxm_141gb", "numba").launches[0]["registers_per_thread"]
        drv = (res or {}).get("regs_per_thread")
        rows.append({"kernel": name, "ptxas": regs, "spill_bytes": spill, "driver": drv, "model": model})
        print(f"{name:42s} {regs:6d} {spill:8d} {drv if drv is not None else '-':>7} {model:6.0f}", flush=True)
    both = [r for r in rows if r["driver"] is not None]
    if both:
        print(f"ptxas vs driver: median |diff| {statistics.median(abs(r['ptxas'] - r['driver']) for r in both):.0f}; "
              f"model vs ptxas: median |diff| {statistics.median(abs(r['model'] - r['ptxas']) for r in rows):.0f} "
              f"over {len(rows)} kernels")
    if a.json:
        Path(a.json).write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
