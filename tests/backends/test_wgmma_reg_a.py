"""Register-A ``wgmma`` (flash attention's ``P @ V`` with ``P`` in registers, :mod:`tilesim.backends.cuda.
wgmma_reg_a`) and the fast-math switches (:mod:`tilesim.backends.cuda.fast_math`), brief AU: placement and
source, the fragment model, sm_90a machine code, numba's CUDA simulator against the interpreter (with a mutation
that must fail), and the GPU."""

import json
import os
import re
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from ._util import ROOT, can_compile_ptx, needs_numba_cuda


def _fa(B=1, H=1, S=80, D=64, causal=True, dtype="float16", **cfg):
    from kernels import attention as A

    cfg = {**dict(block_M=64, block_N=64, threads=128, num_stages=2), **cfg}
    return A.flash_attention_fwd(B, H, S, D, is_causal=causal, dtype=dtype, **cfg)


def _source(k, wgmma=True, **sw):
    from tilesim.backends.cuda import fast_math as FM
    from tilesim.backends.cuda import wgmma_reg_a as WRA
    from tilesim.backends.cuda.runtime import CudaProgram

    keep = (WRA.REG_A, FM.FAST_EXP2, FM.FMA_CONTRACT)
    try:
        WRA.REG_A, FM.FAST_EXP2, FM.FMA_CONTRACT = sw.get("reg_a", False), sw.get("fast", False), sw.get("fast", False)
        return CudaProgram(k.prim_func, sim=False, tensor_cores=True, async_copy=True, wgmma=wgmma)
    finally:
        WRA.REG_A, FM.FAST_EXP2, FM.FMA_CONTRACT = keep


