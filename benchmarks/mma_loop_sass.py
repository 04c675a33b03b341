"""SASS of the main loop of the tensor-core (``mma.sync``) kernels, counted by instruction class (no GPU).

Contract
--------
:func:`loop_counts` takes the ``cuobjdump --dump-sass`` text of one kernel and returns the instruction counts of
**one iteration of its main loop along the hot path**: the main loop is the innermost loop (a backward branch)
whose body holds every ``HMMA`` of the kernel; its blocks form a graph (inner backward branches dropped); the
hot path is the path from the loop head to the backward branch with, in order of priority, the most ``HMMA``,
the most unpredicated ``LDGSTS`` (the whole-tile ``cp.async`` form), the fewest zero-filling ``LDGSTS``, the
fewest ``LDG``/``STS`` (the ordinary-copy fallback), then the fewest instructions — the iteration of an interior
tile (for flash attention: a tile off the diagonal). ``cold`` is the same key's longest path (the diagonal tile
when the mask is versioned). Classes (:data:`CLASSES`): HMMA, LDSM, LDGSTS, INT (integer and predicate
arithmetic: IMAD*, IADD3, ISETP, LEA*, SHF, LOP3, SEL, PRMT, ...), MOV, F32, MUFU, BAR (BAR/DEPBAR/LDGDEPBAR),
OTHER.

:func:`study` builds the ``benchmarks/gpu_run.py --only tc`` kernels (causal flash attention bf16 64x64/t128/s2
at (2, 16, 2048, 128) and (1, 32, 4096, 128); GEMM bf16 4096^3 128x128x32/t128/s4, Square and FullRow) with
``tensor_cores=True``, compiles them to PTX (``CudaProgram.compile_ptx((9, 0, 'a'))``), assembles with
``ptxas -arch=sm_90a -v`` (the one on PATH, else Triton's) and disassembles with Triton's ``cuobjdump``.
:data:`tilesim.backends.cuda.emitter.INT_FORMS` (the switch of this study's changes) is set per ``--forms``.

Run: ``python benchmarks/mma_loop_sass.py [--forms new old] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

_LINE = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);")

CLASSES = ("HMMA", "LDSM", "LDGSTS", "INT", "MOV", "F32", "MUFU", "BAR", "OTHER")
_INT = ("IMAD", "IADD", "ISETP", "LEA", "SHF", "LOP", "SEL", "PRMT", "IABS", "IMNMX", "VIADD", "VIMNMX", "SGXT",
        "P2R", "R2P", "PLOP3", "BMSK", "FLO", "POPC", "UIADD", "UIMAD", "ULEA", "USHF", "ULOP", "USEL", "ISCADD",
        "BFE", "BFI", "I2F", "F2I")


def classify(op: str) -> str:
    base = op.split(".")[0]
    if base == "HMMA":
        return "HMMA"
    if base == "LDSM":
        return "LDSM"
    if base == "LDGSTS":
        return "LDGSTS"
    if base in ("BAR", "DEPBAR", "LDGDEPBAR"):
        return "BAR"
    if base == "MUFU":
        return "MUFU"
    if base in ("MOV", "UMOV", "CS2R", "S2R", "S2UR", "R2UR"):
        return "MOV"
    if base in ("FADD", "FMUL", "FFMA", "FMNMX", "FSEL", "FSETP", "F2FP", "F2F", "FCHK", "FMNMX3", "FSWZADD"):
        return "F32"
    if base != "SHFL" and (base.startswith(_INT) or base in _INT):
        return "INT"
    return "OTHER"


def parse(sass: str) -> list:
    """``[(address, predicate, opcode, operands)]`` of every instruction."""
    out = []
    for line in sass.splitlines():
        m = _LINE.match(line)
        if m:
            out.append((int(m.group(1), 16), (m.group(2) or "").strip(), m.group(3), m.group(4).strip()))
    return out


def _target(ins) -> int | None:
    if ins[2].split(".")[0] not in ("BRA", "JMP"):
        return None
    hx = re.findall(r"0x([0-9a-f]+)", ins[3])
    return int(hx[-1], 16) if hx else None


def _blocks(ins: list) -> list:
    lead = {ins[0][0]}
    for k, x in enumerate(ins):
        t = _target(x)
        if t is not None:
            lead.add(t)
            if k + 1 < len(ins):
                lead.add(ins[k + 1][0])
        elif x[2].split(".")[0] in ("EXIT", "RET") and k + 1 < len(ins):
            lead.add(ins[k + 1][0])
    blocks, cur = [], []
    for x in ins:
        if x[0] in lead and cur:
            blocks.append(cur)
            cur = []
        cur.append(x)
    if cur:
        blocks.append(cur)
    return blocks


def _key(block) -> tuple:
    hmma = sum(1 for x in block if x[2].startswith("HMMA"))
    ldgsts = sum(1 for x in block if x[2].startswith("LDGSTS") and "ZFILL" not in x[2])
    zfill = sum(1 for x in block if x[2].startswith("LDGSTS") and "ZFILL" in x[2])
    slow = sum(1 for x in block if x[2].split(".")[0] in ("LDG", "STS"))
    return (hmma, ldgsts, -zfill, -slow)


def loop_counts(sass: str) -> dict:
    """Counts per class of one hot-path iteration of the main loop (see the module docstring)."""
    blocks, hot, cold, loop_bytes = loop_paths(sass)

    def counts(path):
        c = dict.fromkeys(CLASSES, 0)
        for i in path:
            for x in blocks[i]:
                c[classify(x[2])] += 1
        c["total"] = sum(c[k] for k in CLASSES)
        return c

    return {"hot": counts(hot), "cold": counts(cold), "loop_bytes": loop_bytes}


def hot_instructions(sass: str) -> list:
    """The instructions (address, predicate, opcode, operands) of the hot path, in address order."""
    blocks, hot, _, _ = loop_paths(sass)
    return [x for i in hot for x in blocks[i]]


def loop_paths(sass: str):
    """(blocks of the main loop, hot path, cold path (block indices), loop size in bytes)."""
    ins = parse(sass)
    hmma_at = [x[0] for x in ins if x[2].startswith("HMMA")]
    if not hmma_at:
        raise ValueError("no HMMA in this kernel")
    best = None
    for x in ins:
        t = _target(x)
        if t is not None and t < x[0] and t <= min(hmma_at) and x[0] >= max(hmma_at):
            if best is None or x[0] - t < best[1] - best[0]:
                best = (t, x[0])
    if best is None:
        raise ValueError("no loop holds every HMMA")
    head, latch = best
    body = [x for x in ins if head <= x[0] <= latch]
    blocks = _blocks(body)
    start = {b[0][0]: i for i, b in enumerate(blocks)}
    succ = []
    for i, b in enumerate(blocks):
        last = b[-1]
        t = _target(last)
        s = []
        uncond = last[2].split(".")[0] in ("BRA", "JMP", "EXIT", "RET") and not last[1] and "P" not in last[3].split(",")[0]
        if t is not None and t > last[0] and t in start:
            s.append(start[t])
        if not uncond and i + 1 < len(blocks):
            s.append(i + 1)
        succ.append(sorted(set(s)))
    # longest / shortest path by key over the DAG (blocks are in address order; edges go forward)
    neg_inf = None
    best_hi = [neg_inf] * len(blocks)
    best_lo = [neg_inf] * len(blocks)

    def add(a, b):
        return tuple(p + q for p, q in zip(a, b))

    def k_of(i):
        b = blocks[i]
        return _key(b) + (len(b),)

    best_hi[0] = (k_of(0), [0])
    best_lo[0] = (k_of(0), [0])
    for i in range(len(blocks)):
        for j in succ[i]:
            for table, pick in ((best_hi, max), (best_lo, None)):
                if table[i] is None:
                    continue
                cand = (add(table[i][0], k_of(j)), table[i][1] + [j])
                cur = table[j]
                if cur is None:
                    table[j] = cand
                    continue
                a, b = cand[0], cur[0]
                if pick is max:  # same memory/HMMA key: the longest
                    better = a > b
                else:  # same memory/HMMA key, then the fewest instructions
                    better = a[:4] > b[:4] or (a[:4] == b[:4] and a[4] < b[4])
                if better:
                    table[j] = cand
    last = len(blocks) - 1
    return blocks, best_lo[last][1], best_hi[last][1], latch - head + 16


def ptxas_sass(ptx: str) -> tuple[str, str]:
    """(ptxas -v log, SASS) of ``ptx`` for sm_90a."""
    from benchmarks.tc_warp_grid_sass import _nvbin

    ptxas = shutil.which("ptxas")
    if ptxas is None:
        ptxas = _nvbin("ptxas")
        ptx = re.sub(r"^\.version 9\.\d+", ".version 8.7", ptx, count=1, flags=re.M)
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        Path(src).write_text(ptx)
        r = subprocess.run([ptxas, "-arch=sm_90a", "-v", src, "-o", out], capture_output=True, text=True,
                           timeout=900, check=True)
        sass = subprocess.run([_nvbin("cuobjdump"), "--dump-sass", out], capture_output=True, text=True,
                              check=True).stdout
    return r.stdout + r.stderr, sass


def kernel_stats(prim_func, **opts) -> dict:
    from tilesim.backends.cuda.runtime import CudaProgram

    prog = CudaProgram(prim_func, sim=False, tensor_cores=True, async_copy=True, **opts)
    (_, ptx), = prog.compile_ptx((9, 0, "a"))
    log, sass = ptxas_sass(ptx)
    row = {"regs": max(int(x) for x in re.findall(r"Used (\d+) registers", log)),
           "spill_bytes": sum(int(x) for x in re.findall(r"(\d+) bytes spill", log))}
    row.update(loop_counts(sass))
    return row


def study(forms=("new", "old")) -> list:
    from kernels import attention as A
    from kernels import gemm as G
    from tilesim.backends.cuda import emitter as E
    from tilesim.backends.cuda import mma_layout as ML

    cases = [("fa causal (2,16,2048,128) 64x64/t128/s2", "",
              lambda: A.flash_attention_fwd(2, 16, 2048, 128, is_causal=True, dtype="bfloat16", block_M=64,
                                            block_N=64, threads=128, num_stages=2)),
             ("fa causal (1,32,4096,128) 64x64/t128/s2", "",
              lambda: A.flash_attention_fwd(1, 32, 4096, 128, is_causal=True, dtype="bfloat16", block_M=64,
                                            block_N=64, threads=128, num_stages=2)),
             ("gemm 4096^3 128x128x32/t128/s4 Square", "Square",
              lambda: G.matmul(4096, 4096, 4096, dtype="bfloat16", out_dtype="float32", block_M=128, block_N=128,
                               block_K=32, num_stages=4, threads=128)),
             ("gemm 4096^3 128x128x32/t128/s4 FullRow", "FullRow",
              lambda: G.matmul(4096, 4096, 4096, dtype="bfloat16", out_dtype="float32", block_M=128, block_N=128,
                               block_K=32, num_stages=4, threads=128))]
    rows = []
    keep_forms, keep_pol = E.INT_FORMS, ML.FORCE_POLICY
    try:
        for form in forms:
            E.INT_FORMS = form == "new"
            for name, pol, make in cases:
                ML.FORCE_POLICY = pol or None
                st = kernel_stats(make().prim_func)
                rows.append(dict(kernel=name, forms=form, **st))
                h = st["hot"]
                print(f"{form:3s} {name:42s} regs {st['regs']:3d} spill {st['spill_bytes']:3d} | hot: total "
                      f"{h['total']:5d} " + " ".join(f"{k} {h[k]}" for k in CLASSES)
                      + f" | cold total {st['cold']['total']}", flush=True)
    finally:
        E.INT_FORMS, ML.FORCE_POLICY = keep_forms, keep_pol
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--forms", nargs="*", default=["new", "old"], choices=["new", "old"])
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    rows = study(tuple(a.forms))
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
