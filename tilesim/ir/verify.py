"""The IR verifier: invariants every consumer may rely on, checked once and reported as a list.

Rules (one function per node class in the tables :data:`EXPRS` and :data:`STMTS`):
* every :class:`Var` used is in scope: a parameter or dynamic dim, a block index of the enclosing
  launch, an enclosing loop variable, or a :class:`Let` earlier in an enclosing body;
* every buffer used is a parameter, or allocated (``Alloc``) before use in the program;
* regions have one start and one extent per buffer dimension; on-chip buffers have static shapes;
* binary operands share the node's dtype (comparisons: each other's); stores/fills/casts are typed;
* ``Parallel`` bodies hold no tile operations, launches or pipelined loops; launches are not nested;
* ``Break``/``Continue`` appear only inside a loop;
* per-thread statements: a launch's thread variables are in scope in its body (``kind="thread"``, one per
  ``threads`` dimension at most); ``AtomicFetch`` binds its variable like a ``Let`` and its dtype is the
  buffer's; ``SyncThreads`` appears inside a launch, not inside ``T.Parallel``, with a positive count of
  at most the block's threads;
* warp-specialised code: ``MBarrier("init")`` declares its barrier array (one positive count per barrier)
  before any other operation on it; barrier arrays are never data (loads, stores, regions); ``WarpSpec``
  appears inside a launch, not inside ``T.Parallel`` or another ``WarpSpec``, naming at most the block's
  threads.

:func:`verify` returns problems; :func:`verify_or_raise` raises ``KernelSyntaxError`` for scoping
problems a user can cause (a name bound in one branch used after it) and ``InternalError`` otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InternalError, KernelSyntaxError, Loc
from . import groups as G
from . import nodes as N
from .printer import format_ir
from .rules import RuleTable
from .traverse import expr_children, regions_of

#: ``rule(verifier, expr, scope)``: checks one expression node (and its operands)
EXPRS = RuleTable("verifier expressions", groups=G.EXPRS)
#: ``rule(verifier, stmt, scope, ctx)``: checks one statement (and its bodies)
STMTS = RuleTable("verifier statements", groups=G.STMTS)


@dataclass(frozen=True)
class Problem:
    message: str
    loc: Loc | None
    user: bool = False
    hint: str | None = None


class _V:
    def __init__(self):
        self.problems: list[Problem] = []
        self.buffers: set[int] = set()
        self.at = None  # location of the statement being checked

    def bad(self, msg, loc, user=False, hint=None):
        self.problems.append(Problem(msg, loc, user, hint))

    # expressions -------------------------------------------------------------
    def expr(self, e, scope):
        fn = EXPRS.get(type(e))
        if fn is None:
            self.bad(f"unknown expression node {type(e).__name__}", getattr(e, "loc", None))
        else:
            fn(self, e, scope)

    def buffer(self, b, loc):
        if b.scope == "shared.barrier":
            self.bad(f"the barrier array {b.name} is used as data", loc, user=True,
                     hint="barriers are operands of T.barrier_arrive / T.barrier_wait only")
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
            if isinstance(s, (N.Let, N.AtomicFetch)):
                scope.add(s.var.uid)

    def stmt(self, s, scope, ctx):
        t = type(s)
        self.at = getattr(s, "loc", None)
        fn = STMTS.get(t)
        if fn is None:
            self.bad(f"unknown statement node {t.__name__}", getattr(s, "loc", None))
            return
        if ctx.get("parallel") and (t in G.TILE_OPS and not (t is N.Atomic and not isinstance(s.value, N.Region))
                                    or t is N.Launch or (t is N.For and s.kind == "pipelined")):
            self.bad(f"{t.__name__} inside T.Parallel", s.loc, user=True)
        fn(self, s, scope, ctx)


# ------------------------------------------------------------------------------------ expressions
@EXPRS.register(N.Const)
def _const(v, e, scope):
    return


@EXPRS.register(N.Var)
def _var(v, e, scope):
    if e.uid not in scope:
        v.bad(f"'{e.name}' is used outside the loop or `if` that defines it", v.at or e.loc, user=True)


@EXPRS.register(N.Binary)
def _binary(v, e, scope):
    if e.op not in N.BINARY_OPS:
        v.bad(f"unknown binary op {e.op}", e.loc)
    if not (e.a.dtype == e.b.dtype == e.dtype):
        v.bad(f"binary {e.op} operand dtypes {e.a.dtype}/{e.b.dtype} differ from {e.dtype}", e.loc)
    v.expr(e.a, scope)
    v.expr(e.b, scope)


@EXPRS.register(N.Compare, N.Logical)
def _compare(v, e, scope):
    if e.a.dtype != e.b.dtype:
        v.bad(f"{type(e).__name__} operand dtypes differ: {e.a.dtype} vs {e.b.dtype}", e.loc)
    v.expr(e.a, scope)
    v.expr(e.b, scope)


@EXPRS.register(N.Unary, N.Cast, N.Reinterpret)
def _operands(v, e, scope):
    for a in expr_children(e):
        v.expr(a, scope)


@EXPRS.register(N.Call)
def _call(v, e, scope):
    if e.func not in N.MATH_FUNCS:
        v.bad(f"unknown math function {e.func}", e.loc)
    for a in e.args:
        v.expr(a, scope)


@EXPRS.register(N.Select)
def _select(v, e, scope):
    if e.a.dtype != e.dtype or e.b.dtype != e.dtype or e.cond.dtype != "bool":
        v.bad("select operand dtypes are inconsistent", e.loc)
    for a in (e.cond, e.a, e.b):
        v.expr(a, scope)


@EXPRS.register(N.WarpShuffle)
def _warp_shuffle(v, e, scope):
    if e.kind not in ("idx", "xor", "down", "up"):
        v.bad(f"unknown warp shuffle kind {e.kind!r}", e.loc)
    if e.value.dtype != e.dtype or not isinstance(e.width, int) or not 1 <= e.width <= 32 or e.width & (e.width - 1):
        v.bad("warp shuffle: value dtype differs or width is not a power of two in 1..32", e.loc)
    v.expr(e.value, scope)
    v.expr(e.lane, scope)


@EXPRS.register(N.Load)
def _load(v, e, scope):
    v.buffer(e.buffer, e.loc)
    if e.buffer.scope != "var" and len(e.indices) != e.buffer.ndim:
        v.bad(f"load of {e.buffer.name} with {len(e.indices)} indices", e.loc)
    for i in e.indices:
        v.expr(i, scope)


# ------------------------------------------------------------------------------------- statements
@STMTS.register(N.Launch)
def _launch(v, s, scope, ctx):
    if ctx.get("launch"):
        v.bad("nested launch", s.loc)
    for g in s.grid:
        v.expr(g, scope)
    if len(s.thread_vars) > len(s.threads) or any(t.kind != "thread" for t in s.thread_vars):
        v.bad("launch thread variables do not match its threads", s.loc)
    inner = scope | {b.uid for b in s.block_vars} | {t.uid for t in s.thread_vars}
    v.body(s.body, inner, {**ctx, "launch": True, "threads": s.num_threads})


@STMTS.register(N.Alloc)
def _alloc(v, s, scope, ctx):
    b = s.buffer
    if b.scope != "global" and b.static_shape() is None:
        v.bad(f"on-chip buffer {b.name} has a non-constant shape", s.loc)
    if b.alias_of is not None and b.alias_of.uid not in v.buffers:
        v.bad(f"view of {b.alias_of.name} before it is allocated", s.loc)
    v.buffers.add(b.uid)
    if s.init is not None:
        v.expr(s.init, scope)


@STMTS.register(N.PtrTensor)
def _ptr_tensor(v, s, scope, ctx):
    b = s.buffer
    if b.scope != "global" or b.alias_of is not None:
        v.bad(f"T.make_tensor result {b.name} must be a global buffer of its own", s.loc)
    if s.addr.dtype not in ("int64", "uint64"):
        v.bad(f"T.make_tensor({b.name}): the address is {s.addr.dtype}, not a 64-bit pointer", s.loc)
    v.expr(s.addr, scope)
    v.buffers.add(b.uid)


@STMTS.register(N.Copy, N.Gemm, N.Reduce, N.Cumsum)
def _tile_op(v, s, scope, ctx):
    for r in regions_of(s):
        v.region(r, scope)


@STMTS.register(N.Fill)
def _fill(v, s, scope, ctx):
    v.region(s.dst, scope)
    v.expr(s.value, scope)
    if s.value.dtype != s.dst.dtype:
        v.bad("fill value dtype differs from the buffer's", s.loc)


@STMTS.register(N.Atomic)
def _atomic(v, s, scope, ctx):
    v.region(s.dst, scope)
    if isinstance(s.value, N.Region):
        v.region(s.value, scope)
    else:
        v.expr(s.value, scope)


@STMTS.register(N.For)
def _for(v, s, scope, ctx):
    v.expr(s.start, scope)
    v.expr(s.stop, scope)
    v.body(s.body, scope | {s.var.uid}, {**ctx, "loop": True})


@STMTS.register(N.Parallel)
def _parallel(v, s, scope, ctx):
    v.body(s.body, scope | {x.uid for x in s.vars}, {**ctx, "parallel": True})


@STMTS.register(N.While)
def _while(v, s, scope, ctx):
    v.expr(s.cond, scope)
    v.body(s.body, scope, {**ctx, "loop": True})


@STMTS.register(N.If)
def _if(v, s, scope, ctx):
    v.expr(s.cond, scope)
    v.body(s.then, scope, ctx)
    v.body(s.orelse, scope, ctx)


@STMTS.register(N.DeviceAssert)
def _device_assert(v, s, scope, ctx):
    if s.cond.dtype != "bool":
        v.bad(f"T.device_assert condition of type {s.cond.dtype}", s.loc)
    v.expr(s.cond, scope)


@STMTS.register(N.Event)
def _event(v, s, scope, ctx):
    if s.kind not in ("mark", "range_start", "range_end"):
        v.bad(f"iket event {s.name!r} of unknown kind {s.kind!r}", s.loc)
    if s.payload is None:
        if s.payload_dtype != "NoPayload":
            v.bad(f"iket event {s.name!r} declares payload type {s.payload_dtype} without a payload", s.loc)
        return
    if s.payload_dtype not in ("int32", "uint32", "float32"):
        v.bad(f"iket event {s.name!r}: payload type {s.payload_dtype} is not int32, uint32 or float32", s.loc)
    v.expr(s.payload, scope)


@STMTS.register(N.Break, N.Continue)
def _break(v, s, scope, ctx):
    if not ctx.get("loop"):
        v.bad(f"{type(s).__name__.lower()} outside a loop", s.loc)


@STMTS.register(N.Let)
def _let(v, s, scope, ctx):
    v.expr(s.value, scope)
    if s.var.dtype != s.value.dtype:
        v.bad("let variable dtype differs from its value", s.loc)


@STMTS.register(N.Store)
def _store(v, s, scope, ctx):
    v.buffer(s.buffer, s.loc)
    if s.buffer.scope != "var" and len(s.indices) != s.buffer.ndim:
        v.bad(f"store to {s.buffer.name} with {len(s.indices)} indices", s.loc)
    for i in s.indices:
        v.expr(i, scope)
    v.expr(s.value, scope)
    if s.value.dtype != s.buffer.dtype:
        v.bad(f"store of {s.value.dtype} into {s.buffer.dtype} buffer {s.buffer.name}", s.loc)


@STMTS.register(N.AtomicFetch)
def _atomic_fetch(v, s, scope, ctx):
    v.buffer(s.buffer, s.loc)
    if s.kind not in N.ATOMIC_KINDS:
        v.bad(f"unknown atomic kind {s.kind}", s.loc)
    if s.buffer.scope != "var" and len(s.indices) != s.buffer.ndim:
        v.bad(f"atomic on {s.buffer.name} with {len(s.indices)} indices", s.loc)
    for i in s.indices:
        v.expr(i, scope)
    v.expr(s.value, scope)
    if not (s.value.dtype == s.var.dtype == s.buffer.dtype):
        v.bad(f"atomic of {s.value.dtype} into {s.buffer.dtype} buffer {s.buffer.name} returning {s.var.dtype}",
              s.loc)


@STMTS.register(N.SyncThreads)
def _sync_threads(v, s, scope, ctx):
    what = "T.sync_grid" if s.grid else "T.sync_threads"
    if not ctx.get("launch"):
        v.bad(f"{what} outside a launch", s.loc, user=True)
    elif ctx.get("parallel"):
        v.bad(f"{what} inside T.Parallel", s.loc, user=True)
    elif s.count is not None and not 0 < s.count <= ctx["threads"]:
        v.bad(f"T.sync_threads: {s.count} threads, but the block has {ctx['threads']}", s.loc, user=True)


@STMTS.register(N.MBarrier)
def _mbarrier(v, s, scope, ctx):
    what = f"barrier {s.op} on {s.buffer.name}"
    if s.op not in N.MBARRIER_OPS:
        v.bad(f"unknown barrier operation {s.op}", s.loc)
    if not ctx.get("launch") or ctx.get("parallel"):
        v.bad(f"{what} {'inside T.Parallel' if ctx.get('launch') else 'outside a launch'}", s.loc, user=True)
    if s.buffer.scope != "shared.barrier" or s.buffer.ndim != 1:
        v.bad(f"{what}: not a barrier array", s.loc)
    if s.op == "init":
        if len(s.counts) != s.buffer.shape[0] or not all(isinstance(c, int) and c > 0 for c in s.counts):
            v.bad(f"{what}: arrival counts {s.counts} for {s.buffer.shape[0]} barriers", s.loc)
        v.buffers.add(s.buffer.uid)
        return
    if s.buffer.uid not in v.buffers:
        v.bad(f"barrier {s.buffer.name} is used before it is allocated", s.loc)
    if s.index is None or (s.op == "wait") != (s.parity is not None) or not 0 < s.threads <= ctx.get("threads", 0):
        v.bad(f"{what}: malformed (index {s.index}, parity {s.parity}, threads {s.threads})", s.loc)
    if s.cta is not None and s.op != "arrive":
        v.bad(f"{what}: only an arrival goes to another block of the cluster", s.loc)
    for e in (s.index, s.parity, s.cta):
        if e is not None:
            v.expr(e, scope)


@STMTS.register(N.ClusterCancel)
def _cluster_cancel(v, s, scope, ctx):
    if not ctx.get("launch") or ctx.get("parallel"):
        v.bad("T.clc_try_cancel_multicast outside a launch or inside T.Parallel", s.loc, user=True)
    r = s.result
    if r.buffer.scope not in ("shared", "shared.dyn") or r.buffer.dtype not in ("uint32", "int32") or r.extents[-1] != 4:
        v.bad(f"T.clc_try_cancel_multicast: result {r.buffer.name} is not 4 words of a shared uint32 buffer", s.loc)
    if s.barrier.scope != "shared.barrier" or s.barrier.uid not in v.buffers:
        v.bad(f"T.clc_try_cancel_multicast: {s.barrier.name} is not an allocated barrier array", s.loc)
    v.region(r, scope)
    v.expr(s.index, scope)


@STMTS.register(N.PairIssue)
def _pair_issue(v, s, scope, ctx):
    if not ctx.get("launch") or ctx.get("parallel"):
        v.bad("a 2-CTA (use_2cta=True) instruction outside a launch or inside T.Parallel", s.loc, user=True)
    v.body(s.body, scope, ctx)


@STMTS.register(N.WarpSpec)
def _warp_spec(v, s, scope, ctx):
    if not ctx.get("launch") or ctx.get("parallel") or ctx.get("ws"):
        v.bad("T.ws outside a launch, inside T.Parallel or inside another T.ws", s.loc, user=True)
    if not s.groups or not 0 < s.threads <= ctx.get("threads", 0):
        v.bad(f"T.ws{s.groups}: {s.threads} threads in a block of {ctx.get('threads')}", s.loc)
    v.body(s.body, scope, {**ctx, "ws": True})


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
        raise KernelSyntaxError(p.message, p.loc, hint=p.hint or hint)
    raise InternalError("the frontend produced invalid IR: " + "; ".join(
        f"{p.message} at {p.loc}" for p in problems[:5]), detail=format_ir(pf))