# ------------------------------------------------------------------------------------------ placement / source
def test_switches_are_off_by_default(monkeypatch):
    from tilesim.backends.cuda import fast_math as FM
    from tilesim.backends.cuda import wgmma_reg_a as WRA

    for v in ("TILESIM_CUDA_WGMMA_REG_A", "TILESIM_CUDA_FAST_EXP2", "TILESIM_CUDA_FMA"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setattr(WRA, "REG_A", None)
    monkeypatch.setattr(FM, "FAST_EXP2", None)
    monkeypatch.setattr(FM, "FMA_CONTRACT", None)
    assert not WRA.reg_a_enabled() and not FM.fast_exp2() and not FM.fma_contract()
    monkeypatch.setenv("TILESIM_CUDA_WGMMA_REG_A", "1")
    monkeypatch.setenv("TILESIM_CUDA_FAST_EXP2", "1")
    monkeypatch.setenv("TILESIM_CUDA_FMA", "1")
    assert WRA.reg_a_enabled() and FM.fast_exp2() and FM.fma_contract()


def test_register_a_source_packs_fences_then_issues():
    k = _fa()
    off = _source(k).source
    assert "_wgmma_ra_" not in off and "_wgmma_f16_f16_n64" in off  # switch off: Q @ K^T on wgmma, P @ V mma.sync
    src = _source(k, reg_a=True).source
    # P @ V: K = 64 -> 4 k16 steps x 1 slab, N = 64 (dim), V stored (K, N): B N-major
    calls = re.findall(r"_wgmma_ra_f16_n64_1\((\w+)\[(\d+)\]", src)
    assert len(calls) == 4 and [int(i) for _, i in calls] == [0, 4, 8, 12]
    lines = src.splitlines()
    first_pack = next(i for i, ln in enumerate(lines) if "_pack_f16x2(acc_s_cast" in ln)
    fence = next(i for i, ln in enumerate(lines) if "_wg_fence_regs((" in ln)
    first_mma = next(i for i, ln in enumerate(lines) if "_wgmma_ra_" in ln)
    packs = [i for i, ln in enumerate(lines) if "_pack_f16x2(acc_s_cast" in ln]
    assert len(packs) == 16 and first_pack < fence < first_mma and max(packs) < fence
    tail = lines[first_mma:first_mma + 6]
    assert tail[-2].strip() == "_wg_commit()" and tail[-1].strip() == "_wg_wait0()"
    # K and V tiles of a static 4-D tensor: whole-tile chunks as one 32-bit shared address + literals (4 per tile
    # and thread: 64 rows x 128 bytes / 128 threads / 16 bytes), in the prologue and in the loop
    assert len(re.findall(r"_cp_async16u\(_sa\d+ \+ uint32\(\d+\), [KV]_\d+,", src)) == 16
    # the A registers of k16 step 0: C-fragment slots of n8 tiles 0 and 1 (row g, row g + 8 for each)
    assert re.search(r"= _pack_f16x2\(acc_s_cast_\d+\[0\], acc_s_cast_\d+\[1\]\)", src)


def test_register_a_needs_wgmma_and_a_register_fragment():
    k = _fa()
    assert "_wgmma_ra_" not in _source(k, wgmma=False, reg_a=True).source  # wgmma off: mma.sync register A
    from tilesim.backends.cuda import layout as LY

    keep = LY.REGISTER_A
    try:
        LY.REGISTER_A = False  # P through shared memory: both gemms on shared-operand wgmma, no register A
        src = _source(k, reg_a=True).source
    finally:
        LY.REGISTER_A = keep
    assert "_wgmma_ra_" not in src and src.count("_wgmma_f16_f16_") >= 2


def test_fast_math_source_forms():
    k = _fa()
    assert "_ex2ftz" not in _source(k).source and "_ffma" not in _source(k).source
    src = _source(k, fast=True).source
    assert "_m_exp2_f32" not in src and src.count("_ex2ftz(") == 2  # r_scale and the scores
    assert re.search(r"_ex2ftz\(_ffma\(acc_s_\d+\[.*\], float32\([0-9.e-]+\), -\(m_\d+\[\w+\] \* float32", src)


# ------------------------------------------------------------------------------------------ the CPU models
def test_fma_ref_rounds_once():
    from tilesim.backends.cuda.fast_math import fma_ref

    x = np.float32(1 + 2.0 ** -12)
    z = np.float32(-(1 + 2.0 ** -11))
    assert np.float32(x * x) + z == 0  # the unfused form loses the 2^-24 (x*x rounds to 1 + 2^-11)
    assert fma_ref(x, x, z) == np.float32(2.0 ** -24)
    rng = np.random.default_rng(1)
    for _ in range(300):
        a, b, c = (np.float32(v) for v in rng.standard_normal(3) * 10.0 ** rng.integers(-3, 4, 3))
        r = fma_ref(a, b, c)
        exact = float(a) * float(b) + float(c)  # a*b exact in float64; the sum's rounding is far below float32's
        assert abs(float(r) - exact) <= 0.5 * float(np.spacing(np.float32(abs(exact)))) * (1 + 1e-6) + 1e-45


def test_ex2_ftz_model_flushes():
    from tilesim.backends.cuda.fast_math import ex2_ftz_ref

    assert ex2_ftz_ref(-126.0) == np.float32(2.0 ** -126)
    assert ex2_ftz_ref(-126.5) == 0 and ex2_ftz_ref(-149.0) == 0  # subnormal results flushed
    assert ex2_ftz_ref(np.float32(1e-40)) == 1.0  # subnormal input read as 0
    assert ex2_ftz_ref(-np.inf) == 0 and ex2_ftz_ref(3.0) == 8.0


def test_register_a_fragment_model_matches_the_mma_sync_a_fragment():
    """Each warp of the warpgroup holds an m16 x k16 A fragment of ``mma.m16n8k16`` (rows 16w..16w+15): built
    here from the mma.sync simulator's own A-fragment reader on a random matrix, then read back."""
    from tilesim.backends.cuda.mma_sim import _pack
    from tilesim.backends.cuda.wgmma_sim import register_a

    rng = np.random.default_rng(2)
    M = rng.standard_normal((64, 16)).astype(ml_dtypes.bfloat16)
    bits = M.view(np.uint16)
    regs = {}
    for tid in range(128):
        w, lane = tid // 32, tid % 32
        g, t = lane // 4, lane % 4
        r0, c0 = 16 * w + g, 2 * t
        regs[tid] = tuple(int(_pack(bits[r0 + dr, c0 + dc], bits[r0 + dr, c0 + dc + 1]))
                          for dr, dc in ((0, 0), (8, 0), (0, 8), (8, 8)))
    assert np.array_equal(register_a(regs, "bf16"), M.astype(np.float64))
    swapped = {t: (r[0], r[2], r[1], r[3]) for t, r in regs.items()}  # a2a3 <-> a4a5: a wrong fragment order
    assert not np.array_equal(register_a(swapped, "bf16"), M.astype(np.float64))


# ------------------------------------------------------------------------------------------ machine code
@pytest.mark.skipif(not can_compile_ptx(), reason="numba-cuda cannot compile PTX here")
@pytest.mark.parametrize("cfg", [(64, 128, 12), (128, 256, 12)])
def test_sm90a_register_a_hgmma(cfg, tmp_path):
    from tests.backends.test_wgmma import _sm90a

    bm, th, n_hgmma = cfg
    k = _fa(1, 32, 4096, 128, dtype="bfloat16", block_M=bm, threads=th)
    log, sass, spills = _sm90a(_source(k, reg_a=True, fast=True), tmp_path)
    assert sass.count("HGMMA.") == n_hgmma and "HMMA." not in sass and "LDSM" not in sass
    # P @ V: A from registers (R<n>), B N-major from shared memory
    assert len(re.findall(r"HGMMA\.64x128x16\.F32\.BF16 R\d+, R\d+, gdesc\[UR\d+\]\.tnspB", sass)) == 4
    assert spills == 0 and "warning" not in log.lower()
    # ex2.approx.ftz: no subnormal range test (x >= -126) around MUFU.EX2; without the switch: one per exp2
    ex2_guard = re.compile(r"FSETP\.GEU\.AND P\d, PT, R\d+(\.reuse)?, -126, PT")
    assert not ex2_guard.search(sass) and sass.count("MUFU.EX2") >= 32  # 32 scores per thread
    if bm == 64:
        _log, sass0, _sp = _sm90a(_source(k, reg_a=True), tmp_path)
        assert len(ex2_guard.findall(sass0)) >= 32


# ------------------------------------------------------------------------------------------ simulator
_SIM = r"""
import json, sys
import numpy as np
sys.path.insert(0, {root!r})
from kernels import attention as A
from tilesim.backends.cuda import fast_math as FM, wgmma_reg_a as WRA, wgmma_sim as WS
from tilesim.backends.cuda.check import cuda_twin, interp_twin, rel_err
WRA.REG_A = True
if {mutant!r}:  # the A fragment's registers 1 and 2 swapped (row g + 8 and column 2t + 8 confused)
    real = WS.register_a
    WS.register_a = lambda regs, kind: real({{t: (r[0], r[2], r[1], r[3]) for t, r in regs.items()}}, kind)
rng = np.random.default_rng(0)
h = lambda *s: rng.standard_normal(s).astype(np.float16)
for causal, S, D, bm, th, fast in {cases!r}:
    FM.FAST_EXP2 = FM.FMA_CONTRACT = fast
    k = A.flash_attention_fwd(1, 1, S, D, is_causal=causal, dtype="float16", block_M=bm, block_N=64, threads=th,
                              num_stages=2)
    jk = cuda_twin(k, tensor_cores=True, async_copy=True, wgmma=True)
    src = jk.get_kernel_source()
    assert "_wgmma_ra_" in src and ("_ex2ftz" in src) == fast
    x = [h(1, S, 1, D) for _ in range(3)]
    out = jk(*[a.copy() for a in x])
    ref = interp_twin(k)(*[a.copy() for a in x])
    print(json.dumps({{"case": [causal, S, D, bm, th, fast], "err": rel_err(out[0], ref[0])}}), flush=True)
"""


def _run_sim(cases, mutant=False):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    r = subprocess.run([sys.executable, "-c", _SIM.format(root=ROOT, cases=cases, mutant=mutant)],
                       capture_output=True, text=True, env=env, timeout=1500)
    assert r.returncode == 0, r.stderr[-4000:]
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


@needs_numba_cuda
def test_register_a_flash_attention_in_the_simulator():
    # no tile divides S; fp16 output: a sixteenth of fp16's epsilon, as the mma.sync register-A tests
    rows = _run_sim([(True, 80, 64, 64, 128, False), (False, 80, 64, 64, 128, True), (True, 144, 32, 128, 256, True)])
    assert len(rows) == 3
    for row in rows:
        assert row["err"] < 6.1e-5, row


@needs_numba_cuda
def test_register_a_mutation_fails_in_the_simulator():
    rows = _run_sim([(True, 80, 64, 64, 128, False)], mutant=True)
    assert len(rows) == 1 and rows[0]["err"] > 1e-2, rows


# ------------------------------------------------------------------------------------------ GPU
@pytest.mark.gpu
@pytest.mark.parametrize("case", [(True, 1000, 128, 64, 128, True), (True, 1000, 128, 128, 256, True),
                                  (False, 200, 64, 64, 128, False)])
def test_register_a_flash_attention_on_the_gpu(case):
    from tilesim.backends.cuda import fast_math as FM
    from tilesim.backends.cuda import wgmma_reg_a as WRA
    from tilesim.backends.cuda.caps import available
    from tilesim.backends.cuda.check import cuda_twin, interp_twin, rel_err

    if not available():
        pytest.skip("no CUDA GPU")
    causal, S, D, bm, th, fast = case
    keep = (WRA.REG_A, FM.FAST_EXP2, FM.FMA_CONTRACT)
    try:
        WRA.REG_A, FM.FAST_EXP2, FM.FMA_CONTRACT = True, fast, fast
        k = _fa(1, 2, S, D, causal=causal, block_M=bm, threads=th)
        jk = cuda_twin(k, tensor_cores=True, async_copy=True, wgmma=True)
        assert "_wgmma_ra_" in jk.get_kernel_source()
        rng = np.random.default_rng(5)
        x = [rng.standard_normal((1, S, 2, D)).astype(np.float16) for _ in range(3)]
        out = jk(*[a.copy() for a in x])
    finally:
        WRA.REG_A, FM.FAST_EXP2, FM.FMA_CONTRACT = keep
    ref = interp_twin(k)(*[a.copy() for a in x])
    assert rel_err(out[0], ref[0]) < 6.1e-5
