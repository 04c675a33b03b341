"""The ``overhead`` step of ``benchmarks/gpu_run.py`` (issue 14 item 5): the host cost of a CUDA call, timed on
the H200 in the run's process; results land in the run's JSON (``results``), the prediction written before the
first run is in docs/cuda-backend.md ("Call plans")."""

from __future__ import annotations

import time

from tilesim.backends.cuda.caps import cuda_module


def call_overhead(results: dict, log) -> None:
    """Host time per call on a tiny RMSNorm (64×256 bf16 torch CUDA tensors, the output allocated per call):
    the high-level call ``kc(x, w)`` with call plans (the default; ``call_overhead_s``), the same with plans off
    (the full path: binding, conversion, numba's dispatcher), ``prepare()``'s launch-only closure, a plan's raw
    launcher on an empty kernel, and a bare numba launch of the same empty kernel (three int16 arrays, explicit
    signature, device arrays made once: the floor of numba's dispatcher); also ``torch.empty`` and the torch
    stream query alone. Each: 3 warm-up calls, then 7 rounds of 50 calls ended by a synchronize; the median
    round's time per call."""
    import torch

    from kernels import norms
    from tilesim.backends.cuda import plans as P
    from tilesim.backends.cuda.caps import launch_api
    from tilesim.backends.cuda.check import cuda_twin

    cuda = cuda_module()
    k = norms.rms_norm(64, 256, block_M=1, dtype="bfloat16", threads=128)
    kc = cuda_twin(k)
    full = cuda_twin(k)
    full._cuda.call_plans = False
    x = torch.randn(64, 256, device="cuda").to(torch.bfloat16)
    w = torch.randn(256, device="cuda").to(torch.bfloat16)

    def per_call(fn, n=50, rounds=7):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(rounds):
            t = time.perf_counter()
            for _ in range(n):
                fn()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t) / n)
        return sorted(times)[len(times) // 2]

    kc(x, w)  # the first call of a signature takes the full path and stores the plan; the next ones run it
    same = bool(torch.equal(kc(x, w), full(x, w)))
    plan = next((p for p in kc._cuda.plans.plans.values() if p), None)
    results["call_plan"] = {"launcher": type(plan.launcher).__name__ if plan else None, "note": plan.note if plan else "",
                            "equal_to_full_path": same}
    run, _outs = kc._cuda.prepare(kc, (x, w))

    @cuda.jit("void(int16[::1], int16[::1], int16[::1])")
    def empty(a, b, c):
        pass

    flat = [x.reshape(-1).view(torch.int16), w.view(torch.int16), torch.empty_like(x).reshape(-1).view(torch.int16)]
    dev = [cuda.as_cuda_array(t) for t in flat]
    cfg = empty[64, 128, 0, 0]
    spec = [("src", i, None) for i in range(3)]
    raw = P.RawLauncher.build([(cfg, spec, dev)], flat, [P.torch_ptr] * 3, launch_api())
    times = {"call_overhead_s": per_call(lambda: kc(x, w)), "call_overhead_full_path_s": per_call(lambda: full(x, w)),
             "prepared_launch_s": per_call(run), "bare_numba_launch_s": per_call(lambda: cfg(*dev))}
    if raw is not None:
        try:
            times["raw_launch_empty_s"] = per_call(lambda: raw(flat))
        except P.RawLaunchRefused as e:
            results["call_plan"]["raw_empty_error"] = str(e)
    # two parts of a plan call, alone (where to look if the plan call misses its prediction)
    times["torch_empty_s"] = per_call(lambda: torch.empty((64, 256), dtype=torch.bfloat16, device="cuda"))
    times["torch_stream_query_s"] = per_call(lambda: P.torch_stream(torch, x))
    results["call_plan"]["stats"] = dict(kc._cuda.plans.stats)
    results.update(times)
    log("high-level call overhead: " + ", ".join(f"{k_} {v * 1e6:.1f} us" for k_, v in times.items())
        + f"; plan launcher {results['call_plan']['launcher']}, equal to the full path: {same}")
