"""The on-chip footprint of one analysed launch.

Contract
--------
``_footprint(analyzer, launch, body)`` → ``(shared, fragment, local, side)``: bytes per on-chip
buffer by memory class (shared buffers written by async copies in a ``T.Pipelined`` loop are
multiplied by its ``num_stages``) and which core side (``matrix``/``vector``) holds each buffer.
A symbolic on-chip shape is a ``KernelTypeError``. Aliases and global buffers are skipped.
"""

from __future__ import annotations

import numpy as np

from ..errors import KernelTypeError
from ..ir import nodes as N
from .analyzer import Analyzer
from .node_helpers import _root, _scope, _size
from .parallel_rules import _collect_rw


def _footprint(a: Analyzer, launch: N.Launch, body_nodes):
    shared, frag, local, side = {}, {}, {}, {}
    for b in a.buffers.values():
        if b.alias_of is not None or b.scope in ("global",):
            continue
        shape = b.static_shape()
        if shape is None:
            raise KernelTypeError(f"on-chip buffer '{b.name}' has a symbolic shape", b.loc)
        nbytes = float(np.prod(shape)) * _size(b.dtype) if shape else _size(b.dtype)
        sc = _scope(b)
        if sc == "shared":
            mult = 1
            if b.uid in a.async_dst and a.profile.async_copy:
                mult = max(1, _stages_of(launch.body, b.uid))
            shared[b.name] = nbytes * mult
        elif b.scope == "fragment":
            frag[b.name] = nbytes
        else:
            local[b.name] = nbytes
        side[b.name] = "matrix" if (b.uid in a.gemm_operands and sc == "shared") or b.uid in a.gemm_outputs \
            else "vector"
    return shared, frag, local, side


def _stages_of(stmts, uid) -> int:
    """num_stages of the innermost pipelined loop that copies into buffer ``uid``."""
    best = 1
    for s in stmts:
        if isinstance(s, N.For):
            if s.kind == "pipelined" and _writes(s.body, uid):
                best = max(best, int(s.annotation("num_stages", 0) or 0))
            best = max(best, _stages_of(s.body, uid))
        elif isinstance(s, N.If):
            best = max(best, _stages_of(s.then, uid), _stages_of(s.orelse, uid))
        elif isinstance(s, N.While):
            best = max(best, _stages_of(s.body, uid))
    return best


def _writes(stmts, uid) -> bool:
    for s in stmts:
        if isinstance(s, N.Copy) and _root(s.dst.buffer).uid == uid:
            return True
        if isinstance(s, N.Parallel):
            w: set = set()
            _collect_rw(s.body, set(), w)
            if any(_root(b).uid == uid for b in w):
                return True
        for attr in ("body", "then", "orelse"):
            sub = getattr(s, attr, None)
            if isinstance(sub, tuple) and not isinstance(s, N.Parallel) and _writes(sub, uid):
                return True
    return False
