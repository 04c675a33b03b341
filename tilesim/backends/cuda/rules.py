"""IR node → thread-level Python source: the CUDA lowering's rule tables.

``EXPR_RULES[cls](g, e) -> str`` returns a Python expression computing ``e`` in its compute type
(float32 for every float type narrower than 64 bits, float64, int64 for integers, bool).
``STMT_RULES[cls](g, s)`` emits the statements of ``s`` through the kernel generator ``g``
(:class:`tilesim.backends.cuda.lower.KernelGen`). ``EVENT_RULES[cls](g, s)`` lists the shared/global
memory a block-level statement reads and writes (``("R", res)``, ``("W", res)``) and the barriers it
contains (``("SYNC",)``), for the barrier pass. Each is a :class:`tilesim.ir.rules.RuleTable` (a missing
rule is an ``InternalError`` naming the node and its location); ``tests/backends`` checks each table
covers its IR families (``tilesim.ir.groups``).

What maps to what
-----------------
* ``Copy`` → one loop per thread over the iteration domain's layout (a register fragment's own slots,
  or the default coalesced layout of a shared/global tile), each element converted to the
  destination dtype; global reads out of range give 0 and global writes out of range are skipped;
  fragment → fragment copies with different layouts go through shared scratch.
* ``Gemm`` → per-thread register micro-tile over shared operands: for each ``k`` every thread loads
  its rows of ``A`` and columns of ``B`` (converted to the accumulator's type) and does
  ``rows x cols`` fused multiply-adds into its slots of ``C``.
* ``Reduce`` → per-thread partial over its own slots, then warp shuffles (``shfl_xor``) when the
  reduced thread group lies inside a warp, else a shared scratch round; the result lands replicated
  in every thread of the destination's layout.
* ``Fill`` / ``Atomic`` / ``Cumsum`` → thread loops; ``cuda.atomic.add/max/min`` (primary replicas
  only); cumsum runs one thread per line over shared/global memory.
* ``Parallel`` → each thread runs the body for the elements its loop layout gives it.
* ``For`` (all kinds, ``T.Pipelined`` included) → a serial ``range`` loop; ``While``/``If``/``Let``/
  ``Break``/``Continue`` → the Python statement.
"""

from __future__ import annotations

import math

from ... import dtypes as dt
from ...errors import KernelTypeError
from ...ir import groups as G
from ...ir import nodes as N
from ...ir.rules import RuleTable
from ...ir.traverse import expr_children, loads_in, walk_stmts
from . import fast_math as FM
from .layout import Layout, default_layout, full_replicated

EXPR_RULES = RuleTable("CUDA lowering expressions", groups=G.EXPRS)
STMT_RULES = RuleTable("CUDA lowering statements", groups=G.STMTS)
EVENT_RULES = RuleTable("CUDA barrier events", groups=G.STMTS)


# ------------------------------------------------------------------------------------------ dtypes
def ctype(dtype: str) -> str:
    """Compute representation of ``dtype``: 'f32', 'f64', 'int' or 'bool'."""
    if dtype == "bool":
        return "bool"
    if dt.is_float(dtype):
        return "f64" if dtype == "float64" else "f32"
    return "int"


_ROUND = {"float16": "_rnd_f16", "bfloat16": "_rnd_bf16", "float8_e4m3fn": "_rnd_e4m3",
          "float8_e5m2": "_rnd_e5m2", "float4_e2m1fn": "_rnd_e2m1"}
_LOAD_CVT = {"float16": "float32", "bfloat16": "_bf2f", "float8_e4m3fn": "_e4m3_2f",
             "float8_e5m2": "_e5m2_2f", "float4_e2m1fn": "_e2m1_2f"}
_STORE_CVT = {"float16": "float16", "bfloat16": "_f2bf", "float8_e4m3fn": "_f2e4m3",
              "float8_e5m2": "_f2e5m2", "float4_e2m1fn": "_f2e2m1"}


def storage_np(dtype: str) -> str:
    """Name (in the generated namespace) of the NumPy type memory of ``dtype`` is declared with."""
    if dtype in ("bfloat16",):
        return "int16"  # raw bits (torch exports bf16 memory as int16)
    if dtype in ("float8_e4m3fn", "float8_e5m2", "float4_e2m1fn", "bool"):
        return "uint8"
    return dtype


