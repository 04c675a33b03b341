"""One execution seam for sweeps: report points, tuning candidates, validation runs.

Contract
--------
A sweep is a module-level function ``fn`` and a sequence of ``items``; ``executor.run(fn, items)``
returns one :class:`Outcome` per item, **in the order of** ``items`` whatever order the work completed
in: ``Outcome(index, value)`` where ``fn(*item)`` returned, ``Outcome(index, error="Type: message",
traceback=...)`` where it raised (one point's failure never loses the others; a worker that dies fails
only the items it held). ``progress(done, total, what)`` is called as work completes and
``on_result(outcome)`` once per item as soon as its result is back (the report checkpoints with it).
``order`` (a permutation of the item indices) sets the order items are chunked and submitted in, e.g.
to keep items that share a cache entry on one worker; it never changes the order of the results.

Executors (:data:`EXECUTORS`, chosen by name with :func:`make_executor`; every one is a context manager):

* ``local`` (:class:`LocalExecutor`): ``workers=1`` runs the items in this process, one by one, with no
  pickling and no dependency; ``workers=N>1`` uses N local processes (``concurrent.futures``, spawned).
* ``dask`` (:class:`DaskExecutor`, ``pip install -e ".[dask]"``): joins the Dask ``distributed`` cluster
  at ``address`` (``tcp://host:8786``), or starts a local cluster of ``workers`` processes of one thread.
* ``ray`` (:class:`RayExecutor`, ``pip install ray``): joins ``ray.init(address=...)`` or starts a local
  Ray with ``workers`` CPUs.

Items go to workers in chunks (``chunk`` items per task; by default about 8 tasks per worker, at most
64 items each) so that the scheduler's cost per task stays small beside 2-12 ms simulations. A chunk is
pickled here by :func:`pack`: registered kernel specs travel by name (the worker looks them up in its
own ``kernels.registry``), hardware models by value (a user's TOML file need not exist on the worker).
So workers must run the same tilesim, kernels and hwmodels as this process. Off this process, tilesim's
``TileLangCompatWarning`` (lint findings about configurations real TileLang would refuse) is silenced:
a sweep judges fit by the simulator, and thousands of candidates would flood the workers' logs; and a
worker's first task freezes the objects it already holds out of the garbage collector's scans
(:func:`_freeze_once`).
Results are identical to the in-process run: the simulator is deterministic (no dependence on hash
order or on the process), and results are put back in item order.

Errors: an unknown executor name, or an engine that is not installed, raises
:class:`~tilesim.errors.KernelError` with the install command as its hint.

Layer: core-side seam (imports neither ``kernels`` nor ``hwmodels``: a spec is recognised through
``sys.modules``); used by the app layer (``tilesim.tune``, ``tilesim.report``, ``tilesim.sim.validation``,
``tilesim.cli``). Engines are imported only through :mod:`tilesim.optional`.
"""

from __future__ import annotations

import concurrent.futures as cf
import gc
import importlib
import io
import logging
import math
import multiprocessing
import os
import pickle
import sys
import time
import traceback
import types
import warnings
from dataclasses import dataclass

from . import optional
from .errors import KernelError, TileLangCompatWarning

__all__ = ["Outcome", "Executor", "LocalExecutor", "DaskExecutor", "RayExecutor", "EXECUTORS",
           "make_executor", "pack", "unpack", "Progress", "add_executor_arguments", "executor_from_args"]


@dataclass(frozen=True)
class Outcome:
    """What one item of a sweep gave: ``value``, or ``error`` (``"Type: message"``) and its traceback."""

    index: int
    value: object = None
    error: str | None = None
    traceback: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


# --------------------------------------------------------------------------------------------- pickling

def _spec_by_name(name: str):
    return importlib.import_module("kernels.registry").get(name)


def _mappingproxy(d: dict):
    return types.MappingProxyType(d)


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj):
        if type(obj) is types.MappingProxyType:  # hardware models freeze their tables in mappingproxies
            return _mappingproxy, (dict(obj),)
        reg = sys.modules.get("kernels.registry")
        if reg is not None and type(obj) is getattr(reg, "KernelSpec", None):
            try:
                if reg.get(obj.name) is obj:  # a registered spec: the worker's registry has the same one
                    return _spec_by_name, (obj.name,)
            except Exception:  # noqa: BLE001 - not registered: pickled by value below (or refused)
                pass
        return NotImplemented


def pack(obj) -> bytes:
    """``obj`` as bytes a worker can :func:`unpack` (specs by name, hardware models by value)."""
    buf = io.BytesIO()
    _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


def unpack(blob: bytes):
    return pickle.loads(blob)


def _call(fn, index, item) -> Outcome:
    try:
        return Outcome(index, fn(*item))
    except Exception as e:  # noqa: BLE001 - one item's failure is recorded; the sweep goes on
        return Outcome(index, None, f"{type(e).__name__}: {e}", traceback.format_exc(limit=8))


_frozen = False


