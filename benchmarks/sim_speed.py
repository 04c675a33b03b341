"""How long the simulator takes on large problems (target: < 0.5 s each).

    python benchmarks/sim_speed.py

Simulates a 16384³ fp16 GEMM (16,384 blocks of 128×128, 512 pipelined iterations each) and a
128K-token causal flash-attention forward (32 heads, d=128: 32,768 blocks whose trip counts differ
by block row) on the H200 model, and prints the wall time of the analysis + simulation (best of 3,
after one warm-up call that loads the hardware model) and the simulated result.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import core_kernels as ck  # noqa: E402

from tilesim.sim import simulate_kernel  # noqa: E402


def timed(kernel, **kw):
    simulate_kernel(kernel, **kw)
    best = float("inf")
    rep = None
    for _ in range(3):
        t0 = time.perf_counter()
        rep = simulate_kernel(kernel, **kw)
        best = min(best, time.perf_counter() - t0)
    return best, rep


def main():
    cases = [
        ("GEMM 16384^3 fp16, 128x128x32 tiles, 3 stages",
         ck.matmul_relu(16384, 16384, 16384, block_M=128, block_N=128, block_K=32, num_stages=3)),
        ("flash attention fwd, 128K tokens, 32 heads, d=128, causal",
         ck.flash_attention(1, 32, 131072, 128, True, 128, 128, 2, 256)),
    ]
    print(f"{'case':62s} {'wall':>9s} {'simulated':>12s}  bound")
    ok = True
    for name, k in cases:
        wall, rep = timed(k, hw="h200_sxm_141gb", profile="tensorcore")
        ok &= wall < 0.5
        print(f"{name:62s} {wall * 1e3:7.1f}ms {rep.time_s * 1e3:10.3f}ms  {rep.bound}")
    print("target < 500 ms each:", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
