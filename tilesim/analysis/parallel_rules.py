"""Cost rules for element-level code: ``T.Parallel`` bodies and scalar stores.

Contract
--------
* A ``T.Parallel`` of ``E`` elements (or a ``Store`` outside one) becomes one
  :class:`~tilesim.analysis.program.Op` whose work is the per-element cost (an
  :class:`~tilesim.analysis.expr_rules._Acc`) times ``E``; nested ``if``/``for``/``T.Parallel``
  scale it by their taken fraction, trip count or extent.
* Global accesses count every element (TileLang does not guard them) times the taken fraction of
  enclosing ``if``s; the op's kind (``load``/``async``/``store``/``compute``) follows what it reads
  and writes. Statements without an element-level meaning are a ``KernelTypeError``.
* Element-level statements are costed by :data:`~.rule_tables.ELEMENT_RULES` (one rule per class).
* ``_collect_rw`` / ``_expr_loads`` list the buffers a statement list writes and reads
  (:func:`tilesim.ir.traverse.regions` of its stores, lets and conditions).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import KernelTypeError
from ..ir import nodes as N
from ..ir.traverse import loads_in, regions, walk_stmts
from .analyzer import Analyzer
from .banks import conflict_bytes
from .expr_rules import _Acc
from .node_helpers import _core, _root, _scope, _size, guarded_copy, single_stage
from .owner_rules import owner_threads
from .program import GAccess, Op
from .rule_tables import COST_RULES, ELEMENT_RULES


@COST_RULES.register(N.Store)
def _store_stmt(a: Analyzer, s: N.Store):
    # a scalar store outside T.Parallel (a T.alloc_var or a single element)
    if s.buffer.scope == "var":
        a.set_var(s.buffer, s.value)
    acc = _Acc()
    _element_store(a, s, acc)
    per_thread = float(a.threads) if a.launch.thread_vars else 1.0  # per-thread code: every thread stores
    return [_element_op(a, s, acc, per_thread, f"store {s.buffer.name}")]


@COST_RULES.register(N.Parallel)
def _parallel(a: Analyzer, s: N.Parallel):
    E = float(np.prod(s.extents)) if s.extents else 1.0
    # bind the element variables to (small) axes so element-level conditions can be evaluated
    pushed = 0
    big = E > (1 << 16)
    for v, n in zip(s.vars, s.extents):
        ax = a.space.push(n if not big else 1)
        a.env[v.uid] = a.space.axis_array(np.arange(n) if not big else np.zeros(1, dtype=np.int64), ax)
        pushed += 1
    outer = set(a.parallel_vars)
    a.parallel_vars |= {v.uid for v in s.vars}
    a._uniform = {}
    try:
        acc = _Acc()
        _element_body(a, s.body, acc)
        if acc.smem:
            acc.smem += conflict_bytes(a, s)
    finally:
        a.parallel_vars = outer
        a._uniform = {}
        for v in s.vars:
            a.env.pop(v.uid, None)
        for _ in range(pushed):
            a.space.pop()
    names = sorted({_root(b).name for b in acc.loads}) if acc.loads else []
    label = "T.Parallel" + (f" ({', '.join(names)})" if names else "")
    rep = float(a.layouts.loop_rep.get(id(s), 1)) if a.layouts is not None and a.profile.fragment_layout_loop_work \
        else 1.0
    op = _element_op(a, s, acc, E, label, rep)
    if rep > 1:
        op.label += f" [x{rep:g} replicated]"
    owners = owner_threads(a, s)
    if owners and op.kind == "load":
        # the loop runs on `owners` threads (TileLang's replicated index layout): each issues its share of the
        # loads, `owner_load_bytes_in_flight` outstanding at a time, one memory latency per round
        per_owner = float(np.max(op.work.get("global", 0.0))) / owners
        op.load_rounds = max(1.0, float(np.ceil(per_owner / a.profile.owner_load_bytes_in_flight)))
        # the outstanding loads sit in registers, which nvcc allocates for every thread of the block
        a.owner_inflight_bytes = max(a.owner_inflight_bytes, min(per_owner, a.profile.owner_load_bytes_in_flight))
        op.label += f" [{owners} threads]"
    return [op]


def _element_body(a: Analyzer, stmts, acc: _Acc, f: float = 1.0):
    """Add the per-element cost of element-level ``stmts``, times ``f``, to ``acc`` (:data:`ELEMENT_RULES`)."""
    for st in stmts:
        fn = _ELEMENT.get(type(st))
        if fn is None:
            COST_RULES(st)  # a class the analysis does not know at all is an internal error
            raise KernelTypeError(f"{type(st).__name__} inside T.Parallel is not supported by the cost analysis",
                                  st.loc)
        fn(a, st, acc, f)


_ELEMENT = ELEMENT_RULES.rules


@ELEMENT_RULES.register(N.Store)
def _el_store(a: Analyzer, st: N.Store, acc: _Acc, f: float):
    sub = _Acc()
    _element_store(a, st, sub)
    acc.merge(sub.scaled(f) if f != 1.0 else sub)


@COST_RULES.register(N.DeviceAssert)
def _device_assert(a: Analyzer, s: N.DeviceAssert):
    acc = _Acc()
    a.element_cost(s.cond, acc)
    per_thread = float(a.threads) if a.launch.thread_vars else 1.0
    return [_element_op(a, s, acc, per_thread, "T.device_assert")]


@ELEMENT_RULES.register(N.DeviceAssert)
def _el_device_assert(a: Analyzer, st: N.DeviceAssert, acc: _Acc, f: float):
    sub = _Acc()
    a.element_cost(st.cond, sub)
    acc.merge(sub.scaled(f) if f != 1.0 else sub)


@ELEMENT_RULES.register(N.Let)
def _el_let(a: Analyzer, st: N.Let, acc: _Acc, f: float):
    a.lets[st.var.uid] = st.value
    sub = _Acc()
    a.element_cost(st.value, sub)
    acc.merge(sub.scaled(f) if f != 1.0 else sub)


@ELEMENT_RULES.register(N.If)
def _el_if(a: Analyzer, st: N.If, acc: _Acc, f: float):
    frac = a.element_fraction(st.cond)
    sub = _Acc()
    a.element_cost(st.cond, sub)
    acc.merge(sub.scaled(f))
    _element_body(a, st.then, acc, f * frac)
    if st.orelse:
        _element_body(a, st.orelse, acc, f * (1.0 - frac))


@ELEMENT_RULES.register(N.For)
def _el_for(a: Analyzer, st: N.For, acc: _Acc, f: float):
    start, trip = a.trip_of(st)
    tm = float(np.mean(trip)) if isinstance(trip, np.ndarray) else float(trip)
    a.env[st.var.uid] = start if not isinstance(start, np.ndarray) else start
    _element_body(a, st.body, acc, f * tm)
    a.env.pop(st.var.uid, None)


@ELEMENT_RULES.register(N.Atomic)
def _el_atomic(a: Analyzer, st: N.Atomic, acc: _Acc, f: float):
    sub = _Acc()
    if not isinstance(st.value, N.Region):
        a.element_cost(st.value, sub)
    size = _size(st.dst.dtype)
    sc = _scope(st.dst.buffer)
    if sc == "global":
        deps, data = a.block_deps(list(st.dst.starts))
        r = _root(st.dst.buffer)
        sub.gstore[r.uid] = [r, 2.0 * size, deps, data]  # read-modify-write at L2
        sub.loads.add(st.dst.buffer)
    elif sc == "shared":
        sub.smem += 2.0 * size
    sub.add_alu(st.dst.dtype, 2.0)
    acc.merge(sub.scaled(f) if f != 1.0 else sub)


@ELEMENT_RULES.register(N.Break, N.Continue, N.Alloc, N.Event)
def _el_nothing(a: Analyzer, st, acc: _Acc, f: float):
    return


@ELEMENT_RULES.register(N.Parallel)
def _el_parallel(a: Analyzer, st: N.Parallel, acc: _Acc, f: float):
    inner = float(np.prod(st.extents))
    _element_body(a, st.body, acc, f * inner)


def _element_store(a: Analyzer, st: N.Store, acc: _Acc):
    a.element_cost(st.value, acc)
    sc = _scope(st.buffer)
    size = _size(st.buffer.dtype)
    if sc == "global":
        deps, data = a.block_deps(list(st.indices))
        r = _root(st.buffer)
        cur = acc.gstore.get(r.uid)
        if cur:
            cur[1] += size
            cur[2] |= deps
        else:
            acc.gstore[r.uid] = [r, size, deps, data]
    elif sc == "shared":
        acc.smem += size
    if sc == "global":
        acc.loads.add(st.buffer)


def _element_op(a: Analyzer, s, acc: _Acc, E: float, label: str, rep: float = 1.0) -> Op:
    """The op of an element-wise statement over ``E`` points; ``rep``: threads that compute each point (a loop laid
    out after a replicated fragment: its ALU, SFU and shared-memory work is done ``rep`` times, its global traffic
    once)."""
    p = a.profile
    has_load = bool(acc.gload)
    has_store = bool(acc.gstore)
    writes_shared = False
    writes = set()
    reads = set()
    body = getattr(s, "body", (s,)) if not isinstance(s, N.Store) else (s,)
    _collect_rw(body, reads, writes)
    writes_shared = any(_scope(b) == "shared" for b in writes)
    kind = "compute"
    if has_load:
        kind = "load"
        if p.async_copy and not p.cp_async and a.pipelined_depth and writes_shared and not has_store and \
                not single_stage(a) and not guarded_copy(a) and not p.parallel_copies_sync and \
                all(_scope(b) == "shared" for b in writes):
            kind = "async"
    elif has_store:
        kind = "store" if not acc.alu and not acc.sfu else "compute"
    side = "vector"
    op = Op(kind=kind, label=label, node=type(s).__name__, loc=s.loc, side=side,
            reads=frozenset(_root(b).uid for b in reads), writes=frozenset(_root(b).uid for b in writes))
    a.round_trip(op, [b for b in reads if b.scope != "global"])
    for d, n in acc.alu.items():
        op.work[f"vector:{d}"] = op.work.get(f"vector:{d}", 0.0) + n * E * rep
    core = _core(a.hw, p.vector_core or p.matrix_core)
    vunit = next((u for u in core.units if u.kind == "vector"), None)
    for d, n in acc.flops.items():
        key = (vunit.name if vunit else "vector", d)
        op.flops[key] = op.flops.get(key, 0.0) + n * E
    sfu_n = sum(acc.sfu.values())
    if sfu_n:
        op.work["sfu"] = sfu_n * E * rep
        sunit = next((u for u in core.units if u.kind == "sfu"), None)
        op.flops[(sunit.name if sunit else "sfu", "float32")] = sfu_n * E
        op.sfu_funcs = {k: v * E for k, v in acc.sfu.items()}
    if acc.smem:
        op.work["smem"] = acc.smem * E * rep
    gtotal = 0.0
    gload = 0.0
    for buf, per, deps, data in acc.gload.values():
        nb = per * E
        op.gaccess.append(GAccess(buf, nb, False, deps if not data else frozenset(range(3)), data))
        gtotal = gtotal + nb
        gload = gload + nb
        op.xfer["global->" + ("shared" if writes_shared else "registers")] = \
            op.xfer.get("global->" + ("shared" if writes_shared else "registers"), 0.0) + nb
    for buf, per, deps, data in acc.gstore.values():
        nb = per * E
        op.gaccess.append(GAccess(buf, nb, True, deps if not data else frozenset(range(3)), data))
        gtotal = gtotal + nb
        op.xfer["registers->global"] = op.xfer.get("registers->global", 0.0) + nb
    if gtotal:
        op.work["global"] = gtotal
        op.latency = "global" if has_load else ""
        op.gather = bool(has_load and acc.gather and p.gather_index_latency)
        if op.gather and p.serial_gathers and acc.gather_offset:  # one 16-byte chunk (index, data) at a time
            op.gather_rounds = max(1.0, math.ceil(float(np.max(gload)) / max(1, a.threads) / a.vec_bytes - 1e-9))
    if has_load:  # the loop's loads per thread are issued together (unrolled), as in a tile copy
        a.sync_load_bytes = max(a.sync_load_bytes, float(np.max(gload)) / max(1, a.threads))
    if writes_shared and p.sync_per_shared_write:
        op.syncs = 1.0
    if kind == "async":
        a.async_dst |= {_root(b).uid for b in writes}
        a.pipelined_async = True  # kind 'async' needs a pipelined loop
    a.mark_written(op, [b for b in writes if b.scope != "global"])
    return op


#: element-level statements whose reads/writes an element op records (loop bounds are not counted)
_RW_STMTS = frozenset({N.Store, N.Let, N.If, N.AtomicFetch})


def _collect_rw(stmts, reads: set, writes: set):
    for st in walk_stmts(stmts):
        if type(st) in _RW_STMTS:
            r, w = regions(st)
            reads.update(r)
            writes.update(w)


def _expr_loads(e, out: set):
    out.update(x.buffer for x in loads_in(e))
