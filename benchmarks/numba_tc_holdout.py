"""The HELD-OUT set of the simulator's ``numba_tc`` profile: Numba-backend runs on the H200 that no earlier file has.

Contract
--------
* ``CONFIGS`` is the held-out set (fixed 2026-12-02 before any fitting, docs/simulator.md §6c): library kernels
  through ``target="cuda"`` with tensor cores on — bf16/fp16 GEMMs at shapes and tiles the TRAIN rows do not have
  (skinny M, sizes the tiles do not divide, ``trans_B``, 256-thread 128×128, 1 stage), fp8 e4m3 GEMMs, causal and
  non-causal flash attention at other lengths/tiles/stages — and memory-bound kernels (one-pass softmax and
  RMSNorm, the per-token fp8 cast, the plain fp32 softmax) so the profile is checked beyond tensor cores. TRAIN is
  ``TRAIN`` below: rows of existing ``reports/measurements/numba_h200_*.json`` files; the two never share a row
  (``split_rows``; a test checks the disjointness).
* On the GPU (one process): sets ``TILESIM_CUDA_WGMMA=0`` (the profile models the ``mma.sync`` lowering), builds and
  checks each kernel against torch (relative norm error), times it with CUDA events (median of rounds of event-timed
  loops, the GPU kept busy while launches queue: ``gpu_run.gpu_time``) and records the compiled kernel's resources
  (registers, local memory, static shared memory, blocks per SM from the driver: ``gpu_run.resources``) and whether
  its gemm lowered to ``mma.sync``. JSON: device/versions/date and one row per config, written after every row.
* ``--list`` prints the configs (no GPU, no torch). ``--predict OUT`` simulates every config with ``numba_tc`` on
  ``h200_sxm_141gb`` (CPU) and writes the predictions. ``--compare MEASURED [--predictions P]`` prints and returns
  the per-row error of the predictions against a measured JSON (median |sim/meas − 1|).

    python benchmarks/numba_tc_holdout.py --list
    python benchmarks/numba_tc_holdout.py --predict reports/measurements/numba_tc_holdout_predictions_2026-12-02.json
    python3 benchmarks/numba_tc_holdout.py --out $OUT/numba_tc_holdout.json          # on the H200
    python benchmarks/numba_tc_holdout.py --compare reports/measurements/numba_tc_holdout_h200_<stamp>.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ["TILESIM_CUDA_WGMMA"] = "0"  # the mma.sync lowering, whatever the backend's default becomes
os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

#: TRAIN (fixed before fitting, 2026-12-02): every row of run 9 (the one run of today's tensor-core lowering: the
#: Square warp grid of run 8, cp.async pipelines of run 7, fp8 m16n8k32 of run 9; runs 6-8 timed older lowerings of
#: the same configs) and the memory-bound rows of the 2026-12-01 run whose lowering has not changed since
#: (one-pass RMSNorm/softmax at 512 threads, the chunked RMSNorm, the per-token cast bm32, the plain softmax bm4).
TRAIN_FILES = {
    "numba_h200_20261202T081754Z.json": None,  # None: every bench row
    "numba_h200_20261201T231544Z.json": ("rmsnorm_bf16 bm1/bnrow/t512", "softmax_bf16 bm1/bnrow/t512",
                                         "rmsnorm_bf16 bm1/t512", "fp8_cast_per_token bm32/t128",
                                         "softmax_plain/bm4/t128"),
}

BF16, FP16 = "bfloat16", "float16"


def _g(name, M, N, K, bm, bn, bk, st, th, dtype=BF16, out=BF16, trans_B=False):
    return dict(name=name, kind="gemm", shape=[M, N, K], dtype=dtype, out_dtype=out, trans_B=trans_B,
                config=dict(block_M=bm, block_N=bn, block_K=bk, num_stages=st, threads=th))


def _f8(name, M, N, K, bm, bn, bk, st, th):
    return dict(name=name, kind="fp8_gemm", shape=[M, N, K],
                config=dict(block_M=bm, block_N=bn, block_K=bk, num_stages=st, threads=th))


def _fa(name, B, S, H, D, causal, bm, bn, th, st):
    return dict(name=name, kind="flash_attn", shape=[B, S, H, D], causal=causal,
                config=dict(block_M=bm, block_N=bn, threads=th, num_stages=st))


#: the HELD-OUT set (fixed 2026-12-02 before fitting; none of these rows is in any earlier file)
CONFIGS = [
    _g("gemm_bf16 2048^3 128x128x32/128/s3", 2048, 2048, 2048, 128, 128, 32, 3, 128, out="float32"),
    _g("gemm_bf16 8192x8192x2048 128x128x32/128/s4", 8192, 8192, 2048, 128, 128, 32, 4, 128),
    _g("gemm_bf16 4096^3 64x64x32/128/s3", 4096, 4096, 4096, 64, 64, 32, 3, 128, out="float32"),
    _g("gemm_bf16 4096^3 128x128x32/256/s3", 4096, 4096, 4096, 128, 128, 32, 3, 256, out="float32"),
    _g("gemm_bf16 4096^3 128x64x32/128/s3", 4096, 4096, 4096, 128, 64, 32, 3, 128, out="float32"),
    _g("gemm_bf16 skinny 128x8192x8192 128x128x32/128/s3", 128, 8192, 8192, 128, 128, 32, 3, 128),
    _g("gemm_bf16 skinny 64x8192x4096 64x128x64/128/s3", 64, 8192, 4096, 64, 128, 64, 3, 128),
    _g("gemm_bf16 ragged 4000x3000x2000 128x128x32/128/s3", 4000, 3000, 2000, 128, 128, 32, 3, 128),
    _g("gemm_fp16 4096x4096x2048 128x128x32/128/s2", 4096, 4096, 2048, 128, 128, 32, 2, 128, dtype=FP16, out=FP16),
    _g("gemm_bf16 transB 4096^3 128x128x32/128/s3", 4096, 4096, 4096, 128, 128, 32, 3, 128, trans_B=True),
    _g("gemm_bf16 2048^3 128x128x32/128/s1", 2048, 2048, 2048, 128, 128, 32, 1, 128, out="float32"),
    _f8("gemm_fp8 2048x2048x4096 128x128x64/256/s3", 2048, 2048, 4096, 128, 128, 64, 3, 256),
    _f8("gemm_fp8 8192x8192x4096 128x128x128/256/s3", 8192, 8192, 4096, 128, 128, 128, 3, 256),
    _f8("gemm_fp8 skinny 128x7168x4096 64x128x128/128/s3", 128, 7168, 4096, 64, 128, 128, 3, 128),
    _f8("gemm_fp8 ragged 3000x2500x4096 128x128x64/128/s4", 3000, 2500, 4096, 128, 128, 64, 4, 128),
    _fa("fa_bf16 causal (1,4096,16,128) 64x64/t128/s2", 1, 4096, 16, 128, True, 64, 64, 128, 2),
    _fa("fa_bf16 full (2,1024,16,128) 64x64/t128/s2", 2, 1024, 16, 128, False, 64, 64, 128, 2),
    _fa("fa_bf16 full (2,2048,8,64) 128x64/t256/s1", 2, 2048, 8, 64, False, 128, 64, 256, 1),
    _fa("fa_bf16 causal (4,1024,16,64) 64x32/t128/s1", 4, 1024, 16, 64, True, 64, 32, 128, 1),
    _fa("fa_bf16 causal (2,2048,16,128) 128x32/t256/s2", 2, 2048, 16, 128, True, 128, 32, 256, 2),
    _fa("fa_bf16 full (1,512,32,128) 64x64/t128/s1", 1, 512, 32, 128, False, 64, 64, 128, 1),
    dict(name="softmax_bf16 (4096,16384) bm1/bnrow/t512", kind="softmax", shape=[4096, 16384],
         config=dict(block_M=1, block_N=None, threads=512)),
    dict(name="rmsnorm_bf16 (16384,4096) bm1/bnrow/t256", kind="rmsnorm", shape=[16384, 4096],
         config=dict(block_M=1, block_N=None, threads=256)),
    dict(name="rmsnorm_bf16 (4096,16384) bm1/t512 chunked", kind="rmsnorm", shape=[4096, 16384],
         config=dict(block_M=1, block_N=1024, threads=512)),
    dict(name="fp8_cast_per_token (4096,16384) bm16/t256", kind="fp8_cast", shape=[4096, 16384],
         config=dict(block_M=16, threads=256)),
    dict(name="softmax_plain fp32 (16384,2048) bm2/t128", kind="softmax_plain", shape=[16384, 2048],
         config=dict(block_M=2, threads=128)),
]


#: the second HELD-OUT set (fixed 2026-12-02 12:45 UTC, after the first set was measured, before any prediction for
#: it): the second fit (docs/simulator.md §6c) trains on TRAIN and the first set; these rows test it. None of them
#: is in any earlier file.
CONFIGS_2 = [
    _g("gemm_bf16 3072^3 128x128x32/128/s3", 3072, 3072, 3072, 128, 128, 32, 3, 128, out="float32"),
    _g("gemm_bf16 6144x4096x1024 128x256x32/256/s3", 6144, 4096, 1024, 128, 256, 32, 3, 256),
    _g("gemm_bf16 4096x4096x1024 64x128x32/128/s3", 4096, 4096, 1024, 64, 128, 32, 3, 128),
    _g("gemm_bf16 lone 1024x1024x8192 128x128x32/128/s4", 1024, 1024, 8192, 128, 128, 32, 4, 128, out="float32"),
    _g("gemm_bf16 skinny 256x4096x4096 64x64x64/128/s3", 256, 4096, 4096, 64, 64, 64, 3, 128),
    _g("gemm_bf16 4096x2048x4096 128x128x64/256/s3", 4096, 2048, 4096, 128, 128, 64, 3, 256),
    _g("gemm_bf16 ragged 2000x2000x1000 64x64x32/128/s2", 2000, 2000, 1000, 64, 64, 32, 2, 128),
    _g("gemm_fp16 2048x8192x2048 128x128x32/128/s1", 2048, 8192, 2048, 128, 128, 32, 1, 128, dtype=FP16, out=FP16),
    _g("gemm_bf16 skinny 32x8192x4096 32x128x64/128/s3", 32, 8192, 4096, 32, 128, 64, 3, 128),
    _f8("gemm_fp8 4096x4096x2048 128x128x64/128/s3", 4096, 4096, 2048, 128, 128, 64, 3, 128),
    _f8("gemm_fp8 1024x8192x4096 128x256x64/256/s3", 1024, 8192, 4096, 128, 256, 64, 3, 256),
    _f8("gemm_fp8 4096^3 64x128x128/128/s3", 4096, 4096, 4096, 64, 128, 128, 3, 128),
    _fa("fa_bf16 causal (2,1024,32,128) 128x64/t256/s2", 2, 1024, 32, 128, True, 128, 64, 256, 2),
    _fa("fa_bf16 full (4,2048,8,128) 64x64/t128/s2", 4, 2048, 8, 128, False, 64, 64, 128, 2),
    _fa("fa_bf16 causal (1,8192,8,64) 64x64/t128/s2", 1, 8192, 8, 64, True, 64, 64, 128, 2),
    _fa("fa_bf16 full (2,4096,16,64) 64x32/t128/s2", 2, 4096, 16, 64, False, 64, 32, 128, 2),
    _fa("fa_bf16 causal (8,512,16,128) 64x64/t128/s1", 8, 512, 16, 128, True, 64, 64, 128, 1),
    dict(name="softmax_bf16 (8192,4096) bm1/bnrow/t256", kind="softmax", shape=[8192, 4096],
         config=dict(block_M=1, block_N=None, threads=256)),
    dict(name="rmsnorm_bf16 (32768,2048) bm1/bnrow/t256", kind="rmsnorm", shape=[32768, 2048],
         config=dict(block_M=1, block_N=None, threads=256)),
    dict(name="rmsnorm_bf16 (2048,32768) bm1/t512 chunked bn2048", kind="rmsnorm", shape=[2048, 32768],
         config=dict(block_M=1, block_N=2048, threads=512)),
    dict(name="fp8_cast_per_token (8192,4096) bm32/t128", kind="fp8_cast", shape=[8192, 4096],
         config=dict(block_M=32, threads=128)),
    dict(name="softmax_plain fp32 (8192,4096) bm1/t128", kind="softmax_plain", shape=[8192, 4096],
         config=dict(block_M=1, threads=128)),
]
#: TRAIN configurations timed again after set 2 on the lowering of that run (main's cp.async fast path for static
#: in-bounds tiles, P in registers): not held out — they show how much that lowering change moved the fit's rows
ANCHORS = [
    dict(_g("anchor gemm_bf16 4096^3 128x128x32/128/s4", 4096, 4096, 4096, 128, 128, 32, 4, 128, out="float32"),
         anchor=True),
    dict(_fa("anchor fa_bf16 causal (2,2048,16,128) 64x64/t128/s2", 2, 2048, 16, 128, True, 64, 64, 128, 2),
         anchor=True),
]


def _w(c):
    """The config with ``tilesim.cuda_wgmma`` on for this row (the backend's wgmma K loop; the model: numba_tc_wgmma)."""
    return dict(c, wgmma=True)


#: the third HELD-OUT set (fixed 2026-12-02 ~16:20 UTC by helper AS, after the profile followed AQ's integer forms and
#: AP's wgmma loop — docs/simulator.md §6d — and before any prediction for it was written; none of these (shape,
#: configuration) pairs is in any earlier file or set): both lowerings of the eleventh session's code
CONFIGS_3 = [
    _g("s3 mma gemm_bf16 2048x4096x4096 128x128x32/128/s3", 2048, 4096, 4096, 128, 128, 32, 3, 128, out="float32"),
    _g("s3 mma gemm_bf16 8192x4096x2048 128x256x32/256/s4", 8192, 4096, 2048, 128, 256, 32, 4, 256),
    _g("s3 mma gemm_fp16 3072x3072x4096 128x128x32/128/s4", 3072, 3072, 4096, 128, 128, 32, 4, 128, dtype=FP16,
       out=FP16),
    _g("s3 mma gemm_bf16 4096x4096x2048 64x128x32/128/s4", 4096, 4096, 2048, 64, 128, 32, 4, 128, out="float32"),
    _f8("s3 mma gemm_fp8 4096x8192x2048 128x128x128/128/s3", 4096, 8192, 2048, 128, 128, 128, 3, 128),
    _f8("s3 mma gemm_fp8 8192x4096x2048 128x128x64/256/s4", 8192, 4096, 2048, 128, 128, 64, 4, 256),
    _fa("s3 mma fa_bf16 causal (4,2048,16,128) 128x64/t256/s2", 4, 2048, 16, 128, True, 128, 64, 256, 2),
    _fa("s3 mma fa_bf16 full (2,2048,16,128) 64x32/t128/s3", 2, 2048, 16, 128, False, 64, 32, 128, 3),
    _fa("s3 mma fa_bf16 causal (2,4096,16,64) 128x64/t256/s2", 2, 4096, 16, 64, True, 128, 64, 256, 2),
    _fa("s3 mma fa_bf16 full (1,8192,16,128) 64x64/t128/s2", 1, 8192, 16, 128, False, 64, 64, 128, 2),
    _w(_g("s3 wgmma gemm_bf16 4096x8192x4096 128x256x64/256/s3", 4096, 8192, 4096, 128, 256, 64, 3, 256,
          out="float32")),
    _w(_g("s3 wgmma gemm_bf16 8192x8192x4096 128x128x64/128/s3", 8192, 8192, 4096, 128, 128, 64, 3, 128,
          out="float32")),
    _w(_g("s3 wgmma gemm_bf16 2048^3 128x128x64/128/s4", 2048, 2048, 2048, 128, 128, 64, 4, 128, out="float32")),
    _w(_g("s3 wgmma gemm_bf16 4096x4096x1024 128x128x64/256/s3", 4096, 4096, 1024, 128, 128, 64, 3, 256,
          out="float32")),
    _w(_g("s3 wgmma gemm_fp16 4096x8192x4096 128x128x64/128/s3", 4096, 8192, 4096, 128, 128, 64, 3, 128, dtype=FP16,
          out="float32")),
    _w(_g("s3 wgmma gemm_bf16 ragged 4000x3000x2048 128x128x64/128/s3", 4000, 3000, 2048, 128, 128, 64, 3, 128,
          out="float32")),
    _w(_f8("s3 wgmma gemm_fp8 8192x8192x4096 128x128x128/128/s3", 8192, 8192, 4096, 128, 128, 128, 3, 128)),
    _w(_f8("s3 wgmma gemm_fp8 2048x2048x8192 128x128x128/256/s4", 2048, 2048, 8192, 128, 128, 128, 4, 256)),
    _w(_f8("s3 wgmma gemm_fp8 6144x4096x4096 128x128x64/128/s4", 6144, 4096, 4096, 128, 128, 64, 4, 128)),
]
SETS = {"1": CONFIGS, "2": CONFIGS_2 + ANCHORS, "3": CONFIGS_3}


def build(c):
    """The library kernel of config ``c`` (a ``tilelang.jit`` kernel; runs anywhere)."""
    cfg = dict(c["config"])
    kind = c["kind"]
    if kind == "gemm":
        from kernels import gemm as G
        M, N, K = c["shape"]
        return G.matmul(M, N, K, dtype=c["dtype"], out_dtype=c["out_dtype"], trans_B=c["trans_B"], **cfg)
    if kind == "fp8_gemm":
        from kernels.fp8_gemm import fp8_matmul
        return fp8_matmul(*c["shape"], **cfg)
    if kind == "flash_attn":
        from kernels import attention as A
        B, S, H, D = c["shape"]
        return A.flash_attention_fwd(B, H, S, D, is_causal=c["causal"], dtype=BF16, **cfg)
    if kind == "softmax":
        from kernels import norms
        return norms.softmax(*c["shape"], dtype=BF16, **cfg)
    if kind == "rmsnorm":
        from kernels import norms
        return norms.rms_norm(*c["shape"], dtype=BF16, eps=1e-6, **cfg)
    if kind == "fp8_cast":
        from kernels import fp8_cast
        return fp8_cast.per_token_cast(*c["shape"], group_size=128, in_dtype=BF16, **cfg)
    if kind == "softmax_plain":
        from tests.core_kernels import softmax_plain
        return softmax_plain(*c["shape"], **cfg)
    raise KeyError(kind)


def split_rows():
    """(TRAIN names, HELD-OUT names): TRAIN as ``file:row name``."""
    train = set()
    for f, names in TRAIN_FILES.items():
        rows = json.load(open(os.path.join(ROOT, "reports", "measurements", f)))["bench"]
        train |= {f"{f}:{r['name']}" for r in rows if names is None or r["name"] in names}
    return train, [c["name"] for c in CONFIGS]


# ------------------------------------------------------------------------------------------------ GPU side
def _inputs(c, torch):
    dev = "cuda"
    kind = c["kind"]
    if kind == "gemm":
        M, N, K = c["shape"]
        dt = getattr(torch, c["dtype"])
        a = torch.randn(M, K, device=dev).to(dt)
        b = torch.randn((N, K) if c["trans_B"] else (K, N), device=dev).to(dt)
        ref = a.double() @ (b.double().t() if c["trans_B"] else b.double())
        return (a, b), ref
    if kind == "fp8_gemm":
        M, N, K = c["shape"]
        a = torch.randn(M, K, device=dev).to(torch.float8_e4m3fn)
        b = torch.randn(N, K, device=dev).to(torch.float8_e4m3fn)
        return (a, b), a.double() @ b.double().t()
    if kind == "flash_attn":
        B, S, H, D = c["shape"]
        q, k, v = (torch.randn(B, S, H, D, device=dev).to(torch.bfloat16) for _ in range(3))
        import torch.nn.functional as F
        ref = F.scaled_dot_product_attention(*(t.transpose(1, 2).double() for t in (q, k, v)),
                                             is_causal=c["causal"]).transpose(1, 2)
        return (q, k, v), ref
    M, N = c["shape"]
    if kind == "softmax":
        x = torch.randn(M, N, device=dev).to(torch.bfloat16)
        return (x,), torch.softmax(x.double(), dim=1)
    if kind == "rmsnorm":
        x = torch.randn(M, N, device=dev).to(torch.bfloat16)
        w = (1.0 + 0.2 * torch.randn(N, device=dev)).to(torch.bfloat16)
        xd = x.double()
        return (x, w), xd * torch.rsqrt((xd * xd).mean(dim=1, keepdim=True) + 1e-6) * w.double()
    if kind == "fp8_cast":
        x = torch.randn(M, N, device=dev).to(torch.bfloat16)
        return (x,), None
    if kind == "softmax_plain":
        x = torch.randn(M, N, device=dev) * 4
        return (x,), torch.softmax(x.double(), dim=1)
    raise KeyError(kind)


def run_gpu(out_path, only=None, budget_s=190.0, configs=None):
    import torch

    from benchmarks.gpu_run import environment, gpu_time, prepared, relnorm, resources

    t0 = time.time()
    res = {"file": os.path.basename(out_path), "command": " ".join(sys.argv), "env": environment(),
           "env_vars": {"TILESIM_CUDA_WGMMA": os.environ.get("TILESIM_CUDA_WGMMA")}, "bench": [], "errors": []}

    def save():
        os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
        with open(out_path, "w") as f:
            json.dump(res, f, indent=1, default=str)

    save()
    for c in configs or CONFIGS:
        if only and not any(o in c["name"] for o in only):
            continue
        if time.time() - t0 > budget_s:
            res["errors"].append(f"{c['name']}: skipped, time budget {budget_s:.0f} s spent")
            continue
        t1 = time.time()
        try:
            args, ref = _inputs(c, torch)
            kc, run, outs = prepared(build(c), *args, tensor_cores=True, wgmma=bool(c.get("wgmma")))
            run()
            torch.cuda.synchronize()
            o = outs[0] if isinstance(outs, (tuple, list)) else outs
            err = relnorm(o, ref) if ref is not None else None
            torch.cuda.synchronize()
            s = time.time()
            run()
            torch.cuda.synchronize()
            est = max(1e-6, time.time() - s)
            reps = int(min(50, max(3, math.ceil(0.02 / est))))
            t, times = gpu_time(run, reps=reps, rounds=7, sleep_ms=20.0)
            src = kc.get_kernel_source()
            row = dict(name=c["name"], kind=c["kind"], shape=c["shape"], config=c["config"], ours_median_s=t,
                       rounds_s=times, reps=reps, rel_err=err, mma_sync="_mma_" in src,
                       wgmma_requested=bool(c.get("wgmma")), wgmma="wgmma" in src,
                       cp_async="cp.async" in src or "_cp_async" in src, resources=resources(kc),
                       wall_s=time.time() - t1)
            res["bench"].append(row)
            print(f"{c['name']:55s} {t * 1e3:9.4f} ms  err {err}  mma {row['mma_sync']}  "
                  f"regs {[r.get('regs_per_thread') for r in row['resources']]} "
                  f"blk {[r.get('blocks_per_sm') for r in row['resources']]}  [{row['wall_s']:.1f} s]", flush=True)
        except Exception as ex:  # noqa: BLE001
            res["errors"].append(f"{c['name']}: {type(ex).__name__}: {ex}"[:2000])
            print(f"{c['name']}: FAILED {type(ex).__name__}: {str(ex)[:400]}", flush=True)
        save()
    res["total_seconds"] = time.time() - t0
    save()
    return res


# ------------------------------------------------------------------------------------------------ CPU side
def ptxas_rows(out_path=None, names=None, configs=None):
    """Each config's kernels compiled here as the device compiles them (cc 9.0, tensor cores and cp.async on),
    assembled by Triton's ``ptxas -arch=sm_90 -v`` and disassembled by its ``cuobjdump``: registers, spills and
    the SASS counts of HMMA / LDSM / LDGSTS / BAR (the lowering's real counts before any GPU run)."""
    import re
    import subprocess
    import tempfile

    from benchmarks.tc_warp_grid_sass import _nvbin
    from tilesim.backends.cuda.runtime import CudaProgram

    rows = []
    for c in configs or CONFIGS:
        if names and not any(n in c["name"] for n in names):
            continue
        prog = CudaProgram(build(c).prim_func, sim=False, tensor_cores=True, async_copy=True)
        for kname, ptx in prog.compile_ptx((9, 0)):
            with tempfile.TemporaryDirectory() as d:
                src, cub = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
                with open(src, "w") as f:
                    f.write(re.sub(r"^\.version 9\.\d+", ".version 8.7", ptx, count=1, flags=re.M))
                r = subprocess.run([_nvbin("ptxas"), "-arch=sm_90", "-v", src, "-o", cub], capture_output=True,
                                   text=True, timeout=600, check=True)
                sass = subprocess.run([_nvbin("cuobjdump"), "--dump-sass", cub], capture_output=True, text=True,
                                      check=True).stdout
            log = r.stdout + r.stderr
            row = dict(name=c["name"], kernel=kname, mma_sync="_mma_" in prog.source,
                       regs=max(int(x) for x in re.findall(r"Used (\d+) registers", log)),
                       spill_stores=max([int(x) for x in re.findall(r"(\d+) bytes spill stores", log)] or [0]),
                       smem_bytes=sum(k.smem_bytes for k in prog.kernels if k.name == kname),
                       **{op.lower(): len(re.findall(rf"\b{op}\b", sass)) for op in ("HMMA", "LDSM", "LDGSTS",
                                                                                        "BAR", "LDG", "STS")})
            rows.append(row)
            print(json.dumps(row), flush=True)
    if out_path:
        with open(out_path, "w") as f:
            json.dump(rows, f, indent=1)
    return rows


def predict(out_path, configs=None, set_name="1"):
    import warnings

    from tilesim.sim import simulate

    warnings.simplefilter("ignore")
    rows = []
    from tilesim.analysis.profiles import PROFILES
    for c in configs or CONFIGS:
        prof = PROFILES["numba_tc_wgmma" if c.get("wgmma") else "numba_tc"]
        rep = simulate(build(c).prim_func, "h200_sxm_141gb", prof)
        rows.append(dict(name=c["name"], anchor=bool(c.get("anchor")), profile=prof.name, sim_s=rep.time_s, registers_per_thread=rep.launches[0].get(
            "registers_per_thread"), blocks_per_sm=rep.blocks_per_core, bound=getattr(rep, "bound", "")))
        print(f"{c['name']:55s} {rep.time_s * 1e3:9.4f} ms  regs {rows[-1]['registers_per_thread']}  "
              f"blk {rep.blocks_per_core}  {rows[-1]['bound']}")
    from tilesim.analysis.profiles import get_profile
    prof = get_profile("numba_tc")
    fields = ("warp_cpi", "warp_issue_cycles", "mma_phase_locked", "mma_register_overhead_per_thread", "cp_async_chunk_instr", "ldsm_extra_instr",
              "mma_fp8_extra_instr", "mma_fp8_chain_instr", "loop_iter_instr", "cp_async_inside_chunk_instr",
              "cp_async_tile_check_instr", "mma_matrix_fraction")
    doc = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "profile": "numba_tc", "profile_values": {f: getattr(prof, f) for f in fields}, "hw": "h200_sxm_141gb",
           "held_out_set": set_name, "command": "python benchmarks/numba_tc_holdout.py --predict "
           + os.path.relpath(out_path, ROOT), "rows": rows}
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)
    return doc