def register_np(dtype: str) -> str:
    """Element type of a register (local) array holding ``dtype`` values."""
    if dtype in dt.NARROW_FLOATS or dtype == "float32":
        return "float32"
    if dtype == "bool":
        return "uint8"
    return dtype


def from_storage(code: str, dtype: str) -> str:
    if dtype in _LOAD_CVT:
        return f"{_LOAD_CVT[dtype]}({code})"
    if dtype == "bool":
        return f"({code} != 0)"
    if dt.is_int(dtype):
        return f"int64({code})"
    return code


def to_storage(code: str, dtype: str) -> str:
    if dtype in _STORE_CVT:
        return f"{_STORE_CVT[dtype]}({code})"
    if dtype == "bool":
        return f"uint8({code})"
    return code


def from_register(code: str, dtype: str) -> str:
    if dtype == "bool":
        return f"({code} != 0)"
    if dt.is_int(dtype):
        return f"int64({code})"
    return code


def to_register(code: str, dtype: str) -> str:
    if dtype == "bool":
        return f"uint8({code})"
    return code


def zero(dtype: str) -> str:
    c = ctype(dtype)
    return {"f32": "float32(0.0)", "f64": "float64(0.0)", "int": "int64(0)", "bool": "False"}[c]


def float_lit(v: float, cd: str) -> str:
    t = "float32" if cd == "f32" else "float64"
    if math.isnan(v):
        return f"{t}(_NAN)"
    if math.isinf(v):
        return f"{t}(_INF)" if v > 0 else f"{t}(-_INF)"
    return f"{t}({float(v)!r})"


def convert(code: str, src: str, dst: str) -> str:
    """Convert a compute-representation value of dtype ``src`` to ``dst`` (compute representation)."""
    if src == dst:
        return code
    cd = ctype(dst)
    if cd in ("f32", "f64"):
        base = "float32" if cd == "f32" else "float64"
        if ctype(src) == cd and (src not in dt.NARROW_FLOATS or dst not in dt.NARROW_FLOATS):
            inner = code
        else:
            inner = f"{base}({code})"
        if dst in _ROUND:
            return f"{_ROUND[dst]}({inner})"
        return inner
    if cd == "bool":
        return f"({code} != 0)"
    # integers: truncate floats toward zero, then wrap to the width
    bits = dt.bits(dst)
    inner = f"int64({code})"
    if bits < 64 and not (ctype(src) == "int" and dt.bits(src) <= bits and dt.is_signed(src) == dt.is_signed(dst)):
        inner = f"int64({dst}({inner}))"
    return inner


# ------------------------------------------------------------------------------------------ expressions
@EXPR_RULES.register(N.Const)
def _const(g, e):
    c = ctype(e.dtype)
    if c in ("f32", "f64"):
        return float_lit(float(e.value), c)
    if c == "bool":
        return "True" if e.value else "False"
    v = int(e.value)
    return f"int64({v})" if v < 0 else f"int64({v})"


@EXPR_RULES.register(N.Var)
def _var(g, e):
    return g.var_ref(e)


_FOPS = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_IOPS = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//", "floormod": "%", "bitand": "&", "bitor": "|",
         "bitxor": "^", "shl": "<<", "shr": ">>"}


def _as(g, e, dtype):
    return convert(g.expr(e), e.dtype, dtype) if ctype(e.dtype) != ctype(dtype) or (
        e.dtype == "float64") != (dtype == "float64") else g.expr(e)


