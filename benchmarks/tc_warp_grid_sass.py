"""The tensor-core GEMM's warp grid in sm_90 machine code: registers, spills, LDSM / HMMA per grid (no GPU).

Contract
--------
Builds ``kernels.gemm.matmul`` (bf16 in, fp32 out, 4096^3, the ``benchmarks/gpu_run.py --only tc`` configs)
with ``tensor_cores=True``, once per warp policy (``mma_layout.FORCE_POLICY``: ``FullRow`` = the 4 x 1 grid
of the runs before issue 14's grid, ``Square`` = TileLang's default, ``FullCol``), compiles it to PTX for
compute capability 9.0 (``CudaProgram.compile_ptx``), assembles it with ``ptxas -arch=sm_90 -v`` and
disassembles it with ``cuobjdump --dump-sass`` (both from Triton's package; the PTX ISA version is lowered
to 8.7, which that ptxas reads). Prints per (config, policy): warp grid, registers per thread, spill
bytes, the SASS counts of ``LDSM`` (all forms) and ``HMMA``, and LDSM per k16 step per warp
(``LDSM / (block_K / 16)``: the K loop of the gemm is unrolled). ``--json PATH`` writes the rows.

Run: ``python benchmarks/tc_warp_grid_sass.py [--quick] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CONFIGS = [dict(block_M=128, block_N=128, block_K=32, num_stages=4, threads=128, async_copy=True),
           dict(block_M=128, block_N=128, block_K=32, num_stages=2, threads=128, async_copy=False),
           dict(block_M=128, block_N=128, block_K=64, num_stages=3, threads=128, async_copy=True),
           dict(block_M=128, block_N=256, block_K=32, num_stages=3, threads=256, async_copy=True)]


def _nvbin(name: str) -> str:
    import triton
    return os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", name)


def sass_stats(ptx: str) -> dict:
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        Path(src).write_text(re.sub(r"^\.version 9\.\d+", ".version 8.7", ptx, count=1, flags=re.M))
        r = subprocess.run([_nvbin("ptxas"), "-arch=sm_90", "-v", src, "-o", out], capture_output=True, text=True,
                           timeout=600, check=True)
        sass = subprocess.run([_nvbin("cuobjdump"), "--dump-sass", out], capture_output=True, text=True,
                              check=True).stdout
    log = r.stdout + r.stderr
    return {"regs": max(int(x) for x in re.findall(r"Used (\d+) registers", log)),
            "spill_stores": max([int(x) for x in re.findall(r"(\d+) bytes spill stores", log)] or [0]),
            "spill_loads": max([int(x) for x in re.findall(r"(\d+) bytes spill loads", log)] or [0]),
            "ldsm": len(re.findall(r"\bLDSM\.", sass)), "hmma": len(re.findall(r"\bHMMA\.", sass))}


def main(argv=None):
    from kernels import gemm as G
    from tilesim.backends.cuda import mma_layout as ML
    from tilesim.backends.cuda.runtime import CudaProgram

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the first config only")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    rows = []
    keep = ML.FORCE_POLICY
    try:
        for cfg in CONFIGS[:1] if a.quick else CONFIGS:
            v = dict(cfg)
            ac = v.pop("async_copy")
            for pol in ("FullRow", "Square", "FullCol"):
                ML.FORCE_POLICY = pol
                k = G.matmul(4096, 4096, 4096, dtype="bfloat16", out_dtype="float32", **v)
                prog = CudaProgram(k.prim_func, sim=False, tensor_cores=True, async_copy=ac)
                (_, ptx), = prog.compile_ptx((9, 0))
                st = sass_stats(ptx)
                grid = ML.warp_grid(v["block_M"], v["block_N"], v["threads"], pol)
                row = dict(config=cfg, policy=pol, grid=list(grid), **st,
                           ldsm_per_kstep_per_warp=st["ldsm"] / (v["block_K"] // 16),
                           hmma_per_kstep_per_warp=st["hmma"] / (v["block_K"] // 16))
                rows.append(row)
                print(f"{v['block_M']}x{v['block_N']}x{v['block_K']}/t{v['threads']}/s{v['num_stages']}"
                      f"{'' if ac else '/sync'} {pol:8s} grid {grid[0]}x{grid[1]}: {st['regs']} regs, spills "
                      f"{st['spill_stores']}/{st['spill_loads']} B, LDSM {st['ldsm']} HMMA {st['hmma']} "
                      f"(per k16 step and warp: {row['ldsm_per_kstep_per_warp']:g} LDSM, "
                      f"{row['hmma_per_kstep_per_warp']:g} HMMA)", flush=True)
    finally:
        ML.FORCE_POLICY = keep
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
