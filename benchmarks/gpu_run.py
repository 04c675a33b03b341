"""The one script that runs on the H200: checks the Numba CUDA backend against the interpreter, then
times it against torch — all in one run, short table printed last.

    python3 benchmarks/gpu_run.py [--quick] [--sweep] [--skip-checks] [--skip-bench] [--only STEP...] [--out DIR]

Installs nothing. Steps:

1. environment (device, driver, package versions, date);
2. correctness: every test kernel of ``tests/registry.py`` at its GPU size (shapes tiles do not divide)
   and every kernel registered in ``kernels.registry`` (each test shape) runs with ``target="cuda"`` on
   fresh random inputs and is compared with the interpreter (relative norm error per output dtype); one
   kernel also runs on torch CUDA tensors (in place, outputs allocated on the device);
3. benchmarks, each checked first against a float64 reference on fresh random data (relative norm
   error): the device-to-device copy ceiling, fp32 GEMM 4096³ (torch with TF32 off), RMSNorm and row
   softmax on (8192, 8192) bf16, the plain row softmax (``plainsm``: 32768x1024 fp32 written the obvious
   way, issue 14 item 4), the per-token FP8 cast (against the copy bandwidth), causal
   flash-attention forward bf16 (against ``scaled_dot_product_attention``).

Timing: medians of repeated event-timed loops, with the GPU kept busy (``torch.cuda._sleep``) while the
launches are queued so that Python launch overhead is not counted; our kernels are launched through
``CudaProgram.prepare`` (arguments bound once). Results go to ``$OUT/numba_h200_<date>.json`` (or
``--out``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
import warnings  # noqa: E402

import numpy as np  # noqa: E402

from tilesim.backends.cuda.caps import cuda_module, ensure_numpy_compat  # noqa: E402

warnings.filterwarnings("ignore", message=".*(occupancy|Host array used|under-utilization).*")

ensure_numpy_compat()

RESULTS: dict = {"checks": [], "bench": [], "errors": []}
ALL_SHAPES = False
SWEEP = False
CHECKS = "all"
OUT = None


def log(*a):
    print(*a, flush=True)


def save():
    if OUT is None:
        return
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, RESULTS["file"]), "w") as f:
        json.dump(RESULTS, f, indent=1, default=str)


# ---------------------------------------------------------------------------------------------- env
def environment():
    import numba

    cuda = cuda_module()
    info = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "python": platform.python_version(), "numpy": np.__version__, "numba": numba.__version__}
    try:
        import numba_cuda

        info["numba_cuda"] = getattr(numba_cuda, "__version__", "?")
    except Exception:  # noqa: BLE001
        pass
    for mod in ("torch", "cupy", "ml_dtypes", "triton"):
        try:
            info[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001
            info[mod] = None
    dev = cuda.get_current_device()
    info["device"] = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
    info["compute_capability"] = list(dev.compute_capability)
    info["sm_count"] = dev.MULTIPROCESSOR_COUNT
    try:
        info["driver"] = cuda.cudadrv.driver.driver.get_version()
    except Exception:  # noqa: BLE001
        pass
    try:
        import subprocess

        info["nvidia_smi"] = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.mem",
                                             "--format=csv,noheader"], capture_output=True, text=True,
                                            timeout=20).stdout.strip()
    except Exception:  # noqa: BLE001
        pass
    return info


# ---------------------------------------------------------------------------------------------- checks
def run_checks(quick: bool):
    from tests.registry import cuda_cases
    from tilesim.backends.cuda.check import library_cases, run_case

    rng = np.random.default_rng(int(time.time()) % 100000)
    cases = cuda_cases("gpu")
    if CHECKS == "core":
        cases_lib = False
    else:
        cases_lib = True
    try:
        if not cases_lib:
            raise StopIteration
        from kernels.registry import all_specs

        specs = all_specs()
        nshapes = ALL_SHAPES and max(len(s.test_shapes or s.shapes) for s in specs) or 1
        for i in range(nshapes):
            for c in library_cases([s for s in specs if i < len(s.test_shapes or s.shapes)], shape_index=i):
                c.name = f"{c.name}[{i}]"
                cases.append(c)
    except StopIteration:
        pass
    except Exception as e:  # noqa: BLE001
        RESULTS["errors"].append(f"library import: {type(e).__name__}: {e}")
    for c in cases:
        t = time.time()
        if c.kernel is None:
            r = {"name": c.name, "ok": False, "error": "build: " + getattr(c, "error", "?")}
        else:
            try:
                r = run_case(c, rng)
            except Exception as e:  # noqa: BLE001
                r = {"name": c.name, "ok": False, "error": f"{type(e).__name__}: {e}"[:1500]}
                if "shared memory" in str(e):
                    r["smem_limit"] = True
        r["seconds"] = round(time.time() - t, 2)
        RESULTS["checks"].append(r)
        log(f"check {r['name']:<40} {'ok' if r['ok'] else 'FAIL'} "
            f"{r.get('rel_err', '')} {r.get('error', '')[:300]} ({r['seconds']} s)")
        save()
    # torch CUDA tensors in place (outputs allocated on the device)
    try:
        import torch

        from kernels import norms

        k = norms.rms_norm(1000, 777, block_M=2, dtype="bfloat16", threads=128)
        from tilesim.backends.cuda.check import cuda_twin, rel_err

        kc = cuda_twin(k)
        x = torch.randn(1000, 777, device="cuda").to(torch.bfloat16)
        w = torch.randn(777, device="cuda").to(torch.bfloat16)
        y = kc(x, w)
        ok_dev = isinstance(y, torch.Tensor) and y.is_cuda and y.dtype == torch.bfloat16
        import ml_dtypes

        xn = x.cpu().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        wn = w.cpu().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        yi = k(xn, wn)
        e = rel_err(y.float().cpu().numpy(), yi.astype(np.float32))
        RESULTS["checks"].append({"name": "torch_cuda_inplace_rmsnorm", "ok": bool(ok_dev and e < 2e-2),
                                  "rel_err": [e], "on_device": ok_dev})
        log(f"check torch_cuda_inplace_rmsnorm {'ok' if ok_dev and e < 2e-2 else 'FAIL'} {e}")
    except Exception as e:  # noqa: BLE001
        RESULTS["checks"].append({"name": "torch_cuda_inplace_rmsnorm", "ok": False, "error": repr(e)[:500]})
    save()


# ---------------------------------------------------------------------------------------------- timing
def gpu_time(fn, reps=20, rounds=7, sleep_ms=30.0):
    """Median over ``rounds`` of (event-timed loop of ``reps`` calls) / reps, in seconds."""
    import torch

    fn()
    torch.cuda.synchronize()
    # calibrate the sleep: cycles per ms
    times = []
    cyc = int(sleep_ms * 1.9e6)
    for _ in range(rounds):
        torch.cuda._sleep(cyc)
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3 / reps)
    times.sort()
    return times[len(times) // 2], times


def relnorm(out, ref):
    import torch

    o, r = out.double(), ref.double()
    return float(torch.linalg.vector_norm(o - r) / torch.linalg.vector_norm(r))


def bench_entry(name, shape, ours_s, ref_s, ref_name, err, extra=None, kc=None):
    e = {"name": name, "shape": shape, "ours_median_s": ours_s, "ref": ref_name, "ref_median_s": ref_s,
         "ratio_ours_over_ref_speed": (ref_s / ours_s) if (ours_s and ref_s) else None, "rel_err": err}
    if extra:
        e.update(extra)
    if kc is not None:
        try:
            e["resources"] = resources(kc)
        except Exception as ex:  # noqa: BLE001
            e["resources_error"] = repr(ex)[:300]
    RESULTS["bench"].append(e)
    save()
    log(f"bench {name:<28} ours {ours_s * 1e3 if ours_s else float('nan'):9.3f} ms  {ref_name} "
        f"{ref_s * 1e3 if ref_s else float('nan'):9.3f} ms  speed ratio {e['ratio_ours_over_ref_speed']}  err {err}")
    return e


def prepared(kernel, *args, tensor_cores=None, async_copy=None, wgmma=None):
    from tilesim.backends.cuda.check import cuda_twin

    kc = cuda_twin(kernel, tensor_cores=tensor_cores, async_copy=async_copy, wgmma=wgmma)
    run, outs = kc._cuda.prepare(kc, args)
    return kc, run, outs


def resources(kc):
    """Per generated kernel: registers and local memory per thread, static shared memory, threads, and
    resident blocks per SM from the driver's occupancy calculator (what the simulator has to estimate)."""
    from numba import cuda

    out = []
    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    for k in kc._cuda.kernels:
        d = kc._cuda.dispatcher(k)
        r = {"kernel": k.name, "threads": k.threads, "smem_bytes_planned": k.smem_bytes}
        for key, fn in (("regs_per_thread", "get_regs_per_thread"), ("local_bytes_per_thread", "get_local_mem_per_thread"),
                        ("shared_bytes_static", "get_shared_mem_per_block")):
            try:
                r[key] = int(getattr(d, fn)())
            except Exception as ex:  # noqa: BLE001
                r[key] = None
                r.setdefault("notes", []).append(f"{fn}: {type(ex).__name__}")
        try:
            ov = next(iter(d.overloads.values()))
            r["blocks_per_sm"] = int(ov.max_cooperative_grid_blocks(k.threads)) // sms
        except Exception as ex:  # noqa: BLE001
            r["blocks_per_sm"] = None
            r.setdefault("notes", []).append(f"occupancy: {type(ex).__name__}")
        out.append(r)
    return out


