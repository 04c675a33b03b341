"""Chunk scheduling: how a launch's blocks are split into chunks, and running chunks on threads.

Contract
--------
``plan(launch, total, per_block, options)`` returns ``(chunk, workers)``: the launch's ``total`` blocks
run as chunks of ``chunk`` consecutive blocks (the last one may be shorter), at most ``workers`` at a
time. ``per_block`` is the on-chip bytes estimate of one block.

* A launch with a grid barrier (``T.sync_grid``, annotation ``sync_grid``): one chunk of all its blocks,
  one worker, whatever the mode and memory bound — a chunk runs its blocks statement by statement, so
  every block's writes before the barrier are seen by every block after it.
* ``mode="serial"``, a launch that binds a tensor to an address (``T.make_tensor``: the address may differ
  per block, and a chunk's global storage is shared by its blocks), or a launch whose blocks wait for values
  other blocks publish (``T.atomic_load``, annotation ``ordered_blocks``): ``chunk = 1``, ``workers = 1`` —
  blocks run one after another in launch order, so a block sees everything earlier blocks wrote.
* A cluster launch plans in clusters (``unit`` blocks each, kept together): ``mode="serial"`` runs one
  cluster per chunk.
* Otherwise a chunk holds at most ``options.chunk_bytes // per_block`` blocks (the memory bound) and
  about ``TARGET_CHUNK_BYTES`` (cache-sized, yet big enough that NumPy calls, not Python, take the
  time); the grid is split into chunks of nearly equal size.
* Threads (``options.threads``, see :func:`resolve_threads`): a launch that is safe to run
  concurrently (:func:`parallel_safe`) is split into at least ``min(threads, blocks)`` chunks of at
  most ``chunk_bytes // threads`` each, so the chunks in flight stay within ``chunk_bytes``. With
  ``threads=0`` (auto) only launches whose chunks reach ``MIN_THREADED_CHUNK_BYTES`` use threads:
  below that, handing the GIL between threads costs more than running NumPy calls side by side
  gains (on a 2-core VM a 512³ GEMM, 6 MiB of tiles, ran ~20% slower in two threads, a 2048³ one
  ~1.6x faster). An explicit ``threads >= 2`` threads every safe launch.
* Safe to run concurrently: not ``mode="serial"``, not ``races=True`` (the race record is shared by
  the chunks), not ``uninit="check"`` (nor are the global initialised masks; one thread also makes the
  first finding reported the same every run), no atomic operation in the body (concurrent float adds would make results depend on
  timing).

``run_chunks(starts, fn, done, workers)`` calls ``fn(start)`` for every chunk start and
``done(fn's result)`` after each chunk in launch order, on the calling thread. With ``workers > 1``
the calling thread and ``workers - 1`` threads of a shared pool take chunks in launch order, so at
most ``workers`` chunks are in flight. If chunks raise, no further chunk starts, the running ones are
waited for, and the error of the earliest failing chunk in launch order is raised: every chunk before
it has run, as in a sequential run. ``done`` is called for the chunks before the first failure.
Each worker runs in a copy of the caller's ``contextvars`` context, under the caller's
``numpy.errstate``.

Why the results do not depend on threading: chunks are independent (each has its own ``Ctx``,
storage dict and window cache, and writes its own blocks' outputs), every per-block NumPy operation
gives the same bits whatever the chunk size (the stacked ``matmul`` calls the same BLAS kernel per
block), and nothing shared is written except global tensors at the blocks' own elements. A kernel in
which two blocks write one global element without an atomic (a race; ``races=True`` reports it) may
keep either block's value when chunks run concurrently, where a sequential run keeps the later block's.
"""

from __future__ import annotations

import contextvars
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_futures

import numpy as np

from ...ir import nodes as N
from ...ir.traverse import walk_stmts

#: Most worker threads ``threads=0`` (auto) picks.
MAX_AUTO_THREADS = 8
#: Preferred on-chip bytes of one chunk (``per_block`` estimate): big enough that NumPy calls, not
#: Python, take the time; small enough that a chunk's tiles stay in cache.
TARGET_CHUNK_BYTES = 16 * 2**20
#: Smallest chunk that ``threads=0`` (auto) runs on a thread (see the module docstring).
MIN_THREADED_CHUNK_BYTES = 8 * 2**20

_executor_obj: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def usable_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def resolve_threads(threads: int) -> int:
    """``InterpOptions.threads`` → the number of chunks a launch may run at once."""
    if threads == 0:
        return min(MAX_AUTO_THREADS, usable_cpus())
    return threads


def _has_atomic(stmts) -> bool:
    return any(isinstance(s, N.Atomic) for s in walk_stmts(stmts))


