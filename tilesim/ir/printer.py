"""Readable text form of the tile IR (``tilesim ir kernel.py``, ``kernel.get_kernel_source()``).

The text is Python-like and stable: names that repeat get a ``_<n>`` suffix in order of appearance.
One rule per node class in the tables :data:`EXPRS` and :data:`STMTS`; a class without a rule prints
as ``<ClassName>`` (the printer also shows invalid IR, in internal-error details).
"""

from __future__ import annotations

from . import groups as G
from . import nodes as N
from .rules import RuleTable

#: ``rule(printer, expr) -> str``
EXPRS = RuleTable("printer expressions", groups=G.EXPRS)
#: ``rule(printer, stmt, depth)``: appends the statement's lines
STMTS = RuleTable("printer statements", groups=G.STMTS)

_SYM = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "floormod": "%",
        "bitand": "&", "bitor": "|", "bitxor": "^", "shl": "<<", "shr": ">>", "pow": "**",
        "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


class _P:
    def __init__(self):
        self.names: dict[int, str] = {}
        self.used: dict[str, int] = {}
        self.lines: list[str] = []

    def name(self, obj) -> str:
        uid = obj.uid
        if uid not in self.names:
            n = self.used.get(obj.name, 0)
            self.used[obj.name] = n + 1
            self.names[uid] = obj.name if n == 0 else f"{obj.name}_{n}"
        return self.names[uid]

    def dim(self, d):
        return str(d) if isinstance(d, int) else self.e(d)

    def e(self, x) -> str:
        fn = EXPRS.get(type(x))
        return fn(self, x) if fn is not None else f"<{type(x).__name__}>"  # printable even when invalid

    def region(self, r: N.Region) -> str:
        parts = []
        for s, ext in zip(r.starts, r.extents):
            if ext == 1:
                parts.append(self.e(s))
            elif isinstance(s, N.Const) and s.value == 0:
                parts.append(f"0:{self.dim(ext)}")
            else:
                parts.append(f"{self.e(s)}:+{self.dim(ext)}")
        return f"{self.name(r.buffer)}[" + ", ".join(parts) + "]"

    def w(self, depth, text):
        self.lines.append("    " * depth + text)

    def body(self, stmts, depth):
        if not stmts:
            self.w(depth, "pass")
        for s in stmts:
            self.s(s, depth)

    def s(self, s, d):
        fn = STMTS.get(type(s))
        if fn is None:
            self.w(d, f"<{type(s).__name__}>")
        else:
            fn(self, s, d)


# ------------------------------------------------------------------------------------ expressions
@EXPRS.register(N.Const)
def _const(p, x):
    return repr(x.value) if x.dtype in ("int32", "bool", "float32") else f"{x.dtype}({x.value!r})"


@EXPRS.register(N.Var)
def _var(p, x):
    return p.name(x)


@EXPRS.register(N.Binary)
def _binary(p, x):
    if x.op in ("min", "max", "truncmod"):
        return f"{x.op}({p.e(x.a)}, {p.e(x.b)})"
    return f"({p.e(x.a)} {_SYM[x.op]} {p.e(x.b)})"


@EXPRS.register(N.Compare)
def _compare(p, x):
    return f"({p.e(x.a)} {_SYM[x.op]} {p.e(x.b)})"


@EXPRS.register(N.Logical)
def _logical(p, x):
    return f"({p.e(x.a)} {x.op} {p.e(x.b)})"


_UNARY = {"neg": "-", "not": "not ", "bitnot": "~"}


@EXPRS.register(N.Unary)
def _unary(p, x):
    return _UNARY[x.op] + p.e(x.a)


@EXPRS.register(N.Call)
def _call(p, x):
    return f"T.{x.func}(" + ", ".join(p.e(a) for a in x.args) + ")"


@EXPRS.register(N.Select)
def _select(p, x):
    return f"T.if_then_else({p.e(x.cond)}, {p.e(x.a)}, {p.e(x.b)})"


@EXPRS.register(N.Cast)
def _cast(p, x):
    return f"T.cast({p.e(x.value)}, {x.dtype})"


@EXPRS.register(N.WarpShuffle)
def _warp_shuffle(p, x):
    name = {"idx": "shfl_sync"}.get(x.kind, f"shfl_{x.kind}")
    return f"T.{name}({p.e(x.value)}, {p.e(x.lane)}, width={x.width})"


@EXPRS.register(N.Reinterpret)
def _reinterpret(p, x):
    return f"T.reinterpret({p.e(x.value)}, {x.dtype})"


