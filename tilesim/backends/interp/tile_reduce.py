"""Interpreter rules of ``T.reduce_*`` and ``T.cumsum``: one NumPy reduction/scan along the tile axis per chunk."""

from __future__ import annotations

import numpy as np

from ... import dtypes as dt
from ...ir import nodes as N
from . import memory, reference
from .exprs import ev
from .state import Ctx
from .tables import STMT_RULES

rule = STMT_RULES.register


def _reduce_fn(kind):
    return reference.REDUCERS[kind]  # the meaning is written once, in reference.py


_combine = reference.combine


@rule(N.Reduce)
def _reduce(s: N.Reduce, ctx: Ctx):
    src = memory.to_compute(memory.read_region(s.src, ctx, ev), s.src.dtype)
    if dt.is_float(s.dst.dtype) and src.dtype != dt.compute_dtype(s.dst.dtype) and s.kind in ("sum", "abssum"):
        src = src.astype(np.promote_types(src.dtype, dt.compute_dtype(s.dst.dtype)))
    r = _reduce_fn(s.kind)(src, axis=1 + s.dim)
    _, dext = memory.region_starts(s.dst, ctx, ev)
    r = r.reshape((r.shape[0],) + dext)
    if not s.clear:
        old = memory.to_compute(memory.read_region(s.dst, ctx, ev), s.dst.dtype)
        r = _combine(s.kind, old, r)
    memory.write_region(s.dst, dt.convert(r, s.dst.dtype), ctx, ev)


@rule(N.Cumsum)
def _cumsum(s: N.Cumsum, ctx: Ctx):
    src = memory.to_compute(memory.read_region(s.src, ctx, ev), s.src.dtype)
    ax = 1 + s.dim
    if s.reverse:
        r = np.flip(np.cumsum(np.flip(src, axis=ax), axis=ax), axis=ax)
    else:
        r = np.cumsum(src, axis=ax)
    memory.write_region(s.dst, dt.convert(r, s.dst.dtype), ctx, ev)
