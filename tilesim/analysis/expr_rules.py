"""Element-level cost of expressions: the per-element accumulator and :data:`EXPR_RULES`.

Contract
--------
* :class:`_Acc` is the cost of one element of element-level code (a ``T.Parallel`` body or a
  scalar store): ALU slots and FLOPs by dtype, SFU results by function, shared-memory bytes and
  global bytes per buffer (``[buffer, bytes/elem, block-axis deps, data-dependent]``).
* Each rule ``rule(analyzer, expr, acc)`` adds the cost of one evaluation of ``expr`` (operands
  through ``analyzer.element_cost``, which skips loop-invariant subexpressions) to ``acc``.
  Every expression class of :mod:`tilesim.ir.groups` has a rule here.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..ir import nodes as N
from ..ir.traverse import expr_children
from .node_helpers import _root, _scope, _size
from .profiles import MATH_COST, PRECISE_MATH_COST
from .rule_tables import EXPR_RULES
from .symbolic import free_vars


class _Acc:
    """Per-element cost of element-level code (``T.Parallel`` bodies)."""

    __slots__ = ("alu", "flops", "sfu", "smem", "gload", "gstore", "loads", "gather", "gather_offset")

    def __init__(self):
        self.alu: dict[str, float] = {}
        self.flops: dict[str, float] = {}
        self.sfu: dict[str, float] = {}
        self.smem = 0.0
        self.gload: dict[int, list] = {}  # buffer uid -> [buffer, bytes/elem, deps, data_dep]
        self.gstore: dict[int, list] = {}
        self.loads = set()
        #: a global load's index reads global memory (a gather through a block table or an index list)
        self.gather = False
        #: that index load's own address has a data-dependent offset left after folding the block indices of
        #: extent 1 (paged decode's ``(lo + it * block_N + i) // block_size`` with ``lo = bs * ceildiv(seq_len, splits)``
        #: and more than one split): it differs per thread and cannot be hoisted (profile ``serial_gathers``)
        self.gather_offset = False

    def add_alu(self, dtype, n, flops=0.0):
        key = "float32" if not dt.is_float(dtype) or dtype in dt.FP8 else dtype
        self.alu[key] = self.alu.get(key, 0.0) + n
        if flops:
            self.flops[key] = self.flops.get(key, 0.0) + flops

    def scaled(self, f) -> _Acc:
        out = _Acc()
        out.alu = {k: v * f for k, v in self.alu.items()}
        out.flops = {k: v * f for k, v in self.flops.items()}
        out.sfu = {k: v * f for k, v in self.sfu.items()}
        out.smem = self.smem * f
        out.gload = {k: [v[0], v[1] * f, v[2], v[3]] for k, v in self.gload.items()}
        out.gstore = {k: [v[0], v[1] * f, v[2], v[3]] for k, v in self.gstore.items()}
        out.loads = set(self.loads)
        out.gather = self.gather
        out.gather_offset = self.gather_offset
        return out

    def merge(self, o: _Acc):
        for k, v in o.alu.items():
            self.alu[k] = self.alu.get(k, 0.0) + v
        for k, v in o.flops.items():
            self.flops[k] = self.flops.get(k, 0.0) + v
        for k, v in o.sfu.items():
            self.sfu[k] = self.sfu.get(k, 0.0) + v
        self.smem += o.smem
        for src, dst in ((o.gload, self.gload), (o.gstore, self.gstore)):
            for k, v in src.items():
                if k in dst:
                    dst[k][1] = dst[k][1] + v[1]
                    dst[k][2] = dst[k][2] | v[2]
                    dst[k][3] = dst[k][3] or v[3]
                else:
                    dst[k] = list(v)
        self.loads |= o.loads
        self.gather = self.gather or o.gather
        self.gather_offset = self.gather_offset or o.gather_offset


@EXPR_RULES.register(N.Const, N.Var)
def _e_leaf(a, e, acc):
    return None


def _precise(a, func: str, dtype: str):
    """(SFU ops, ALU slots) of ``func`` on fp32 without fast math (``profile.precise_math``), else None."""
    if a.profile.precise_math and dtype == "float32":
        return PRECISE_MATH_COST.get(func)
    return None


def _is_mul(x) -> bool:
    return type(x) is N.Binary and x.op == "mul" and dt.is_float(x.dtype)


@EXPR_RULES.register(N.Binary)
def _e_binary(a, e, acc: _Acc):
    a.element_cost(e.a, acc)
    a.element_cost(e.b, acc)
    if dt.is_float(e.dtype):
        if e.op in ("add", "sub") and (_is_mul(e.a) or _is_mul(e.b)):
            acc.add_alu(e.dtype, 0.0, flops=1.0)  # fused into the multiply's FMA slot
        elif e.op == "div":
            acc.sfu["rcp"] = acc.sfu.get("rcp", 0.0) + 1.0
            acc.add_alu(e.dtype, _precise(a, "div", e.dtype)[1] if _precise(a, "div", e.dtype) else 2.0,
                        flops=1.0)
        elif e.op == "pow":
            s, n = MATH_COST["pow"]
            acc.sfu["pow"] = acc.sfu.get("pow", 0.0) + s
            acc.add_alu(e.dtype, n, flops=1.0)
        else:
            acc.add_alu(e.dtype, 1.0, flops=1.0)
    else:
        acc.add_alu(e.dtype, 1.0)


@EXPR_RULES.register(N.Compare, N.Logical)
def _e_cmp(a, e, acc: _Acc):
    a.element_cost(e.a, acc)
    a.element_cost(e.b, acc)
    acc.add_alu(getattr(e.a, "dtype", "float32"), 1.0)


@EXPR_RULES.register(N.Unary)
def _e_unary(a, e, acc: _Acc):
    a.element_cost(e.a, acc)
    acc.add_alu(e.dtype, 1.0)


@EXPR_RULES.register(N.Call)
def _e_call(a, e, acc: _Acc):
    for x in e.args:
        a.element_cost(x, acc)
    s, n = _precise(a, e.func, e.dtype) or MATH_COST.get(e.func, (0, 1))
    if s:
        acc.sfu[e.func] = acc.sfu.get(e.func, 0.0) + s
    acc.add_alu(e.dtype, float(n), flops=1.0 if dt.is_float(e.dtype) else 0.0)


@EXPR_RULES.register(N.Select)
def _e_select(a, e, acc: _Acc):
    a.element_cost(e.cond, acc)
    a.element_cost(e.a, acc)
    a.element_cost(e.b, acc)
    acc.add_alu(e.dtype, 1.0)


@EXPR_RULES.register(N.Cast)
def _e_cast(a, e, acc: _Acc):
    a.element_cost(e.value, acc)
    if getattr(e.value, "dtype", e.dtype) != e.dtype:
        acc.add_alu(e.dtype, 1.0)


@EXPR_RULES.register(N.Reinterpret)
def _e_reinterpret(a, e, acc: _Acc):
    a.element_cost(e.value, acc)


@EXPR_RULES.register(N.WarpShuffle)
def _e_warp_shuffle(a, e, acc: _Acc):
    """One ``shfl.sync`` per thread: costed as one instruction of the value's type."""
    a.element_cost(e.value, acc)
    a.element_cost(e.lane, acc)
    acc.add_alu(e.dtype, 1.0)