def bench_copy():
    import torch

    n = 1 << 30  # 1 GiB each way
    x = torch.empty(n, dtype=torch.uint8, device="cuda")
    x.random_(0, 255)
    y = torch.empty_like(x)
    t, _ = gpu_time(lambda: y.copy_(x), reps=10)
    bw = 2 * n / t
    RESULTS["copy_bandwidth_Bps"] = bw
    log(f"bench copy: {bw / 1e12:.3f} TB/s (read + write, 1 GiB)")
    return bw


def bench_gemm(quick):
    import torch

    from kernels import gemm as G

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    M = N = K = 4096
    a = torch.randn(M, K, device="cuda")
    b = torch.randn(K, N, device="cuda")
    ref = a.double() @ b.double()
    t_ref, _ = gpu_time(lambda: torch.matmul(a, b), reps=10)
    err_t = relnorm(torch.matmul(a, b), ref)
    flops = 2.0 * M * N * K
    variants = [dict(block_M=128, block_N=128, block_K=16, num_stages=2, threads=256)]
    if not quick:
        variants += [dict(block_M=128, block_N=128, block_K=8, num_stages=2, threads=256),
                     dict(block_M=128, block_N=128, block_K=32, num_stages=2, threads=256)]
    if SWEEP:  # more points for the simulator's numba profile (benchmarks/numba_profile_validation.py)
        variants += [dict(block_M=64, block_N=64, block_K=16, num_stages=2, threads=64),
                     dict(block_M=64, block_N=64, block_K=16, num_stages=2, threads=256),
                     dict(block_M=128, block_N=64, block_K=16, num_stages=2, threads=128),
                     dict(block_M=64, block_N=128, block_K=16, num_stages=2, threads=128),
                     dict(block_M=128, block_N=128, block_K=16, num_stages=2, threads=128)]
    best = None
    for v in variants:
        try:
            k = G.matmul(M, N, K, dtype="float32", out_dtype="float32", **v)
            kc, run, c = prepared(k, a, b)
            run()
            torch.cuda.synchronize()
            err = relnorm(c, ref)
            t, _ = gpu_time(run, reps=5)
            e = bench_entry(f"gemm_fp32_4096 {v['block_M']}x{v['block_N']}x{v['block_K']}/{v['threads']}",
                            [M, N, K], t, t_ref, "torch.matmul fp32 (TF32 off)", err,
                            {"tflops_ours": flops / t / 1e12, "tflops_ref": flops / t_ref / 1e12, "ref_err": err_t,
                             "config": v}, kc=kc)
            if best is None or t < best["ours_median_s"]:
                best = e
        except Exception as ex:  # noqa: BLE001
            RESULTS["errors"].append(f"gemm {v}: {type(ex).__name__}: {ex}"[:2000])
            log("gemm variant failed", v, repr(ex)[:500])
    if best:
        RESULTS["best"] = RESULTS.get("best", {})
        RESULTS["best"]["gemm_fp32_4096"] = best


