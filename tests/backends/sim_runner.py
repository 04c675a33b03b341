"""Run toy kernels under numba's CUDA simulator and compare with the interpreter (a subprocess of
``test_cudasim.py``: ``NUMBA_ENABLE_CUDASIM=1`` must be set before ``numba.cuda`` is imported).

Prints one JSON object per case on stdout; ``--only NAME`` restricts the cases.
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.append(os.path.join(ROOT, "tests"))

import numpy as np  # noqa: E402

from tilesim.backends.cuda.check import core_cases, library_cases, run_case  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--library", nargs="*", default=None,
                    help="registered kernel names to run too (fp32/fp16 ones; default: none)")
    a = ap.parse_args()
    import core_kernels as ck

    cases = core_cases(ck, "toy")
    if a.library:
        from kernels.registry import all_specs

        specs = [s for s in all_specs() if s.name in a.library]
        over = {"*": {"dtype": "float16"}}
        cases += [c for c in library_cases(specs, allow_dtypes={"float32", "float16"}, overrides=over)
                  if c.kernel is not None]
    rng = np.random.default_rng(1234)
    for c in cases:
        if a.only and c.name not in a.only and c.name not in (a.library or ()):
            continue
        t = time.time()
        try:
            r = run_case(c, rng)
        except Exception as e:  # noqa: BLE001
            r = {"name": c.name, "ok": False, "error": f"{type(e).__name__}: {e}"[:2000]}
        r["seconds"] = round(time.time() - t, 2)
        print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
