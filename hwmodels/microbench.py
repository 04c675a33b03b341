"""Microbenchmarks that measure the H200 numbers the datasheets do not give (run on the GPU).

Usage: ``python -m hwmodels.microbench --out results.json [--repeat 3]`` on a machine with CuPy and a CUDA
GPU. It measures, with CuPy raw kernels and ``clock64()``:

* the SM clock while busy (spin kernel: cycles ÷ event time);
* DRAM, L2 and shared-memory load latency (single-thread pointer chase; L2 and DRAM chases use
  ``ld.global.cg`` so L1 is bypassed);
* L2 read bandwidth (16 MiB working set, all SMs, ``ld.global.cg``) and DRAM read bandwidth (2 GiB);
* shared-memory read bandwidth per SM and FP32 FMA / SFU ``ex2`` throughput per SM;
* ``__syncthreads`` cost (one 1024-thread block), block dispatch cost (many empty blocks), and the
  GPU-side time per back-to-back empty kernel (launches queued behind a spinning kernel).

The JSON it writes is what the ``measured:`` sources in ``hwmodels/data/h200_sxm_141gb.toml`` cite.
Nothing here is imported by the package.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import time

import numpy as np

from tilesim import optional

SRC = r"""
extern "C" __global__ void spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {}
}
extern "C" __global__ void empty() {}
extern "C" __global__ void chase(const unsigned long long* __restrict__ nxt, long long steps,
                                 unsigned long long* out, long long* cycles) {
    unsigned long long p = 0;
    for (int i = 0; i < 1024; ++i) p = __ldcg(&nxt[p]);          // warm TLB / L2
    long long t0 = clock64();
    for (long long i = 0; i < steps; ++i) p = __ldcg(&nxt[p]);
    long long t1 = clock64();
    out[0] = p; cycles[0] = t1 - t0;
}
extern "C" __global__ void smem_chase(long long steps, unsigned int* out, long long* cycles) {
    __shared__ unsigned int s[4096];
    for (int i = threadIdx.x; i < 4096; i += blockDim.x) s[i] = (i * 97 + 31) & 4095;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned int p = 0;
        long long t0 = clock64();
        for (long long i = 0; i < steps; ++i) p = s[p];
        long long t1 = clock64();
        out[0] = p; cycles[0] = t1 - t0;
    }
}
extern "C" __global__ void read_bw(const float4* __restrict__ buf, long long n4, int reps, float* out) {
    float acc = 0.f;
    long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (int r = 0; r < reps; ++r)
        for (long long i = tid; i < n4; i += stride) { float4 v = __ldcg(&buf[i]); acc += v.x + v.y + v.z + v.w; }
    if (acc == -1.2345f) out[0] = acc;
}
extern "C" __global__ void smem_bw(int iters, float* out) {
    __shared__ float s[4096];
    for (int i = threadIdx.x; i < 4096; i += blockDim.x) s[i] = (float)i;
    __syncthreads();
    float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
    int idx = threadIdx.x;
    for (int it = 0; it < iters; ++it) {
        int b = idx + it * 128;
        a0 += s[b & 4095]; a1 += s[(b + 32) & 4095]; a2 += s[(b + 64) & 4095]; a3 += s[(b + 96) & 4095];
    }
    if (a0 + a1 + a2 + a3 == -1.f) out[0] = a0;
}
extern "C" __global__ void fma_tp(int iters, float* out) {
    float a[8];
    for (int k = 0; k < 8; ++k) a[k] = threadIdx.x * 1e-3f + k;
    #pragma unroll 16
    for (int it = 0; it < iters; ++it)
        for (int k = 0; k < 8; ++k) a[k] = fmaf(a[k], 0.9999f, 1e-4f);
    float s = 0.f; for (int k = 0; k < 8; ++k) s += a[k];
    if (s == -1.f) out[0] = s;
}
extern "C" __global__ void sfu_tp(int iters, float* out) {
    float a[8];
    for (int k = 0; k < 8; ++k) a[k] = -1.f - threadIdx.x * 1e-3f - k;
    #pragma unroll 16
    for (int it = 0; it < iters; ++it)
        for (int k = 0; k < 8; ++k) asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(a[k]));
    float s = 0.f; for (int k = 0; k < 8; ++k) s += a[k];
    if (s == -1.f) out[0] = s;
}
extern "C" __global__ void sync_cost(int iters, long long* cycles) {
    long long t0 = clock64();
    for (int i = 0; i < iters; ++i) __syncthreads();
    long long t1 = clock64();
    if (threadIdx.x == 0) cycles[0] = t1 - t0;
}
"""


def _timed(cp, fn, repeats: int = 5) -> float:
    """Median seconds of ``fn()`` between CUDA events (after one warm-up call)."""
    fn()
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(repeats):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) / 1e3)
    return sorted(times)[len(times) // 2]


def _chase_buffer(cp, np, region_bytes: int, stride_words: int = 32):
    nodes = region_bytes // (8 * stride_words)
    perm = np.random.default_rng(0).permutation(nodes).astype(np.uint64) * stride_words
    host = np.zeros(nodes * stride_words, dtype=np.uint64)
    host[perm] = np.roll(perm, -1)
    return cp.asarray(host), int(perm[0])


def run() -> dict:
    """Run every microbenchmark; return the results as a flat dict."""
    cp = optional.require("cupy", "the hardware microbenchmarks (python -m hwmodels.microbench)")

    mod = cp.RawModule(code=SRC)
    k = {name: mod.get_function(name) for name in (
        "spin", "empty", "chase", "smem_chase", "read_bw", "smem_bw", "fma_tp", "sfu_tp", "sync_cost")}
    props = cp.cuda.runtime.getDeviceProperties(0)
    sms = props["multiProcessorCount"]
    res: dict = {"device": props["name"].decode(), "sm_count": sms, "cupy": cp.__version__,
                 "date": datetime.date.today().isoformat(), "python": platform.python_version()}
    i64 = cp.zeros(1, dtype=cp.int64)
    u64 = cp.zeros(1, dtype=cp.uint64)
    f32 = cp.zeros(1, dtype=cp.float32)

    spin_cycles = 400_000_000
    t = _timed(cp, lambda: k["spin"]((1,), (1,), (np.int64(spin_cycles),)), 3)
    clock = spin_cycles / t
    res["sm_clock_hz"] = clock

    for label, region in (("dram", 1 << 30), ("l2", 4 << 20)):
        buf, _ = _chase_buffer(cp, np, region)
        steps = 200_000 if label == "dram" else 400_000
        k["chase"]((1,), (1,), (buf, np.int64(steps), u64, i64))
        cp.cuda.Device().synchronize()
        res[f"{label}_latency_cycles"] = int(i64.get()[0]) / steps
        del buf
    k["smem_chase"]((1,), (256,), (np.int64(1_000_000), u64, i64))
    cp.cuda.Device().synchronize()
    res["smem_latency_cycles"] = int(i64.get()[0]) / 1_000_000

    for label, nbytes, reps in (("l2", 16 << 20, 400), ("dram", 2 << 30, 4)):
        buf = cp.ones(nbytes // 4, dtype=cp.float32)
        n4 = nbytes // 16
        args = (buf, np.int64(n4), np.int32(reps), f32)
        t = _timed(cp, lambda args=args: k["read_bw"]((sms * 8,), (512,), args))
        res[f"{label}_read_bytes_per_s"] = nbytes * reps / t
        del buf, args

    iters = 100_000
    t = _timed(cp, lambda: k["smem_bw"]((sms * 2,), (1024,), (np.int32(iters), f32)))
    res["smem_read_bytes_per_cycle_per_sm"] = sms * 2 * 1024 * iters * 4 * 4 / (t * clock * sms)
    iters = 4_000
    for name, key in (("fma_tp", "fp32_fma_flops_per_cycle_per_sm"), ("sfu_tp", "ex2_results_per_cycle_per_sm")):
        t = _timed(cp, lambda name=name: k[name]((sms * 8,), (256,), (np.int32(iters), f32)))
        ops = sms * 8 * 256 * iters * 8 * (2 if name == "fma_tp" else 1)
        res[key] = ops / (t * clock * sms)

    iters = 100_000
    k["sync_cost"]((1,), (1024,), (np.int32(iters), i64))
    cp.cuda.Device().synchronize()
    res["syncthreads_1024_cycles"] = int(i64.get()[0]) / iters

    blocks = sms * 4000
    t = _timed(cp, lambda: k["empty"]((blocks,), (128,), ()))
    res["block_dispatch_cycles_per_sm"] = t * clock * sms / blocks

    n = 256
    k["spin"]((1,), (1,), (np.int64(100_000_000),))  # keep the GPU busy while launches queue up
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for _ in range(n):
        k["empty"]((1,), (32,), ())
    end.record()
    end.synchronize()
    res["back_to_back_empty_kernel_s"] = cp.cuda.get_elapsed_time(start, end) / 1e3 / n
    t0 = time.perf_counter()
    for _ in range(200):
        k["empty"]((1,), (32,), ())
        cp.cuda.Device().synchronize()
    res["launch_and_sync_roundtrip_s"] = (time.perf_counter() - t0) / 200
    return res


def main() -> None:
    """Command-line entry: run and write JSON (also print it)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="microbench.json")
    parser.add_argument("--repeat", type=int, default=3, help="independent runs; medians are reported")
    args = parser.parse_args()
    runs = [run() for _ in range(args.repeat)]
    res = dict(runs[0])
    for key, val in runs[0].items():
        if isinstance(val, float):
            vals = sorted(r[key] for r in runs)
            res[key] = vals[len(vals) // 2]
            res[key + "_range"] = [vals[0], vals[-1]]
    text = json.dumps(res, indent=2)
    print(text)
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write(text + "\n")


if __name__ == "__main__":
    main()