def _tc():
    """:mod:`benchmarks.gpu_tc` (the tensor-core rows), bound to this module's helpers and ``RESULTS``."""
    from benchmarks import gpu_tc

    gpu_tc.bind(sys.modules[__name__])
    return gpu_tc


def bench_wgmma_rows(quick):
    """bf16 / fp8 GEMM 4096^3 on ``wgmma`` (:mod:`benchmarks.gpu_tc_wgmma`; ``--only wgmma``, never by default)."""
    from benchmarks.gpu_tc_wgmma import bench_wgmma

    def fail(msg):
        RESULTS["errors"].append(msg[:2000])
        log(msg[:500])

    bench_wgmma(quick, prepared, gpu_time, relnorm, bench_entry, fail, log)



def _row_name(kind, v):
    bn = v.get("block_N", 1024)
    return f"{kind}_bf16 bm{v['block_M']}" + ("" if bn == 1024 else f"/bn{bn or 'row'}") + f"/t{v['threads']}"


def _row_variants(quick):
    """Single-pass variants (``block_N=None``: the row in registers, read once) first, then the chunked
    two-pass form (block_N=1024; its names carry no ``bn``, as in runs 1-4)."""
    vs = [dict(block_M=1, block_N=None, threads=512), dict(block_M=1, block_N=None, threads=1024)]
    if not quick:
        vs += [dict(block_M=1, block_N=None, threads=256), dict(block_M=2, block_N=None, threads=512),
               dict(block_M=1, block_N=1024, threads=512)]
    if SWEEP:
        vs += [dict(block_M=1, block_N=4096, threads=512), dict(block_M=1, block_N=1024, threads=1024),
               dict(block_M=1, block_N=1024, threads=256), dict(block_M=1, block_N=2048, threads=512)]
    return vs