@EXPR_RULES.register(N.Binary)
def _binary(g, e):
    d = e.dtype
    c = ctype(d)
    if c in ("f32", "f64"):
        a, b = _as(g, e.a, d), _as(g, e.b, d)
        sfx = "f32" if c == "f32" else "f64"
        fused = _contracted(g, e) if c == "f32" and e.op in ("add", "sub") else None
        if fused is not None:
            r = fused
        elif e.op in _FOPS:
            r = f"({a} {_FOPS[e.op]} {b})"
        elif e.op == "min":
            r = f"min({a}, {b})"
        elif e.op == "max":
            r = f"max({a}, {b})"
        elif e.op == "pow":
            r = f"_m_pow_{sfx}({a}, {b})"
        elif e.op == "truncmod":
            r = f"_m_fmod_{sfx}({a}, {b})"
        elif e.op == "floordiv":
            r = f"_m_floor_{sfx}({a} / {b})"
        elif e.op == "floormod":
            u = g.hoist(b)
            t = g.hoist(f"_m_fmod_{sfx}({a}, {u})")
            r = f"({t} + {u} if ({t} != 0 and (({t} < 0) != ({u} < 0))) else {t})"
        else:
            raise KernelTypeError(f"operator {e.op} is not defined for {d}", e.loc)
        if d in _ROUND:
            r = f"{_ROUND[d]}({r})"
        return r
    if c == "bool":
        a, b = _as(g, e.a, "bool"), _as(g, e.b, "bool")
        if e.op in ("bitand", "min", "mul"):
            return f"({a} and {b})"
        if e.op in ("bitor", "max", "add"):
            return f"({a} or {b})"
        if e.op == "bitxor":
            return f"({a} != {b})"
        raise KernelTypeError(f"operator {e.op} is not defined for bool", e.loc)
    a, b = _as(g, e.a, "int64"), _as(g, e.b, "int64")
    if e.op in _IOPS:
        return f"({a} {_IOPS[e.op]} {b})"
    if e.op == "min":
        return f"min({a}, {b})"
    if e.op == "max":
        return f"max({a}, {b})"
    if e.op == "div":
        return f"_tdiv({a}, {b})"
    if e.op == "truncmod":
        return f"_tmod({a}, {b})"
    if e.op == "pow":
        return f"({a} ** {b})"
    raise KernelTypeError(f"operator {e.op} is not defined for {d}", e.loc)


def _contracted(g, e):
    """``_ffma(x, y, ±z)`` for a float32 ``x * y ± z`` / ``z + x * y`` while :func:`.fast_math.fma_contract` is on
    (the product float32 itself, no narrower rounding between), else None."""
    if not FM.fma_contract() or e.dtype != "float32":
        return None

    def prod(x):
        return isinstance(x, N.Binary) and x.op == "mul" and x.dtype == "float32"

    if prod(e.a):
        x, y, z, neg = e.a.a, e.a.b, e.b, e.op == "sub"
    elif prod(e.b) and e.op == "add":
        x, y, z, neg = e.b.a, e.b.b, e.a, False
    else:
        return None
    zc = _as(g, z, "float32")
    return f"_ffma({_as(g, x, 'float32')}, {_as(g, y, 'float32')}, {'-' if neg else ''}{zc})"


def _common(a: str, b: str) -> str:
    if "float64" in (a, b):
        return "float64"
    if dt.is_float(a) or dt.is_float(b):
        return "float32"
    if a == "bool" and b == "bool":
        return "bool"
    return "int64"


_CMPS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


@EXPR_RULES.register(N.Compare)
def _compare(g, e):
    from .affine_mask import compare_form

    f = compare_form(g, e)  # a strength-reduced affine comparison of a T.Parallel loop (affine_mask.py)
    if f is not None:
        return f
    t = _common(e.a.dtype, e.b.dtype)
    return f"({_as(g, e.a, t)} {_CMPS[e.op]} {_as(g, e.b, t)})"


@EXPR_RULES.register(N.Logical)
def _logical(g, e):
    return f"({_as(g, e.a, 'bool')} {e.op} {_as(g, e.b, 'bool')})"


@EXPR_RULES.register(N.Unary)
def _unary(g, e):
    if e.op == "neg":
        return f"(-{_as(g, e.a, e.dtype)})"
    if e.op == "not":
        return f"(not {_as(g, e.a, 'bool')})"
    return f"(~{_as(g, e.a, 'int64')})"


