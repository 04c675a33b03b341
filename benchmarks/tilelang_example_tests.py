"""TileLang's own example tests, at their test sizes, on tilesim (CPU): outcome and time of each test.

Usage::

    python benchmarks/tilelang_example_tests.py --mirror DIR [--only SUBSTR ...] [--timeout S] [--jobs N]
                                                [--fla-mirror FLA_DIR]

The companion of ``benchmarks/tilelang_examples.py`` (which runs each example *program* as its ``__main__``
does, often at GPU sizes): here every ``test_*.py`` wrapper of ``examples/`` (the pytest files TileLang's CI
runs, calling each example's ``main`` with its test sizes) runs under pytest, so each test's time is the time
of that example's check at its test sizes — issue 13's laptop-speed measure ("each example's check at its
test sizes in under 2 s").

Contract
--------
* Staging, the import swap, the CUDA-on-CPU torch shim, the stand-ins of CUDA-only reference packages
  (``STANDINS``), the environment, the excluded directories and
  ``--fla-mirror`` (fla at the commit the gdn examples cite) are ``tilelang_examples.py``'s (imported from it),
  so a test sees what a program sees.
* Each wrapper runs in its own subprocess (``python -m pytest -p no:cacheprovider --junitxml``) from a private
  copy of its top-level example directory, ``--jobs`` at a time, ``--timeout`` seconds per wrapper (a
  wrapper past it: every test of it is ``timeout``).
* Per test: ``passed``/``failed``/``error``/``skipped`` (pytest's outcome, with the first line of its message)
  and ``seconds``; a file that defines no tests (a helper named ``test_*.py``) is one ``no-tests`` row (pytest's time for the test: setup, call and teardown). A wrapper whose collection fails
  (an import error) is one ``error`` row named after the file.
* Output: a table, a summary (outcomes; of the passed tests, how many took under 2 s and the median) and JSON
  written atomically to ``reports/measurements/tilelang_example_tests_<UTC timestamp>.json``.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import datetime
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tilelang_examples as TE  # noqa: E402 - this directory's harness: staging, shim, environment

REPO = TE.REPO


def wrappers(examples: Path, only: list[str]) -> list[str]:
    """The ``test_*.py`` files of ``examples`` outside the excluded directories, as relative paths."""
    found = []
    for path in sorted(examples.rglob("test_*.py")):
        rel = path.relative_to(examples).as_posix()
        if TE.EXCLUDED_DIRS & set(rel.split("/")[:-1]):
            continue
        if only and not any(s in rel for s in only):
            continue
        found.append(rel)
    return found


def parse_junit(xml_text: str, rel: str) -> list[dict]:
    """One row per test case of a pytest junit report."""
    rows = []
    for case in ET.fromstring(xml_text).iter("testcase"):
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            node = case.find(tag)
            if node is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
                message = (node.get("message") or node.text or "").strip().splitlines()[0:1]
                message = message[0][:200] if message else ""
                break
        name = case.get("name", "?")
        rows.append({"wrapper": rel, "test": name, "outcome": outcome, "seconds": round(float(case.get("time", 0)), 2),
                     "message": message})
    return rows


def run_wrapper(rel: str, staging: Path, work: Path, env: dict, timeout: float) -> list[dict]:
    top = rel.split("/")[0]
    private = Path(tempfile.mkdtemp(dir=work, prefix="test_"))
    shutil.copytree(staging / top, private / top, symlinks=True)
    for other in staging.iterdir():
        if other.name != top and other.is_dir():
            (private / other.name).symlink_to(other, target_is_directory=True)
    script = private / rel
    report = private / "junit.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", script.name]
    env = dict(env, TILESIM_SHIM_CAPABILITY=TE.capability_of(rel))
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=script.parent, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        timed_out = True
    seconds = round(time.perf_counter() - start, 2)
    rows = parse_junit(report.read_text(), rel) if report.exists() else []
    shutil.rmtree(private, ignore_errors=True)
    if timed_out:
        return [{"wrapper": rel, "test": "*", "outcome": "timeout", "seconds": seconds,
                 "message": f"timeout after {timeout:g} s"}]
    if not rows and proc.returncode == 5:  # pytest collected nothing: a helper module named test_*.py
        return [{"wrapper": rel, "test": "(none)", "outcome": "no-tests", "seconds": seconds,
                 "message": "the file defines no tests"}]
    if not rows:
        tail = [line for line in out.strip().splitlines() if line.strip()][-1:] or [f"exit code {proc.returncode}"]
        return [{"wrapper": rel, "test": "(collection)", "outcome": "error", "seconds": seconds, "message": tail[0][:200]}]
    return rows


def summarise(rows: list[dict]) -> dict:
    counts = collections.Counter(r["outcome"] for r in rows)
    passed = sorted(r["seconds"] for r in rows if r["outcome"] == "passed")
    return {"counts": dict(sorted(counts.items())), "tests": len(rows),
            "passed_under_2s": sum(s < 2.0 for s in passed),
            "passed_median_s": passed[len(passed) // 2] if passed else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mirror", type=Path, required=True, help="bare git dir or checkout of TileLang")
    ap.add_argument("--only", action="append", default=[], help="run wrappers whose path contains this (repeatable)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per wrapper file")
    ap.add_argument("--jobs", type=int, default=2, help="wrappers run in parallel")
    ap.add_argument("--fla-mirror", type=Path, help="bare git dir of fla-org/flash-linear-attention (see "
                                                    "tilelang_examples.py)")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="tilelang_example_tests_") as tmp:
        work = Path(tmp)
        examples, commit = TE.extract_examples(args.mirror.resolve(), work)
        todo = wrappers(examples, args.only)
        env, fla_dirs = TE.prepare(examples, work, args.jobs, args.fla_mirror)
        print(f"{len(todo)} test files; timeout {args.timeout:g} s each, jobs {args.jobs}", flush=True)
        rows: list[dict] = []
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            futures = {pool.submit(run_wrapper, rel, work / "staged", work, TE.env_for(rel, env, fla_dirs),
                                   args.timeout): rel for rel in todo}
            for fut in concurrent.futures.as_completed(futures):
                got = fut.result()
                rows += got
                c = collections.Counter(r["outcome"] for r in got)
                print(f"[{sum(f.done() for f in futures)}/{len(todo)}] {futures[fut]}: {dict(c)}", flush=True)

    rows.sort(key=lambda r: (r["wrapper"], r["test"]))
    summary = summarise(rows)
    width = max((len(f"{r['wrapper']}::{r['test']}") for r in rows), default=10)
    print(f"\n{'test':<{width}}  {'outcome':<8} {'seconds':>8}  message")
    for r in rows:
        print(f"{r['wrapper'] + '::' + r['test']:<{width}}  {r['outcome']:<8} {r['seconds']:>8.1f}  {r['message'][:120]}")
    print(f"\nsummary: {summary['counts']} of {summary['tests']} tests; passed: {summary['passed_under_2s']} under 2 s, "
          f"median {summary['passed_median_s']} s")
    report = {"mirror": str(args.mirror), "mirror_commit": commit,
              "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              **TE.versions(), "timeout_s": args.timeout, "jobs": args.jobs, "only": args.only,
              "summary": summary, "rows": rows}
    print(f"\nwrote {TE.write_json(report, 'tilelang_example_tests').relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