def bench_rows(quick, copy_bw):
    import torch
    import torch.nn.functional as F

    from kernels import norms

    M = N = 8192
    x = torch.randn(M, N, device="cuda").to(torch.bfloat16)
    w = (1.0 + 0.2 * torch.randn(N, device="cuda")).to(torch.bfloat16)
    bytes_rms = 2 * M * N * 2 + 2 * N
    bytes_sm = 2 * M * N * 2
    xd = x.double()
    refs = {"rmsnorm": xd * torch.rsqrt((xd * xd).mean(dim=1, keepdim=True) + 1e-6) * w.double(),
            "softmax": torch.softmax(xd, dim=1)}
    torch_fns = {"rmsnorm": (lambda: F.rms_norm(x, (N,), w, 1e-6), "F.rms_norm", bytes_rms),
                 "softmax": (lambda: torch.softmax(x, dim=-1), "torch.softmax", bytes_sm)}
    for kind in ("rmsnorm", "softmax"):
        tfn, tname, nbytes = torch_fns[kind]
        ref = refs[kind]
        t_ref, _ = gpu_time(tfn, reps=20)
        err_t = relnorm(tfn(), ref)
        best = None
        for v in _row_variants(quick):
            try:
                if kind == "rmsnorm":
                    k = norms.rms_norm(M, N, dtype="bfloat16", eps=1e-6, **v)
                    kc, run, y = prepared(k, x, w)
                else:
                    k = norms.softmax(M, N, dtype="bfloat16", **v)
                    kc, run, y = prepared(k, x)
                run()
                torch.cuda.synchronize()
                err = relnorm(y, ref)
                t, _ = gpu_time(run, reps=20)
                e = bench_entry(_row_name(kind, v), [M, N], t, t_ref, tname, err,
                                {"GBps_ours": nbytes / t / 1e9, "GBps_ref": nbytes / t_ref / 1e9,
                                 "fraction_of_copy_bw": nbytes / t / copy_bw, "ref_err": err_t, "config": v}, kc=kc)
                if best is None or t < best["ours_median_s"]:
                    best = e
            except Exception as ex:  # noqa: BLE001
                RESULTS["errors"].append(f"{kind} {v}: {type(ex).__name__}: {ex}"[:2000])
                log(f"{kind} variant failed", v, repr(ex)[:500])
        RESULTS.setdefault("best", {})[f"{kind}_bf16_8192"] = best
    if SWEEP:
        _defer_ab(x, w, refs["rmsnorm"], copy_bw, bytes_rms)