@EXPR_RULES.register(N.Call)
def _call(g, e):
    d = e.dtype
    f = e.func
    if f == "philox":
        raise KernelTypeError("T.rng_rand / T.rng_rand_float (cuRAND Philox draws) are not supported by the CUDA "
                              "backend", e.loc, hint="run the kernel on the interpreter (target='interp')")
    if f in ("isnan", "isinf", "isfinite"):
        a = e.args[0]
        if not dt.is_float(a.dtype):
            return "False" if f != "isfinite" else "True"
        sfx = "f64" if a.dtype == "float64" else "f32"
        x = g.expr(a)
        if f == "isnan":
            t = g.hoist(x)
            return f"({t} != {t})"
        return f"(_m_{f}_{sfx}({x}) != 0)"
    if not dt.is_float(d):
        if f in ("abs", "fabs"):
            return f"abs({_as(g, e.args[0], 'int64')})"
        if f in ("min", "max"):
            return f"{f}({', '.join(_as(g, a, 'int64') for a in e.args)})"
        if f in ("floor", "ceil", "round", "trunc"):
            return _as(g, e.args[0], "int64")
        raise KernelTypeError(f"T.{f} of an integer is not supported by the CUDA backend", e.loc,
                              hint="cast the argument to a float type first")
    c = ctype(d)
    sfx = "f32" if c == "f32" else "f64"
    args = [_as(g, a, "float64" if c == "f64" else "float32") for a in e.args]
    if f == "sigmoid":
        one = float_lit(1.0, c)
        r = f"({one} / ({one} + _m_exp_{sfx}(-{args[0]})))"
    elif f == "exp2" and sfx == "f32" and FM.fast_exp2():
        r = f"_ex2ftz({args[0]})"  # ex2.approx.ftz.f32 (fast_math.py)
    else:
        r = f"_m_{f}_{sfx}({', '.join(args)})"
    if d in _ROUND:
        r = f"{_ROUND[d]}({r})"
    return r


@EXPR_RULES.register(N.Select)
def _select(g, e):
    return f"({_as(g, e.a, e.dtype)} if {_as(g, e.cond, 'bool')} else {_as(g, e.b, e.dtype)})"


@EXPR_RULES.register(N.Cast)
def _cast(g, e):
    return convert(g.expr(e.value), e.value.dtype, e.dtype)


_BITS_FROM_F32 = {"int32": "_f32_as_i32", "uint32": "_f32_as_i32"}
_F32_FROM_BITS = {"int32": "_i32_as_f32", "uint32": "_i32_as_f32"}


@EXPR_RULES.register(N.Reinterpret)
def _reinterpret(g, e):
    s, d = e.value.dtype, e.dtype
    x = g.expr(e.value)
    if s == d:
        return x
    if s == "float32" and d in _BITS_FROM_F32:
        return f"int64({d}({_BITS_FROM_F32[d]}({x})))"
    if d == "float32" and s in _F32_FROM_BITS:
        return f"{_F32_FROM_BITS[s]}(int32({x}))"
    if s == "float64" and d in ("int64", "uint64"):
        return f"int64(_f64_as_i64({x}))"
    if d == "float64" and s in ("int64", "uint64"):
        return f"_i64_as_f64(int64({x}))"
    if s == "bfloat16" and d in ("int16", "uint16"):
        return f"int64({d}(_f2bf({x})))"
    if d == "bfloat16" and s in ("int16", "uint16"):
        return f"_bf2f(uint16({x}))"
    if s in ("float8_e4m3fn", "float8_e5m2") and d in ("int8", "uint8"):
        return f"int64({d}({_STORE_CVT[s]}({x})))"
    if d in ("float8_e4m3fn", "float8_e5m2") and s in ("int8", "uint8"):
        return f"{_LOAD_CVT[d]}(uint8({x}))"
    if dt.is_int(s) and dt.is_int(d) and dt.bits(s) == dt.bits(d):
        return f"int64({d}({x}))"
    raise KernelTypeError(f"T.reinterpret from {s} to {d} is not supported by the CUDA backend", e.loc)


@EXPR_RULES.register(N.Load)
def _load(g, e):
    return g.load(e.buffer, [g.expr(i) for i in e.indices], e.indices)


