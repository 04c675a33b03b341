"""The large fuzz run of issue 16: mutated bad kernels and calls, and legal variations, through tilesim.

    python benchmarks/fuzz.py [--cases 1500] [--seed 16] [--timeout 20] [--out reports/measurements/]

Generates ``--cases`` deterministic cases with :mod:`tilesim.testing.fuzz` (one mutation each of a
valid kernel: its source, its call, or a legal variation), runs each in this process under a
``--timeout`` (a hang is a case over it), prints the counts and writes a summary JSON
``fuzz_<UTC time>.json`` (counts, counts per mutation, every case that was not a clean rejection or
a correct run, the seed, the tilesim commit, the wall time) atomically under ``--out``.
The goal (issue 16): 0 internal exceptions, 0 silent acceptances, 0 wrong answers, 0 hangs.
Exit status 1 when any of those is non-zero.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tilesim.atomic_io import write_text  # noqa: E402
from tilesim.testing.fuzz import generate, run_case, summarise  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=1500)
    p.add_argument("--seed", type=int, default=16)
    p.add_argument("--timeout", type=float, default=20.0, help="seconds per case before it counts as a hang")
    p.add_argument("--out", default=str(ROOT / "reports" / "measurements"))
    a = p.parse_args(argv)
    warnings.simplefilter("ignore")  # TileLangCompatWarning on some legal variations: not what is counted
    t0 = time.perf_counter()
    outcomes = [run_case(c, a.timeout) for c in generate(a.cases, a.seed)]
    wall = time.perf_counter() - t0
    summary = summarise(outcomes)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    summary = {"what": "tilesim fuzz run (issue 16)", "seed": a.seed, "timeout_s": a.timeout, "commit": commit,
               "wall_s": round(wall, 1), **summary}
    head = {k: summary[k] for k in ("cases", "rejected", "rejected_with_location", "ok", "silent", "wrong",
                                    "internal", "hang")}
    print(json.dumps(head), f"in {wall:.1f} s")
    for f in summary["failures"][:40]:
        print(f"  {f['kind']:8} #{f['id']} {f['base']} {f['mutation']} {f['detail']}: {f['message'][:160]}")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"fuzz_{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}.json"
    write_text(path, json.dumps(summary, indent=2) + "\n")
    print(f"summary written to {path}")
    return 1 if any(summary[k] for k in ("silent", "wrong", "internal", "hang")) else 0


if __name__ == "__main__":
    sys.exit(main())
