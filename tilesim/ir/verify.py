"""The IR verifier: invariants every consumer may rely on, checked once and reported as a list.

Rules (one function per node family below):
* every :class:`Var` used is in scope: a parameter or dynamic dim, a block index of the enclosing
  launch, an enclosing loop variable, or a :class:`Let` earlier in an enclosing body;
* every buffer used is a parameter, or allocated (``Alloc``) before use in the program;
* regions have one start and one extent per buffer dimension; on-chip buffers have static shapes;
* binary operands share the node's dtype (comparisons: each other's); stores/fills/casts are typed;
* ``Parallel`` bodies hold no tile operations, launches or pipelined loops; launches are not nested;
* ``Break``/``Continue`` appear only inside a loop.

:func:`verify` returns problems; :func:`verify_or_raise` raises ``KernelSyntaxError`` for scoping
problems a user can cause (a name bound in one branch used after it) and ``InternalError`` otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InternalError, KernelSyntaxError, Loc
from . import groups as G
from . import nodes as N


@dataclass(frozen=True)
class Problem:
    message: str
    loc: Loc | None
    user: bool = False


class _V:
    def __init__(self):
        self.problems: list[Problem] = []
        self.buffers: set[int] = set()
        self.at = None  # location of the statement being checked

    def bad(self, msg, loc, user=False):
        self.problems.append(Problem(msg, loc, user))

    # expressions -------------------------------------------------------------
    def expr(self, e, scope):
        if isinstance(e, N.Const):
            return
        if isinstance(e, N.Var):
            if e.uid not in scope:
                self.bad(f"'{e.name}' is used outside the loop or `if` that defines it", self.at or e.loc, user=True)
            return
        if isinstance(e, N.Binary):
            if e.op not in N.BINARY_OPS:
                self.bad(f"unknown binary op {e.op}", e.loc)
            if not (e.a.dtype == e.b.dtype == e.dtype):
                self.bad(f"binary {e.op} operand dtypes {e.a.dtype}/{e.b.dtype} differ from {e.dtype}", e.loc)
            self.expr(e.a, scope)
            self.expr(e.b, scope)
        elif isinstance(e, (N.Compare, N.Logical)):
            if e.a.dtype != e.b.dtype:
                self.bad(f"{type(e).__name__} operand dtypes differ: {e.a.dtype} vs {e.b.dtype}", e.loc)
            self.expr(e.a, scope)
            self.expr(e.b, scope)
        elif isinstance(e, N.Unary):
            self.expr(e.a, scope)
        elif isinstance(e, N.Call):
            if e.func not in N.MATH_FUNCS:
                self.bad(f"unknown math function {e.func}", e.loc)
            for a in e.args:
                self.expr(a, scope)
        elif isinstance(e, N.Select):
            if e.a.dtype != e.dtype or e.b.dtype != e.dtype or e.cond.dtype != "bool":
                self.bad("select operand dtypes are inconsistent", e.loc)
            for a in (e.cond, e.a, e.b):
                self.expr(a, scope)
        elif isinstance(e, (N.Cast, N.Reinterpret)):
            self.expr(e.value, scope)
        elif isinstance(e, N.Load):
            self.buffer(e.buffer, e.loc)
            if e.buffer.scope != "var" and len(e.indices) != e.buffer.ndim:
                self.bad(f"load of {e.buffer.name} with {len(e.indices)} indices", e.loc)
            for i in e.indices:
                self.expr(i, scope)
        else:
            self.bad(f"unknown expression node {type(e).__name__}", getattr(e, "loc", None))

    def buffer(self, b, loc):
        if b.uid not in self.buffers and (b.alias_of is None or b.alias_of.uid not in self.buffers):
            self.bad(f"buffer {b.name} is used before it is allocated", loc)

    def region(self, r, scope):
        self.buffer(r.buffer, r.loc)
        if len(r.starts) != r.buffer.ndim or len(r.extents) != r.buffer.ndim:
            self.bad(f"region of {r.buffer.name} has the wrong rank", r.loc)
        for s in r.starts:
            self.expr(s, scope)

    # statements --------------------------------------------------------------
    def body(self, stmts, scope, ctx):
        scope = set(scope)
        for s in stmts:
            self.stmt(s, scope, ctx)
            if isinstance(s, N.Let):
                scope.add(s.var.uid)

    def stmt(self, s, scope, ctx):
        t = type(s)
        self.at = getattr(s, "loc", None)
        if t not in G.STMTS:
            self.bad(f"unknown statement node {t.__name__}", getattr(s, "loc", None))
            return
        if ctx.get("parallel") and (t in G.TILE_OPS and not (t is N.Atomic and not isinstance(s.value, N.Region))
                                    or t is N.Launch or (t is N.For and s.kind == "pipelined")):
            self.bad(f"{t.__name__} inside T.Parallel", s.loc, user=True)
        if t is N.Launch:
            if ctx.get("launch"):
                self.bad("nested launch", s.loc)
            for g in s.grid:
                self.expr(g, scope)
            inner = scope | {v.uid for v in s.block_vars}
            self.body(s.body, inner, {**ctx, "launch": True})
        elif t is N.Alloc:
            b = s.buffer
            if b.scope != "global" and b.static_shape() is None:
                self.bad(f"on-chip buffer {b.name} has a non-constant shape", s.loc)
            if b.alias_of is not None and b.alias_of.uid not in self.buffers:
                self.bad(f"view of {b.alias_of.name} before it is allocated", s.loc)
            self.buffers.add(b.uid)
            if s.init is not None:
                self.expr(s.init, scope)
        elif t is N.Copy:
            self.region(s.src, scope)
            self.region(s.dst, scope)
        elif t is N.Gemm:
            for r in (s.a, s.b, s.c):
                self.region(r, scope)
        elif t in (N.Reduce, N.Cumsum):
            self.region(s.src, scope)
            self.region(s.dst, scope)
        elif t is N.Fill:
            self.region(s.dst, scope)
            self.expr(s.value, scope)
            if s.value.dtype != s.dst.dtype:
                self.bad("fill value dtype differs from the buffer's", s.loc)
        elif t is N.Atomic:
            self.region(s.dst, scope)
            if isinstance(s.value, N.Region):
                self.region(s.value, scope)
            else:
                self.expr(s.value, scope)
        elif t is N.For:
            self.expr(s.start, scope)
            self.expr(s.stop, scope)
            self.body(s.body, scope | {s.var.uid}, {**ctx, "loop": True})
        elif t is N.Parallel:
            self.body(s.body, scope | {v.uid for v in s.vars}, {**ctx, "parallel": True})
        elif t is N.While:
            self.expr(s.cond, scope)
            self.body(s.body, scope, {**ctx, "loop": True})
        elif t is N.If:
            self.expr(s.cond, scope)
            self.body(s.then, scope, ctx)
            self.body(s.orelse, scope, ctx)
        elif t in (N.Break, N.Continue):
            if not ctx.get("loop"):
                self.bad(f"{t.__name__.lower()} outside a loop", s.loc)
        elif t is N.Let:
            self.expr(s.value, scope)
            if s.var.dtype != s.value.dtype:
                self.bad("let variable dtype differs from its value", s.loc)
        elif t is N.Store:
            self.buffer(s.buffer, s.loc)
            if s.buffer.scope != "var" and len(s.indices) != s.buffer.ndim:
                self.bad(f"store to {s.buffer.name} with {len(s.indices)} indices", s.loc)
            for i in s.indices:
                self.expr(i, scope)
            self.expr(s.value, scope)
            if s.value.dtype != s.buffer.dtype:
                self.bad(f"store of {s.value.dtype} into {s.buffer.dtype} buffer {s.buffer.name}", s.loc)


def verify(pf: N.PrimFunc) -> list[Problem]:
    v = _V()
    scope = {d.uid for d in pf.dyn_vars}
    for p in pf.params:
        if isinstance(p, N.Buffer):
            v.buffers.add(p.uid)
            for d in p.shape:
                if isinstance(d, N.Var):
                    scope.add(d.uid)
        else:
            scope.add(p.uid)
    v.body(pf.body, scope, {})
    return v.problems


def verify_or_raise(pf: N.PrimFunc) -> None:
    problems = verify(pf)
    if not problems:
        return
    user = [p for p in problems if p.user]
    if user:
        p = user[0]
        hint = "declare it with T.alloc_var (or a fragment) before the loop/if and assign into it" \
            if "outside" in p.message else "T.Parallel bodies hold element-wise statements only"
        raise KernelSyntaxError(p.message, p.loc, hint=hint)
    from .printer import format_ir
    raise InternalError("the frontend produced invalid IR: " + "; ".join(
        f"{p.message} at {p.loc}" for p in problems[:5]), detail=format_ir(pf))
