"""The sanitizer's numbers for issue 16: planted bugs found, false positives, and its cost on the README GEMM.

    python benchmarks/sanitizer.py [--out reports/measurements/] [--no-library]

* Runs ``tilesim.sanitize.check_kernel`` on every case of ``tests/sanitizer_cases.py`` in batched and
  in serial mode: planted bugs found (out of bounds, uninitialised memory, races), whether each
  uninitialised-memory finding points at a source line naming the buffer it reports (the read, not an
  output), and findings on the correct look-alikes (edge tiles included).
* False positives of the shadow mask on every kernel of ``kernels/`` at each of its ``test_shapes`` (small
  shapes the tiles do not divide) and on every kernel of ``tests/registry.py`` (its ``toy`` size or the
  smallest shape its strategy draws), with their own inputs (skipped with ``--no-library``).
* Overhead on the README GEMM at 1000x700x300 (fp16 in, fp32 out): median wall time of one plain run, one
  run under ``InterpOptions(uninit="check")`` (the mask alone), one under ``InterpOptions(oob="check",
  races=True, uninit="check")`` (what ``check_kernel`` runs once), the old three-run differential (three
  runs under ``oob="check", races=True`` with the NaN, zero and one fills) and a whole ``check_kernel``;
  5 repetitions each (3 for the whole checks), after a warm-up. Checking runs step through the K loop
  (the fused GEMM loop is off), so a plain run with ``fuse_gemm_loops=False`` is reported too.

Prints the numbers and writes ``sanitizer_<UTC time>.json`` under ``--out`` (atomically).
"""

from __future__ import annotations

import argparse
import json
import linecache
import statistics
import sys
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import kernels.registry as KR  # noqa: E402  (before tests/ is on the path: it has a kernels/ too)

sys.path.insert(0, str(ROOT / "tests"))

from hypothesis import HealthCheck, find, settings  # noqa: E402
from registry import REGISTRY  # noqa: E402
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


def _names_its_buffer(finding: str) -> bool:
    """The finding's source line names the buffer (or output) it reports."""
    if "(at " not in finding:
        return False
    buf = finding.split("buffer ")[1].split()[0] if "buffer " in finding else finding.split("output ")[1].split(":")[0]
    path, line = finding.rsplit("(at ", 1)[1].rstrip(")").rsplit(":", 2)[:2]
    return buf in linecache.getline(path, int(line))


def _library() -> list:
    """(name, kernel, inputs) of every kernel of kernels/ at its test shapes and of tests/registry.py."""
    out = []
    for spec in KR.all_specs():
        for shape in spec.test_shapes:
            prm = spec.params(shape)
            out.append((f"kernels:{spec.name}:{shape.get('label', '')}", lambda spec=spec, prm=prm: spec.build(**prm),
                        lambda spec=spec, prm=prm: list(spec.make_inputs(np.random.default_rng(0), **prm))))
    for tk in REGISTRY.values():
        prm = tk.toy or find(tk.shapes, lambda _: True,
                             settings=settings(database=None, suppress_health_check=list(HealthCheck)))
        out.append((f"tests:{tk.name}", lambda tk=tk, prm=prm: tk.build(prm),
                    lambda tk=tk, prm=prm: list(tk.inputs(np.random.default_rng(0), prm))))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "reports" / "measurements"))
    p.add_argument("--no-library", action="store_true", help="skip the kernel-library false-positive run")
    a = p.parse_args(argv)
    warnings.simplefilter("ignore")
    res = {"what": "tilesim sanitizer (issue 16)", "modes": {}}
    for mode in ("batched", "serial"):
        found, missed, false_pos, clean, at_read, uninit = 0, [], [], 0, [], 0
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
                if kind == "uninit":
                    uninit += 1
                    at_read.append({"case": name, "finding": rep.findings[0],
                                    "line_names_buffer": _names_its_buffer(rep.findings[0])})
        bugs = sum(k != "correct" for _, k, _, _ in CASES)
        named = sum(f["line_names_buffer"] for f in at_read)
        res["modes"][mode] = {"planted_bugs": bugs, "found": found, "missed": missed,
                              "correct_kernels": len(CASES) - bugs, "false_positives": false_pos,
                              "uninit_found": uninit, "uninit_at_a_line_naming_the_buffer": named,
                              "uninit_findings": at_read}
        print(f"{mode}: {found}/{bugs} planted bugs found ({named}/{uninit} uninitialised ones at a line naming "
              f"the buffer), {len(false_pos)} false positives on {len(CASES) - bugs} correct kernels")
    lib = []
    if not a.no_library:
        t0 = time.perf_counter()
        cases = _library()
        for name, build, inputs in cases:
            rep = check_kernel(build(), inputs())
            if not rep.ok:
                lib.append({"kernel": name, "finding": rep.findings[0]})
        n = len(cases)
        res["library"] = {"kernels_checked": n, "false_positives": lib, "seconds": time.perf_counter() - t0}
        print(f"library: {len(lib)} false positives on {n} kernel configurations "
              f"({time.perf_counter() - t0:.0f} s)")
    k = matmul(1000, 700, 300)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((1000, 300)).astype("float16"), rng.standard_normal((300, 700)).astype("float16")
    plain = _median_s(lambda: k.run(x, y))
    stepwise = _median_s(lambda: k.run(x, y, options=InterpOptions(fuse_gemm_loops=False)))
    mask = _median_s(lambda: k.run(x, y, options=InterpOptions(uninit="check")))
    checked = _median_s(lambda: k.run(x, y, options=InterpOptions(oob="check", races=True, uninit="check")))
    three = _median_s(lambda: [k.run(x, y, options=InterpOptions(oob="check", races=True, uninit=f))
                               for f in ("nan", "zero", "one")], reps=3)
    whole = _median_s(lambda: check_kernel(k, [x, y]), reps=3)
    res["readme_gemm_1000x700x300"] = {
        "plain_s": plain, "plain_stepwise_s": stepwise, "mask_run_s": mask, "checked_run_s": checked, "three_run_differential_s": three,
        "check_kernel_s": whole, "mask_run_ratio": mask / plain, "checked_run_ratio": checked / plain,
        "three_run_ratio": three / plain, "check_kernel_ratio": whole / plain}
    print(f"README GEMM 1000x700x300: plain {plain * 1e3:.0f} ms (K loop step by step: {stepwise * 1e3:.0f} ms); mask only {mask * 1e3:.0f} ms "
          f"({mask / plain:.1f}x); one checked run (mask+oob+races) {checked * 1e3:.0f} ms ({checked / plain:.1f}x); "
          f"old three-run differential {three * 1e3:.0f} ms ({three / plain:.1f}x); check_kernel {whole * 1e3:.0f} ms "
          f"({whole / plain:.1f}x)")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"sanitizer_{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}.json"
    write_text(path, json.dumps(res, indent=2) + "\n")
    print(f"written to {path}")
    ok = all(m["found"] == m["planted_bugs"] and not m["false_positives"]
             and m["uninit_at_a_line_naming_the_buffer"] == m["uninit_found"] for m in res["modes"].values())
    ok = ok and not res.get("library", {}).get("false_positives")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
