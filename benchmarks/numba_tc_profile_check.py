"""The simulator's ``numba_tc`` profile against the Numba backend's tensor-core runs on the H200 (CPU only).

Reads ``reports/measurements/numba_h200_20261201T231501Z.json`` (``benchmarks/gpu_run.py --only tc``: bf16 GEMM
4096³ at three tilings, causal flash attention bf16 (2, 2048, 16, 128) at two), rebuilds each kernel from the
library with the run's configuration, simulates it on ``h200_sxm_141gb`` with ``numba`` (the CUDA-core lowering)
and ``numba_tc`` (the default lowering since that run) and prints ``sim / measured - 1``. Nothing is fitted: the
five points are held out.

    python benchmarks/numba_tc_profile_check.py [--file reports/measurements/numba_h200_<stamp>.json]
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

import numpy as np

import tilesim.sim as S
from kernels import attention as A
from kernels import gemm as G

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "reports" / "measurements" / "numba_h200_20261201T231501Z.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--file", type=Path, default=DEFAULT)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    errs = []
    for b in json.loads(args.file.read_text())["bench"]:
        cfg, meas = dict(b["config"]), b["ours_median_s"]
        if b["name"].startswith("gemm"):
            M, N, K = b["shape"]
            k = G.matmul(M, N, K, dtype="bfloat16", out_dtype="float32", **cfg)
        else:
            B, L, H, D = b["shape"]
            k = A.flash_attention_fwd(B, H, L, D, is_causal=True, dtype="bfloat16", **cfg)
        fma, tc = (S.simulate(k.prim_func, "h200_sxm_141gb", p).time_s for p in ("numba", "numba_tc"))
        errs.append(tc / meas - 1)
        print(f"{b['name']:45s} measured {meas * 1e3:7.3f} ms   numba {fma * 1e3:7.3f} ({fma / meas - 1:+.2f})   "
              f"numba_tc {tc * 1e3:7.3f} ({tc / meas - 1:+.2f})")
    a = np.abs(errs)
    print(f"numba_tc: {len(a)} points, median |error| {np.median(a):.1%}, worst {a.max():.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
