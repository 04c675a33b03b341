"""A tuning sweep of 10,000 candidates in one process vs on a local 2-worker cluster (issue 18).

    python benchmarks/sweep_scale.py                       # 10,000 candidates, Dask, 2 workers
    python benchmarks/sweep_scale.py --candidates 400 --executor local --workers 2

Candidates are (registered kernel, one of its report shapes, device, configuration of its tunables),
drawn without replacement by a seeded shuffle from every kernel x shape x device (the five built-in
hardware models) x the kernel's whole tunable grid, so cheap and expensive kernels mix as in a real
design-space search. Each candidate is built and simulated (``tilesim.tune.evaluate``); one that does
not fit its device is a result too.

Both runs start cold in the same way: the in-process run and the cluster's workers first evaluate the
same few warm-up candidates (imports, the hardware-model and compile caches), which are timed apart,
as is the cluster's start. The sweep itself is then timed on each. The results are checked to be
identical, trial by trial. The load average is recorded before and after each phase, since the ratio
means something only on an otherwise idle machine; beside the wall times it records CPU seconds (the
in-process run's, and each Dask worker's during the sweep), which other processes do not inflate, and
``local_cpu_s / max(worker CPU s)``: the speed-up were each worker given a core of its own.

Writes ``reports/measurements/sweep_scale_<UTC time>.json`` (atomically; ``--out`` to change the
folder) with the times, the ratio ``local_s / cluster_s``, points/s per worker and the loads.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import os
import platform
import random
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import hwmodels  # noqa: E402
from kernels.registry import all_specs  # noqa: E402
from tilesim.errors import TileLangCompatWarning  # noqa: E402
from tilesim.report import io  # noqa: E402
from tilesim.report.main import ALL_DEVICES  # noqa: E402
from tilesim.sweep import make_executor  # noqa: E402
from tilesim.tune import run_trials  # noqa: E402

WARMUP = 8


def candidates(n: int, seed: int = 0) -> list[tuple]:
    """``n + WARMUP`` distinct ``(spec, shape, model, profile, config)`` tasks; the first WARMUP warm up."""
    models = [hwmodels.load(d) for d in ALL_DEVICES]
    pool = []
    for spec in all_specs():
        keys = list(spec.tunables)
        grid = [dict(zip(keys, v)) for v in itertools.product(*(spec.tunables[k] for k in keys))] or [{}]
        for m, shape, cfg in itertools.product(range(len(models)), range(len(spec.shapes)), range(len(grid))):
            pool.append((spec, shape, m, cfg, grid))
    if n + WARMUP > len(pool):
        raise SystemExit(f"only {len(pool)} candidates exist")
    picked = random.Random(seed).sample(pool, n + WARMUP)
    return [(spec, spec.shapes[s], models[m], None, grid[c]) for spec, s, m, c, grid in picked]


def worker_cpu(ex) -> dict | None:
    """CPU seconds each Dask worker process has used so far (None for other executors)."""
    client = getattr(ex, "client", None)
    return client.run(time.process_time) if client is not None else None


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--candidates", type=int, default=10_000)
    ap.add_argument("--executor", default="dask", choices=["dask", "ray", "local"])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--address", default=None, help="use an existing cluster instead of a local one")
    ap.add_argument("--out", default=str(ROOT / "reports" / "measurements"))
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore", TileLangCompatWarning)  # as on the workers (tilesim.sweep)

    tasks = candidates(args.candidates)
    warm, sweep = tasks[:WARMUP], tasks[WARMUP:]
    loads = {"start": load()}

    _, local_warm_s = timed(lambda: run_trials(warm))
    cpu0 = time.process_time()
    here, local_s = timed(lambda: run_trials(sweep))
    local_cpu_s = time.process_time() - cpu0
    loads["after_local"] = load()
    print(f"in process: {len(sweep)} candidates in {local_s:.1f} s ({len(sweep) / local_s:.0f}/s); load {loads}")

    ex, start_s = timed(lambda: make_executor(args.executor, args.workers, args.address))
    try:
        _, cluster_warm_s = timed(lambda: run_trials(warm, ex))
        w0 = worker_cpu(ex)
        there, cluster_s = timed(lambda: run_trials(sweep, ex))
        w1 = worker_cpu(ex)
    finally:
        ex.close()
    loads["after_cluster"] = load()
    identical = here == there
    ratio = local_s / cluster_s
    # CPU seconds, which the other processes on a busy machine do not inflate: the work each worker did,
    # and the speed-up the sweep would show if each worker had a core of its own
    cpu = sorted(w1[k] - w0[k] for k in w1) if w0 and w1 else None
    cpu_bound = local_cpu_s / cpu[-1] if cpu else None
    print(f"{ex.describe()}: {len(sweep)} candidates in {cluster_s:.1f} s ({len(sweep) / cluster_s:.0f}/s, "
          f"{len(sweep) / cluster_s / ex.workers:.0f}/s per worker); start {start_s:.1f} s, warm-up "
          f"{cluster_warm_s:.1f} s; speed-up {ratio:.2f}x; identical results: {identical}; load {loads}")
    if cpu:
        print(f"CPU seconds: in process {local_cpu_s:.1f}, workers {', '.join(f'{c:.1f}' for c in cpu)} "
              f"(speed-up if each worker had a core: {cpu_bound:.2f}x)")

    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    rec = {
        "benchmark": "sweep_scale", "issue": 18, "date_utc": stamp,
        "command": "python benchmarks/sweep_scale.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "candidates": len(sweep), "warmup_candidates": len(warm),
        "failed_to_fit": sum(t.error is not None for t in here),
        "local_s": local_s, "local_cpu_s": local_cpu_s, "local_warmup_s": local_warm_s,
        "executor": ex.describe(), "workers": ex.workers, "cluster_start_s": start_s,
        "cluster_warmup_s": cluster_warm_s, "cluster_s": cluster_s, "speedup": ratio,
        "worker_cpu_s": cpu, "speedup_if_each_worker_had_a_core": cpu_bound,
        "points_per_s_local": len(sweep) / local_s, "points_per_s_cluster": len(sweep) / cluster_s,
        "points_per_s_per_worker": len(sweep) / cluster_s / ex.workers,
        "identical_results": identical, "loadavg_1_5_15": loads,
    }
    path = Path(args.out) / f"sweep_scale_{stamp}.json"
    io.write_json(path, rec)
    print(f"wrote {path}")
    return 0 if identical else 1


if __name__ == "__main__":  # the guard matters: the cluster's worker processes are spawned
    sys.exit(main())
