"""Cost analysis: tile IR + launch shapes + lowering profile → the per-block cost program.

Contract
--------
* :data:`COST_RULES` maps every statement class of :mod:`tilesim.ir.groups` to a rule
  ``rule(analyzer, stmt) -> list[Op | Loop]``; :data:`EXPR_RULES` maps every expression class to a
  rule that adds one element's cost (ALU slots, SFU results, shared/global bytes) to an accumulator.
  A node class without a rule is an ``InternalError`` (``tests/sim`` checks the tables are complete).
* Trip counts, ``if`` conditions and the in-bounds part of every global region are evaluated as NumPy
  arrays over all blocks at once (:mod:`tilesim.analysis.symbolic`); inner loops are sampled. A trip
  count that depends on tensor data is read from the tensors passed in ``tensors`` (by parameter
  name) or taken from ``hints`` (``{"<loop var>": trips}``, ``{"while:<line>": trips}``,
  ``{"if:<line>": taken fraction}``); without either it is a ``KernelError`` that says so.
* Copies with edges count only in-bounds bytes; ``T.Parallel`` global accesses count every element
  (TileLang does not guard them) times the taken fraction of enclosing ``if``s.
* :func:`analyze` returns one :class:`~tilesim.analysis.program.LaunchProgram` per launch, already
  compressed into block classes. A thread-block cluster launch (``T.ClusterKernel``) is refused with a
  located ``KernelTypeError`` (clusters are not modelled).

Layout
------
This module is the driver (:func:`resolve_shapes`, :func:`analyze`) and the import point of the
analysis; importing it registers every rule. The parts live in:

* :mod:`~tilesim.analysis.rule_tables` — the ``COST_RULES``/``EXPR_RULES`` tables and ``rule``;
* :mod:`~tilesim.analysis.node_helpers` — stateless buffer/region/dtype helpers;
* :mod:`~tilesim.analysis.analyzer` — :class:`Analyzer`, the per-launch state and dispatch;
* :mod:`~tilesim.analysis.control_rules` — allocations, lets, loops and trip counts, ``while``, ``if``;
* :mod:`~tilesim.analysis.tile_rules` — copies, gemm, reductions, cumsum, fill, atomics;
* :mod:`~tilesim.analysis.parallel_rules` — ``T.Parallel`` bodies and scalar stores;
* :mod:`~tilesim.analysis.simt_rules` — per-thread code: thread indices, barriers, ``AtomicFetch``;
* :mod:`~tilesim.analysis.expr_rules` — the per-element accumulator and expression rules;
* :mod:`~tilesim.analysis.footprint` — the on-chip footprint of a launch.
"""

from __future__ import annotations

import numpy as np

from ..errors import KernelTypeError
from ..ir import nodes as N

# the rule modules fill COST_RULES / EXPR_RULES when imported
from . import control_rules, expr_rules, parallel_rules, simt_rules, tile_rules, ws_rules  # noqa: F401
from .analyzer import Analyzer
from .footprint import _footprint, peak_live_bytes
from .node_helpers import _size
from .profiles import get_profile
from .program import LaunchProgram, Loop, compress
from .rule_tables import COST_RULES, EXPR_RULES, rule  # noqa: F401  (re-exported)
from .symbolic import DataDependent
from .tile_rules import CP_ASYNC_ISSUE

__all__ = ["COST_RULES", "EXPR_RULES", "analyze", "Analyzer", "resolve_shapes"]


