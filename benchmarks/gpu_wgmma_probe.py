"""One-call H200 probe of ``wgmma`` from numba-cuda: which shared-memory layouts, descriptor encodings and
accumulator layouts match NumPy, and how fast the instruction issues (issue 14, brief AM).

Contract
--------
Standalone numba-cuda kernels (no tilesim lowering; the intrinsics of
``tilesim/backends/cuda/wgmma_intrinsics.py`` and the index math of ``wgmma_layout.py``, the ones the lowering
uses). One kernel per (operand types, N, A/B majorness): one warpgroup copies a host-built *shared-memory
image* of A (64 x K) and B into a 1024-byte aligned shared array, issues ``fence.proxy.async``, a barrier,
``wgmma.fence``, one ``wgmma.mma_async`` per K step (descriptor start addresses taken from a per-step offset
table), ``commit_group``, ``wait_group 0``, and stores its raw accumulator registers. The image, the offset
table and the descriptor's LBO / SBO / swizzle bits are run-time data, so one kernel checks every layout
hypothesis:

* K-major: 128-, 64- and 32-byte swizzle (``wgmma_layout.tile_offset``, SBO = 8 rows, LBO unused) and the
  unswizzled core-matrix layout in two arrangements (K-chunks adjacent / row groups adjacent) with both
  readings of LBO and SBO;
* M-/N-major (16-bit types only): 128- and 64-byte swizzle with LBO = region stride / 8-row stride and the
  reverse, and the unswizzled layout (two arrangements x two readings);
* every A hypothesis x every B hypothesis; inputs are small integers, so every product and sum is exact;
* the accumulator read back by two hypotheses (``acc_coord``: the ISA's D fragment; and the same with the
  two inner bits swapped).

Then a rate test: every SM runs blocks that issue ``m64nNk*`` back to back on fixed descriptors (1 and 2
warpgroups, bf16 N = 128 / 256, e4m3 N = 256), TFLOP/s from CUDA events.

Output: ``$OUT/wgmma_probe.json`` (``--out``): per variant the kernel, hypotheses, which accumulator
hypothesis matched and the max error; ``summary``: the matching (A, B) hypotheses per kernel; ``rate``.
``--ptx-only DIR`` (no GPU): compiles every kernel for sm_90a, writes the PTX, assembles it with
``ptxas -arch=sm_90a`` and counts HGMMA/QGMMA in the SASS (Triton's ``cuobjdump``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tilesim.backends.cuda import wgmma_layout as WL  # noqa: E402
from tilesim.backends.cuda.wgmma_intrinsics import reg_slot, wgmma_name, wgmma_namespace  # noqa: E402

SMEM = 48 * 1024 - 1024  # static shared bytes of the probe kernels (A at 0, B at B_OFF)
B_OFF = 8192

# (a, b, N, trans_a, trans_b, K): the kernels
KERNELS = [("bf16", "bf16", 128, 0, 0, 64), ("bf16", "bf16", 64, 0, 0, 64), ("bf16", "bf16", 256, 0, 0, 64),
           ("bf16", "bf16", 128, 0, 1, 64), ("bf16", "bf16", 128, 1, 0, 64), ("bf16", "bf16", 256, 0, 1, 64),
           ("f16", "f16", 128, 0, 0, 64), ("e4m3", "e4m3", 128, 0, 0, 128), ("e4m3", "e4m3", 256, 0, 0, 128)]


# ------------------------------------------------------------------------------------------ images (host)
def _kmajor_hyps(R: int, K: int, e: int):
    """K-major layouts of an R x K tile: name -> (byte offset fn (r, k), per-step start fn (s), lbo, sbo, mode)."""
    out = {}
    E = 16 // e
    for W in (128, 64, 32):
        if (K * e) % W == 0 and R % (1024 // W if W < 128 else 8) == 0:
            out[f"sw{W}"] = (lambda r, k, W=W: WL.tile_offset(r, k, R, e, W) * e,
                             lambda s, W=W: WL.kmajor_start(0, s * 32 // e, R, e, W), *WL.kmajor_lbo_sbo(W),
                             WL.SWIZZLE_MODE[W])
    nk = K // E
    for arr in ("kfast", "rfast"):
        s_c, s_r = (128, 128 * nk) if arr == "kfast" else (128 * (R // 8), 128)

        def off(r, k, s_c=s_c, s_r=s_r):
            return (r // 8) * s_r + (k // E) * s_c + (r % 8) * 16 + (k % E) * e

        for rd, (lbo, sbo) in (("isa", (s_c, s_r)), ("swap", (s_r, s_c))):
            out[f"int_{arr}_{rd}"] = (off, lambda s, s_c=s_c: s * 2 * s_c, lbo, sbo, 0)
    return out


def _mnmajor_hyps(R: int, K: int, e: int):
    """M-/N-major layouts of a tile stored K x R (R contiguous): name -> as :func:`_kmajor_hyps`, offset fn (r, k)."""
    out = {}
    E = 16 // e
    for W in (128, 64):
        if (R * e) % W:
            continue
        for rd, reg in (("lboreg", True), ("sboreg", False)):
            out[f"sw{W}_{rd}"] = (lambda r, k, W=W: WL.tile_offset(k, r, K, e, W) * e,
                                  lambda s, W=W: WL.mnmajor_start(16 * s, 0, K, e, W),
                                  *WL.mnmajor_lbo_sbo(K, W, reg), WL.SWIZZLE_MODE[W])
    for arr in ("nfast", "kfast"):
        s_n, s_k = (128, 128 * (R // E)) if arr == "nfast" else (128 * (K // 8), 128)

        def off(r, k, s_n=s_n, s_k=s_k):
            return (k // 8) * s_k + (r // E) * s_n + (k % 8) * 16 + (r % E) * e

        for rd, (lbo, sbo) in (("a", (s_n, s_k)), ("b", (s_k, s_n))):
            out[f"int_{arr}_{rd}"] = (off, lambda s, s_k=s_k: s * 2 * s_k, lbo, sbo, 0)
    return out


def image(mat_bits: np.ndarray, off, nbytes: int) -> np.ndarray:
    """Bytes of the shared image: element (r, k) of ``mat_bits`` (R x K raw bits) at byte ``off(r, k)``."""
    e = mat_bits.dtype.itemsize
    img = np.zeros(nbytes, np.uint8)
    R, K = mat_bits.shape
    raw = mat_bits.view(np.uint8).reshape(R, K, e)
    for r in range(R):
        for k in range(K):
            o = off(r, k)
            img[o:o + e] = raw[r, k]
    return img


def _bits(x: np.ndarray, kind: str) -> np.ndarray:
    import ml_dtypes
    t = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "e4m3": ml_dtypes.float8_e4m3fn}[kind]
    v = x.astype(t)
    return v.view(np.uint16 if v.dtype.itemsize == 2 else np.uint8)


def acc_hyps():
    """name -> fn(tid, i) -> (row, col) inside the 64 x N slab."""
    def swapped(tid, i):
        w, lane = tid // 32, tid % 32
        j, e = divmod(i, 4)
        return 16 * w + 8 * (e % 2) + lane // 4, 8 * j + 2 * (lane % 4) + e // 2
    return {"isa": WL.acc_coord, "swapped": swapped}


# ------------------------------------------------------------------------------------------ kernels
def kernel_source(a, b, n, ta, tb, nk, mode="full") -> tuple[str, str]:
    """``mode``: ``full``; ``harness`` (no wgmma instruction at all); ``fence`` (fence/commit/wait only);
    ``dyn`` (dynamic shared memory); ``imm`` (scale-d an immediate instead of a predicate); ``const`` (the
    128-byte-swizzle K-major offsets as literals, unrolled: no descriptor value comes from memory)."""
    name = wgmma_name(a, b, n, bool(ta), bool(tb)) + ("_imm" if mode == "imm" else "")
    nr = n // 2
    stores = "\n".join(f"    out[tid * {nr} + {i}] = acc[{reg_slot(i, n)}]" for i in range(nr))
    decl = ("cuda.shared.array(0, uint8, alignment=1024)" if mode == "dyn"
            else f"cuda.shared.array({SMEM}, uint8, alignment=1024)")
    call = {"harness": "pass", "fence": "pass"}.get(mode, f"{name}(da, db, acc, 0)")
    sync = "" if mode == "harness" else "_wg_fence()"
    done = "" if mode == "harness" else "_wg_commit()\n    _wg_wait0()"
    if mode == "cpp":  # the C++ reference (cpp_source): registers stored by the C++ side through out_addr
        src = f"""
