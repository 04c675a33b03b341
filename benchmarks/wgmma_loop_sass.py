"""The ``wgmma`` GEMM's K loop in sm_90a machine code (issue 14, brief AP): registers, spills, instruction classes.

Contract
--------
Builds ``kernels.gemm.matmul`` (bf16 in, fp32 out) and ``kernels.fp8_gemm.fp8_matmul`` (e4m3) at 4096^3 with
``T.gemm`` on ``wgmma`` (``CudaProgram(..., tensor_cores=True, async_copy=True, wgmma=True)``) for the configs of
``CONFIGS``, compiles each to PTX for ``sm_90a`` (``compile_ptx((9, 0, 'a'))``), assembles it with CUDA's
``ptxas -arch=sm_90a -v`` (``/usr/local/bin/ptxas``, else Triton's) and disassembles it with Triton's
``cuobjdump --dump-sass``. Per row it prints registers, spill store/load bytes, the local-memory frame
(``stack frame``), and for the **K loop** — the innermost backward branch whose body holds the ``HGMMA`` /
``QGMMA`` instructions — the static instruction counts by class:

* ``mma``: ``HGMMA`` / ``QGMMA``; ``ldgsts``: ``LDGSTS`` (``cp.async``); ``ldg_sts``: ``LDG`` + ``STS`` (the
  ordinary-copy fallback for misaligned tiles, present in the code, not run on aligned tiles);
* ``sync``: ``WARPSYNC`` + ``BAR`` + ``WARPGROUP.*`` (``wgmma.fence`` / ``wait_group``) + ``DEPBAR``
  (``cp.async.wait_group``) + ``FENCE``; the ``WARPGROUP.DEPBAR.LE gsb0, 0xN`` lines are listed too
  (``wait_group N``);
* ``int``: integer / address arithmetic (``IMAD``, ``IADD3``, ``LEA``, ``LOP3``, ``SHF``, ``ISETP``, ``SEL``,
  ``IABS``, ``MOV``, ``R2UR``, ``UIADD3``, ``ULOP3``, ``USHF``, ``UMOV``, ``ULEA``, ``UIMAD``, ...);
* ``local``: ``STL`` / ``LDL`` (spills or a local array); ``total``: every instruction of the loop body.

Static counts of the loop body (every branch of it: the whole-tile fast path, the per-chunk path and the
misaligned fallback), not executed counts. ``--json PATH`` writes the rows; ``--only SUBSTR`` filters the
config names; ``--variant`` picks the lowering (``inflight``: ``tile_wgmma.INFLIGHT = True``, ``wait0``: False,
``both``; default: the environment's choice).

``--fast-path`` counts the K loop of :func:`fast_path_only` (the copies reduced to their whole-tile branch): the
instructions a k-block of an interior, aligned tile executes (per thread; the loop's refill guard aside).
``--registry`` instead lowers every library kernel (``kernels.registry``, ``library_cases``) with tensor cores,
``cp.async`` and ``wgmma`` on, assembles those on ``wgmma`` for sm_90a and prints how many lowered, how many are on
``wgmma`` / in flight, and any failure or ptxas warning.

Run: ``python benchmarks/wgmma_loop_sass.py [--only bf16] [--variant both] [--json out.json] [--registry]``.
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

#: (name, kind, block_M, block_N, block_K, threads, num_stages)
CONFIGS = [("bf16 128x128x64/128/s3", "bf16", 128, 128, 64, 128, 3),
           ("bf16 128x256x64/256/s3", "bf16", 128, 256, 64, 256, 3),
           ("bf16 128x128x64/256/s4", "bf16", 128, 128, 64, 256, 4),
           ("fp8 128x128x128/128/s3", "fp8", 128, 128, 128, 128, 3),
           ("fp8 128x128x128/256/s4", "fp8", 128, 128, 128, 256, 4)]

_INT = ("IMAD", "IADD3", "LEA", "LOP3", "SHF", "ISETP", "SEL", "IABS", "MOV", "R2UR", "IMNMX", "VIADDMNMX", "VIADD",
        "UIADD3", "ULOP3", "USHF", "UMOV", "ULEA", "UIMAD", "USEL", "UISETP", "S2R", "S2UR", "PRMT", "I2F", "F2I",
        "PLOP3", "BMSK", "SGXT", "POPC", "FLO", "IMUL", "ISCADD")


def _bin(tool: str) -> str:
    if tool == "ptxas" and os.path.exists("/usr/local/bin/ptxas"):
        return "/usr/local/bin/ptxas"
    import triton
    return os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", tool)


def assemble(ptx: str) -> tuple[str, str]:
    """(ptxas -v log, SASS text) of one PTX module for sm_90a."""
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        Path(src).write_text(ptx)
        r = subprocess.run([_bin("ptxas"), "-arch=sm_90a", "-v", src, "-o", out], capture_output=True, text=True,
                           timeout=900)
        if r.returncode:
            raise RuntimeError(r.stderr[-2000:])
        sass = subprocess.run([_bin("cuobjdump"), "--dump-sass", out], capture_output=True, text=True,
                              check=True).stdout
    return r.stdout + r.stderr, sass


_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")


def instructions(sass: str) -> list:
    """[(address, opcode with modifiers, operands)] of the SASS text."""
    return [(int(m.group(1), 16), m.group(3), m.group(4).strip()) for m in _LINE.finditer(sass)]


def k_loop(ins: list, mma: str) -> list:
    """The instructions of the innermost loop (backward branch) containing every ``mma`` instruction."""
    pos = [i for i, (_, op, _) in enumerate(ins) if op.startswith(mma + ".")]
    if not pos:
        return []
    first, last = ins[pos[0]][0], ins[pos[-1]][0]
    best = None
    for addr, op, args in ins:
        if op.startswith("BRA") and addr > last:
            m = re.search(r"0x([0-9a-f]+)", args)
            if m and int(m.group(1), 16) <= first:
                tgt = int(m.group(1), 16)
                if best is None or (addr - tgt) < (best[1] - best[0]):
                    best = (tgt, addr)
    if best is None:
        return []
    return [x for x in ins if best[0] <= x[0] <= best[1]]


def classify(loop: list, mma: str) -> dict:
    ops = [op for _, op, _ in loop]
    base = [op.split(".")[0] for op in ops]
    c = {"total": len(ops), "mma": sum(op.startswith(mma + ".") for op in ops),
         "ldgsts": base.count("LDGSTS"), "ldg_sts": base.count("LDG") + base.count("STS"),
         "sync": sum(b in ("WARPSYNC", "BAR", "WARPGROUP", "DEPBAR", "FENCE", "MEMBAR") for b in base),
         "int": sum(b in _INT for b in base), "local": base.count("STL") + base.count("LDL")}
    c["wait_groups"] = [f"{op} {args}" for _, op, args in loop if op.startswith("WARPGROUP.DEPBAR")]
    c["arrive"] = sum(op.startswith("WARPGROUP.ARRIVE") for op in ops)
    c["depbar"] = [f"{op} {args}" for _, op, args in loop if op.startswith("DEPBAR")]
    return c


def build(kind: str, bm: int, bn: int, bk: int, th: int, st: int, inflight: bool | None):
    from kernels import gemm as G
    from kernels.fp8_gemm import fp8_matmul
    from tilesim.backends.cuda.runtime import CudaProgram
    v = dict(block_M=bm, block_N=bn, block_K=bk, num_stages=st, threads=th)
    k = fp8_matmul(4096, 4096, 4096, **v) if kind == "fp8" else G.matmul(4096, 4096, 4096, dtype="bfloat16",
                                                                           out_dtype="float32", **v)
    from tilesim.backends.cuda import tile_wgmma as TW
    keep = getattr(TW, "INFLIGHT", None)  # absent before brief AP (the study runs on older trees too)
    TW.INFLIGHT = inflight  # None: the environment's choice (TILESIM_CUDA_WGMMA_INFLIGHT, default on)
    try:
        return CudaProgram(k.prim_func, sim=False, tensor_cores=True, async_copy=True, wgmma=True)
    finally:
        TW.INFLIGHT = keep


def fast_path_only(src: str) -> str:
    """The generated source with every tile copy reduced to its whole-tile branch: each ``if _aligned(...)...:`` gets
    ``if True:`` and its ``elif``/``else`` siblings are dropped. An analysis variant (valid only when every tile is
    aligned and inside its tensor, as at 4096^3): its K loop is the path those tiles execute."""
    lines, out, i = src.splitlines(), [], 0
    while i < len(lines):
        ln = lines[i]
        ind = len(ln) - len(ln.lstrip())
        if ln.lstrip().startswith("if _aligned(") and ln.rstrip().endswith(":"):
            out.append(" " * ind + "if True:")
            i += 1
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > ind):
                out.append(lines[i])
                i += 1
            while i < len(lines) and len(lines[i]) - len(lines[i].lstrip()) == ind \
                    and lines[i].lstrip().startswith(("elif ", "else:")):
                i += 1
                while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > ind):
                    i += 1
            continue
        out.append(ln)
        i += 1
    return "\n".join(out) + "\n"


def study(kind, bm, bn, bk, th, st, inflight=None, fast=False) -> dict:
    import dataclasses
    prog = build(kind, bm, bn, bk, th, st, inflight)
    if fast:
        ks = prog.program.kernels[0]
        prog.program.kernels[0] = dataclasses.replace(ks, source=fast_path_only(ks.source))
    (_, ptx), = prog.compile_ptx((9, 0, "a"))
    log, sass = assemble(ptx)
    mma = "QGMMA" if kind == "fp8" else "HGMMA"
    ins = instructions(sass)
    loop = k_loop(ins, mma)
    row = {"regs": max(int(x) for x in re.findall(r"Used (\d+) registers", log)),
           "spill_stores": max([int(x) for x in re.findall(r"(\d+) bytes spill stores", log)] or [0]),
           "spill_loads": max([int(x) for x in re.findall(r"(\d+) bytes spill loads", log)] or [0]),
           "stack": max([int(x) for x in re.findall(r"(\d+) bytes stack frame", log)] or [0]),
           "warnings": [ln for ln in log.splitlines() if "warning" in ln.lower()],
           "mma_total": sum(op.startswith(mma + ".") for _, op, _ in ins),
           "stl_ldl_total": sum(op.split(".")[0] in ("STL", "LDL") for _, op, _ in ins),
           "loop": classify(loop, mma), "inflight_in_source": "_wg_wait1()" in prog.source}
    return row


def registry() -> dict:
    from kernels.registry import all_specs
    from tilesim.backends.cuda.check import library_cases
    from tilesim.backends.cuda.runtime import CudaProgram
    rows = []
    for spec in all_specs():
        try:
            c = library_cases([spec])[0]
            prog = CudaProgram(c.kernel.prim_func, sim=False, tensor_cores=True, async_copy=True, wgmma=True)
            wg, infl, ok = "_wgmma_" in prog.source, "_wg_wait1()" in prog.source, True
            if wg:
                for _, ptx in prog.compile_ptx((9, 0, "a")):
                    log, _ = assemble(ptx)
                    ok = ok and "warning" not in log.lower()
            rows.append((spec.name, wg, infl, ok))
        except Exception as ex:  # noqa: BLE001 - reported
            rows.append((spec.name, None, None, f"{type(ex).__name__}: {ex}"[:300]))
    return {"kernels": len(rows), "wgmma": [r[0] for r in rows if r[1]], "inflight": [r[0] for r in rows if r[2]],
            "failed": [r for r in rows if r[3] is not True]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--registry", action="store_true")
    ap.add_argument("--fast-path", action="store_true", help="count the K loop of fast_path_only(source)")
    ap.add_argument("--only", default="")
    ap.add_argument("--variant", choices=("default", "inflight", "wait0", "both"), default="default")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    if a.registry:
        print(json.dumps(registry(), indent=1))
        return
    variants = {"default": [None], "inflight": [True], "wait0": [False], "both": [False, True]}[a.variant]
    rows = []
    for name, *cfg in CONFIGS:
        if a.only not in name:
            continue
        for var in variants:
            r = study(*cfg, inflight=var, fast=a.fast_path)
            r.update(name=name, inflight=var, fast_path=a.fast_path)
            rows.append(r)
            lp = r["loop"]
            print(f"{name:24s} {'' if var is None else ('inflight' if var else 'wait0'):8s} regs {r['regs']:3d} "
                  f"spills {r['spill_stores']}/{r['spill_loads']} B stack {r['stack']} | loop: total {lp['total']} "
                  f"mma {lp['mma']} ldgsts {lp['ldgsts']} ldg+sts {lp['ldg_sts']} int {lp['int']} sync {lp['sync']} "
                  f"local {lp['local']} | waits {lp['wait_groups']} {'WARN ' + str(r['warnings']) if r['warnings'] else ''}",
                  flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