def resolve_shapes(pf: N.PrimFunc, shapes: dict):
    """Split the caller's keyword arguments into dynamic-dimension values, tensors and hints."""
    dims: dict[int, int] = {}
    tensors: dict[int, np.ndarray] = {}
    hints: dict = dict(shapes.pop("hints", None) or {})
    by_name = {d.name: d for d in pf.dyn_vars}
    params = {p.name: p for p in pf.params}
    norm = {p.name.lower().replace("_", ""): p.name for p in pf.params}
    for k, v in hints.items():
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not v >= 0:
            raise KernelTypeError(f"hint '{k}' of {pf.name} must be a number >= 0, got {v!r}", pf.loc,
                                  hint="hints give trip counts of data-dependent loops, e.g. hints={'k': 64}")
    for k, v in list(shapes.items()):
        if k not in params and k not in by_name and k.lower().replace("_", "") in norm:
            k = norm[k.lower().replace("_", "")]
        if k in by_name:
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
                raise KernelTypeError(f"dimension '{k}' of {pf.name} must be a positive integer, got {v!r}", pf.loc)
            dims[by_name[k].uid] = int(v)
        elif k in params and isinstance(params[k], N.Buffer) and (hasattr(v, "shape") or isinstance(v, (list, tuple))):
            arr = np.asarray(v)
            tensors[params[k].uid] = arr
            for want, got in zip(params[k].shape, arr.shape):
                if isinstance(want, N.Var) and want.kind == "dynamic":
                    dims.setdefault(want.uid, int(got))
        elif k in params and isinstance(params[k], N.Var):
            dims[params[k].uid] = v
        else:
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not v >= 0:
                raise KernelTypeError(f"'{k}' is not a dimension, tensor or scalar of {pf.name}, and as a hint it "
                                      f"must be a number >= 0, got {v!r}", pf.loc,
                                      hint="its dimensions and parameters: " + ", ".join([*by_name, *params]))
            hints[k] = v
    missing = [d.name for d in pf.dyn_vars if d.uid not in dims]
    if missing:
        raise KernelTypeError(f"{pf.name} has symbolic dimension(s) {', '.join(missing)} with no value",
                              pf.loc, hint="pass them as keywords, e.g. simulate(..., "
                              + ", ".join(f"{m}=4096" for m in missing) + ")")
    return dims, tensors, hints


def _scale_element_slots(body, factor):
    """Non-gemm ops' vector issue slots times the profile's ``element_slot_factor``."""
    for n in body:
        if isinstance(n, Loop):
            _scale_element_slots(n.body, factor)
        elif not n.label.startswith(("gemm", CP_ASYNC_ISSUE)) and "issue" not in n.work:  # SASS-counted streams
            for k in [k for k in n.work if k.startswith("vector:")]:
                n.work[k] *= factor


def analyze(pf: N.PrimFunc, hw, profile="tensorcore", **shapes) -> list[LaunchProgram]:
    """The per-block cost program of every launch of ``pf`` (see the module docstring).

    Args:
        pf: the program.
        hw: a loaded hardware model (``hwmodels.load``).
        profile: lowering profile name or object.
        **shapes: values of dynamic dimensions by name; tensors by parameter name (for data-dependent
            loops); ``hints={...}`` for data-dependent trip counts and branches.
    """
    prof = get_profile(profile)
    dims, tensors, hints = resolve_shapes(pf, dict(shapes))
    top_lets: dict = {}
    progs = []
    for s in pf.body:
        if isinstance(s, N.Let):
            top_lets[s.var.uid] = s.value
        elif isinstance(s, N.Launch):
            if s.annotation("cluster"):
                raise KernelTypeError(
                    f"a thread-block cluster launch (cluster_dims {tuple(s.annotation('cluster'))}) is not modelled by "
                    "the simulator: its blocks share barriers and shared memory and 2-CTA gemms span two SMs", s.loc,
                    hint="run it on the interpreter; cost the program launched with T.Kernel (one block per tile)")
            a = Analyzer(pf, s, hw, prof, dims, tensors, hints, top_lets)
            simt_rules.bind_threads(a, s)
            body = a.body(s.body)
            if prof.element_slot_factor != 1.0:
                _scale_element_slots(body, prof.element_slot_factor)
            shared, frag, local, side = _footprint(a, s, body)
            gbufs = {}
            for p in pf.params:
                if isinstance(p, N.Buffer):
                    try:
                        n = float(np.prod([a.ev(d) if not isinstance(d, int) else d for d in p.shape]))
                    except DataDependent:
                        n = float("inf")
                    gbufs[p.uid] = (p, n * _size(p.dtype))
            swz = s.annotation("swizzle")
            peak = peak_live_bytes(a, s) if prof.register_estimate == "liveness" else None
            if peak is not None and a.owner_inflight_bytes:  # a replicated-owner loop's loads in flight
                peak = peak + a.owner_inflight_bytes * a.threads
            prog = LaunchProgram(launch=s, grid=a.grid, threads=a.threads, body=body, shared_bytes=shared,
                                 fragment_bytes=frag, local_bytes=local, side_of_buffer=side, swizzle=swz,
                                 has_async_copies=bool(a.async_dst), warp_specialized=a.pipelined_async,
                                 global_buffers=gbufs, notes=a.notes,
                                 register_peak_bytes=peak, sync_load_bytes_per_thread=a.sync_load_bytes)
            progs.append(compress(prog))
    if not progs:
        raise KernelTypeError(f"{pf.name} has no T.Kernel launch to simulate", pf.loc)
    return progs
