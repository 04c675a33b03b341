"""Memory-bound lowering of a plain user kernel (issue 14 item 4): the row softmax written the obvious
TileLang way (``core_kernels.softmax_plain``: T.copy to a fragment, reduce_max, T.exp, reduce_sum, a
division, T.copy out). Checks the sm_90 machine code (ptxas + cuobjdump: 128-bit global loads and stores,
warp shuffles, no barrier when a row is one warp, one barrier per reduction when a row spans warps, no
spills) and the results under numba's CUDA simulator on shapes the tiles do not divide, against a float64
NumPy softmax. The speed check is ``benchmarks/gpu_run.py --only plainsm`` (needs a GPU)."""

import json
import os
import subprocess
import sys

import pytest

from ._util import ROOT, can_compile_ptx, core_module, needs_numba_cuda, sass_of

pytestmark = [needs_numba_cuda]


def _sass(M, N, block_M, threads, tmp_path):
    from tilesim.backends.cuda.runtime import CudaProgram

    if not can_compile_ptx():
        pytest.skip("numba-cuda cannot compile here (no NVVM)")
    k = core_module().softmax_plain(M, N, block_M=block_M, threads=threads)
    prog = CudaProgram(k.prim_func, sim=False)
    (_, ptx), = prog.compile_ptx((9, 0))
    log, sass = sass_of(ptx, tmp_path)
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in log
    return prog.source, sass


def _ops(sass):
    """Opcode counts of the SASS listing (first token of each instruction, predicate dropped)."""
    counts = {}
    for line in sass.splitlines():
        if "/*" not in line or ";" not in line:
            continue
        body = line.split("*/", 1)[1].split(";", 1)[0].split()
        if not body:
            continue
        op = body[1] if body[0].startswith("@") and len(body) > 1 else body[0]
        counts[op] = counts.get(op, 0) + 1
    return counts


def test_plain_softmax_one_row_per_warp_machine_code(tmp_path):
    # 32768 x 1024 fp32, 4 rows per 128-thread block: each warp owns a row, 32 values per thread
    src, sass = _sass(32768, 1024, 4, 128, tmp_path)
    ops = _ops(sass)
    assert ops.get("LDG.E.128") == 8 and ops.get("STG.E.128") == 8  # whole-tile fast path: 8 x 16 B each way
    assert ops.get("LDG.E") == 32 and ops.get("STG.E") == 32  # the guarded scalar edge path
    assert ops.get("SHFL.BFLY") == 10  # 5 butterflies per reduction, max then sum
    assert not any(op.startswith("BAR") for op in ops)  # a row is one warp: no barrier, no shared memory
    assert "cuda.shared" not in src and "syncthreads" not in src


def test_plain_softmax_row_across_warps_machine_code(tmp_path):
    # one 1024-wide row per 128-thread block: the row spans 4 warps: shuffles, then one shared round each
    src, sass = _sass(32768, 1024, 1, 128, tmp_path)
    ops = _ops(sass)
    assert ops.get("LDG.E.128") == 2 and ops.get("STG.E.128") == 2
    assert ops.get("SHFL.BFLY") == 10
    assert ops.get("BAR.SYNC.DEFER_BLOCKING", 0) + ops.get("BAR.SYNC", 0) == 2  # one per reduction
    assert src.count("cuda.syncthreads()") == 2


def test_plain_softmax_unaligned_rows_use_scalar_accesses(tmp_path):
    # a 1001-wide row is not 16-byte aligned for every row: no vector access is emitted
    src, sass = _sass(64, 1001, 4, 128, tmp_path)
    assert "_ldv4" not in src and "_stv4" not in src
    ops = _ops(sass)
    assert "LDG.E.128" not in ops and "STG.E.128" not in ops


_SIM = r"""
import json, sys
import numpy as np
sys.path.insert(0, {root!r})
from tests.core_kernels import softmax_plain
from tilesim.backends.cuda.check import cuda_twin

rng = np.random.default_rng(3)
for M, N, bm, th in {cases!r}:
    x = (rng.standard_normal((M, N)) * 4).astype(np.float32)
    jk = cuda_twin(softmax_plain(M, N, block_M=bm, threads=th))
    y = np.asarray(jk(x.copy()))
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    ref = e / e.sum(axis=1, keepdims=True)
    print(json.dumps({{"case": [M, N, bm, th], "err": float(np.abs(y - ref).max() / np.abs(ref).max()),
                      "vec": "_ldv4" in jk.get_kernel_source()}}))
"""

# (M, N, block_M, threads): M never a multiple of block_M (the last block takes the guarded path)
_CASES = [(10, 256, 4, 128), (5, 200, 4, 128), (3, 130, 1, 64), (7, 1001, 2, 64)]


def test_plain_softmax_in_the_simulator_on_undivided_shapes():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    r = subprocess.run([sys.executable, "-c", _SIM.format(root=ROOT, cases=_CASES)], capture_output=True,
                       text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-4000:]
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert [row["case"] for row in rows] == [list(c) for c in _CASES]
    for row in rows:
        assert row["err"] < 1e-5, row
    assert rows[0]["vec"] and rows[1]["vec"] and not rows[3]["vec"]