def compare(measured, predictions):
    meas = {r["name"]: r for r in json.load(open(measured))["bench"]}
    pred = {r["name"]: r for r in json.load(open(predictions))["rows"]}
    errs, ratios = [], []
    print(f"{'config':55s} {'measured':>10s} {'predicted':>10s} {'sim/meas':>8s} {'regs p/m':>9s} {'blk p/m':>7s}")
    for name, p in pred.items():
        if p.get("anchor"):
            m = meas.get(name)
            if m:
                print(f"{name:55s} {m['ours_median_s'] * 1e3:8.4f}ms {p['sim_s'] * 1e3:8.4f}ms "
                      f"{p['sim_s'] / m['ours_median_s']:8.2f}  (anchor: a TRAIN config, not held out)")
            continue
        m = meas.get(name)
        if m is None:
            print(f"{name:55s} {'(not measured)':>10s}")
            continue
        q = p["sim_s"] / m["ours_median_s"]
        errs.append(abs(q - 1))
        ratios.append(q)
        r0 = (m.get("resources") or [{}])[0]
        print(f"{name:55s} {m['ours_median_s'] * 1e3:8.4f}ms {p['sim_s'] * 1e3:8.4f}ms {q:8.2f} "
              f"{p['registers_per_thread']:.0f}/{r0.get('regs_per_thread')!s:>3s} "
              f"{p['blocks_per_sm']}/{r0.get('blocks_per_sm')}")
    if errs:
        worst = max(max(q, 1 / q) for q in ratios)
        print(f"HELD-OUT: {len(errs)} rows, median |error| {100 * statistics.median(errs):.1f}%, "
              f"worst |error| {100 * max(errs):.1f}%, worst factor {worst:.2f}x")
    return errs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="print the held-out configs and the TRAIN rows")
    ap.add_argument("--set", default="1", choices=sorted(SETS), help="which held-out set (default 1)")
    ap.add_argument("--out", help="run on the GPU and write the JSON here")
    ap.add_argument("--only", nargs="*", help="substrings of config names")
    ap.add_argument("--predict", help="simulate every config with numba_tc and write the predictions here")
    ap.add_argument("--compare", help="a measured JSON of this harness")
    ap.add_argument("--ptxas", nargs="?", const="", help="ptxas/cuobjdump counts of every config (CPU); JSON path")
    ap.add_argument("--predictions", default=os.path.join(
        ROOT, "reports", "measurements", "numba_tc_holdout_predictions_2026-12-02.json"))
    a = ap.parse_args(argv)
    configs = SETS[a.set]
    if a.list:
        train, held = split_rows()
        held = [c["name"] for c in configs]
        print(f"HELD-OUT set {a.set} ({len(held)}):")
        for c in configs:
            print(f"  {c['name']:55s} {c['kind']:13s} {c['shape']} {c['config']}")
        print(f"TRAIN ({len(train)}):")
        for n in sorted(train):
            print(f"  {n}")
        return 0
    if a.ptxas is not None:
        ptxas_rows(a.ptxas or None, a.only, configs)
        return 0
    if a.predict:
        predict(a.predict, configs, a.set)
        return 0
    if a.compare:
        compare(a.compare, a.predictions)
        return 0
    if a.out:
        run_gpu(a.out, a.only, configs=configs)
        return 0
    ap.error("give --list, --predict, --compare or --out")


if __name__ == "__main__":
    raise SystemExit(main())
