"""The ``wgmma`` rows of ``benchmarks/gpu_run.py --only wgmma`` (issue 14, brief AM): bf16 GEMM 4096^3 and fp8
e4m3 GEMM 4096^3 with ``T.gemm`` lowered to Hopper's ``wgmma.mma_async`` (``tilesim.cuda_wgmma``), against
``torch.matmul`` / ``torch._scaled_mm`` and the ``mma.sync`` lowering, all timed in the same process.

Each variant is checked against a float64 product of the same inputs before it is timed. bf16 runs with B
stored ``(K, N)`` (N-major B: the descriptor reading ``wgmma_layout.MN_LBO_IS_REGION``) and ``(N, K)``
(K-major, ``trans_B``); when the N-major form is wrong with the module's reading, the other reading is tried
once and the row records which one was right (``mn_lbo_is_region``). Called by ``gpu_run.main`` with its helpers
(timing, error, result recording), so the rows land in that run's JSON.

Every ``wgmma`` configuration is timed twice in turn (brief AP): ``/wait0`` (``tile_wgmma.INFLIGHT = False``:
``wgmma.wait_group 0`` at the end of every gemm, the form of device run 2) and ``/inflight`` (one group in flight
across k-blocks where the pipeline has 3+ stages; the row records ``inflight_in_source``). Two diagnostic rows
(``/nofence``, bf16 and fp8 at 128 threads, 5 stages, in flight: two copy groups are still outstanding at the
fence) drop ``fence.proxy.async`` before the barriers
(``tile_wgmma.PROXY_FENCE = False``: not correct by the PTX memory model; it times what the fence — in SASS
``MEMBAR.ALL.CTA`` — costs).
"""

from __future__ import annotations

#: bf16 (block_M, block_N, block_K, num_stages, threads, trans_B); the first four also run with --quick (the third
#: and fourth: 16 KB stages, so 5 / 6 stages keep 2 blocks per SM with 3 / 4 k-blocks of copies ahead of a group in
#: flight)
BF16 = [(128, 128, 64, 4, 256, False), (128, 128, 64, 3, 128, False), (128, 128, 32, 5, 128, False),
        (128, 128, 32, 6, 128, False), (128, 256, 64, 3, 256, False), (128, 128, 64, 3, 256, False),
        (128, 128, 64, 4, 256, True), (128, 256, 64, 3, 256, True)]
#: fp8 e4m3 (block_M, block_N, block_K, num_stages, threads); the first three also run with --quick
FP8 = [(128, 128, 128, 3, 128), (128, 128, 128, 4, 256), (128, 128, 64, 5, 128), (128, 256, 128, 3, 256),
       (128, 128, 128, 3, 256)]


def bench_wgmma(quick, prepared, gpu_time, relnorm, bench_entry, fail, log):
    """``TILESIM_WGMMA_BENCH=fp8``: only the first two fp8 configurations, in flight, after their ``_scaled_mm``
    reference (the short second device call of brief AP); ``short``: the mma.sync reference row, bf16
    128x128x64/128/s3 in flight and those two fp8 rows (the eleventh session's last call)."""
    import os

    import torch

    mode = os.environ.get("TILESIM_WGMMA_BENCH", "")
    return _bench(quick, prepared, gpu_time, relnorm, bench_entry, fail, log, torch, fp8_only=mode == "fp8",
                  short=mode == "short")


