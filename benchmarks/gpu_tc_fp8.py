"""The fp8 row of ``benchmarks/gpu_run.py --only tc``: e4m3 GEMM 4096^3 on tensor cores (``mma.sync.m16n8k32``,
issue 14 item 1) against ``torch._scaled_mm`` (e4m3 A row-major, B column-major, unit scales, bf16 out), timed
in the same process. Each variant is checked against a float64 product of the same fp8 inputs before it is
timed. Called by ``gpu_tc.bench_tensor_cores`` with its helpers (timing, error, result recording), so the
rows land in that run's JSON; the prediction written before the first run is in docs/cuda-backend.md.
"""

from __future__ import annotations

#: (block_M, block_N, block_K, num_stages, threads): the first two run with --quick too
VARIANTS = [(128, 128, 64, 3, 256), (128, 128, 128, 3, 256), (128, 128, 64, 4, 128), (128, 256, 64, 3, 256)]


def bench_fp8_tensor_cores(quick, prepared, gpu_time, relnorm, bench_entry, fail):
    import torch

    from kernels.fp8_gemm import fp8_matmul

    M = N = K = 4096
    a = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn)  # (N, K) row-major: b.t() is column-major
    one = torch.ones((), device="cuda", dtype=torch.float32)

    def ref_run():
        return torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

    ref = a.double() @ b.double().t()
    t_ref, _ = gpu_time(ref_run, reps=10)
    err_t = relnorm(ref_run(), ref)
    flops = 2.0 * M * N * K
    for bm, bn, bk, st, th in VARIANTS[:2] if quick else VARIANTS:
        v = dict(block_M=bm, block_N=bn, block_K=bk, num_stages=st, threads=th)
        try:
            kc, run, c = prepared(fp8_matmul(M, N, K, **v), a, b, tensor_cores=True, async_copy=True,
                                   wgmma=False)  # the mma.sync rows
            if "_mma_e4m3_e4m3(" not in kc.get_kernel_source():
                raise RuntimeError("the fp8 gemm did not lower to tensor cores")
            run()
            torch.cuda.synchronize()
            err = relnorm(c, ref)
            t, _ = gpu_time(run, reps=5)
            bench_entry(f"gemm_fp8_e4m3_4096_tc {bm}x{bn}x{bk}/{th}/s{st}", [M, N, K], t, t_ref,
                        "torch._scaled_mm e4m3 (unit scales, bf16 out)", err,
                        {"tflops_ours": flops / t / 1e12, "tflops_ref": flops / t_ref / 1e12, "ref_err": err_t,
                         "config": v, "out_dtype": "bfloat16"}, kc=kc)
        except Exception as ex:  # noqa: BLE001
            fail(f"tc fp8 gemm {v}: {type(ex).__name__}: {ex}")