def _freeze_once() -> None:
    """Move the objects a worker process holds before its first sweep task (the engine's modules and
    state, tilesim's) out of the cyclic garbage collector's sight (``gc.freeze``): the full collections
    that building thousands of kernels triggers then no longer re-scan them. Measured: ~15% less worker
    CPU on a tuning sweep. Frozen objects are still freed when unreferenced; only cycles among them
    would outlive their use, and a collection runs first."""
    global _frozen
    if not _frozen:
        gc.collect()
        gc.freeze()
        _frozen = True


def _run_packed(blob: bytes) -> bytes:
    """A worker's task: unpack ``(fn, [(index, item), ...])``, run each item, pack the outcomes."""
    _freeze_once()
    fn, chunk = unpack(blob)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TileLangCompatWarning)
        return pack([_call(fn, i, item) for i, item in chunk])


# -------------------------------------------------------------------------------------------- executors

class Executor:
    """Base: chunking, progress, error capture and reassembly; engines implement :meth:`_submit`."""

    name = "?"

    def __init__(self, workers: int | None = None, address: str | None = None):
        self.address = address
        self.workers = max(1, int(workers or os.cpu_count() or 1))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        pass

    def describe(self) -> str:
        return f"{self.name} ({self.address or f'{self.workers} local worker(s)'})"

    def _submit(self, blobs: list[bytes]):
        """Yield ``(chunk number, packed outcomes or the exception that lost the chunk)`` as they finish."""
        raise NotImplementedError

    def chunk_size(self, n: int) -> int:
        return max(1, min(64, math.ceil(n / (8 * self.workers))))

    def run(self, fn, items, progress=None, chunk: int | None = None, on_result=None, order=None) -> list[Outcome]:
        indexed = [(i, tuple(it)) for i, it in enumerate(items)]
        if order is not None:  # submission order (e.g. items sharing a cache entry in one chunk); results keep item order
            indexed = [indexed[i] for i in order]
        n = len(indexed)
        size = chunk or self.chunk_size(n)
        chunks = [indexed[s: s + size] for s in range(0, n, size)]
        out: list[Outcome | None] = [None] * n
        done = 0
        if progress:
            progress(0, n, f"{fn.__name__}: {n} item(s) on {self.describe()}")
        for k, res in self._results(fn, chunks):
            if isinstance(res, BaseException):
                msg = f"{type(res).__name__}: {res}"
                res = [Outcome(i, None, f"lost with its worker: {msg}") for i, _ in chunks[k]]
            for o in res:
                out[o.index] = o
                if on_result:
                    on_result(o)
            done += len(res)
            if progress:
                progress(done, n, f"{fn.__name__}: {len([o for o in out if o and not o.ok])} failed so far")
        return out

    def _results(self, fn, chunks):
        blobs = [pack((fn, c)) for c in chunks]
        for k, res in self._submit(blobs):
            yield k, res if isinstance(res, BaseException) else unpack(res)


class LocalExecutor(Executor):
    """In this process (``workers=1``, the default), or on ``workers`` local processes."""

    name = "local"

    def __init__(self, workers: int | None = 1, address: str | None = None):
        if address:
            raise KernelError("--address joins a cluster; the local executor has none",
                              hint="use --executor dask (or ray) with --address")
        super().__init__(workers or 1)
        self._pool = None

    def describe(self) -> str:
        return "this process" if self.workers == 1 else f"{self.workers} local processes"

    def chunk_size(self, n: int) -> int:
        return 1 if self.workers == 1 else super().chunk_size(n)

    def _results(self, fn, chunks):
        if self.workers > 1:
            yield from super()._results(fn, chunks)
            return
        for k, c in enumerate(chunks):  # in process: no pickling, the caller's warning filters
            yield k, [_call(fn, i, item) for i, item in c]

    def _submit(self, blobs):
        if self._pool is None:
            self._pool = cf.ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"))
        futs = {self._pool.submit(_run_packed, b): k for k, b in enumerate(blobs)}
        for f in cf.as_completed(futs):
            yield futs[f], f.exception() or f.result()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None


#: Dask settings of the local clusters tilesim starts (a cluster joined with ``address`` keeps its own)
#: (measured on a 2-core machine: the profiler and the 20-100 ms housekeeping ticks cost the workers ~20% CPU)
LOCAL_DASK_CONFIG = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "500ms",
                     "distributed.worker.memory.monitor-interval": "1s",
                     "distributed.admin.system-monitor.interval": "2s"}