# ------------------------------------------------------------------------------------------ statements
def _body(g, stmts):
    n0 = g.nlines()
    g.body(stmts)
    if g.nlines() == n0:
        g.emit("pass")


@STMT_RULES.register(N.Let)
def _let(g, s):
    g.emit(f"{g.bind_let(s.var)} = {g.expr(s.value)}")


@STMT_RULES.register(N.Store)
def _store(g, s):
    g.store(s.buffer, [g.expr(i) for i in s.indices], s.indices, g.expr(s.value), s.value.dtype)


@STMT_RULES.register(N.Alloc)
def _alloc(g, s):
    g.alloc(s)


_PTR_REFUSAL = ("T.make_tensor (a tensor at a raw device address from a T.ptr table) is not lowered by the CUDA "
                "backend: Numba kernels take device arrays, not addresses")


@STMT_RULES.register(N.PtrTensor)
def _ptr_tensor(g, s):
    raise KernelTypeError(_PTR_REFUSAL, s.loc, hint="run it with target='interp', which binds the address")


@STMT_RULES.register(N.If)
def _if(g, s):
    g.emit(f"if {_as(g, s.cond, 'bool')}:")
    with g.indent():
        _body(g, s.then)
    if s.orelse:
        g.emit("else:")
        with g.indent():
            _body(g, s.orelse)


@STMT_RULES.register(N.For)
def _for(g, s):
    if id(s) in g.pipelines:  # a T.Pipelined loop with cp.async copies (pipeline.py)
        g.pipelined_loop(s)
        return
    name = g.bind_loop(s.var)
    g.defer_begin(s)
    g.emit(f"for {name} in range({_as(g, s.start, 'int64')}, {_as(g, s.stop, 'int64')}, {int(s.step)}):")
    with g.indent():
        _body(g, s.body)
    g.defer_end(s)


@STMT_RULES.register(N.While)
def _while(g, s):
    # the condition may need hoisted temporaries: evaluate it at the top of every iteration
    g.emit("while True:")
    with g.indent():
        g.emit(f"if not {_as(g, s.cond, 'bool')}:")
        g.emit("    break")
        _body(g, s.body)


@STMT_RULES.register(N.DeviceAssert)
def _device_assert(g, s):
    g.emit(f"pass  # T.device_assert({s.message!r}): not checked by the CUDA backend (run target='interp' to check)")


@STMT_RULES.register(N.Event)
def _event(g, s):
    g.emit(f"pass  # iket {s.kind} {s.name!r} (event {s.event_id}): no effect on values; not instrumented here")


@STMT_RULES.register(N.Break)
def _break(g, s):
    g.emit("break")


@STMT_RULES.register(N.Continue)
def _continue(g, s):
    g.emit("continue")


@STMT_RULES.register(N.Launch)
def _launch(g, s):
    raise KernelTypeError("a T.Kernel launch nested inside another launch", s.loc,
                          hint="launches are top-level statements of a prim_func")


@STMT_RULES.register(N.Parallel)
def _parallel(g, s):
    if g.par is not None:  # nested T.Parallel inside an element: plain serial loops
        names = [g.bind_loop(v) for v in s.vars]
        for name, ext in zip(names, s.extents):
            g.emit(f"for {name} in range({int(ext)}):")
            g.push_indent()
        _body(g, s.body)
        for _ in names:
            g.pop_indent()
        return
    lay = g.placement.loop_layouts.get(id(s)) or default_layout(s.extents, g.nt)
    g.parallel(s, lay)


@STMT_RULES.register(N.Copy)
def _copy(g, s):
    g.tile_copy(s)


@STMT_RULES.register(N.Gemm)
def _gemm(g, s):
    g.tile_gemm(s)


@STMT_RULES.register(N.Reduce)
def _reduce(g, s):
    g.tile_reduce(s)


@STMT_RULES.register(N.Fill)
def _fill(g, s):
    g.tile_fill(s)


@STMT_RULES.register(N.Atomic)
def _atomic(g, s):
    g.tile_atomic(s)


@STMT_RULES.register(N.Cumsum)
def _cumsum(g, s):
    g.tile_cumsum(s)