def _bench(quick, prepared, gpu_time, relnorm, bench_entry, fail, log, torch, fp8_only, short=False):
    from kernels import gemm as G
    from kernels.fp8_gemm import fp8_matmul
    from tilesim.backends.cuda import wgmma_layout as WL

    M = N = K = 4096
    flops = 2.0 * M * N * K
    from tilesim.backends.cuda import tile_wgmma as TW

    def row(name, kernel, args, out_ref, t_r, ref_name, wg, extra, inflight=None, fence=True):
        keep = TW.INFLIGHT, TW.PROXY_FENCE
        TW.INFLIGHT, TW.PROXY_FENCE = inflight, fence
        try:
            kc, run, c = prepared(kernel, *args, tensor_cores=True, async_copy=True, wgmma=wg)
            src = kc.get_kernel_source()
        finally:
            TW.INFLIGHT, TW.PROXY_FENCE = keep
        if wg and fence == ("_fence_async_smem()" not in src):
            raise RuntimeError("the proxy fence switch did not take effect")
        if wg and "_wgmma_" not in src:
            raise RuntimeError("the gemm did not lower to wgmma: " + src.splitlines()[2][:300])
        extra = dict(extra, inflight_in_source="_wg_wait1()" in src)
        run()
        torch.cuda.synchronize()
        err = relnorm(c, out_ref)
        if err > 1e-2:
            return err
        t, _ = gpu_time(run, reps=5)
        bench_entry(name, [M, N, K], t, t_r, ref_name, err,
                    {"tflops_ours": flops / t / 1e12, "tflops_ref": flops / t_r / 1e12, "wgmma": wg, **extra}, kc=kc)
        return err

    if not fp8_only:
        a = torch.randn(M, K, device="cuda").to(torch.bfloat16)
        b = torch.randn(K, N, device="cuda").to(torch.bfloat16)
        bt = b.t().contiguous()  # (N, K)
        ref = a.double() @ b.double()
        t_ref, _ = gpu_time(lambda: torch.matmul(a, b), reps=10)
        err_t = relnorm(torch.matmul(a, b), ref)

        # the mma.sync lowering's best configuration of run 8, same process
        try:
            row("gemm_bf16_4096_mma_sync 128x128x32/128/s4", G.matmul(M, N, K, block_M=128, block_N=128, block_K=32,
                num_stages=4, threads=128, dtype="bfloat16", out_dtype="float32"), (a, b), ref, t_ref,
                "torch.matmul bf16", False, {"ref_err": err_t})
        except Exception as ex:  # noqa: BLE001
            fail(f"wgmma bench mma.sync row: {type(ex).__name__}: {ex}")
        pairs = [(BF16[1], True)] if short else [(c, i) for c in (BF16[:4] if quick else BF16) for i in (False, True)]
        for (bm, bn, bk, st, th, tb), infl in pairs:
            v = dict(block_M=bm, block_N=bn, block_K=bk, num_stages=st, threads=th)
            name = f"gemm_bf16_4096_wgmma {bm}x{bn}x{bk}/{th}/s{st}{'/NT' if tb else ''}/{'inflight' if infl else 'wait0'}"
            try:
                k = G.matmul(M, N, K, dtype="bfloat16", out_dtype="float32", trans_B=tb, **v)
                args = (a, bt) if tb else (a, b)
                extra = {"ref_err": err_t, "config": v, "trans_B": tb, "mn_lbo_is_region": WL.MN_LBO_IS_REGION}
                err = row(name, k, args, ref, t_ref, "torch.matmul bf16", True, extra, infl)
                if err > 1e-2 and not tb:
                    log(f"{name}: rel. error {err:.3g} with MN_LBO_IS_REGION={WL.MN_LBO_IS_REGION}; trying the other")
                    WL.MN_LBO_IS_REGION = not WL.MN_LBO_IS_REGION
                    extra["mn_lbo_is_region"] = WL.MN_LBO_IS_REGION
                    err = row(name, G.matmul(M, N, K, dtype="bfloat16", out_dtype="float32", **v), args, ref, t_ref,
                              "torch.matmul bf16", True, extra, infl)
                if err > 1e-2:
                    fail(f"{name}: wrong result, rel. error {err:.3g}")
            except Exception as ex:  # noqa: BLE001
                fail(f"wgmma bench {name}: {type(ex).__name__}: {ex}")
        # fp16 (issue 14: "fp16 the same"): the best bf16 configuration, its own torch reference in this process
        a16, b16 = a.to(torch.float16), b.to(torch.float16)
        ref16 = a16.double() @ b16.double()
        t16, _ = gpu_time(lambda: torch.matmul(a16, b16), reps=10)
        bm, bn, bk, st, th, _tb = BF16[1]
        name = f"gemm_fp16_4096_wgmma {bm}x{bn}x{bk}/{th}/s{st}/inflight"
        try:
            err = row(name, G.matmul(M, N, K, dtype="float16", out_dtype="float32", block_M=bm, block_N=bn,
                                     block_K=bk, num_stages=st, threads=th), (a16, b16), ref16, t16,
                      "torch.matmul fp16", True, {"ref_err": relnorm(torch.matmul(a16, b16), ref16)}, True)
            if err > 1e-2:
                fail(f"{name}: wrong result, rel. error {err:.3g}")
        except Exception as ex:  # noqa: BLE001
            fail(f"wgmma bench {name}: {type(ex).__name__}: {ex}")
        if not short:  # the proxy-fence diagnostic
            name = "gemm_bf16_4096_wgmma 128x128x32/128/s5/inflight/nofence (diagnostic)"
            try:
                v = dict(block_M=128, block_N=128, block_K=32, num_stages=5, threads=128)
                err = row(name, G.matmul(M, N, K, dtype="bfloat16", out_dtype="float32", **v), (a, b), ref, t_ref,
                          "torch.matmul bf16", True, {"ref_err": err_t, "config": v, "proxy_fence": False}, True, False)
                if err > 1e-2:
                    fail(f"{name}: wrong result, rel. error {err:.3g}")
            except Exception as ex:  # noqa: BLE001
                fail(f"wgmma bench {name}: {type(ex).__name__}: {ex}")

    a8 = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
    b8 = torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn)
    one = torch.ones((), device="cuda", dtype=torch.float32)

    def ref8():
        return torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

    r8 = a8.double() @ b8.double().t()
    t8, _ = gpu_time(ref8, reps=10)
    err8 = relnorm(ref8(), r8)
    fp8_cfgs = FP8[:2] if fp8_only or short else FP8[:3] if quick else FP8
    only_inflight = fp8_only or short
    for (bm, bn, bk, st, th), infl in [(c, i) for c in fp8_cfgs for i in ((True,) if only_inflight else (False, True))]:
        v = dict(block_M=bm, block_N=bn, block_K=bk, num_stages=st, threads=th)
        name = f"gemm_fp8_e4m3_4096_wgmma {bm}x{bn}x{bk}/{th}/s{st}/{'inflight' if infl else 'wait0'}"
        try:
            err = row(name, fp8_matmul(M, N, K, **v), (a8, b8), r8, t8, "torch._scaled_mm e4m3 (unit scales, bf16 out)",
                      True, {"ref_err": err8, "config": v, "out_dtype": "bfloat16"}, infl)
            if err > 1e-2:
                fail(f"{name}: wrong result, rel. error {err:.3g}")
        except Exception as ex:  # noqa: BLE001
            fail(f"wgmma bench {name}: {type(ex).__name__}: {ex}")
    if fp8_only:
        return
    name = "gemm_fp8_e4m3_4096_wgmma 128x128x64/128/s5/inflight/nofence (diagnostic)"
    try:
        v = dict(block_M=128, block_N=128, block_K=64, num_stages=5, threads=128)
        err = row(name, fp8_matmul(M, N, K, **v), (a8, b8), r8, t8, "torch._scaled_mm e4m3 (unit scales, bf16 out)",
                  True, {"ref_err": err8, "config": v, "out_dtype": "bfloat16", "proxy_fence": False}, True, False)
        if err > 1e-2:
            fail(f"{name}: wrong result, rel. error {err:.3g}")
    except Exception as ex:  # noqa: BLE001
        fail(f"wgmma bench {name}: {type(ex).__name__}: {ex}")