def bench_plain_softmax(quick, copy_bw):
    """Issue 14 item 4's yardstick: the row softmax written the obvious TileLang way
    (``tests/core_kernels.softmax_plain``: T.copy to a fragment, reduce_max, T.exp, reduce_sum, a division,
    T.copy out) on (32768, 1024) fp32, 4 rows per 128-thread block, against the copy bandwidth (target >= 70%);
    float64-checked. Other row/thread splits are timed too (not with ``--quick``)."""
    import torch

    from tests.core_kernels import softmax_plain

    M, N = 32768, 1024
    x = torch.randn(M, N, device="cuda") * 4
    ref = torch.softmax(x.double(), dim=1)
    nbytes = 2 * M * N * 4

    def tfn():
        return torch.softmax(x, dim=-1)

    t_ref, _ = gpu_time(tfn, reps=20)
    variants = [(4, 128, False)] if quick else [(4, 128, False), (4, 128, True), (8, 256, False), (1, 128, False),
                                                (2, 64, False)]
    for bm, th, recip in variants:  # recip: the A/B of the per-element division (multiply by 1/sum)
        try:
            kc, run, y = prepared(softmax_plain(M, N, block_M=bm, threads=th, recip=recip), x)
            run()
            torch.cuda.synchronize()
            err = relnorm(y, ref)
            t, _ = gpu_time(run, reps=20)
            e = bench_entry(f"softmax_plain/bm{bm}/t{th}" + ("/recip" if recip else ""), [M, N], t, t_ref,
                            "torch.softmax", err,
                            {"GBps_ours": nbytes / t / 1e9, "GBps_ref": nbytes / t_ref / 1e9,
                             "fraction_of_copy_bw": nbytes / t / copy_bw, "ref_err": relnorm(tfn(), ref),
                             "config": {"block_M": bm, "threads": th, "recip": recip}}, kc=kc)
            if (bm, th, recip) == (4, 128, False):
                RESULTS.setdefault("best", {})["softmax_plain_fp32_32768x1024"] = e
        except Exception as ex:  # noqa: BLE001
            RESULTS["errors"].append(f"softmax_plain bm{bm}/t{th}/{recip}: {type(ex).__name__}: {ex}"[:2000])
            log("softmax_plain variant failed", bm, th, repr(ex)[:500])