@EXPRS.register(N.Load)
def _load(p, x):
    if x.buffer.scope == "var":
        return p.name(x.buffer)
    return f"{p.name(x.buffer)}[" + ", ".join(p.e(i) for i in x.indices) + "]"


# ------------------------------------------------------------------------------------- statements
@STMTS.register(N.Launch)
def _launch(p, s, d):
    bv = ", ".join(p.name(v) for v in s.block_vars)
    grid = ", ".join(p.e(g) for g in s.grid)
    extra = "".join(f", {k}={v!r}" for k, v in s.annotations)
    p.w(d, f"with T.Kernel({grid}, threads={s.threads if len(s.threads) > 1 else s.threads[0]}{extra}) as ({bv}):")
    for k, v in enumerate(s.thread_vars):
        p.w(d + 1, f"{p.name(v)} = T.get_thread_binding({k})")
    p.body(s.body, d + 1)


@STMTS.register(N.PtrTensor)
def _ptr_tensor(p, s, d):
    b = s.buffer
    shape = "(" + ", ".join(p.dim(x) for x in b.shape) + ("," if len(b.shape) == 1 else "") + ")"
    p.w(d, f"{p.name(b)} = T.make_tensor({p.e(s.addr)}, {shape}, {b.dtype})")


@STMTS.register(N.Alloc)
def _alloc(p, s, d):
    b = s.buffer
    shape = "(" + ", ".join(p.dim(x) for x in b.shape) + ("," if len(b.shape) == 1 else "") + ")"
    if b.alias_of is not None:
        p.w(d, f"{p.name(b)} = T.view({p.name(b.alias_of)}, {shape}, {b.dtype})")
    elif b.scope == "var":
        init = f", {p.e(s.init)}" if s.init is not None else ""
        p.w(d, f"{p.name(b)} = T.alloc_var({b.dtype}{init})")
    else:
        p.w(d, f"{p.name(b)} = T.alloc_{b.scope}({shape}, {b.dtype})")


@STMTS.register(N.Copy)
def _copy(p, s, d):
    p.w(d, f"T.copy({p.region(s.src)}, {p.region(s.dst)})")


@STMTS.register(N.Gemm)
def _gemm(p, s, d):
    flags = "".join([", transpose_A=True" if s.trans_a else "", ", transpose_B=True" if s.trans_b else "",
                     ", clear_accum=True" if s.clear_accum else "", ", use_2cta=True" if s.pair else ""])
    p.w(d, f"T.gemm({p.region(s.a)}, {p.region(s.b)}, {p.region(s.c)}{flags})")


@STMTS.register(N.Reduce)
def _reduce(p, s, d):
    p.w(d, f"T.reduce_{s.kind}({p.region(s.src)}, {p.region(s.dst)}, dim={s.dim}, clear={s.clear})")


@STMTS.register(N.Cumsum)
def _cumsum(p, s, d):
    p.w(d, f"T.cumsum({p.region(s.src)}, {p.region(s.dst)}, dim={s.dim}, reverse={s.reverse})")


@STMTS.register(N.Fill)
def _fill(p, s, d):
    p.w(d, f"T.fill({p.region(s.dst)}, {p.e(s.value)})")


@STMTS.register(N.Atomic)
def _atomic(p, s, d):
    v = p.region(s.value) if isinstance(s.value, N.Region) else p.e(s.value)
    p.w(d, f"T.atomic_{s.kind}({p.region(s.dst)}, {v})")


@STMTS.register(N.AtomicFetch)
def _atomic_fetch(p, s, d):
    dst = f"{p.name(s.buffer)}[" + ", ".join(p.e(i) for i in s.indices) + "]" if s.indices else p.name(s.buffer)
    p.w(d, f"{p.name(s.var)}: {s.var.dtype} = T.atomic_{s.kind}({dst}, {p.e(s.value)}, return_prev=True)")


@STMTS.register(N.SyncThreads)
def _sync_threads(p, s, d):
    if s.grid:
        p.w(d, "T.sync_grid()")
        return
    args = ", ".join(str(a) for a in (s.barrier_id, s.count) if a is not None)
    p.w(d, f"T.sync_threads({args})")


_MBAR_FN = {"arrive": "T.barrier_arrive", "cp_async_arrive": "T.cp_async_barrier_noinc",
            "commit": "T.tcgen05_mma_arrive", "commit_pair": "T.tcgen05_mma_arrive", "wait": "T.barrier_wait"}