class DaskExecutor(Executor):
    """A Dask ``distributed`` cluster: joined at ``address``, else a local one of ``workers`` processes."""

    name = "dask"
    #: how long joining a cluster at ``address`` may take before it is reported as unreachable
    connect_timeout = "30s"

    def __init__(self, workers: int | None = None, address: str | None = None):
        super().__init__(workers, address)
        self._dist = optional.require("distributed", "--executor dask")
        self._cluster = None
        if address:
            try:
                self.client = self._dist.Client(address, timeout=self.connect_timeout)
            except (OSError, TimeoutError) as e:
                raise KernelError(f"cannot reach a Dask scheduler at {address!r} ({type(e).__name__}: {e})",
                                  hint="start one (`dask scheduler`, then `dask worker ADDRESS --nthreads 1` on "
                                       "each host) or check the address; omit --address for a local cluster") from e
            self.workers = max(1, len(self.client.scheduler_info().get("workers", {})))
        else:
            # the workers' statistical profiler samples the task's stack every 10 ms, and their event loops
            # tick every 20 ms: CPU a sweep can use
            with optional.require("dask.config", "--executor dask").set(LOCAL_DASK_CONFIG):
                self._cluster = self._dist.LocalCluster(n_workers=self.workers, threads_per_worker=1,
                                                        processes=True, dashboard_address=None,
                                                        silence_logs=logging.ERROR)
            self.client = self._dist.Client(self._cluster)

    def _submit(self, blobs):
        futs = [self.client.submit(_run_packed, b, pure=False) for b in blobs]
        index = {f.key: k for k, f in enumerate(futs)}
        for f in self._dist.as_completed(futs):
            try:
                yield index[f.key], f.result()
            except Exception as e:  # noqa: BLE001 - a worker died or the task was lost: fail this chunk only
                yield index[f.key], e

    def close(self) -> None:
        self.client.close()
        if self._cluster is not None:
            self._cluster.close()


class RayExecutor(Executor):
    """A Ray cluster: joined at ``address`` (``"auto"`` or ``ray://host:10001``), else a local Ray."""

    name = "ray"

    def __init__(self, workers: int | None = None, address: str | None = None):
        super().__init__(workers, address)
        self._ray = optional.require("ray", "--executor ray")
        self._owned = not self._ray.is_initialized()
        if self._owned:
            self._ray.init(address=address, num_cpus=None if address else self.workers, include_dashboard=False,
                           log_to_driver=False)
        if address:
            self.workers = max(1, int(self._ray.cluster_resources().get("CPU", 1)))
        self._task = self._ray.remote(num_cpus=1)(_run_packed)

    def _submit(self, blobs):
        refs = {self._task.remote(b): k for k, b in enumerate(blobs)}
        pending = list(refs)
        while pending:
            ready, pending = self._ray.wait(pending, num_returns=1)
            for r in ready:
                try:
                    yield refs[r], self._ray.get(r)
                except Exception as e:  # noqa: BLE001 - a lost worker fails only its chunk
                    yield refs[r], e

    def close(self) -> None:
        if self._owned:
            self._ray.shutdown()


EXECUTORS = {"local": LocalExecutor, "dask": DaskExecutor, "ray": RayExecutor}


def make_executor(name: str = "local", workers: int | None = None, address: str | None = None) -> Executor:
    """The executor called ``name`` (see :data:`EXECUTORS`)."""
    if name not in EXECUTORS:
        raise KernelError(f"unknown executor {name!r}", hint="choose one of: " + ", ".join(EXECUTORS))
    return EXECUTORS[name](workers=workers, address=address)


# ------------------------------------------------------------------------------------ progress and CLI

class Progress:
    """``progress(done, total, what)``: a bar on a terminal, one line per tenth of the work in a log."""

    def __init__(self, stream=None, width=30):
        self.stream, self.width, self.t0 = stream or sys.stderr, width, time.perf_counter()
        self._last = -1

    def __call__(self, i, n, what):
        elapsed = time.perf_counter() - self.t0
        if not self.stream.isatty():
            step = max(1, n // 10)
            if i // step != self._last or i >= n:
                self._last = i // step
                self.stream.write(f"  {i}/{n} ({elapsed:.1f}s) {what}\n")
            return
        fill = int(self.width * i / max(n, 1))
        self.stream.write(f"\r[{'#' * fill}{'.' * (self.width - fill)}] {i}/{n} {elapsed:5.1f}s {what[:60]:<60}")
        if i >= n:
            self.stream.write("\n")
        self.stream.flush()


def add_executor_arguments(parser) -> None:
    """``--executor``, ``--workers`` and ``--address`` on an ``argparse`` sub-parser."""
    parser.add_argument("--executor", default="local", choices=sorted(EXECUTORS),
                        help="where the sweep runs: local (this process, or --workers local processes), "
                             "dask or ray (a local cluster of --workers, or the cluster at --address)")
    parser.add_argument("--workers", type=int, default=None,
                        help="worker processes (local: default 1 = in process; dask/ray: default all cores)")
    parser.add_argument("--address", default=None,
                        help="join an existing cluster (dask: tcp://host:8786; ray: auto or ray://host:10001)")


def executor_from_args(args) -> Executor | None:
    """The executor the parsed arguments ask for; ``None`` for the plain in-process default."""
    name, workers, address = getattr(args, "executor", "local"), getattr(args, "workers", None), \
        getattr(args, "address", None)
    if name == "local" and (workers or 1) == 1 and not address:
        return None
    return make_executor(name, workers, address)
