"""Per-thread (SIMT) launches on the CPU target: the block's threads as loops split at barriers.

Contract
--------
``gen_simt_body(g, launch)`` emits the body of a launch with thread variables. It first rewrites the launch
as the interpreter does (``interp.simt.prepare``: per-thread ``T.alloc_local``/``T.alloc_var`` buffers
become block buffers of shape ``(T, *S)`` indexed by the linear thread first), then splits the statements
into **phases**: a maximal run of element statements (stores, lets, loads, atomics, loops and ifs without a
barrier) becomes ``for _t in range(T)`` with the thread indices computed from ``_t``; ``T.sync_threads()``
ends a phase; tile operations (``T.copy``, ``T.gemm``, ``T.Parallel``, ...) run once per block between
phases; a loop or ``if`` that contains a barrier or a tile operation runs once per block around its phases.

For a race-free program this is the interpreter's lock-step meaning (threads of a block between barriers
touch disjoint shared elements, or only through atomics, which apply in thread order in both). Values a
thread computes (``Let``) live in per-block arrays of length ``T``, so they survive barriers.

Raises ``codegen.Unsupported`` (the program then runs on the interpreter) for: a loop or ``if`` around a
barrier or tile operation whose condition or bounds depend on the thread; a tile operation reading a
per-thread value; named barriers of part of the block; ``break``/``continue`` of a loop outside the phase.
"""

from __future__ import annotations

from ... import dtypes as dt
from ...ir import nodes as N
from ...ir.traverse import walk, walk_stmts
from ..interp import simt as interp_simt
from .codegen import EXPR_RULES, SIMT_BODY, STMT_RULES, Unsupported, _Gen, onchip_dtype
from .codegen_rules import for_header
from .codegen_tiles import _COMBINE, _COMBINE_INT

_BARRIER_OR_TILE = (N.SyncThreads, N.Copy, N.Gemm, N.Reduce, N.Fill, N.Cumsum, N.Parallel)


def _crosses(s) -> bool:
    """Whether ``s`` holds a barrier or a block-level tile operation (it cannot run inside a phase)."""
    for x in walk_stmts((s,)):
        if isinstance(x, N.SyncThreads) or interp_simt._is_block_level(x):
            return True
    return False


def _uses(exprs, uids) -> bool:
    return any(type(x) in (N.Var, N.Load) and (x.uid if type(x) is N.Var else x.buffer.uid) in uids
               for e in exprs for x in walk(e))