# ------------------------------------------------------------------------------------------ events
def _expr_reads(g, exprs):
    out = []
    for e in loads_in(exprs):
        r = g.resource(e.buffer)
        if r is not None:
            out.append(("R", r))
    return out


def _mem(g, buf, kind):
    r = g.resource(buf)
    return [(kind, r)] if r is not None else []


def _region_reads(g, r):
    return _expr_reads(g, list(r.starts) + [x for x in r.extents if isinstance(x, N.Expr)])


@EVENT_RULES.register(N.Let)
def _ev_let(g, s):
    return _expr_reads(g, [s.value])


@EVENT_RULES.register(N.Store)
def _ev_store(g, s):
    return _expr_reads(g, list(s.indices) + [s.value]) + _mem(g, s.buffer, "W")


@EVENT_RULES.register(N.PtrTensor)
def _ev_ptr_tensor(g, s):
    raise KernelTypeError(_PTR_REFUSAL, s.loc, hint="run it with target='interp', which binds the address")


@EVENT_RULES.register(N.Alloc)
def _ev_alloc(g, s):
    return _expr_reads(g, [s.init]) if s.init is not None else []


@EVENT_RULES.register(N.Break, N.Continue, N.Launch, N.DeviceAssert, N.Event)
def _ev_break(g, s):
    return []


@EVENT_RULES.register(N.Parallel)
def _ev_parallel(g, s):
    # a nested T.Parallel's own rule lists its body's events
    out = []
    for x in walk_stmts(s.body, enter=lambda x: not isinstance(x, N.Parallel)):
        out.extend(EVENT_RULES(x)(g, x))
    return out


@EVENT_RULES.register(N.If, N.For, N.While)
def _ev_compound_cond(g, s):
    # the condition / bounds (the bodies are walked by the barrier pass)
    return _expr_reads(g, expr_children(s))


@EVENT_RULES.register(N.Copy)
def _ev_copy(g, s):
    if id(s) in g.async_copies:  # issued by its pipeline, published by the pipeline's own barrier
        return []
    ev = _region_reads(g, s.src) + _region_reads(g, s.dst) + _mem(g, s.src.buffer, "R")
    ev += g.copy_internal_events(s)
    return ev + _mem(g, s.dst.buffer, "W")


@EVENT_RULES.register(N.Gemm)
def _ev_gemm(g, s):
    ev = []
    for r in (s.a, s.b, s.c):
        ev += _region_reads(g, r)
    ev += _mem(g, s.a.buffer, "R") + _mem(g, s.b.buffer, "R") + _mem(g, s.c.buffer, "R")
    return ev + _mem(g, s.c.buffer, "W")


@EVENT_RULES.register(N.Reduce)
def _ev_reduce(g, s):
    ev = _region_reads(g, s.src) + _region_reads(g, s.dst) + _mem(g, s.src.buffer, "R")
    ev += g.reduce_internal_events(s)
    if not s.clear:
        ev += _mem(g, s.dst.buffer, "R")
    return ev + _mem(g, s.dst.buffer, "W")


@EVENT_RULES.register(N.Fill)
def _ev_fill(g, s):
    return _region_reads(g, s.dst) + _expr_reads(g, [s.value]) + _mem(g, s.dst.buffer, "W")


@EVENT_RULES.register(N.Atomic)
def _ev_atomic(g, s):
    ev = _region_reads(g, s.dst)
    if isinstance(s.value, N.Region):
        ev += _region_reads(g, s.value) + _mem(g, s.value.buffer, "R")
    else:
        ev += _expr_reads(g, [s.value])
    return ev + _mem(g, s.dst.buffer, "W")


@EVENT_RULES.register(N.Cumsum)
def _ev_cumsum(g, s):
    return (_region_reads(g, s.src) + _region_reads(g, s.dst) + _mem(g, s.src.buffer, "R")
            + _mem(g, s.dst.buffer, "W"))


__all__ = ["EXPR_RULES", "STMT_RULES", "EVENT_RULES", "ctype", "convert", "from_storage", "to_storage",
           "from_register", "to_register", "storage_np", "register_np", "zero", "float_lit", "Layout",
           "full_replicated"]