def _defer_ab(x, w, ref, copy_bw, nbytes):
    """The chunked RMSNorm with ``tile_reduce.DEFER_LOOP_REDUCTIONS`` off and on, timed back to back."""
    import torch

    from kernels import norms
    from tilesim.backends.cuda import tile_reduce

    M, N = x.shape
    keep = tile_reduce.DEFER_LOOP_REDUCTIONS
    try:
        for flag in (False, True, False, True):
            tile_reduce.DEFER_LOOP_REDUCTIONS = flag
            v = dict(block_M=1, block_N=1024, threads=512)
            kc, run, y = prepared(norms.rms_norm(M, N, dtype="bfloat16", eps=1e-6, **v), x, w)
            run()
            torch.cuda.synchronize()
            err = relnorm(y, ref)
            t, _ = gpu_time(run, reps=20)
            RESULTS.setdefault("defer_ab", []).append({"defer": flag, "config": v, "median_s": t, "rel_err": err,
                                                       "fraction_of_copy_bw": nbytes / t / copy_bw})
            log(f"defer_ab rmsnorm bm1/t512 defer={flag}: {t * 1e6:.1f} us ({nbytes / t / copy_bw * 100:.0f}% of copy)")
    finally:
        tile_reduce.DEFER_LOOP_REDUCTIONS = keep


def bench_fp8(copy_bw, quick):
    import torch

    from kernels import fp8_cast

    M = N = 8192
    g = 128
    x = (torch.randn(M, N, device="cuda") * 3).to(torch.bfloat16)
    nbytes = M * N * 2 + M * N + M * (N // g) * 4

    def torch_cast():
        xf = x.float().view(M, N // g, g)
        amax = xf.abs().amax(-1).clamp(min=1e-4)
        s = amax / 448.0
        q = (xf * (448.0 / amax)[..., None]).to(torch.float8_e4m3fn).view(M, N)
        return q, s

    t_ref, _ = gpu_time(torch_cast, reps=10)
    xd = x.double()
    best = None
    for v in ([dict(block_M=32, threads=128), dict(block_M=16, threads=128)] +
              ([] if quick else [dict(block_M=64, threads=256)]) +
              ([dict(block_M=32, threads=256), dict(block_M=8, threads=128), dict(block_M=64, threads=128)]
               if SWEEP else [])):
        try:
            k = fp8_cast.per_token_cast(M, N, group_size=g, in_dtype="bfloat16", **v)
            kc, run, (q, s) = prepared(k, x)
            run()
            torch.cuda.synchronize()
            deq = q.double().view(M, N // g, g) * s.double()[..., None]
            err = relnorm(deq.view(M, N), xd)
            qt, st = torch_cast()
            same_q = float((q.view(torch.uint8) == qt.view(torch.uint8)).double().mean())
            t, _ = gpu_time(run, reps=20)
            e = bench_entry(f"fp8_cast_per_token bm{v['block_M']}/t{v['threads']}", [M, N], t, t_ref,
                            "torch (5 ops)", err,
                            {"GBps_ours": nbytes / t / 1e9, "fraction_of_copy_bw": nbytes / t / copy_bw,
                             "GBps_ref": nbytes / t_ref / 1e9, "same_q_as_torch": same_q, "config": v,
                             "scale_rel_err_vs_torch": relnorm(s, st)}, kc=kc)
            if best is None or t < best["ours_median_s"]:
                best = e
        except Exception as ex:  # noqa: BLE001
            RESULTS["errors"].append(f"fp8 {v}: {type(ex).__name__}: {ex}"[:2000])
            log("fp8 variant failed", v, repr(ex)[:500])
    RESULTS.setdefault("best", {})["fp8_cast_per_token_8192"] = best


def bench_attention(quick):
    import torch
    import torch.nn.functional as F

    from kernels import attention as A

    B, H, S, D = 2, 16, 2048, 128
    q, k_, v_ = (torch.randn(B, S, H, D, device="cuda").to(torch.bfloat16) for _ in range(3))
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k_, v_))
    t_ref, _ = gpu_time(lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=True), reps=10)
    flops = 4.0 * B * H * S * S * D / 2
    # float64 reference
    qd, kd, vd = (t.double() for t in (qt, kt, vt))
    sc = (qd @ kd.transpose(-1, -2)) / (D ** 0.5)
    mask = torch.ones(S, S, device="cuda", dtype=torch.bool).tril()
    sc = sc.masked_fill(~mask, float("-inf"))
    ref = (torch.softmax(sc, dim=-1) @ vd).transpose(1, 2)
    del sc, qd, kd, vd
    err_t = relnorm(F.scaled_dot_product_attention(qt, kt, vt, is_causal=True).transpose(1, 2), ref)
    best = None
    variants = [dict(block_M=64, block_N=32, threads=128)]
    if not quick:
        variants += [dict(block_M=64, block_N=32, threads=256), dict(block_M=32, block_N=32, threads=64)]
    if SWEEP:
        variants += [dict(block_M=16, block_N=32, threads=64), dict(block_M=32, block_N=64, threads=128),
                     dict(block_M=64, block_N=16, threads=128), dict(block_M=32, block_N=32, threads=128)]
    for v in variants:
        try:
            kern = A.flash_attention_fwd(B, H, S, D, is_causal=True, dtype="bfloat16", **v)
            kc, run, (o, lse) = prepared(kern, q, k_, v_)
            run()
            torch.cuda.synchronize()
            err = relnorm(o, ref)
            t, _ = gpu_time(run, reps=3, rounds=5)
            e = bench_entry(f"flash_attn_fwd_bf16_causal {v['block_M']}x{v['block_N']}/t{v['threads']}",
                            [B, S, H, D], t, t_ref, "F.scaled_dot_product_attention", err,
                            {"tflops_ours": flops / t / 1e12, "tflops_ref": flops / t_ref / 1e12, "ref_err": err_t,
                             "config": v}, kc=kc)
            if best is None or t < best["ours_median_s"]:
                best = e
        except Exception as ex:  # noqa: BLE001
            RESULTS["errors"].append(f"attention {v}: {type(ex).__name__}: {ex}"[:2000])
            log("attention variant failed", v, repr(ex)[:500])
    RESULTS.setdefault("best", {})["flash_attn_fwd_bf16_causal"] = best