def probe(imgA, imgB, na, nb, offA, offB, hiA, hiB, out, out_addr):
    sm = cuda.shared.array({SMEM}, uint8, alignment=1024)
    tid = cuda.threadIdx.x
    for i in range(tid, na, 128):
        sm[i] = imgA[i]
    for i in range(tid, nb, 128):
        sm[{B_OFF} + i] = imgB[i]
    _fence_async_smem()
    cuda.syncthreads()
    base = uint64(_smem_u32(sm, 0))
    wg_cpp(((base & uint64(0x3FFFF)) >> uint64(4)) | uint64(hiA),
           (((base + uint64({B_OFF})) & uint64(0x3FFFF)) >> uint64(4)) | uint64(hiB), out_addr)
"""
        return "wg_cpp", src
    if mode == "const":  # K-major 128-byte swizzle only: 32 bytes per step, every offset a literal, unrolled
        body = "\n".join(f"    {name}((((base + uint64({32 * s})) & uint64(0x3FFFF)) >> uint64(4)) | uint64(hiA), "
                         f"(((base + uint64({B_OFF + 32 * s})) & uint64(0x3FFFF)) >> uint64(4)) | uint64(hiB), acc, 0)"
                         for s in range(nk))
    else:
        body = f"""    for s in range({nk}):
        da = (((base + uint64(offA[s])) & uint64(0x3FFFF)) >> uint64(4)) | uint64(hiA)
        db = (((base + uint64({B_OFF}) + uint64(offB[s])) & uint64(0x3FFFF)) >> uint64(4)) | uint64(hiB)
        {call}"""
    src = f"""
