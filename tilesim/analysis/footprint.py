"""The on-chip footprint of one analysed launch.

Contract
--------
``_footprint(analyzer, launch, body)`` → ``(shared, fragment, local, side)``: bytes per on-chip
buffer by memory class (shared buffers written by async copies in a ``T.Pipelined`` loop are
multiplied by its ``num_stages``) and which core side (``matrix``/``vector``) holds each buffer.
A symbolic on-chip shape is a ``KernelTypeError``. Aliases, global buffers and Blackwell tensor memory
(``T.alloc_tmem``: the matrix unit's accumulator storage, beside the registers) are skipped.

``peak_live_bytes(analyzer, launch)`` → the largest number of register-fragment bytes live at the
same time over the block program (the ``"liveness"`` register estimate of a lowering profile). A
fragment is live from the first to the last statement of its statement list that names it (an
``Alloc`` does not count); inside a loop or branch, what is live across it stays live throughout and
the body's own fragments get their intervals there. A ``T.gemm`` into a register accumulator adds its
per-thread operand micro-tile while it runs: a row of A and a column of B (fp32) for two k steps, the
unrolled k loop loading the next step's operands during this step's FMAs.

Profiles with ``register_streaming`` (the ``tensorcore`` profile: nvcc sees fully unrolled fragment
code and schedules by data flow) also model two things the compiler does with element-wise code: a
fragment written by an element-wise statement (``T.Parallel``, ``T.copy``, ``T.fill``) and read only by
the next one (a ``T.Parallel``, ``T.copy`` or ``T.reduce_*``) is a streamed temporary and takes no
registers of its own (``x*x`` feeding a row sum); and in an element-wise statement the fragments read
for the last time and those first written there count as the larger of the two sets, not their sum
(``T.copy(acc_s, acc_s_cast)``, even though both are ``T.gemm`` fragments). Operands and accumulators
of a ``T.gemm`` are never streamed temporaries: the instruction needs them whole. With
``row_stat_layout="mma"`` a row statistic holds ``max(2, 4 · rows / threads)`` values per thread (each
lane owns two rows of a 16-row MMA tile and the warps split the rows), instead of the square layout.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import KernelTypeError
from ..ir import nodes as N
from ..ir.queries import referenced_buffers
from ..ir.traverse import bodies, walk_stmts
from .analyzer import Analyzer
from .node_helpers import _root, _scope, _size
from .parallel_rules import _collect_rw

#: statements whose bodies get their own liveness intervals (a T.Parallel counts as one statement)
_BRANCHING = frozenset({N.For, N.While, N.If})
#: statements that produce and consume fragments element by element (profiles with register streaming)
_ELEMENTWISE = frozenset({N.Parallel, N.Copy, N.Fill})
#: statements that can consume a streamed temporary element by element (a thread-local reduction first)
_CONSUMERS = frozenset({N.Parallel, N.Copy, N.Reduce})


def _footprint(a: Analyzer, launch: N.Launch, body_nodes):
    shared, frag, local, side = {}, {}, {}, {}
    for b in a.buffers.values():
        if b.alias_of is not None or b.scope in ("global", "tmem"):
            continue  # tensor memory is the matrix unit's own accumulator storage, not registers/shared
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


def _not_parallel(s) -> bool:
    return not isinstance(s, N.Parallel)


def _stages_of(stmts, uid) -> int:
    """num_stages of the innermost pipelined loop that copies into buffer ``uid``."""
    best = 1
    for s in walk_stmts(stmts, enter=_not_parallel):
        if isinstance(s, N.For) and s.kind == "pipelined" and _writes(s.body, uid):
            best = max(best, int(s.annotation("num_stages", 0) or 0))
    return best


def _writes(stmts, uid) -> bool:
    for s in walk_stmts(stmts, enter=_not_parallel):
        if isinstance(s, N.Copy) and _root(s.dst.buffer).uid == uid:
            return True
        if isinstance(s, N.Parallel):
            w: set = set()
            _collect_rw(s.body, set(), w)
            if any(_root(b).uid == uid for b in w):
                return True
    return False


def _on_matrix(p, st: N.Gemm) -> bool:
    return p.gemm_unit == "matrix" and (not p.matrix_dtypes or st.a.dtype in p.matrix_dtypes)


def _mma_operand_regs(a: Analyzer, st: N.Gemm) -> float:
    """Registers per thread of two k steps' A and B fragments of an ``mma.sync`` gemm on its warp grid (the next
    step's ``ldmatrix`` results arrive while the current step's HMMAs run)."""
    from ..warp_partition import mma_sync_grid
    shp = [e for e in st.c.tile_shape() if isinstance(e, int)]
    if len(shp) != 2:
        return 0.0
    M, N_ = shp
    wm, wn = mma_sync_grid(M, N_, max(1, a.threads // a.warp_size), a.profile.gemm_policy or st.policy)
    return 2.0 * (4.0 * max(1, M // (16 * wm)) + 2.0 * max(1, N_ // (8 * wn)))


def _cp_async_address_regs(a: Analyzer) -> float:
    """Registers per thread holding the 64-bit global addresses of a thread's ``cp.async`` chunks (one stage of every
    asynchronous copy destination; 16 bytes a chunk), kept live across the main loop (profile ``cp_async``)."""
    if not (a.profile.cp_async and a.profile.async_copy):
        return 0.0
    total = 0.0
    for b in a.buffers.values():
        if b.alias_of is None and b.uid in a.async_dst and b.static_shape():
            total += float(np.prod(b.static_shape())) * _size(b.dtype)
    return 2.0 * math.ceil(total / 16.0 / max(1, a.threads))


def peak_live_bytes(a: Analyzer, launch: N.Launch) -> float:
    """Peak register-fragment bytes of one block (see the module docstring)."""
    sizes = {}
    regs = [b for b in a.buffers.values()
            if b.alias_of is None and b.scope not in ("global", "tmem") and _scope(b) == "reg"
            and b.static_shape() is not None]
    tiles = [b.static_shape() for b in regs if len(b.static_shape()) == 2]
    row_dims = {t[0] for t in tiles} - {t[1] for t in tiles}
    # a row statistic (a 1-D fragment as long as the rows of a 2-D tile, e.g. flash attention's running
    # max) is replicated over the tile's column threads: a thread holds extent / (row thread groups)
    # values, the row groups of a square-ish tile layout
    rows = 1 << int(math.log2(max(1.0, math.sqrt(a.threads))))
    mma_rows = a.profile.row_stat_layout == "mma"
    for b in regs:
        shape = b.static_shape()
        n = float(np.prod(shape)) if shape else 1.0
        if len(shape) == 1 and shape[0] in row_dims:
            if mma_rows:  # each lane owns 2 rows of a 16-row MMA tile; the warps split the rows
                n = max(2, math.ceil(4 * shape[0] / max(1, a.threads))) * a.threads
            else:
                n = math.ceil(shape[0] / min(shape[0], rows)) * a.threads
        if a.layouts is not None and b.uid in a.layouts.slots:  # TileLang's inferred layout (layout_infer)
            n = float(a.layouts.slots[b.uid]) * a.threads
        sizes[b.uid] = n * _size(b.dtype)
    streamed = a.profile.register_streaming
    pinned = set()  # gemm operands and accumulators: the instruction needs the whole fragment at once
    if streamed:
        for st in walk_stmts(list(launch.body)):
            if isinstance(st, N.Gemm):
                pinned |= set(referenced_buffers(st)) & sizes.keys()

    def extra(st) -> float:
        if isinstance(st, N.Gemm) and a.profile.mma_operand_registers and _on_matrix(a.profile, st):
            return a.threads * (_mma_operand_regs(a, st) + _cp_async_address_regs(a)
                                + a.profile.mma_register_overhead_per_thread) * 4.0
        if isinstance(st, N.Gemm) and _scope(st.c.buffer) == "reg" and a.profile.gemm_operands == "fma":
            shp = [e for e in st.c.tile_shape() if isinstance(e, int)] or [1]
            m, n = ([1] + shp)[-2:]
            per_thread = 4.0 * math.sqrt(max(1.0, float(m) * float(n) / max(1, a.threads)))
            return a.threads * per_thread * 4.0
        return 0.0

    def refs(st) -> set:
        if isinstance(st, N.Alloc):
            return set()
        return set(referenced_buffers(st)) & sizes.keys()

    def peak(stmts, carried: frozenset) -> float:
        r = [refs(st) for st in stmts]
        first, last = {}, {}
        for i, us in enumerate(r):
            for u in us - carried:
                first.setdefault(u, i)
                last[u] = i
        size = dict(sizes)
        if streamed:  # a temporary made element-wise and consumed by the next statement never exists whole
            for u in first:
                i = first[u]
                if (last[u] == i + 1 and u not in pinned and type(stmts[i]) in _ELEMENTWISE
                        and type(stmts[i + 1]) in _CONSUMERS):
                    size[u] = 0.0
        best = sum(size[u] for u in carried)
        for i, st in enumerate(stmts):
            live = set(carried) | {u for u in first if first[u] <= i <= last[u]}
            if type(st) in _BRANCHING:  # loops and branches: each body inside what is live across it
                inner = frozenset(u for u in live if u in carried or first[u] < i or last[u] > i)
                val = max(peak(b, inner) for b in bodies(st))
            elif streamed and type(st) in _ELEMENTWISE:
                # element by element, a fragment read here for the last time frees its registers while
                # the fragments first written here fill theirs: the larger of the two sets, not the sum
                dying = {u for u in live if u not in carried and last[u] == i and first[u] < i}
                born = {u for u in live if u not in carried and first[u] == i and last[u] > i}
                rest = live - dying - born
                val = (sum(size[u] for u in rest) + max(sum(size[u] for u in dying), sum(size[u] for u in born))
                       + extra(st))
            else:
                val = sum(size[u] for u in live) + extra(st)
            best = max(best, val)
        return best

    return peak(list(launch.body), frozenset())