def call_overhead(results, log_fn):
    """The host cost of a call (issue 14 item 5): :mod:`benchmarks.gpu_overhead`."""
    from benchmarks.gpu_overhead import call_overhead as run

    run(results, log_fn)


def table():
    lines = ["", "=" * 100, "tilesim Numba CUDA backend on " + str(RESULTS["env"].get("device")), "=" * 100]
    nok = sum(1 for c in RESULTS["checks"] if c.get("ok"))
    lines.append(f"correctness vs interpreter: {nok}/{len(RESULTS['checks'])} passed")
    for c in RESULTS["checks"]:
        if not c.get("ok"):
            lines.append(f"  FAIL {c['name']}: {c.get('rel_err', '')} {c.get('error', '')[:160]}")
    if "copy_bandwidth_Bps" in RESULTS:
        lines.append(f"copy bandwidth (r+w): {RESULTS['copy_bandwidth_Bps'] / 1e12:.2f} TB/s")
    lines.append(f"{'benchmark (best variant)':<34}{'ours ms':>10}{'ref ms':>10}{'ours/ref speed':>16}  note")
    for key, e in (RESULTS.get("best") or {}).items():
        if not e:
            lines.append(f"{key:<34}{'failed':>10}")
            continue
        note = ""
        if "tflops_ours" in e:
            note = f"{e['tflops_ours']:.1f} vs {e['tflops_ref']:.1f} TFLOP/s"
        if "fraction_of_copy_bw" in e:
            note = f"{e['fraction_of_copy_bw'] * 100:.0f}% of copy BW ({e['GBps_ours']:.0f} GB/s)"
        elif "GBps_ours" in e:
            note = f"{e['GBps_ours']:.0f} vs {e['GBps_ref']:.0f} GB/s"
        lines.append(f"{key:<34}{e['ours_median_s'] * 1e3:>10.3f}{e['ref_median_s'] * 1e3:>10.3f}"
                     f"{e['ratio_ours_over_ref_speed']:>16.3f}  {note}; err {e['rel_err']:.2e}")
    if "call_overhead_s" in RESULTS:
        keys = ["call_overhead_s", "call_overhead_full_path_s", "prepared_launch_s", "raw_launch_empty_s",
                "bare_numba_launch_s"]
        lines.append("call overhead (us): " + ", ".join(f"{k[:-2]} {RESULTS[k] * 1e6:.1f}" for k in keys if k in RESULTS))
    if RESULTS["errors"]:
        lines.append(f"errors: {len(RESULTS['errors'])} (see JSON)")
    print("\n".join(lines), flush=True)


