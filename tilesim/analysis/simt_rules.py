"""Cost rules for per-thread (SIMT) code: thread indices, barriers, atomics that return a value.

Contract (a first model)
------------------------
* In a launch with thread variables (:attr:`~tilesim.ir.nodes.Launch.thread_vars`), :func:`bind_threads`
  binds them to a new inner axis of the analysis space holding a sample of the block's linear thread
  indices (all of them up to 256 threads; else 0..31 and an even spread of 224 more, equal weights),
  so ``if``/loop conditions on the thread index weight their bodies by the fraction of threads taking
  them, and per-thread loop bounds give a mean trip count over threads.
* Every element statement outside ``T.Parallel`` (a store, an element atomic, an ``AtomicFetch``) is
  executed by every thread: its per-element cost times :func:`thread_factor` (the block's threads in a
  per-thread launch, else 1: tile-level code has one logical executor per block). Tile operations and
  ``T.Parallel`` keep their block-level cost.
* ``SyncThreads`` is one op with one barrier (``syncs = 1``, no work): the simulator charges the
  hardware model's barrier time.
* ``AtomicFetch``: a read-modify-write per executing thread — on shared memory 2 element accesses of
  shared bandwidth and 2 ALU operations, on global memory a 2x-size L2 access; conflicts between
  threads on one address (serialisation) are not modelled.
"""

from __future__ import annotations

import numpy as np

from ..ir import nodes as N
from .analyzer import Analyzer
from .expr_rules import _Acc
from .node_helpers import _root, _scope, _size
from .parallel_rules import _element_op
from .rule_tables import COST_RULES, ELEMENT_RULES

_FULL = 256  # up to this many threads, every thread is a sample


def thread_samples(n: int) -> np.ndarray:
    if n <= _FULL:
        return np.arange(n, dtype=np.int64)
    return np.unique(np.r_[np.arange(32), np.linspace(0, n - 1, _FULL - 32).astype(np.int64)])


def bind_threads(a: Analyzer, launch: N.Launch) -> None:
    """Bind the launch's thread variables on a new inner axis (see the module docstring)."""
    if not launch.thread_vars:
        return
    t = thread_samples(launch.num_threads)
    ax = a.space.push(len(t))
    tt = a.space.axis_array(t, ax)
    stride = 1
    for v, ext in zip(launch.thread_vars, launch.threads):
        a.env[v.uid] = (tt // stride) % ext
        stride *= ext


def thread_factor(a: Analyzer) -> float:
    """How many times an element statement outside ``T.Parallel`` runs per block execution."""
    return float(a.threads) if a.launch.thread_vars else 1.0


@COST_RULES.register(N.SyncThreads)
def _sync_threads(a: Analyzer, s: N.SyncThreads):
    op = a.new_op("compute", s, "vector", label="T.sync_grid" if s.grid else
                  "T.sync_threads" + ("" if s.count is None else f"({s.count})"))
    op.syncs = 1.0
    return [op]


def _fetch_cost(a: Analyzer, s: N.AtomicFetch, acc: _Acc):
    a.element_cost(s.value, acc)
    for i in s.indices:
        a.element_cost(i, acc)
    size = _size(s.buffer.dtype)
    sc = _scope(s.buffer)
    if sc == "global":
        deps, data = a.block_deps(list(s.indices))
        r = _root(s.buffer)
        acc.gstore[r.uid] = [r, 2.0 * size, deps, data]  # read-modify-write at L2
        acc.loads.add(s.buffer)
    elif sc == "shared":
        acc.smem += 2.0 * size
    acc.add_alu(s.buffer.dtype, 2.0)


@COST_RULES.register(N.AtomicFetch)
def _atomic_fetch(a: Analyzer, s: N.AtomicFetch):
    acc = _Acc()
    _fetch_cost(a, s, acc)
    a.lets[s.var.uid] = N.Load(s.buffer, s.indices, s.buffer.dtype, s.loc)  # its value is run-time data
    return [_element_op(a, s, acc, thread_factor(a), f"atomic_{s.kind} {s.buffer.name}")]


@ELEMENT_RULES.register(N.AtomicFetch)
def _el_atomic_fetch(a: Analyzer, s: N.AtomicFetch, acc: _Acc, f: float):
    sub = _Acc()
    _fetch_cost(a, s, sub)
    a.lets[s.var.uid] = N.Load(s.buffer, s.indices, s.buffer.dtype, s.loc)
    acc.merge(sub.scaled(f) if f != 1.0 else sub)
