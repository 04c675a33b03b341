"""Cost rules for structure: allocations, lets, loops (trip counts), ``while`` and ``if``.

Contract
--------
* ``Alloc``/``Let``/``Break``/``Continue`` cost nothing (they record buffers, let-values and
  ``T.alloc_var`` values); a nested ``T.Kernel`` is a ``KernelTypeError``.
* ``For`` becomes a :class:`~tilesim.analysis.program.Loop` whose ``trip`` is the per-block mean
  trip count; the loop variable is bound to sampled iterations on a new inner axis while its body
  is analysed (``T.Pipelined`` also sets the pipelining depth and stages).
* ``While`` needs a hint (``while:<line>``); ``if`` weights each branch by its taken fraction
  (evaluated over blocks, else the ``if:<line>`` hint, else 1.0 with a note).
"""

from __future__ import annotations

import numpy as np

from ..errors import KernelError, KernelTypeError
from ..ir import nodes as N
from ..ir.queries import deferrable_loop_reduce
from .analyzer import Analyzer
from .node_helpers import _label, _scope
from .program import Loop
from .rule_tables import COST_RULES
from .symbolic import DataDependent, fit, loop_samples
from .tile_rules import reduce_finish


@COST_RULES.register(N.Alloc)
def _alloc(a: Analyzer, s: N.Alloc):
    a.buffers[s.buffer.uid] = s.buffer
    if s.buffer.scope == "var" and s.init is not None:
        a.set_var(s.buffer, s.init)
    return []


@COST_RULES.register(N.PtrTensor)
def _ptr_tensor(a: Analyzer, s: N.PtrTensor):
    a.buffers[s.buffer.uid] = s.buffer  # a global tensor: its accesses are costed as any global tensor's
    return []


@COST_RULES.register(N.Let)
def _let(a: Analyzer, s: N.Let):
    a.lets[s.var.uid] = s.value
    return []


@COST_RULES.register(N.Event)
def _event(a: Analyzer, s: N.Event):
    # an iket event is a timestamp store for an external profiler: not modelled (no work, no traffic)
    return []


@COST_RULES.register(N.Break, N.Continue)
def _break(a: Analyzer, s):
    # The loop's trip count stays the upper bound (early exits are not modelled).
    return []


@COST_RULES.register(N.Launch)
def _nested_launch(a: Analyzer, s):
    raise KernelTypeError("a T.Kernel inside another T.Kernel", s.loc)


def _loop_axis(a: Analyzer, var: N.Var, start, trip, step: int):
    """Bind ``var`` to sampled iterations on a new inner axis (validity: ``j < trip`` per block)."""
    tmax = int(np.max(trip)) if isinstance(trip, np.ndarray) else int(trip)
    j, w = loop_samples(max(tmax, 1))
    a.space.push(len(j))
    jj = a.space.axis_array(j, a.space.ndim - 1)
    valid = jj < (fit(trip, a.space.ndim) if isinstance(trip, np.ndarray) else trip)
    a.space.inner[-1] = (w, valid)
    st = fit(start, a.space.ndim) if isinstance(start, np.ndarray) else start
    a.env[var.uid] = st + jj * step


@COST_RULES.register(N.For)
def _for(a: Analyzer, s: N.For):
    start, trip = a.trip_of(s)
    stages = int(s.annotation("num_stages", 0) or 0) if s.kind == "pipelined" else 0
    trip_mean = a.mean(trip)
    _loop_axis(a, s.var, start, trip, s.step)
    a.loop_stack.append(s)
    prev_stages = a.pipe_stages
    if s.kind == "pipelined":
        a.pipelined_depth += 1
        a.pipe_stages = stages
    deferred = _deferred_in(a, s)
    a.deferred_reduces.update(id(r) for r in deferred)
    try:
        body = a.body(s.body)
    finally:
        if s.kind == "pipelined":
            a.pipelined_depth -= 1
            a.pipe_stages = prev_stages
        a.loop_stack.pop()
        a.space.pop()
        a.env.pop(s.var.uid, None)
    kind = "pipelined" if s.kind == "pipelined" else "serial"
    if kind == "serial" and _unrolled(a, trip, body):
        kind = "unrolled"
    return [Loop(trip=trip_mean, kind=kind, stages=stages, body=body,
                 label=f"{'T.Pipelined' if kind == 'pipelined' else 'for'} {s.var.name}", loc=s.loc)] + \
        [reduce_finish(a, r) for r in deferred]


def _unrolled(a: Analyzer, trip, body) -> bool:
    """A short, static, barrier-free loop the profile's compiler unrolls (``unroll_max_trip``)."""
    lim = a.profile.unroll_max_trip
    if not lim or isinstance(trip, np.ndarray) or not float(trip).is_integer() or not 1 < trip <= lim:
        return False
    return all(not isinstance(n, Loop) and not n.syncs for n in body)


def _deferred_in(a: Analyzer, s: N.For) -> list:
    """Reductions of ``s``'s body whose cross-thread part the profile defers to after the loop."""
    if not a.profile.defer_loop_reductions:
        return []
    return [r for r in s.body if deferrable_loop_reduce(s.body, r)
            and _scope(r.src.buffer) == "reg" and _scope(r.dst.buffer) == "reg"]


@COST_RULES.register(N.While)
def _while(a: Analyzer, s: N.While):
    line = s.loc.line if s.loc else None
    for key in (f"while:{line}", "while"):
        if key in a.hints:
            trip = float(a.hints[key])
            a.notes.append(f"while loop{_label(s.loc)}: {trip:g} iterations (hint)")
            break
    else:
        raise KernelError("the trip count of a while loop depends on run-time data", s.loc,
                          hint=f"pass a hint: hints={{'while:{line}': expected_iterations}}")
    body = a.body(s.body)
    return [Loop(trip=trip, kind="serial", stages=0, body=body, label="while", loc=s.loc)]


def _weighted(nodes, f):
    for n in nodes:
        n.weight = n.weight * f
    return nodes


@COST_RULES.register(N.If)
def _if(a: Analyzer, s: N.If):
    try:
        c = a.ev(s.cond)
        f = a.mean(np.asarray(c, dtype=np.float64)) if isinstance(c, np.ndarray) else (1.0 if c else 0.0)
    except DataDependent:
        key = f"if:{s.loc.line}" if s.loc else "if"
        f = float(a.hints.get(key, 1.0))
        a.notes.append(f"if{_label(s.loc)}: taken fraction {f:g} ({'hint' if key in a.hints else 'assumed'})")
        f_exact = False
    else:
        f_exact = True
    # a branch inside a pipelined loop that is not always taken (or whose fraction is only a hint) guards its copies
    guard = bool(a.pipelined_depth) and not (f_exact and float(np.min(f)) >= 1.0 - 1e-9)
    a.guarded_depth += guard
    try:
        then = _weighted(a.body(s.then), f)
        orelse = _weighted(a.body(s.orelse), 1.0 - f) if s.orelse else []
    finally:
        a.guarded_depth -= guard
    return then + orelse
