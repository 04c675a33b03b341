"""The sanitizer's numbers for issue 16: planted bugs found, false positives, and its cost on the README GEMM.

    python benchmarks/sanitizer.py [--out reports/measurements/]

* Runs ``tilesim.sanitize.check_kernel`` on every case of ``tests/sanitizer_cases.py`` in batched and
  in serial mode: planted bugs found (of 30: out of bounds, uninitialised memory, races) and findings
  on the correct look-alikes (of 24, edge tiles included).
* Overhead on the README GEMM at 1000x700x300 (fp16 in, fp32 out): the median wall time of one run under
  ``InterpOptions(oob="check", races=True)`` against one plain run, and of a whole ``check_kernel``
  (three runs, one per uninitialised fill) against one plain run; 5 repetitions each, after a warm-up.

Prints the numbers and writes ``sanitizer_<UTC time>.json`` under ``--out`` (atomically).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from sanitizer_cases import CASES  # noqa: E402

from tilesim import InterpOptions  # noqa: E402
from tilesim.atomic_io import write_text  # noqa: E402
from tilesim.examples import matmul  # noqa: E402
from tilesim.sanitize import check_kernel  # noqa: E402


def _median_s(fn, reps=5):
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "reports" / "measurements"))
    a = p.parse_args(argv)
    warnings.simplefilter("ignore")
    res = {"what": "tilesim sanitizer (issue 16)", "modes": {}}
    for mode in ("batched", "serial"):
        found, missed, false_pos, clean = 0, [], [], 0
        for name, kind, build, inputs in CASES:
            ins = inputs(np.random.default_rng(0)) if inputs else None
            rep = check_kernel(build(), ins, modes=(mode,))
            if kind == "correct":
                clean += rep.ok
                if not rep.ok:
                    false_pos.append({"case": name, "finding": rep.findings[0]})
            elif rep.ok:
                missed.append(name)
            else:
                found += 1
        bugs = sum(k != "correct" for _, k, _, _ in CASES)
        res["modes"][mode] = {"planted_bugs": bugs, "found": found, "missed": missed,
                              "correct_kernels": len(CASES) - bugs, "false_positives": false_pos}
        print(f"{mode}: {found}/{bugs} planted bugs found, {len(false_pos)} false positives on "
              f"{len(CASES) - bugs} correct kernels")
    k = matmul(1000, 700, 300)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((1000, 300)).astype("float16"), rng.standard_normal((300, 700)).astype("float16")
    plain = _median_s(lambda: k.run(x, y))
    checked = _median_s(lambda: k.run(x, y, options=InterpOptions(oob="check", races=True)))
    whole = _median_s(lambda: check_kernel(k, [x, y]), reps=3)
    res["readme_gemm_1000x700x300"] = {"plain_s": plain, "checked_run_s": checked, "check_kernel_s": whole,
                                       "checked_run_ratio": checked / plain, "check_kernel_ratio": whole / plain}
    print(f"README GEMM 1000x700x300: plain {plain * 1e3:.1f} ms, one checked run {checked * 1e3:.1f} ms "
          f"({checked / plain:.1f}x), check_kernel {whole * 1e3:.1f} ms ({whole / plain:.1f}x)")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"sanitizer_{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}.json"
    write_text(path, json.dumps(res, indent=2) + "\n")
    print(f"written to {path}")
    ok = all(m["found"] == m["planted_bugs"] and not m["false_positives"] for m in res["modes"].values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