def probe(imgA, imgB, na, nb, offA, offB, hiA, hiB, out):
    sm = {decl}
    tid = cuda.threadIdx.x
    for i in range(tid, na, 128):
        sm[i] = imgA[i]
    for i in range(tid, nb, 128):
        sm[{B_OFF} + i] = imgB[i]
    _fence_async_smem()
    cuda.syncthreads()
    base = uint64(_smem_u32(sm, 0))
    acc = cuda.local.array({nr}, float32)
    for i in range({nr}):
        acc[i] = float32(0.0)
    {sync}
{body}
    {done}
{stores}
"""
    return name, src


def rate_source(a, b, n, nwg, nk, iters) -> tuple[str, str]:
    name = wgmma_name(a, b, n)
    nr = n // 2
    src = f"""
def rate(hiA, hiB, out):
    sm = cuda.shared.array({SMEM}, uint8, alignment=1024)
    tid = cuda.threadIdx.x
    for i in range(tid, {SMEM}, {128 * nwg}):
        sm[i] = uint8(i % 7)
    _fence_async_smem()
    cuda.syncthreads()
    base = uint64(_smem_u32(sm, 0))
    acc = cuda.local.array({nr}, float32)
    for i in range({nr}):
        acc[i] = float32(0.0)
    for it in range({iters}):
        _wg_fence()
        for s in range({nk}):
            da = (((base + uint64(32 * s)) & uint64(0x3FFFF)) >> uint64(4)) | uint64(hiA)
            db = (((base + uint64({B_OFF} + 32 * s)) & uint64(0x3FFFF)) >> uint64(4)) | uint64(hiB)
            {name}(da, db, acc, 0)
        _wg_commit()
        _wg_wait0()
    t = float32(0.0)
    for i in range({nr}):
        t += acc[i]
    out[cuda.blockIdx.x * {128 * nwg} + tid] = t
