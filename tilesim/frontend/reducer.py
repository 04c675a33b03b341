"""``T.alloc_reducer`` / ``T.finalize_reducer``: a fragment every ``T.Parallel`` iteration accumulates into.

Contract
--------
* ``T.alloc_reducer(shape, dtype, op="sum"|"max"|"min", replication=...)`` allocates a shared buffer (its
  elements take atomics from every thread of a parallel loop; TileLang keeps per-thread register replicas,
  an implementation of the same meaning) and records its ``op`` in the launch (``tr.launch["reducers"]``,
  buffer uid -> op).
* In TileLang each thread accumulates into its own replica and ``T.finalize_reducer(r)`` combines the
  replicas, so ``r[i] += v`` in a ``T.Parallel`` over ``(i, j)`` sums **every** ``j``'s contribution. A plain
  store would keep one iteration's value (the element's last writer), so :func:`rewrite_launch` turns, inside
  ``T.Parallel`` bodies, every store ``r[idx] = combine(r[idx], v)`` whose combine is the reducer's op
  (``+`` for sum, ``T.max`` / ``T.min``; either operand order; through casts to ``r``'s dtype) into the
  element atomic ``Atomic(op, r[idx], v)``: all contributions are combined (in an unspecified order, as on a
  GPU). Other stores to a reducer are left as they are.
* ``T.finalize_reducer(r)`` checks ``r`` is a reducer and emits nothing: contributions are combined when made.
"""

from __future__ import annotations

import dataclasses

from .. import dtypes as dt
from ..errors import KernelSyntaxError, KernelTypeError
from ..ir import nodes as N
from ..ir.traverse import map_stmts
from .builders import BUILDERS, builder

_OPS = {"sum": "add", "max": "max", "min": "min"}


@builder("alloc_reducer")
def _b_alloc_reducer(tr, loc, shape, dtype, op="sum", replication=None):
    if op not in _OPS:
        raise KernelTypeError(f"T.alloc_reducer: op must be 'sum', 'max' or 'min', got {op!r}", loc)
    # held in shared memory: its elements are updated by the threads of whole T.Parallel loops (element
    # atomics), which a register fragment laid out over the threads cannot take in the CUDA lowering
    buf = BUILDERS["alloc_shared"](tr, loc, shape, dtype, None)
    tr.launch.setdefault("reducers", {})[buf.uid] = _OPS[op]
    return buf


@builder("finalize_reducer")
def _b_finalize_reducer(tr, loc, reducer):
    if not tr.in_launch():
        raise KernelSyntaxError("T.finalize_reducer outside `with T.Kernel(...)`", loc)
    if not isinstance(reducer, N.Buffer) or reducer.uid not in tr.launch.get("reducers", {}):
        raise KernelTypeError("T.finalize_reducer takes a buffer made by T.alloc_reducer", loc)


def _strip(e, dtype):
    while isinstance(e, N.Cast) and (e.dtype == dtype or dt.is_float(e.dtype)):
        e = e.value
    return e


def _accumulated(s: N.Store, op: str):
    """The value ``v`` of ``r[idx] = op(r[idx], v)``, or ``None``."""
    e = _strip(s.value, s.buffer.dtype)
    if not isinstance(e, N.Binary) or e.op != op:
        return None
    for mine, other in ((e.a, e.b), (e.b, e.a)):
        m = _strip(mine, s.buffer.dtype)
        if isinstance(m, N.Load) and m.buffer.uid == s.buffer.uid and m.indices == s.indices:
            return other
    return None


def rewrite_launch(info: dict, body):
    """``body`` with reducer accumulations inside ``T.Parallel`` turned into element atomics."""
    reducers = info.get("reducers")
    if not reducers:
        return body

    def store(s):
        if type(s) is N.Store and s.buffer.uid in reducers:
            v = _accumulated(s, reducers[s.buffer.uid])
            if v is not None:
                kind = reducers[s.buffer.uid]
                dst = N.Region(s.buffer, s.indices, tuple(1 for _ in s.indices), s.loc)
                val = v if v.dtype == s.buffer.dtype else N.Cast(v, s.buffer.dtype, s.loc)
                return N.Atomic(kind, dst, val, s.loc)
        return s

    def par(s):
        if type(s) is N.Parallel:
            return dataclasses.replace(s, body=map_stmts(s.body, store))
        return s

    return map_stmts(tuple(body), par)