def main():
    global OUT, ALL_SHAPES, CHECKS, SWEEP
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--skip-checks", action="store_true")
    ap.add_argument("--skip-bench", action="store_true")
    ap.add_argument("--all-shapes", action="store_true", help="check library kernels at every test shape")
    ap.add_argument("--checks", choices=["all", "core"], default="all",
                    help="core: only the test kernels of tests/registry.py (a short re-check)")
    ap.add_argument("--sweep", action="store_true",
                    help="time more configurations per kernel (data for benchmarks/numba_profile_validation.py)")
    ap.add_argument("--only", nargs="*", help="benchmarks to run: copy gemm rows plainsm fp8 attention overhead, and tc "
                                              "(tensor cores), tcsweep (their tile configurations) and wgmma (never by default)")
    ap.add_argument("--out", default=os.environ.get("OUT") or os.path.join(ROOT, "reports", "measurements"))
    a = ap.parse_args()
    OUT = a.out
    ALL_SHAPES = a.all_shapes
    CHECKS = a.checks
    SWEEP = a.sweep
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    RESULTS["file"] = f"numba_h200_{stamp}.json"
    RESULTS["command"] = "python3 benchmarks/gpu_run.py " + " ".join(sys.argv[1:])
    t0 = time.time()
    RESULTS["env"] = environment()
    log("env:", json.dumps(RESULTS["env"]))
    save()
    if not a.skip_checks:
        try:
            run_checks(a.quick)
        except Exception:  # noqa: BLE001
            RESULTS["errors"].append("checks: " + traceback.format_exc()[-2000:])
        log(f"checks done in {time.time() - t0:.0f} s")
    if not a.skip_bench:
        only = set(a.only or ["copy", "gemm", "rows", "plainsm", "fp8", "attention", "overhead"])
        copy_bw = 4.2e12
        steps = [("copy", lambda: bench_copy()), ("gemm", lambda: bench_gemm(a.quick)),
                 ("rows", lambda: bench_rows(a.quick, copy_bw)),
                 ("plainsm", lambda: bench_plain_softmax(a.quick, copy_bw)), ("fp8", lambda: bench_fp8(copy_bw, a.quick)),
                 ("attention", lambda: bench_attention(a.quick)), ("overhead", lambda: call_overhead(RESULTS, log)),
                 ("tc", lambda: _tc().bench_tensor_cores(a.quick)), ("wgmma", lambda: bench_wgmma_rows(a.quick)),
                 ("tcsweep", lambda: _tc().bench_tc_sweep())]
        for name, fn in steps:
            if name not in only:
                continue
            t = time.time()
            try:
                r = fn()
                if name == "copy":
                    copy_bw = r
            except Exception:  # noqa: BLE001
                RESULTS["errors"].append(f"{name}: " + traceback.format_exc()[-2000:])
                log(f"{name} failed:", traceback.format_exc()[-1500:])
            log(f"{name} done in {time.time() - t:.0f} s")
    RESULTS["total_seconds"] = time.time() - t0
    save()
    table()


if __name__ == "__main__":
    main()
