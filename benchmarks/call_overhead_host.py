"""Host-side cost of a CUDA-target call on a machine without a GPU (what the call plans remove; issue 14 item 5).

Two measurements, each the median of 7 rounds of 2000 calls of the tiny RMSNorm ``benchmarks/gpu_run.py``
``call_overhead()`` times on the H200 (64×256, one row per block):

* ``sim``: under numba's CUDA simulator (a subprocess), fp16 simulator device arrays, with every kernel launch
  replaced by a no-op: the full path (binding, checks, conversion, output allocation, grid evaluation) against
  the plan path (key, plan lookup, output allocation, the dispatch launcher's flat views). Includes no numba
  dispatcher, no driver, no ``torch``.
* ``fake-gpu``: this process, no simulator: bf16 torch *CPU* tensors through ``JITKernel.__call__`` into a
  stored plan whose raw launcher was prepared by numba-cuda's own ``_Kernel._prepare_args`` (on stand-in device
  arrays) and whose cuda.core ``launch`` is a no-op. Includes everything the GPU plan path runs in Python
  except ``torch.cuda.current_stream`` (key), CUDA ``torch.empty`` (here the CPU one) and cuda.core's
  ``launch`` itself (parameter packing + ``cuLaunchKernel``).

Run: ``python benchmarks/call_overhead_host.py`` (prints one JSON object).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
from types import SimpleNamespace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def per_call(fn, n=2000, rounds=7):
    for _ in range(20):
        fn()
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        times.append((time.perf_counter() - t) / n)
    return sorted(times)[len(times) // 2]


def sim_part():
    import numpy as np

    from kernels import norms
    from tilesim.backends.cuda.caps import cuda_module
    from tilesim.backends.cuda.check import cuda_twin

    cuda = cuda_module()
    k = norms.rms_norm(64, 256, block_M=1, dtype="float16", threads=128)
    x = cuda.to_device(np.random.default_rng(0).standard_normal((64, 256)).astype(np.float16))
    w = cuda.to_device(np.random.default_rng(1).standard_normal(256).astype(np.float16))
    out = {}
    for name, plans in (("full_path_us", False), ("plan_us", True)):
        kc = cuda_twin(k)
        kc.program.call_plans = plans
        kc(x, w)  # compiles; the first call of a key stores its plan

        class NoLaunch:
            def __getitem__(self, cfg):
                return lambda *a: None

        kc.program.dispatcher = lambda _k: NoLaunch()
        kc(x, w)
        if plans:  # the stored plan still holds the real dispatcher: rebuild it with the no-op
            kc.program.plans.plans.clear()
            kc(x, w)
        out[name] = per_call(lambda kc=kc: kc(x, w)) * 1e6
        out[name.replace("_us", "_stats")] = dict(kc.program.plans.stats)
    return out


def fake_gpu_part():
    import numpy as np
    import torch

    from kernels import norms
    from tilesim.backends.cuda import plans as P
    from tilesim.backends.cuda.caps import cuda_module, numba_types
    from tilesim.backends.cuda.check import cuda_twin
    from tilesim.optional import require

    cuda_module()
    prepare = require("numba.cuda.dispatcher", "benchmark")._Kernel._prepare_args
    types = numba_types()
    kc = cuda_twin(norms.rms_norm(64, 256, block_M=1, dtype="bfloat16", threads=128))
    kc._runs_here = True  # no GPU here: the plan below stands in for the one a first GPU call stores
    x = torch.randn(64, 256).to(torch.bfloat16)
    w = torch.randn(256).to(torch.bfloat16)
    y = torch.empty(64, 256, dtype=torch.bfloat16)

    class Overload:
        debug = cooperative = False
        extensions = []
        argument_types = (types.Array(types.int16, 1, "C"),) * 3
        _codelibrary = SimpleNamespace(get_cufunc=lambda: SimpleNamespace(kernel=None))

        def _prepare_args(self, ty, val, stream, retr, kernelargs):
            return prepare(self, ty, val, stream, retr, kernelargs)

    def dev(t):
        smv = SimpleNamespace(size=t.numel(), dtype=np.dtype("i2"), ptr=t.data_ptr(), shape=(t.numel(),),
                              _layout=SimpleNamespace(strides_in_bytes=(2,)))
        return SimpleNamespace(__cuda_memory__=True, _strided_memory_view_shim=smv)

    cfg = SimpleNamespace(dispatcher=SimpleNamespace(overloads={0: Overload()}), stream=0, griddim=(64, 1, 1),
                          blockdim=(128, 1, 1), sharedmem=0)
    objs = [x, w, y]
    launched = []
    raw = P.RawLauncher.build([(cfg, [("src", i, None) for i in range(3)], [dev(t) for t in objs])], objs,
                              [P.torch_ptr] * 3, (lambda *a: launched.append(1), lambda g, b, s: (g, b, s)))
    raw.launch = lambda *a: None
    key = P.call_key(kc.program._is_var, kc.out_idx, [x, w, None])
    plan = P.CallPlan((0, 1), (functools.partial(torch.empty, (64, 256), dtype=torch.bfloat16, device="cpu"),), raw)
    kc.program.plans.store(key, plan)
    return {"fake_gpu_plan_us": per_call(lambda: kc(x, w)) * 1e6,
            "torch_empty_cpu_us": per_call(lambda: torch.empty((64, 256), dtype=torch.bfloat16)) * 1e6,
            "fake_gpu_stats": dict(kc.program.plans.stats)}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--sim":
        print(json.dumps(sim_part()))
        return
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--sim"], capture_output=True, text=True, env=env,
                       cwd=ROOT, check=True)
    res = json.loads(p.stdout.strip().splitlines()[-1])
    res.update(fake_gpu_part())
    print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in res.items()}))


if __name__ == "__main__":
    main()
