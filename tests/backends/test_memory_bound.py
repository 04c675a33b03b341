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


def test_short_fp32_rows_get_8_byte_vectors(tmp_path):
    # 64 fp32 columns over 32 lanes: 2 per thread, too few for 4 lanes: 2-lane (8-byte) accesses instead of scalars
    src, sass = _sass(4096, 64, 4, 128, tmp_path)
    assert "_ldv2(" in src and "_stv2(" in src and "_ldv4" not in src
    ops = _ops(sass)
    assert ops.get("LDG.E.64") == 1 and ops.get("STG.E.64") == 1
    assert not any(op.startswith("BAR") for op in ops)


def test_short_bf16_rows_keep_scalar_accesses():
    # 2-byte globals: the 2-lane (4-byte) fallback stays off (docs/cuda-backend.md, run 4), code unchanged
    from tilesim.backends.cuda.runtime import CudaProgram

    k = core_module().softmax_plain(4096, 64, block_M=4, threads=128, dtype="bfloat16")
    src = CudaProgram(k.prim_func, sim=False).source
    assert "_ldv" not in src and "_stv" not in src


def test_preferred_vec_by_global_dtype():
    from tilesim.backends.cuda.layout import DEFAULT_VEC, default_layout

    assert default_layout((4, 64), 128, 4, True, 2).vec == (1, 2)
    assert default_layout((4, 64), 128, 4, True).vec == (1, 1)  # min_vec defaults to DEFAULT_VEC
    assert default_layout((4, 1024), 128, 4, True, 2).vec == (1, DEFAULT_VEC)
    assert default_layout((4, 96), 128, 4, True, 2).vec == (1, 2)
    assert default_layout((4, 33), 128, 4, True, 2).vec == (1, 1)


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
                      "vec": "_ldv4" in jk.get_kernel_source(),
                      "v2": "_ldv2" in jk.get_kernel_source()}}))