"""
    return name, src


def build(src: str, fname: str, wg_names, cpp: str | None = None):
    from numba import float32, uint8, uint64

    from tilesim.backends.cuda.caps import cuda_module
    cuda = cuda_module()
    ns = wgmma_namespace([x for x in wg_names if x.startswith("_wgmma_")])
    if cpp is not None:
        ns["wg_cpp"] = cuda.declare_device("wg_cpp", "int32(uint64, uint64, uint64)", link=cuda.CUSource(cpp))
    ns.update(cuda=cuda, uint8=uint8, uint64=uint64, float32=float32)
    exec(compile(src, f"<wgmma_probe {fname}>", "exec"), ns)
    return ns[fname]


def cpp_source(n: int, nk: int) -> str:
    """CUDA C++ (linked through NVRTC, ``cuda.CUSource``) doing what the ``const`` kernel does — ``nk`` bf16
    ``m64n<n>k16`` steps on K-major 128-byte-swizzled operands, the start moving 32 bytes a step — written as
    C++ inline assembly: the ladder's reference for numba's ``InlineAsm`` path."""
    nr = n // 2
    regs = ", ".join(f"%{i}" for i in range(nr))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(nr))
    return f"""
extern "C" __device__ int wg_cpp(int* ret, unsigned long long da, unsigned long long db, unsigned long long out) {{
  float d[{nr}];
  for (int i = 0; i < {nr}; ++i) d[i] = 0.f;
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  for (int s = 0; s < {nk}; ++s) {{
    unsigned long long a = da + 2ull * s, b = db + 2ull * s;
    asm volatile("{{ wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16 {{{regs}}}, %{nr}, %{nr + 1}, 1, 1, 1, 0, 0; }}"
                 : {outs} : "l"(a), "l"(b));
  }}
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  float* o = reinterpret_cast<float*>(out);
  int t = threadIdx.x;
  for (int i = 0; i < {nr}; ++i) o[t * {nr} + i] = d[i];
  *ret = 0;
  return 0;
}}
"""


PROBE_CPP_SIG = ("void(uint8[::1], uint8[::1], int64, int64, int32[::1], int32[::1], uint64, uint64, float32[::1], "
                 "uint64)")
PROBE_SIG = "void(uint8[::1], uint8[::1], int64, int64, int32[::1], int32[::1], uint64, uint64, float32[::1])"
RATE_SIG = "void(uint64, uint64, float32[::1])"

RATES = [("bf16", "bf16", 256, 1), ("bf16", "bf16", 256, 2), ("bf16", "bf16", 128, 2), ("e4m3", "e4m3", 256, 2),
         ("bf16", "bf16", 128, 1)]


# ------------------------------------------------------------------------------------------ runs
def variants(a, b, n, ta, tb, K):
    e = 1 if a in ("e4m3", "e5m2") else 2
    ha = _mnmajor_hyps(64, K, e) if ta else _kmajor_hyps(64, K, e)
    hb = _mnmajor_hyps(n, K, e) if tb else _kmajor_hyps(n, K, e)
    return e, ha, hb


class _ModelDevice:
    """``--model``: the probe's host logic run against :mod:`tilesim.backends.cuda.wgmma_sim` (no GPU)."""

    def __init__(self, a, b, n, ta, tb, nk):
        self.args = (a, b, n, bool(ta), bool(tb), nk)

    def __getitem__(self, launch):
        return self

    def __call__(self, imgA, imgB, na, nb, offA, offB, hiA, hiB, out):
        from tilesim.backends.cuda.wgmma_sim import wgmma_model
        a, b, n, ta, tb, nk = self.args
        mem = np.zeros(SMEM, np.uint8)
        mem[:na] = imgA
        mem[B_OFF:B_OFF + nb] = imgB
        D = np.zeros((64, n))
        for s in range(nk):
            da = ((int(offA[s]) & 0x3FFFF) >> 4) | int(hiA)
            db = (((B_OFF + int(offB[s])) & 0x3FFFF) >> 4) | int(hiB)
            try:
                D += wgmma_model(mem, da, db, n, a, b, ta, tb)
            except ValueError:
                D[:] = np.nan
        for tid in range(128):
            for i in range(n // 2):
                out.host[tid * (n // 2) + i] = D[WL.acc_coord(tid, i)]


class _HostArray:
    def __init__(self, n):
        self.host = np.zeros(n, np.float32)

    def copy_to_host(self):
        return self.host.copy()


#: the isolation ladder, run first (each step in its own process on the device): (name, mode, hypothesis pairs)
LADDER = [("harness", "harness", [("sw128", "sw128")]), ("fence_only", "fence", [("sw128", "sw128")]),
          ("one_sw128", "full", [("sw128", "sw128")]), ("one_sw128_dynamic_smem", "dyn", [("sw128", "sw128")]),
          ("one_sw128_scale_d_immediate", "imm", [("sw128", "sw128")]),
          ("one_sw128_literal_offsets", "const", [("sw128", "sw128")]),
          ("one_sw128_cuda_cpp", "cpp", [("sw128", "sw128")]),
          ("one_interleave", "full", [("int_kfast_isa", "int_kfast_isa")])]


#: ``--quick``: the kernels and rates kept (indices into KERNELS / RATES)
QUICK_KERNELS, QUICK_RATES = (0, 3, 4, 7), (1, 3)


def steps(quick: bool = False) -> list:
    """Every probe step: the ladder (bf16 m64n64k16, A and B K-major, K = 64), each kernel, each rate test."""
    kern = [KERNELS[i] for i in QUICK_KERNELS] if quick else KERNELS
    rates = [RATES[i] for i in QUICK_RATES] if quick else RATES
    out = [dict(kind="kernel", name=nm, a="bf16", b="bf16", n=64, ta=0, tb=0, K=64, mode=mode, pairs=pairs)
           for nm, mode, pairs in LADDER]
    out += [dict(kind="kernel", name=f"{a}.{b} n{n} ta{ta} tb{tb} K{K}", a=a, b=b, n=n, ta=ta, tb=tb, K=K, mode="full",
                 pairs=None) for a, b, n, ta, tb, K in kern]
    out += [dict(kind="rate", name=f"rate {a} n{n} x{nwg}wg", a=a, b=b, n=n, nwg=nwg) for a, b, n, nwg in rates]
    return out


def one_kernel(cuda, st: dict, model: bool = False) -> dict:
    """Run one probe kernel over its hypothesis pairs: ``{"step", "matches", "rows", "compile_s"}``."""
    a, b, n, ta, tb, K, mode = st["a"], st["b"], st["n"], st["ta"], st["tb"], st["K"], st["mode"]
    rng = np.random.default_rng(0)
    e, ha, hb = variants(a, b, n, ta, tb, K)
    nk = K * e // 32
    name, src = kernel_source(a, b, n, ta, tb, nk, mode)
    t0 = time.time()
    if model:
        fn = _ModelDevice(a, b, n, ta, tb, nk)
    elif mode == "cpp":
        fn = cuda.jit(PROBE_CPP_SIG)(build(src, "probe", [], cpp_source(n, nk)))
    else:
        fn = cuda.jit(PROBE_SIG)(build(src, "probe", [name]))
    ctime = time.time() - t0
    A = rng.integers(-2, 3, size=(64, K)).astype(np.float32)
    Bt = rng.integers(-2, 3, size=(n, K)).astype(np.float32)  # B^T: N x K
    D = A.astype(np.float64) @ Bt.T.astype(np.float64)
    abits, bbits = _bits(A, a), _bits(Bt, b)
    out = _HostArray(128 * n // 2) if model else cuda.device_array(128 * n // 2, np.float32)
    amaps = {an: tuple(np.array([[f(tid, i)[x] for i in range(n // 2)] for tid in range(128)]) for x in (0, 1))
             for an, f in acc_hyps().items()}
    pairs = st["pairs"] or [(x, y) for x in ha for y in hb]
    matches, rows = [], []
    for hA, hB in pairs:
        vA, vB = ha[hA], hb[hB]
        ia, ib = image(abits, vA[0], B_OFF), image(bbits, vB[0], SMEM - B_OFF)
        offA = np.array([vA[1](s) for s in range(nk)], np.int32)
        offB = np.array([vB[1](s) for s in range(nk)], np.int32)
        hiA = np.uint64(WL.desc_hi(vA[2], vA[3], vA[4]))
        hiB = np.uint64(WL.desc_hi(vB[2], vB[3], vB[4]))
        print(f"launch {st['name']} {hA} x {hB}", file=sys.stderr, flush=True)
        if mode == "dyn" and not model:
            fn[1, 128, 0, SMEM](ia, ib, len(ia), len(ib), offA, offB, hiA, hiB, out)
        elif mode == "cpp" and not model:
            fn[1, 128](ia, ib, len(ia), len(ib), offA, offB, hiA, hiB, out, np.uint64(out.device_ctypes_pointer.value))
        else:
            fn[1, 128](ia, ib, len(ia), len(ib), offA, offB, hiA, hiB, out)
        raw = out.copy_to_host().reshape(128, n // 2)
        row = {"A": hA, "B": hB}
        for an, (rr, cc) in amaps.items():
            got = np.zeros_like(D)
            got[rr, cc] = raw
            err = float(np.abs(got - D).max())
            row[f"acc_{an}_maxerr"] = err
            if err == 0.0:
                row["match"] = an
                matches.append([hA, hB, an])
        if "match" not in row:
            row["raw_head"] = raw[:2, :8].tolist()
        rows.append(row)
        print("ROW " + json.dumps({k: v for k, v in row.items() if k != "raw_head"}), flush=True)
    return {"step": st["name"], "mode": mode, "compile_s": round(ctime, 2), "matches": matches, "rows": rows}


def one_rate(cuda, st: dict) -> dict:
    a, b, n, nwg = st["a"], st["b"], st["n"], st["nwg"]
    e = 1 if a == "e4m3" else 2
    nk, iters = 4, 2048
    name, src = rate_source(a, b, n, nwg, nk, iters)
    fn = cuda.jit(RATE_SIG)(build(src, "rate", [name]))
    hi = np.uint64(WL.desc_hi(*WL.kmajor_lbo_sbo(128), WL.SWIZZLE_MODE[128]))
    blocks = cuda.get_current_device().MULTIPROCESSOR_COUNT * 2
    out = cuda.device_array(blocks * 128 * nwg, np.float32)
    fn[blocks, 128 * nwg](hi, hi, out)
    cuda.synchronize()
    ts = []
    for _ in range(5):
        s0, s1 = cuda.event(), cuda.event()
        s0.record()
        fn[blocks, 128 * nwg](hi, hi, out)
        s1.record()
        s1.synchronize()
        ts.append(cuda.event_elapsed_time(s0, s1) * 1e-3)
    t = float(np.median(ts))
    flop = blocks * nwg * iters * nk * 2 * 64 * n * (32 // e)
    return {"step": st["name"], "blocks": blocks, "ms": t * 1e3, "tflops": flop / t / 1e12}


def run_step(st: dict, model: bool = False) -> dict:
    cuda = None
    if not model:
        from tilesim.backends.cuda.caps import cuda_module
        cuda = cuda_module()
    return one_rate(cuda, st) if st["kind"] == "rate" else one_kernel(cuda, st, model)


def run_device(out_path: Path, model: bool = False, isolate: bool = True, quick: bool = False) -> dict:
    """Every step, each in its own process unless ``model`` or not ``isolate`` (a fault then costs one step)."""
    res = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "steps": [], "faults": []}
    if not model:
        from tilesim.backends.cuda.caps import cuda_module
        dev = cuda_module().get_current_device() if not isolate else None
        res["device"] = str(dev.name) if dev is not None else "see the steps' processes"
    for st in steps(quick):
        if model and st["kind"] == "rate":
            continue
        if model or not isolate:
            try:
                res["steps"].append(run_step(st, model))
            except Exception as ex:  # noqa: BLE001
                res["faults"].append({"step": st["name"], "error": f"{type(ex).__name__}: {ex}"[:1500]})
        else:
            try:
                r = subprocess.run([sys.executable, os.path.abspath(__file__), "--step", json.dumps(st)],
                                   capture_output=True, text=True, timeout=240)
                line = [x for x in r.stdout.splitlines() if x.startswith("{")]
                if r.returncode == 0 and line:
                    res["steps"].append(json.loads(line[-1]))
                else:
                    res["faults"].append({"step": st["name"], "rc": r.returncode,
                                          "rows_before_fault": [json.loads(x[4:]) for x in r.stdout.splitlines()
                                                                if x.startswith("ROW ")],
                                          "last_launch": [x for x in r.stderr.splitlines() if x.startswith("launch")][-1:],
                                          "stderr": r.stderr[-1200:]})
            except subprocess.TimeoutExpired:
                res["faults"].append({"step": st["name"], "error": "timeout"})
        out_path.write_text(json.dumps(res, indent=1))
    return res


# ------------------------------------------------------------------------------------------ no GPU
def _nvbin(name: str) -> str:
    import triton
    return os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", name)


def ptx_only(outdir: Path) -> dict:
    from numba.core import sigutils

    from tilesim.backends.cuda.caps import cuda_module
    cuda = cuda_module()
    outdir.mkdir(parents=True, exist_ok=True)
    rows = {}
    jobs = [("probe", PROBE_SIG, kernel_source(a, b, n, ta, tb, K * (1 if a == "e4m3" else 2) // 32), f"{a}_n{n}_{ta}{tb}")
            for a, b, n, ta, tb, K in KERNELS]
    jobs += [("rate", RATE_SIG, rate_source(a, b, n, nwg, 4, 2048), f"rate_{a}_n{n}_{nwg}wg") for a, b, n, nwg in RATES]
    for fname, sig, (name, src), tag in jobs:
        args, _ = sigutils.normalize_signature(sig)
        ptx, _ = cuda.compile_ptx(build(src, fname, [name]), args, cc=(9, 0, "a"))
        p = outdir / f"{tag}.ptx"
        p.write_text(ptx)
        with tempfile.TemporaryDirectory() as d:
            cub = os.path.join(d, "k.cubin")
            r = subprocess.run(["/usr/local/bin/ptxas", "-arch=sm_90a", "-v", str(p), "-o", cub],
                               capture_output=True, text=True)
            row = {"target": re.findall(r"^\.target (\S+)", ptx, re.M), "ptxas_rc": r.returncode,
                   "ptxas": (r.stdout + r.stderr)[-600:]}
            if r.returncode == 0:
                try:
                    sass = subprocess.run([_nvbin("cuobjdump"), "--dump-sass", cub], capture_output=True,
                                          text=True, check=True).stdout
                    row.update(hgmma=len(re.findall(r"\bHGMMA\.", sass)), qgmma=len(re.findall(r"\bQGMMA\.", sass)),
                               warpsync=len(re.findall(r"WARPSYNC|WARPGROUP", sass)))
                except Exception as ex:  # noqa: BLE001
                    row["sass_error"] = str(ex)
        rows[tag] = row
        print(tag, json.dumps(row)[:400])
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "wgmma_probe.json"))
    ap.add_argument("--ptx-only", metavar="DIR")
    ap.add_argument("--model", action="store_true", help="run the correctness part against the NumPy model (no GPU)")
    ap.add_argument("--step", help="(internal) run one step given as JSON and print its result")
    ap.add_argument("--in-process", action="store_true", help="do not isolate the steps in subprocesses")
    ap.add_argument("--quick", action="store_true", help="the ladder, 4 kernels (K-major, N-major B, M-major A, e4m3), "
                                                         "2 rate tests")
    a = ap.parse_args(argv)
    if a.step:
        print(json.dumps(run_step(json.loads(a.step))), flush=True)
        return 0
    if a.ptx_only:
        rows = ptx_only(Path(a.ptx_only))
        bad = [k for k, v in rows.items() if v["ptxas_rc"] or not (v.get("hgmma") or v.get("qgmma"))]
        print("all assemble with HGMMA/QGMMA" if not bad else f"problems: {bad}")
        return 1 if bad else 0
    res = run_device(Path(a.out), model=a.model, isolate=not a.in_process, quick=a.quick)
    for r in res["steps"]:
        if "matches" in r:
            print(f"{r['step']:36s} {len(r['matches']):3d} matches: {r['matches'][:10]}")
        else:
            print(f"{r['step']:36s} {r['ms']:8.3f} ms {r['tflops']:7.1f} TFLOP/s")
    for f in res["faults"]:
        print("FAULT", json.dumps(f)[:600])
    return 0


if __name__ == "__main__":
    sys.exit(main())