def parallel_safe(launch: N.Launch, options) -> bool:
    """Whether the chunks of ``launch`` may run concurrently (see the module docstring)."""
    return (options.mode != "serial" and not options.races and options.uninit != "check"
            and not _has_atomic(launch.body))


def plan(launch: N.Launch, total: int, per_block: int, options, unit: int = 1) -> tuple[int, int]:
    """``(chunk, workers)`` for a launch of ``total`` blocks of ``per_block`` on-chip bytes each; ``chunk`` is
    a multiple of ``unit`` (the blocks of a cluster, which run together)."""
    if unit > 1:
        chunk, workers = plan(launch, total // unit, per_block * unit, options)
        return chunk * unit, workers
    if launch.annotation("sync_grid"):
        return total, 1  # a grid barrier: all blocks in one chunk, statement by statement (lockstep)
    if (options.mode == "serial" or launch.annotation("ordered_blocks")
            or any(type(st) is N.PtrTensor for st in walk_stmts(launch.body))):
        return 1, 1
    cap = max(1, options.chunk_bytes // per_block)  # the memory bound
    chunk = max(1, min(total, cap, TARGET_CHUNK_BYTES // per_block))
    n = -(-total // chunk)
    workers = resolve_threads(options.threads)
    if workers >= 2 and total >= 2:
        tcap = max(1, options.chunk_bytes // workers // per_block)
        if options.threads == 0:  # auto: only chunks big enough to gain from a thread
            want = min(workers, total * per_block // MIN_THREADED_CHUNK_BYTES)
        else:
            want = min(workers, total)
        tn = max(-(-total // min(chunk, tcap)), want)
        tchunk = -(-total // tn)
        tn = -(-total // tchunk)
        if (tn >= 2 and (options.threads != 0 or tchunk * per_block >= MIN_THREADED_CHUNK_BYTES)
                and parallel_safe(launch, options)):
            return tchunk, min(workers, tn)
    return -(-total // n), 1  # n chunks of (nearly) equal size


def _executor() -> ThreadPoolExecutor:
    """The module's thread pool, made on first use (threads are started as chunks need them)."""
    global _executor_obj
    with _executor_lock:
        if _executor_obj is None:
            _executor_obj = ThreadPoolExecutor(max_workers=max(MAX_AUTO_THREADS, usable_cpus()),
                                               thread_name_prefix="tilesim-chunk")
        return _executor_obj


def _forget_executor_after_fork():
    global _executor_obj, _executor_lock
    _executor_obj = None  # the parent's worker threads do not exist in the child
    _executor_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_executor_after_fork)


class _Work:
    """Chunks handed out in launch order to the calling thread and the pool's workers."""

    def __init__(self, starts, fn):
        self.starts = starts
        self.fn = fn
        self.lock = threading.Lock()
        self.next = 0
        self.stop = False
        self.results: list = [None] * len(starts)
        self.finished = [False] * len(starts)
        self.errors: dict[int, BaseException] = {}

    def take(self):
        with self.lock:
            if self.stop or self.next >= len(self.starts):
                return None
            i = self.next
            self.next += 1
            return i

    def run_one(self) -> bool:
        i = self.take()
        if i is None:
            return False
        try:
            r = self.fn(self.starts[i])
        except BaseException as e:  # noqa: BLE001 - handed back to the calling thread
            with self.lock:
                self.errors[i] = e
                self.stop = True
            return False
        self.results[i] = r
        self.finished[i] = True
        return True

    def loop(self):
        while self.run_one():
            pass


def run_chunks(starts, fn, done=None, workers: int = 1):
    """Run ``fn`` on every chunk start; see the module docstring."""
    starts = list(starts)
    if workers <= 1 or len(starts) < 2:
        for s in starts:
            r = fn(s)
            if done is not None:
                done(r)
        return
    work = _Work(starts, fn)
    executor = _executor()
    # NumPy >= 2 keeps errstate in a context variable (copied); NumPy 1.x keeps it per thread
    err, call = np.geterr(), np.geterrcall()

    def worker_loop():
        with np.errstate(call=call, **err):
            work.loop()

    futs = [executor.submit(contextvars.copy_context().run, worker_loop)
            for _ in range(min(workers, len(starts)) - 1)]
    reported = 0
    try:
        while work.run_one():
            while done is not None and reported < len(starts) and work.finished[reported]:
                done(work.results[reported])
                reported += 1
    except BaseException:
        work.stop = True
        wait_futures(futs)
        raise
    wait_futures(futs)
    for f in futs:
        f.result()  # a failure of the worker loop itself (chunk errors are in work.errors)
    for e in work.errors.values():
        if not isinstance(e, Exception):
            raise e  # KeyboardInterrupt and the like come first
    first_error = min(work.errors) if work.errors else len(starts)
    if done is not None:
        for i in range(reported, first_error):
            done(work.results[i])
    if work.errors:
        raise work.errors[first_error]