@STMTS.register(N.MBarrier)
def _mbarrier(p, s, d):
    if s.op == "init":
        counts = s.counts[0] if len(s.counts) == 1 else list(s.counts)
        p.w(d, f"{p.name(s.buffer)} = T.alloc_barrier({counts})")
        return
    bar = f"{p.name(s.buffer)}[{p.e(s.index)}]"
    extra = f", {p.e(s.parity)}" if s.parity is not None else ""
    if s.cta is not None:
        extra = f", {p.e(s.cta)}"
    if s.op == "commit_pair":
        extra = ", arrive_2cta=True"
    p.w(d, f"{_MBAR_FN.get(s.op, s.op)}({bar}{extra})  # {s.threads} threads")


@STMTS.register(N.ClusterCancel)
def _cluster_cancel(p, s, d):
    p.w(d, f"T.clc_try_cancel_multicast({p.region(s.result)}, {p.name(s.barrier)}[{p.e(s.index)}])")


@STMTS.register(N.PairIssue)
def _pair_issue(p, s, d):
    p.w(d, "# use_2cta=True: in both blocks of the pair, with the issuing block's values")
    p.body(s.body, d)


@STMTS.register(N.WarpSpec)
def _warp_spec(p, s, d):
    p.w(d, f"with T.ws({', '.join(str(g) for g in s.groups)}):  # {s.threads} threads")
    p.body(s.body, d + 1)


_LOOP_FN = {"serial": "T.serial", "pipelined": "T.Pipelined", "unroll": "T.unroll", "vectorized": "T.vectorized"}


@STMTS.register(N.For)
def _for(p, s, d):
    extra = "".join(f", {k}={v!r}" for k, v in s.annotations if v is not None)
    step = f", {s.step}" if s.step != 1 else ""
    p.w(d, f"for {p.name(s.var)} in {_LOOP_FN[s.kind]}({p.e(s.start)}, {p.e(s.stop)}{step}{extra}):")
    p.body(s.body, d + 1)


@STMTS.register(N.Parallel)
def _parallel(p, s, d):
    vs = ", ".join(p.name(v) for v in s.vars)
    p.w(d, f"for {vs} in T.Parallel({', '.join(map(str, s.extents))}):")
    p.body(s.body, d + 1)


@STMTS.register(N.While)
def _while(p, s, d):
    p.w(d, f"while {p.e(s.cond)}:")
    p.body(s.body, d + 1)


@STMTS.register(N.If)
def _if(p, s, d):
    p.w(d, f"if {p.e(s.cond)}:")
    p.body(s.then, d + 1)
    if s.orelse:
        p.w(d, "else:")
        p.body(s.orelse, d + 1)


@STMTS.register(N.DeviceAssert)
def _device_assert(p, s, d):
    p.w(d, f"T.device_assert({p.e(s.cond)}, {s.message!r})")


@STMTS.register(N.Event)
def _event(p, s, d):
    if s.kind == "range_end":
        p.w(d, f"iket.range_pop({s.name!r})")
        return
    fn = "iket.mark" if s.kind == "mark" else "iket.range_push"
    pay = "" if s.payload is None else f", payload=iket.payload({p.e(s.payload)}, dtype={s.payload_dtype!r})"
    p.w(d, f"{fn}({s.name!r}{pay})")


@STMTS.register(N.Break)
def _break(p, s, d):
    p.w(d, "break")


@STMTS.register(N.Continue)
def _continue(p, s, d):
    p.w(d, "continue")


@STMTS.register(N.Let)
def _let(p, s, d):
    p.w(d, f"{p.name(s.var)}: {s.var.dtype} = {p.e(s.value)}")


@STMTS.register(N.Store)
def _store(p, s, d):
    if s.buffer.scope == "var":
        p.w(d, f"{p.name(s.buffer)} = {p.e(s.value)}")
    else:
        p.w(d, f"{p.name(s.buffer)}[" + ", ".join(p.e(i) for i in s.indices) + f"] = {p.e(s.value)}")


def format_ir(pf: N.PrimFunc) -> str:
    p = _P()
    params = []
    for x in pf.params:
        if isinstance(x, N.Buffer):
            shape = ", ".join(p.dim(s) for s in x.shape)
            params.append(f"{p.name(x)}: T.Tensor(({shape}{',' if x.ndim == 1 else ''}), {x.dtype})")
        else:
            params.append(f"{p.name(x)}: {x.dtype}")
    p.w(0, "@T.prim_func")
    p.w(0, f"def {pf.name}({', '.join(params)}):")
    p.body(pf.body, 1)
    return "\n".join(p.lines) + "\n"