"""

# (M, N, block_M, threads): M never a multiple of block_M (the last block takes the guarded path)
_CASES = [(10, 256, 4, 128), (5, 200, 4, 128), (3, 130, 1, 64), (7, 1001, 2, 64), (9, 64, 4, 128), (6, 96, 4, 128)]


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
    assert rows[4]["v2"] and rows[5]["v2"]  # 2-lane vectors, guarded edge rows


# ------------------------------------------------------------------------------------ on a GPU
@pytest.mark.gpu
@pytest.mark.parametrize("M, N, block_M, threads", [(32768, 1024, 4, 128), (1001, 1000, 4, 128), (999, 64, 4, 128)])
def test_plain_softmax_on_the_gpu(M, N, block_M, threads):
    import numpy as np

    from tilesim.backends.cuda.caps import available
    from tilesim.backends.cuda.check import cuda_twin

    if not available():
        pytest.skip("no CUDA GPU")
    x = (np.random.default_rng(5).standard_normal((M, N)) * 4).astype(np.float32)
    y = np.asarray(cuda_twin(core_module().softmax_plain(M, N, block_M=block_M, threads=threads))(x.copy()))
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    ref = e / e.sum(axis=1, keepdims=True)
    assert np.abs(y - ref).max() / np.abs(ref).max() < 1e-5


# ------------------------------------------------------------------ narrow-lane vector access packing
def _jit_lanes(n, bits):
    """CPU-JIT (llvmlite) of the IR that ``_ldvN``/``_stvN`` emit for ``n`` lanes of ``bits`` bits: split a
    ``<k x i32>`` into lanes (``split_words``) and pack lanes back (``join_words``)."""
    import ctypes

    from llvmlite import binding as llvm
    from llvmlite import ir

    from tilesim.backends.cuda.intrinsics import join_words, split_words

    k = n * bits // 32
    i32, ety = ir.IntType(32), ir.IntType(bits)
    wty = ir.VectorType(i32, k)
    mod = ir.Module(name="lanes")
    for name in ("split", "join"):
        fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [wty.as_pointer(), ety.as_pointer()]), name=name)
        b = ir.IRBuilder(fn.append_basic_block())
        wp, lp = fn.args
        if name == "split":
            for i, x in enumerate(split_words(ir, b, b.load(wp), ety, n)):
                b.store(x, b.gep(lp, [ir.Constant(i32, i)]))
        else:
            xs = [b.load(b.gep(lp, [ir.Constant(i32, i)])) for i in range(n)]
            b.store(join_words(ir, b, xs, wty), wp)
        b.ret_void()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    tm = llvm.Target.from_default_triple().create_target_machine()
    eng = llvm.create_mcjit_compiler(llvm.parse_assembly(str(mod)), tm)
    eng.finalize_object()
    proto = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
    return eng, proto(eng.get_function_address("split")), proto(eng.get_function_address("join"))


@pytest.mark.parametrize("n, bits", [(8, 16), (4, 16), (16, 8), (8, 8), (4, 8)])
def test_narrow_lane_words_match_memory_order(n, bits):
    import numpy as np

    eng, split, join = _jit_lanes(n, bits)
    dt = np.uint16 if bits == 16 else np.uint8
    words = np.random.default_rng(n * bits).integers(0, 2 ** 32, n * bits // 32, dtype=np.uint64).astype(np.uint32)
    lanes = np.zeros(n, dt)
    split(words.ctypes.data, lanes.ctypes.data)
    np.testing.assert_array_equal(lanes, words.view(dt))  # lane i is the i-th element in memory
    back = np.zeros_like(words)
    join(back.ctypes.data, lanes.ctypes.data)
    np.testing.assert_array_equal(back, words)
    del eng


def test_bf16_and_fp8_vectors_are_single_wide_accesses():
    # <8 x i16> used to become two ld.global.v4.u16 (8 bytes each): now one ld.global.v4.u32 (LDG.E.128)
    import re

    from kernels import fp8_cast, norms
    from tilesim.backends.cuda.runtime import CudaProgram

    if not can_compile_ptx():
        pytest.skip("numba-cuda cannot compile here (no NVVM)")
    k = norms.rms_norm(8192, 8192, dtype="bfloat16", eps=1e-6, block_N=None, threads=256)
    (_, ptx), = CudaProgram(k.prim_func, sim=False).compile_ptx((9, 0))
    assert "ld.global.v4.u16" not in ptx and "st.global.v4.u16" not in ptx
    assert len(re.findall(r"ld\.global\.v4\.u32", ptx)) == 8 and len(re.findall(r"st\.global\.v4\.u32", ptx)) == 4
    k = fp8_cast.per_token_cast(8192, 8192, group_size=128, block_M=32, in_dtype="bfloat16", threads=128)
    (_, ptx), = CudaProgram(k.prim_func, sim=False).compile_ptx((9, 0))
    assert "st.global.v4.u8" not in ptx and len(re.findall(r"st\.global\.v2\.u32", ptx)) == 4


def test_shared_tile_copies_use_16_byte_vectors(tmp_path):
    # a 128x32 bf16 A tile and a 32x128 B tile into shared memory: 4 (resp. 16) threads x 8 lanes per row
    from kernels import gemm as G
    from tilesim.backends.cuda.layout import copy_layout
    from tilesim.backends.cuda.runtime import CudaProgram

    assert copy_layout((128, 32), 128, 2).vec == (1, 8) and copy_layout((128, 32), 128, 2).tcount[-1] == 4
    assert copy_layout((32, 128), 128, 2).tcount[-1] == 16
    assert copy_layout((64, 64), 128, 4).vec == (1, 4) and copy_layout((64, 6), 128, 4).vec == (1, 2)
    assert copy_layout((8, 7), 128, 4).vec == (1, 1)
    if not can_compile_ptx():
        pytest.skip("numba-cuda cannot compile here (no NVVM)")
    k = G.matmul(4096, 4096, 4096, dtype="bfloat16", out_dtype="float32", block_M=128, block_N=128, block_K=32,
                 num_stages=2, threads=128)
    prog = CudaProgram(k.prim_func, sim=False)
    assert prog.source.count("_ldv8(") == 2
    (_, ptx), = prog.compile_ptx((9, 0))
    log, sass = sass_of(ptx, tmp_path)
    assert "0 bytes spill stores" in log
    ops = _ops(sass)
    assert ops.get("LDG.E.128") == 8 and ops.get("LDG.E.U16") == 16  # fast path 4+4 per thread; edge path scalar