@EXPR_RULES.register(N.Load)
def _e_load(a, e, acc: _Acc):
    sc = _scope(e.buffer)
    size = _size(e.buffer.dtype)
    if sc == "global":
        deps, data = a.block_deps(list(e.indices))
        if data and not acc.gather:
            idx_loads: list = []
            for ix in e.indices:
                free_vars(ix, a.lets, set(), idx_loads)
            acc.gather = any(_scope(b) == "global" for b in idx_loads)
            if acc.gather:
                unit = {u for u, ax in a.block_axis.items() if a.grid[ax] == 1}
                acc.gather_offset = any(_live_load(x, a.lets, unit)[1] for ld in _global_loads(e.indices, a.lets)
                                        for x in ld.indices)
        r = _root(e.buffer)
        cur = acc.gload.get(r.uid)
        if cur:
            cur[1] += size
            cur[2] |= deps
        else:
            acc.gload[r.uid] = [r, size, deps, data]
        acc.loads.add(e.buffer)
    elif sc == "shared":
        acc.smem += size


def _global_loads(exprs, lets) -> list:
    """The global ``Load`` nodes in ``exprs`` (through ``Let`` definitions)."""
    out, stack, seen = [], list(exprs), set()
    while stack:
        x = stack.pop()
        if isinstance(x, N.Var):
            if x.uid in lets and x.uid not in seen:
                seen.add(x.uid)
                stack.append(lets[x.uid])
            continue
        if isinstance(x, N.Load) and _scope(x.buffer) == "global":
            out.append(x)
            continue
        if isinstance(x, N.Expr):
            stack.extend(c for c in expr_children(x) if c is not None)
    return out


def _live_load(e, lets, zero: set, depth: int = 0) -> tuple[bool, bool]:
    """(``e`` is 0, ``e`` reads a loaded value that a product with 0 does not cancel), block indices in ``zero``
    being 0 (extent 1) — TileLang's simplifier folds them the same way."""
    if depth > 64 or isinstance(e, int | float | bool) or e is None:
        return (e == 0) if isinstance(e, int | float) else False, False
    if isinstance(e, N.Const):
        return e.value == 0, False
    if isinstance(e, N.Var):
        if e.uid in zero:
            return True, False
        if e.uid in lets:
            return _live_load(lets[e.uid], lets, zero, depth + 1)
        return False, False
    if isinstance(e, N.Load):
        return False, True
    if isinstance(e, N.Binary):
        za, la = _live_load(e.a, lets, zero, depth + 1)
        zb, lb = _live_load(e.b, lets, zero, depth + 1)
        if e.op in ("mul", "bitand"):
            return (za or zb), (not (za or zb)) and (la or lb)
        if e.op in ("floordiv", "div", "floormod", "truncmod", "shr", "shl"):
            return za, (not za) and (la or lb)
        return (za and zb), (la or lb)
    kids = [c for c in expr_children(e) if c is not None]
    return False, any(_live_load(c, lets, zero, depth + 1)[1] for c in kids)
