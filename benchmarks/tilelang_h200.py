"""Real TileLang on the H200: the ground truth of the simulator's ``tensorcore`` profile.

One run builds, checks and times a fixed set of kernels with **real TileLang 0.1.15** (``import
tilelang``) and writes raw results as JSON; the same kernel sources are traced by tilesim (``import
tilesim as tilelang``) to simulate them, so measurement and simulation share one source text.

Kernels: the core kernels of ``tests/core_kernels.py`` (text-shimmed to ``import tilelang``) and the
extra sources in :data:`EXTRA_SRC` (a GEMM with ``T.use_swizzle``/output dtype/thread knobs and a 1-D
elementwise add). Families: GEMM (sizes, tiles, stages, threads, swizzle, fp16/bf16/fp32), flash
attention (causal and not, several head/sequence mixes), softmax, RMSNorm, elementwise.

On the device (after installing the wheels, shared/GPU.md "Real TileLang on the H200")::

    PYTHONPATH=/tmp/site python3 benchmarks/tilelang_h200.py --out $OUT/tilelang_h200.json

Here, with no GPU::

    python benchmarks/tilelang_h200.py --list                       # trace every config with tilesim
    python benchmarks/tilelang_h200.py --validate reports/measurements/tilelang_h200_<date>.json

``--validate`` calibrates the efficiency fields on the ``train`` split and reports the error on the
held-out ``test`` split (``tilesim.sim.validation``). Correctness of every kernel is checked against
torch (float32/float64 reference, relative norm error) before it is timed; timings are medians of
``tilelang.profiler.do_bench`` (CUDA events, L2 flushed before every repetition).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Extra kernel sources (valid TileLang and tilesim; the import lines are rewritten per backend).
EXTRA_SRC = '''
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def gemm(M, N, K, block_M=128, block_N=128, block_K=32, num_stages=3, threads=128, swizzle=0,
         dtype="float16", accum_dtype="float32", out_dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.use_swizzle(panel_size=max(swizzle, 1), enable=swizzle > 0)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


@tilelang.jit(out_idx=[-1])
def vec_add(N, block=1024, threads=256, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] + B[bx * block + i]

    return main
'''

# ------------------------------------------------------------------------------------------------
# The validation set. ``split`` is fixed here: calibration uses "train", accuracy is reported on "test".
# ------------------------------------------------------------------------------------------------


def _g(i, M, N, K, bm, bn, bk, st, th, sw=0, dtype="float16", out="float16", split="train"):
    return dict(id=i, family="gemm", module="extra", factory="gemm", split=split,
                params=dict(M=M, N=N, K=K, block_M=bm, block_N=bn, block_K=bk, num_stages=st, threads=th,
                            swizzle=sw, dtype=dtype, out_dtype=out, accum_dtype="float32"))


def _fa(i, b, h, s, d, causal, bm, bn, st, th, split):
    return dict(id=i, family="flash_attention", module="core", factory="flash_attention", split=split,
                params=dict(batch=b, heads=h, seq_len=s, dim=d, is_causal=causal, block_M=bm, block_N=bn,
                            num_stages=st, threads=th))


CONFIGS = [
    # GEMM: tiles, threads, stages, sizes, swizzle, dtypes
    _g("gemm_4k_128x128x32_s3_t128", 4096, 4096, 4096, 128, 128, 32, 3, 128),
    _g("gemm_4k_128x128x32_s3_t256", 4096, 4096, 4096, 128, 128, 32, 3, 256, split="test"),
    _g("gemm_4k_128x128x64_s3_t256", 4096, 4096, 4096, 128, 128, 64, 3, 256),
    _g("gemm_4k_128x256x32_s3_t256", 4096, 4096, 4096, 128, 256, 32, 3, 256, split="test"),
    _g("gemm_4k_64x64x32_s2_t128", 4096, 4096, 4096, 64, 64, 32, 2, 128),
    _g("gemm_4k_128x128x32_s1_t128", 4096, 4096, 4096, 128, 128, 32, 1, 128, split="test"),
    _g("gemm_4k_128x128x32_s4_t128", 4096, 4096, 4096, 128, 128, 32, 4, 128),
    _g("gemm_8k_128x256x32_s3_t256_sw10", 8192, 8192, 8192, 128, 256, 32, 3, 256, sw=10, split="test"),
    _g("gemm_8k_128x256x32_s3_t256", 8192, 8192, 8192, 128, 256, 32, 3, 256),
    _g("gemm_2k_128x128x32_s3_t128", 2048, 2048, 2048, 128, 128, 32, 3, 128, split="test"),
    _g("gemm_1kx1kx8k_128x128x32_s3_t128", 1024, 1024, 8192, 128, 128, 32, 3, 128),
    _g("gemm_8kx8kx1k_128x128x64_s2_t256", 8192, 8192, 1024, 128, 128, 64, 2, 256, split="test"),
    _g("gemm_4k_bf16_128x128x32_s3_t128", 4096, 4096, 4096, 128, 128, 32, 3, 128, dtype="bfloat16",
       out="bfloat16"),
    _g("gemm_16kx4kx4k_128x256x64_s3_t256_sw8", 16384, 4096, 4096, 128, 256, 64, 3, 256, sw=8, split="test"),
    _g("gemm_6k_128x256x64_s3_t256", 6144, 6144, 6144, 128, 256, 64, 3, 256, split="test"),
    _g("gemm_4k_64x128x32_s3_t128", 4096, 4096, 4096, 64, 128, 32, 3, 128),
    _g("gemm_3k_128x128x32_s3_t256", 3072, 3072, 3072, 128, 128, 32, 3, 256, split="test"),
    _g("gemm_4k_fp32_128x128x32_s2_t128", 4096, 4096, 4096, 128, 128, 32, 2, 128, dtype="float32",
       out="float32"),
    dict(id="matmul_relu_4k_defaults", family="gemm", module="core", factory="matmul_relu", split="test",
         params=dict(M=4096, N=4096, K=4096)),
    # flash attention (B, S, H, D layout)
    _fa("fa_b1h32s4096d128_causal_128x128_s2_t256", 1, 32, 4096, 128, True, 128, 128, 2, 256, "train"),
    _fa("fa_b1h32s4096d128_full_128x128_s2_t256", 1, 32, 4096, 128, False, 128, 128, 2, 256, "test"),
    _fa("fa_b1h32s2048d64_causal_64x64_s1_t128", 1, 32, 2048, 64, True, 64, 64, 1, 128, "train"),
    _fa("fa_b4h16s1024d64_full_128x64_s2_t128", 4, 16, 1024, 64, False, 128, 64, 2, 128, "test"),
    _fa("fa_b1h8s8192d128_causal_128x128_s2_t256", 1, 8, 8192, 128, True, 128, 128, 2, 256, "train"),
    _fa("fa_b2h16s2048d128_full_64x64_s1_t128", 2, 16, 2048, 128, False, 64, 64, 1, 128, "test"),
    _fa("fa_b8h32s512d64_causal_64x64_s2_t128", 8, 32, 512, 64, True, 64, 64, 2, 128, "train"),
    _fa("fa_b1h32s8192d64_full_128x64_s2_t128", 1, 32, 8192, 64, False, 128, 64, 2, 128, "train"),
    # softmax / RMSNorm (fp32, memory-bound)
    dict(id="softmax_16kx1k_bm8_t128", family="softmax", module="core", factory="softmax", split="train",
         params=dict(M=16384, N=1024, block_M=8, threads=128)),
    dict(id="softmax_32kx2k_bm4_t128", family="softmax", module="core", factory="softmax", split="test",
         params=dict(M=32768, N=2048, block_M=4, threads=128)),
    dict(id="softmax_8kx4k_bm2_t256", family="softmax", module="core", factory="softmax", split="train",
         params=dict(M=8192, N=4096, block_M=2, threads=256)),
    dict(id="rmsnorm_16kx1k_bm4", family="rms_norm", module="core", factory="rms_norm", split="test",
         params=dict(M=16384, N=1024, block_M=4)),
    dict(id="rmsnorm_64kx1k_bm8", family="rms_norm", module="core", factory="rms_norm", split="train",
         params=dict(M=65536, N=1024, block_M=8)),
    dict(id="rmsnorm_16kx4k_bm1", family="rms_norm", module="core", factory="rms_norm", split="test",
         params=dict(M=16384, N=4096, block_M=1)),
    # elementwise
    dict(id="vec_add_64M_fp32_b1024_t256", family="elementwise", module="extra", factory="vec_add",
         split="train", params=dict(N=1 << 26, block=1024, threads=256, dtype="float32")),
    dict(id="vec_add_256M_fp16_b2048_t256", family="elementwise", module="extra", factory="vec_add",
         split="test", params=dict(N=1 << 28, block=2048, threads=256, dtype="float16")),
    dict(id="vec_add_16M_fp32_b512_t128", family="elementwise", module="extra", factory="vec_add",
         split="test", params=dict(N=1 << 24, block=512, threads=128, dtype="float32")),
    dict(id="elementwise_add_8kx8k_eager", family="elementwise", module="core", factory="elementwise_add",
         split="train", params=dict(M=8192, N=8192, block=256, threads=128)),
]


#: A second set measured after the model and its calibration were frozen (predictions written first
#: to ``tilelang_h200_<date>_holdout_predictions.json``): a clean held-out check.
HOLDOUT = [
    _g("h_gemm_5k_128x256x64_s3_t256_sw10", 5120, 5120, 5120, 128, 256, 64, 3, 256, sw=10, split="holdout"),
    _g("h_gemm_4kx8kx2k_128x128x64_s4_t256", 4096, 8192, 2048, 128, 128, 64, 4, 256, split="holdout"),
    _g("h_gemm_2kx2kx8k_128x128x32_s4_t128", 2048, 2048, 8192, 128, 128, 32, 4, 128, split="holdout"),
    _g("h_gemm_8kx4kx4k_bf16_128x256x32_s3_t256", 8192, 4096, 4096, 128, 256, 32, 3, 256, dtype="bfloat16",
       out="bfloat16", split="holdout"),
    _g("h_gemm_3k_64x128x64_s3_t128", 3072, 3072, 3072, 64, 128, 64, 3, 128, split="holdout"),
    _g("h_gemm_12kx12kx1k_128x256x64_s3_t256_sw8", 12288, 12288, 1024, 128, 256, 64, 3, 256, sw=8,
       split="holdout"),
    _g("h_gemm_4k_256x128x32_s3_t256", 4096, 4096, 4096, 256, 128, 32, 3, 256, split="holdout"),
    _fa("h_fa_b2h16s4096d128_causal_128x128_s2_t256", 2, 16, 4096, 128, True, 128, 128, 2, 256, "holdout"),
    _fa("h_fa_b1h16s16384d64_full_128x64_s2_t128", 1, 16, 16384, 64, False, 128, 64, 2, 128, "holdout"),
    _fa("h_fa_b4h32s1024d128_full_64x64_s2_t128", 4, 32, 1024, 128, False, 64, 64, 2, 128, "holdout"),
    _fa("h_fa_b1h64s2048d64_causal_128x64_s2_t256", 1, 64, 2048, 64, True, 128, 64, 2, 256, "holdout"),
    dict(id="h_softmax_64kx1k_bm8_t128", family="softmax", module="core", factory="softmax", split="holdout",
         params=dict(M=65536, N=1024, block_M=8, threads=128)),
    dict(id="h_softmax_4kx8k_bm1_t256", family="softmax", module="core", factory="softmax", split="holdout",
         params=dict(M=4096, N=8192, block_M=1, threads=256)),
    dict(id="h_rmsnorm_32kx2k_bm2", family="rms_norm", module="core", factory="rms_norm", split="holdout",
         params=dict(M=32768, N=2048, block_M=2)),
    dict(id="h_vec_add_128M_fp32_b2048_t256", family="elementwise", module="extra", factory="vec_add",
         split="holdout", params=dict(N=1 << 27, block=2048, threads=256, dtype="float32")),
    dict(id="h_vec_add_4M_fp16_b1024_t128", family="elementwise", module="extra", factory="vec_add",
         split="holdout", params=dict(N=1 << 22, block=1024, threads=128, dtype="float16")),
]
ALL_CONFIGS = CONFIGS + HOLDOUT


# ------------------------------------------------------------------------------------------------
# Building kernels with either implementation from the same source text
# ------------------------------------------------------------------------------------------------

_IMPORTS = {"tilelang": ("import tilelang", "import tilelang.language as T"),
            "tilesim": ("import tilesim as tilelang", "import tilesim.language as T")}


def _shim(text: str, backend: str) -> str:
    for imports in _IMPORTS.values():
        text = text.replace(imports[0] + "\n", "@@IMPORT_PKG@@\n").replace(imports[1] + "\n", "@@IMPORT_T@@\n")
    pkg, lang = _IMPORTS[backend]
    return text.replace("@@IMPORT_PKG@@", pkg).replace("@@IMPORT_T@@", lang)


_MODULES: dict = {}


def load_modules(backend: str) -> dict:
    """``{"core": module, "extra": module}`` built for ``backend`` ("tilelang" or "tilesim")."""
    if backend in _MODULES:
        return _MODULES[backend]
    tmp = Path(tempfile.mkdtemp(prefix=f"tl_{backend}_"))
    mods = {}
    for key, text in (("core", (ROOT / "tests" / "core_kernels.py").read_text()), ("extra", EXTRA_SRC)):
        path = tmp / f"{backend}_{key}_kernels.py"
        path.write_text(_shim(text, backend))
        spec = importlib.util.spec_from_file_location(path.stem, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = mod
        spec.loader.exec_module(mod)
        mods[key] = mod
    _MODULES[backend] = mods
    return mods


def build(cfg: dict, backend: str):
    """The kernel of one config (a JITKernel of ``backend``)."""
    fn = getattr(load_modules(backend)[cfg["module"]], cfg["factory"])
    p = dict(cfg["params"])
    if cfg["factory"] == "elementwise_add":
        if backend == "tilesim":
            return fn.compile(**p)
        return fn  # eager in TileLang: compiled on the first call with tensors
    return fn(**p)


def sim_shapes(cfg: dict) -> dict:
    """Values of dynamic dimensions for the simulator (none of the configs has any)."""
    return {}


# ------------------------------------------------------------------------------------------------
# Device side: inputs, references, timing
# ------------------------------------------------------------------------------------------------


def _inputs_and_ref(cfg, torch):
    p = cfg["params"]
    dev = "cuda"
    g = torch.Generator(device=dev)
    g.manual_seed(hash(cfg["id"]) % (2**31))

    def rnd(*shape, dtype=torch.float32, scale=1.0):
        return (torch.randn(*shape, generator=g, device=dev, dtype=torch.float32) * scale).to(dtype)

    f = cfg["factory"]
    if f in ("gemm", "matmul_relu"):
        dt = getattr(torch, p.get("dtype", "float16"))
        a = rnd(p["M"], p["K"], dtype=dt)
        b = rnd(p["K"], p["N"], dtype=dt)
        ref = a.double() @ b.double() if p["M"] * p["N"] <= 4096 * 4096 else (a.float() @ b.float()).double()
        if f == "matmul_relu":
            ref = ref.clamp_min(0)
        return [a, b], ref
    if f == "flash_attention":
        q, k, v = (rnd(p["batch"], p["seq_len"], p["heads"], p["dim"], dtype=torch.float16) for _ in range(3))
        ref = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2).float(), k.transpose(1, 2).float(), v.transpose(1, 2).float(),
            is_causal=p["is_causal"]).transpose(1, 2).double()
        return [q, k, v], ref
    if f == "softmax":
        x = rnd(p["M"], p["N"], scale=2.0)
        return [x], torch.softmax(x.double(), dim=1)
    if f == "rms_norm":
        x, w = rnd(p["M"], p["N"]), rnd(p["N"])
        xd = x.double()
        return [x, w], xd * torch.rsqrt((xd * xd).mean(dim=1, keepdim=True) + 1e-6) * w.double()
    if f == "vec_add":
        dt = getattr(torch, p["dtype"])
        a, b = rnd(p["N"], dtype=dt), rnd(p["N"], dtype=dt)
        return [a, b], a.double() + b.double()
    if f == "elementwise_add":
        a, b = rnd(p["M"], p["N"]), rnd(p["M"], p["N"])
        return [a, b], a.double() + b.double()
    raise ValueError(f)


def _tolerance(cfg):
    p = cfg["params"]
    if cfg["factory"] in ("gemm", "matmul_relu"):
        return 5e-3 if p.get("dtype") == "float32" else 1e-2
    if cfg["factory"] == "flash_attention":
        return 1e-2
    if cfg["factory"] == "vec_add" and p["dtype"] != "float32":
        return 1e-2
    return 1e-4


def _source_flags(kernel) -> dict:
    flags = {}
    try:
        src = kernel.get_kernel_source()
    except Exception as exc:  # noqa: BLE001
        return {"source_error": repr(exc)[:200]}
    for name, pat in (("wgmma", "wgmma"), ("tma", "tma_load"), ("mbarrier", "mbarrier"),
                      ("cp_async", "cp_async"), ("ldmatrix", "ldmatrix"), ("mma", "mma")):
        flags[name] = pat in src
    flags["source_chars"] = len(src)
    try:
        host = kernel.get_host_source() or ""
        m = re.search(r"MaxDynamicSharedMemorySize,\s*(\d+)", host)
        flags["dynamic_smem_bytes"] = int(m.group(1)) if m else None
    except Exception as exc:  # noqa: BLE001
        flags["host_error"] = repr(exc)[:120]
    try:
        flags.update(_res_usage(src))
    except Exception as exc:  # noqa: BLE001
        flags["res_usage_error"] = repr(exc)[:160]
    return flags


def _res_usage(src: str) -> dict:
    """Registers per thread and static shared memory of the kernel source, compiled to an sm_90a cubin.

    TileLang's tvm_ffi module keeps its cubin in a blob that ``cuobjdump`` does not read (the 2026-12-01
    run recorded no register counts that way), so the source is compiled again with TileLang's own nvcc
    wrapper and the options its CUDA backend uses (C++20, its template and CUTLASS include paths)."""
    from tilelang import env as tl_env
    from tilelang.contrib import nvcc as tl_nvcc

    cubin = tl_nvcc.compile_cuda(src, "cubin", ["-gencode", "arch=compute_90a,code=sm_90a"],
                                 options=["-std=c++20", "-I" + tl_env.TILELANG_TEMPLATE_PATH,
                                          "-I" + tl_env.CUTLASS_INCLUDE_DIR])
    path = tempfile.mktemp(suffix=".cubin")
    try:
        with open(path, "wb") as fh:
            fh.write(bytes(cubin))
        res = subprocess.run(["cuobjdump", "-res-usage", path], capture_output=True, text=True, timeout=30)
    finally:
        os.unlink(path)
    text = res.stdout + res.stderr
    regs = [int(x) for x in re.findall(r"REG:(\d+)", text)]
    smem = [int(x) for x in re.findall(r"SHARED:(\d+)", text)]
    spill = [int(x) for x in re.findall(r"LOCAL:(\d+)", text)]
    return {"registers": max(regs) if regs else None, "static_smem_bytes": max(smem) if smem else None,
            "local_bytes": max(spill) if spill else None,
            "res_usage_raw": None if regs else text[-300:]}


def _versions(torch):
    out = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda}
    try:
        import tilelang
        out["tilelang"] = getattr(tilelang, "__version__", "?")
    except Exception as exc:  # noqa: BLE001
        out["tilelang"] = repr(exc)
    try:
        out["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,power.limit",
             "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception as exc:  # noqa: BLE001
        out["nvidia_smi"] = repr(exc)
    return out


def _torch_ceilings(torch, bench):
    res = {}
    try:
        x = torch.empty(1 << 29, dtype=torch.float32, device="cuda")  # 2 GiB
        y = torch.empty_like(x)
        ms = bench(lambda: y.copy_(x))
        res["d2d_copy_2GiB_bytes_per_s"] = 2 * x.numel() * 4 / (ms * 1e-3)
        x = y = None  # free 4 GiB before the GEMM
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
        b = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
        ms = bench(lambda: a @ b)
        res["torch_fp16_gemm_8192_flops_per_s"] = 2 * 8192**3 / (ms * 1e-3)
    except Exception as exc:  # noqa: BLE001
        res["error"] = repr(exc)[:300]
    return res


def run_device(out_path: str, only: list[str] | None, workers: int, config_set: str = "main") -> dict:
    import concurrent.futures

    import torch
    from tilelang.profiler import do_bench

    def bench(fn):
        return do_bench(fn, warmup=10, rep=60, quantiles=[0.5, 0.2, 0.8])

    def bench1(fn):
        r = bench(fn)
        return r[0] if isinstance(r, list) else r

    t_start = time.time()
    pool_cfgs = HOLDOUT if config_set == "holdout" else CONFIGS
    cfgs = [c for c in pool_cfgs if not only or c["id"] in only]
    doc = {"kind": "tilelang_h200", "date": datetime.date.today().isoformat(),
           "timestamp": datetime.datetime.now().isoformat(timespec="seconds"),
           "device": torch.cuda.get_device_name(0), "versions": _versions(torch),
           "timing": "tilelang.profiler.do_bench(backend='event', warmup=10 ms, rep=60 ms), L2 flushed "
                     "before each repetition; median and 20/80% quantiles in ms",
           "results": []}
    props = torch.cuda.get_device_properties(0)
    doc["device_properties"] = {"sm_count": props.multi_processor_count,
                                "l2_bytes": getattr(props, "L2_cache_size", None),
                                "total_memory_bytes": props.total_memory}
    doc["ceilings"] = _torch_ceilings(torch, bench1)
    print("ceilings", doc["ceilings"], flush=True)

    # compile in parallel (TileLang's own autotuner compiles with a thread pool)
    load_modules("tilelang")
    kernels, errors = {}, {}

    def comp(cfg):
        t0 = time.time()
        k = build(cfg, "tilelang")
        return k, time.time() - t0

    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        futs = {pool.submit(comp, c): c for c in cfgs if c["factory"] != "elementwise_add"}
        for fut in concurrent.futures.as_completed(futs):
            c = futs[fut]
            try:
                kernels[c["id"]] = fut.result()
            except Exception as exc:  # noqa: BLE001
                errors[c["id"]] = f"compile: {type(exc).__name__}: {str(exc)[:400]}"
    print(f"compiled {len(kernels)} kernels in {time.time() - t_start:.1f} s; errors: {list(errors)}", flush=True)

    for cfg in cfgs:
        rec = {k: cfg[k] for k in ("id", "family", "module", "factory", "split", "params")}
        try:
            if cfg["id"] in errors:
                raise RuntimeError(errors[cfg["id"]])
            if cfg["factory"] == "elementwise_add":
                t0 = time.time()
                kernel = build(cfg, "tilelang")
                compile_s = None
            else:
                kernel, compile_s = kernels[cfg["id"]]
            inputs, ref = _inputs_and_ref(cfg, torch)
            out = kernel(*inputs)
            if cfg["factory"] == "elementwise_add":
                compile_s = time.time() - t0
            torch.cuda.synchronize()
            err = float((out.double() - ref).norm() / ref.norm())
            rec["rel_err"] = err
            rec["correct"] = bool(err < _tolerance(cfg)) and bool(torch.isfinite(out).all())
            q = bench(lambda k=kernel, a=inputs: k(*a))
            rec["median_ms"], rec["q20_ms"], rec["q80_ms"] = (float(x) for x in q)
            rec["compile_s"] = compile_s
            if cfg["factory"] != "elementwise_add":
                rec["source_flags"] = _source_flags(kernel)
            inputs = ref = out = None
        except Exception as exc:  # noqa: BLE001
            rec["error"] = f"{type(exc).__name__}: {str(exc)[:500]}"
        doc["results"].append(rec)
        print(json.dumps({k: rec.get(k) for k in ("id", "median_ms", "rel_err", "correct", "error")}), flush=True)
        Path(out_path).write_text(json.dumps(doc, indent=1))
        torch.cuda.empty_cache()
    doc["wall_s"] = time.time() - t_start
    Path(out_path).write_text(json.dumps(doc, indent=1))
    print(f"\n{'id':48s} {'ms':>9s} {'err':>9s} ok")
    for r in doc["results"]:
        print(f"{r['id']:48s} {r.get('median_ms', float('nan')):9.4f} {r.get('rel_err', float('nan')):9.2e} "
              f"{r.get('correct', r.get('error', '')[:40])}")
    return doc


# ------------------------------------------------------------------------------------------------
# Local side: trace with tilesim, simulate, validate
# ------------------------------------------------------------------------------------------------


def load_measurements(path):
    """The measured configs of a results file as ``tilesim.sim.validation.Measurement`` objects."""
    from tilesim.sim.validation import Measurement
    doc = json.loads(Path(path).read_text())
    out = []
    for r in doc["results"]:
        if "median_ms" not in r or not r.get("correct", False):
            continue
        cfg = next((c for c in ALL_CONFIGS if c["id"] == r["id"]), r)
        out.append(Measurement(id=r["id"], family=r["family"], split=r["split"], kernel=build(cfg, "tilesim"),
                               shapes=sim_shapes(cfg), measured_s=r["median_ms"] * 1e-3))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="where the device run writes its JSON")
    ap.add_argument("--only", nargs="*", help="config ids to run")
    ap.add_argument("--workers", type=int, default=8, help="parallel TileLang compiles")
    ap.add_argument("--set", dest="config_set", default="main", choices=["main", "holdout"],
                    help="which config list to measure / list")
    ap.add_argument("--predict", metavar="JSON", help="write the calibrated model's predictions for --set")
    ap.add_argument("--calibration", metavar="JSON", help="a *_calibration.json to use with --predict/--check")
    ap.add_argument("--check", metavar="JSON", help="error of the frozen calibration on measured results")
    ap.add_argument("--list", action="store_true", help="trace every config with tilesim and simulate it")
    ap.add_argument("--validate", metavar="JSON", help="calibrate on train, report the test error")
    ap.add_argument("--hw", default="h200_sxm_141gb")
    ap.add_argument("--write", action="store_true", help="with --validate: write <results>_calibration.json")
    a = ap.parse_args(argv)
    if a.predict or a.check:
        import hwmodels
        from tilesim.sim.validation import apply_overrides, format_validation, validate
        cal = json.loads(Path(a.calibration).read_text())["calibration"] if a.calibration else {}
        hw = hwmodels.load(a.hw)
        if a.predict:
            model = apply_overrides(hw, cal)
            pool = HOLDOUT if a.config_set == "holdout" else CONFIGS
            preds = [{"id": c["id"], "predicted_s": build(c, "tilesim").simulate(hw=model, profile="tensorcore").time_s}
                     for c in pool]
            Path(a.predict).write_text(json.dumps({"kind": "tilelang_h200_predictions", "calibration": cal,
                                                   "made": datetime.datetime.now().isoformat(timespec="seconds"),
                                                   "predictions": preds}, indent=1) + "\n")
            print(f"wrote {len(preds)} predictions to {a.predict}")
        if a.check:
            ms = load_measurements(a.check)
            res = validate(ms, hw, cal, split="all")
            print(format_validation(res, cal))
        return 0
    if a.list:
        for cfg in (HOLDOUT if a.config_set == "holdout" else CONFIGS):
            k = build(cfg, "tilesim")
            rep = k.simulate(hw=a.hw, profile="tensorcore", **sim_shapes(cfg))
            print(f"{cfg['id']:48s} {cfg['split']:5s} sim {rep.time_s * 1e3:9.4f} ms  bound: {rep.bound}")
        return 0
    if a.validate:
        import hwmodels
        from tilesim.sim.validation import calibrate, format_validation, validate
        ms = load_measurements(a.validate)
        hw = hwmodels.load(a.hw)
        base = validate(ms, hw, {}, split="test")
        cal = calibrate(ms, hw)
        train = validate(ms, hw, cal, split="train")
        res = validate(ms, hw, cal, split="test")
        print(format_validation(train))
        print(format_validation(res, cal))
        print(f"uncalibrated model on the test split: median {base['median_error'] * 100:.1f}%, "
              f"worst {base['worst_error'] * 100:.1f}%")
        if a.write:
            out = Path(a.validate).with_name(Path(a.validate).stem + "_calibration.json")
            doc = {"kind": "tilelang_h200_calibration", "measurements": Path(a.validate).name, "hw": hw.name,
                   "profile": "tensorcore", "calibration": cal,
                   "uncalibrated_test": {k: base[k] for k in ("points", "median_error", "worst_error")},
                   "train": {k: train[k] for k in ("points", "median_error", "worst_error", "rows")},
                   "test": {k: res[k] for k in ("points", "median_error", "worst_error", "within_2x", "rows")},
                   "command": f"python benchmarks/tilelang_h200.py --validate {a.validate} --write"}
            out.write_text(json.dumps(doc, indent=1) + "\n")
            print(f"wrote {out}")
        return 0
    if not a.out:
        ap.error("give --out (device run), --list or --validate")
    os.environ.setdefault("TILELANG_PRINT_ON_COMPILATION", "0")
    run_device(a.out, a.only, a.workers, a.config_set)
    return 0


if __name__ == "__main__":
    sys.exit(main())