class _Simt:
    def __init__(self, g: _Gen, launch: N.Launch):
        self.g = g
        self.p = interp_simt.prepare(launch)
        self.per_thread = set(self.p.thread_uids)  # thread indices, per-thread lets and buffers
        for s in walk_stmts(self.p.body):
            if isinstance(s, N.Alloc) and s.buffer.scope == "local" and s.buffer.shape[:1] == (self.p.nthreads,):
                self.per_thread.add(s.buffer.uid)
        self.alloc_at = len(g.lines)
        self.arrays: list = []

    def body(self, stmts) -> None:
        group: list = []
        for s in stmts:
            if isinstance(s, N.Alloc) or _crosses(s):
                self.phase(group)
                group = []
                self.block_stmt(s)
            else:
                group.append(s)
        self.phase(group)

    def block_stmt(self, s) -> None:
        g = self.g
        if isinstance(s, N.SyncThreads):
            if s.grid:
                raise Unsupported("a grid barrier (T.sync_grid)", s.loc)
            if s.count is not None and s.count != self.p.nthreads:
                raise Unsupported("a named barrier of part of the block", s.loc)
            return
        if isinstance(s, N.Alloc):
            STMT_RULES(s)(g, s)
            return
        if interp_simt._is_block_level(s):
            if self.p.block.get(id(s), (None, ()))[1] or _uses([s], self.per_thread):
                raise Unsupported("a tile operation that reads per-thread values", s.loc)
            STMT_RULES(s)(g, s)
            return
        if isinstance(s, N.For):
            if _uses([s.start, s.stop], self.per_thread):
                raise Unsupported("a loop around a barrier whose bounds depend on the thread", s.loc)
            g.nested(for_header(g, s), s.body, self.body)
        elif isinstance(s, N.While):
            if _uses([s.cond], self.per_thread):
                raise Unsupported("a while loop around a barrier whose condition depends on the thread", s.loc)
            g.nested(f"while {g.expr(s.cond)}:", s.body, self.body)
        elif isinstance(s, N.If):
            if _uses([s.cond], self.per_thread):
                raise Unsupported("an if around a barrier or tile operation that depends on the thread", s.loc)
            g.nested(f"if {g.expr(s.cond)}:", s.then, self.body)
            if s.orelse:
                g.nested("else:", s.orelse, self.body)
        else:
            raise Unsupported(f"{type(s).__name__} around a barrier in per-thread code", s.loc)

    def phase(self, stmts) -> None:
        if not stmts:
            return
        for s in stmts:
            _check_jumps(s)
        g = self.g
        g.emit(f"for _t in range({self.p.nthreads}):")
        g.depth += 1
        g.emit(f"{g.var(self.p.tid)} = np.int64(_t)")
        for v, stride, ext in self.p.coords:
            g.emit(f"{g.var(v)} = np.int64((_t // {stride}) % {ext})")
        for s in stmts:
            for x in walk_stmts((s,)):
                var = x.var if isinstance(x, (N.Let, N.AtomicFetch)) else None
                if var is not None and var.uid not in g.thread_lets:
                    g.thread_lets.add(var.uid)
                    self.arrays.append(var)
                    self.per_thread.add(var.uid)
            STMT_RULES(s)(g, s)
        g.depth -= 1

    def finish(self) -> None:
        """Allocate the per-thread value arrays at the start of the block."""
        lines = [f"        {self.g.canon('v', v.uid)}_ = np.empty({self.p.nthreads}, np.{_value_type(v.dtype)})" for v in self.arrays]
        self.g.lines[self.alloc_at:self.alloc_at] = lines


def _value_type(dtype: str) -> str:
    if dt.is_float(dtype):
        return onchip_dtype(dtype).name
    return "bool_" if dtype == "bool" else "int64"


def _check_jumps(s, depth: int = 0) -> None:
    """``break``/``continue`` must belong to a loop inside the phase (the thread loop is not theirs)."""
    if isinstance(s, (N.Break, N.Continue)) and depth == 0:
        raise Unsupported("break/continue of a loop around a barrier", s.loc)
    inner = depth + 1 if isinstance(s, (N.For, N.While)) else depth
    for name in ("body", "then", "orelse"):
        for c in getattr(s, name, ()) or ():
            _check_jumps(c, inner)


def gen_simt_body(g: _Gen, launch: N.Launch) -> None:
    sim = _Simt(g, launch)
    sim.body(sim.p.body)
    sim.finish()


SIMT_BODY.append(gen_simt_body)


# --------------------------------------------------------------------------- per-thread statements


@STMT_RULES.register(N.AtomicFetch)
def _atomic_fetch(g: _Gen, s: N.AtomicFetch) -> None:
    if s.var.uid not in g.thread_lets:
        raise Unsupported("an atomic returning the previous value outside per-thread code", s.loc)
    idx = [g.expr(i) for i in s.indices]
    d = s.buffer.dtype
    old = g.fresh("o")
    g.emit(f"{old} = {g.load(s.buffer, idx)}")
    val = g.conv(g.expr(s.value), s.value.dtype, d)
    if dt.is_float(d):
        cd = "float64" if d == "float64" else "float32"
        new = g.conv(f"np.{cd}({_COMBINE[s.kind].format(a=old, b=val)})", cd, d)
    else:
        new = g.conv(f"np.int64({_COMBINE_INT[s.kind].format(a=old, b=val)})", "int64", d)
    g.store(s.buffer, idx, new)
    g.emit(f"{g.var(s.var)} = {old}")


__all__ = ["gen_simt_body", "EXPR_RULES"]
