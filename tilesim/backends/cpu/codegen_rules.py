"""CPU target rules for expressions, element statements and control flow (see :mod:`.codegen`)."""

from __future__ import annotations

import math

from ... import dtypes as dt
from ...ir import nodes as N
from .codegen import EXPR_RULES, STMT_RULES, Unsupported, _Gen
from .codegen_ew import elementwise_call
from .codegen_gemm_loop import emit_fused

expr_rule = EXPR_RULES.register
stmt_rule = STMT_RULES.register


# ------------------------------------------------------------------------------------- expressions
@expr_rule(N.Const)
def _const(g: _Gen, e: N.Const) -> str:
    if dt.is_float(e.dtype):
        v = float(e.value)
        lit = "np.nan" if math.isnan(v) else ("np.inf" if v == math.inf else ("-np.inf" if v == -math.inf else repr(v)))
        if e.dtype == "float64":
            return g.const("float64", lit)
        if e.dtype in dt.NARROW_FLOATS:
            return g.rnd(f"np.float32({lit})", e.dtype)
        return g.const("float32", lit)
    if e.dtype == "bool":
        return "True" if e.value else "False"
    return g.const("int64", str(int(e.value)))


@expr_rule(N.Var)
def _var(g: _Gen, e: N.Var) -> str:
    return g.var(e)


_FLOAT_OPS = {"add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})", "div": "({a} / {b})",
              "floordiv": "np.floor_divide({a}, {b})", "floormod": "np.mod({a}, {b})", "truncmod": "np.fmod({a}, {b})",
              "min": "fmin({a}, {b})", "max": "fmax({a}, {b})", "pow": "np.power({a}, {b})"}
_INT_OPS = {"add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})", "div": "tdiv({a}, {b})",
            "floordiv": "fdiv({a}, {b})", "floormod": "fmod({a}, {b})", "truncmod": "tmod({a}, {b})",
            "min": "min({a}, {b})", "max": "max({a}, {b})", "pow": "({a} ** {b})",
            "bitand": "({a} & {b})", "bitor": "({a} | {b})", "bitxor": "({a} ^ {b})",
            "shl": "({a} << {b})", "shr": "({a} >> {b})"}
_BOOL_OPS = {"bitand": "({a} and {b})", "min": "({a} and {b})", "bitor": "({a} or {b})", "max": "({a} or {b})",
             "bitxor": "({a} != {b})"}


#: operators whose result already has its operands' Numba type (float32/float64, or int64) when both operands
#: have it: generated code needs no ``np.float32(...)``/``np.int64(...)`` around them (an expression of IR
#: dtype float32 or narrower is a Numba float32, float64 a float64, any integer an int64: ``_Gen.conv``)
_SAME_TYPE_FLOAT = frozenset({"add", "sub", "mul", "div", "min", "max"})
_SAME_TYPE_INT = frozenset({"add", "sub", "mul", "min", "max", "bitand", "bitor", "bitxor", "shl", "shr"})


@expr_rule(N.Binary)
def _binary(g: _Gen, e: N.Binary) -> str:
    d = e.dtype
    a = g.conv(g.expr(e.a), e.a.dtype, d)
    b = g.conv(g.expr(e.b), e.b.dtype, d)
    if dt.is_float(d):
        r = _FLOAT_OPS[e.op].format(a=a, b=b)
        if e.op not in _SAME_TYPE_FLOAT:
            r = f"np.float64({r})" if d == "float64" else f"np.float32({r})"
        return g.rnd(r, d) if d in dt.NARROW_FLOATS else r
    if d == "bool":
        if e.op not in _BOOL_OPS:
            raise Unsupported(f"boolean operator {e.op}", e.loc)
        return _BOOL_OPS[e.op].format(a=a, b=b)
    r = _INT_OPS[e.op].format(a=a, b=b)
    return r if e.op in _SAME_TYPE_INT else f"np.int64({r})"


_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


@expr_rule(N.Compare)
def _compare(g: _Gen, e: N.Compare) -> str:
    return f"({g.expr(e.a)} {_CMP[e.op]} {g.expr(e.b)})"


@expr_rule(N.Logical)
def _logical(g: _Gen, e: N.Logical) -> str:
    return f"({g.conv(g.expr(e.a), e.a.dtype, 'bool')} {e.op} {g.conv(g.expr(e.b), e.b.dtype, 'bool')})"


@expr_rule(N.Unary)
def _unary(g: _Gen, e: N.Unary) -> str:
    a = g.expr(e.a)
    if e.op == "neg":
        return f"(-{a})"
    if e.op == "not":
        return f"(not {a})"
    return f"np.int64(~{a})"


_MATH = {"exp": "np.exp({0})", "exp2": "np.exp2({0})", "exp10": "np.power({one}*10, {0})", "log": "np.log({0})",
         "log2": "np.log2({0})", "log10": "np.log10({0})", "log1p": "np.log1p({0})", "expm1": "np.expm1({0})",
         "sqrt": "np.sqrt({0})", "rsqrt": "({one} / np.sqrt({0}))", "tanh": "np.tanh({0})",
         "sigmoid": "({one} / ({one} + np.exp(-{0})))", "abs": "np.abs({0})", "fabs": "np.abs({0})",
         "sin": "np.sin({0})", "cos": "np.cos({0})", "tan": "np.tan({0})", "floor": "np.floor({0})",
         "ceil": "np.ceil({0})", "round": "np.rint({0})", "trunc": "np.trunc({0})", "isnan": "np.isnan({0})",
         "isinf": "np.isinf({0})", "isfinite": "np.isfinite({0})", "atan": "np.arctan({0})",
         "asin": "np.arcsin({0})", "acos": "np.arccos({0})", "sinh": "np.sinh({0})", "cosh": "np.cosh({0})",
         "pow": "np.power({0}, {1})", "fmod": "np.fmod({0}, {1})", "erf": "math.erf({0})"}

#: float32 forms that vectorise (prelude.exp2f/expf: within 1 ulp, 16 lanes; a libm call per element does not)
_MATH_F32 = {"exp": "expf({0})", "exp2": "exp2f({0})", "sigmoid": "({one} / ({one} + expf(-{0})))"}


@expr_rule(N.Call)
def _call(g: _Gen, e: N.Call) -> str:
    d, argd = e.dtype, e.args[0].dtype
    if e.func in ("abs", "fabs") and (dt.is_int(argd) or argd == "bool"):
        return f"np.int64(abs({g.expr(e.args[0])}))"
    if e.func not in _MATH:
        raise Unsupported(f"the math function {e.func}", e.loc)
    cd = "float32" if dt.is_float(argd) and argd != "float64" else "float64"
    args = [g.conv(g.expr(a), a.dtype, cd) for a in e.args]
    form = _MATH_F32.get(e.func) if cd == "float32" else None
    r = (form or _MATH[e.func]).format(*args, one=g.const(cd, "1"))
    if d == "bool":
        return r
    if dt.is_float(d):
        return g.conv(r if form else f"np.{cd}({r})", cd, d)  # the float32 forms are float32 already
    return f"np.int64({r})"


@expr_rule(N.Select)
def _select(g: _Gen, e: N.Select) -> str:
    a = g.conv(g.expr(e.a), e.a.dtype, e.dtype)
    b = g.conv(g.expr(e.b), e.b.dtype, e.dtype)
    return f"({a} if {g.expr(e.cond)} else {b})"


@expr_rule(N.Cast)
def _cast(g: _Gen, e: N.Cast) -> str:
    return g.conv(g.expr(e.value), e.value.dtype, e.dtype)


@expr_rule(N.Reinterpret)
def _reinterpret(g: _Gen, e: N.Reinterpret) -> str:
    """Bit-cast between dtypes of one width: the source's storage bits, read as the destination."""
    s, d = e.value.dtype, e.dtype
    v = g.expr(e.value)
    width = dt.bits(s)
    mask = (1 << width) - 1
    if s in dt.NARROW_FLOATS:
        b = g.enc(v, s)
    elif s == "float32":
        b = f"f32_bits({v})"
    elif s == "float64":
        b = f"f64_bits({v})"
    elif s == "bool":
        raise Unsupported("T.reinterpret of a bool", e.loc)
    else:
        b = f"(np.int64({v}) & {mask})" if width < 64 else f"np.int64({v})"
    if d in dt.NARROW_FLOATS:
        return g.dec(b, d)
    if d == "float32":
        return f"bits_f32({b})"
    if d == "float64":
        return f"bits_f64({b})"
    if d == "bool":
        raise Unsupported("T.reinterpret to a bool", e.loc)
    return f"np.int64(np.{d}({b}))"


@expr_rule(N.WarpShuffle)
def _shuffle(g: _Gen, e) -> str:
    raise Unsupported("warp shuffles", e.loc)


@expr_rule(N.Load)
def _load(g: _Gen, e: N.Load) -> str:
    return g.load(e.buffer, [g.expr(i) for i in e.indices])


# -------------------------------------------------------------------------------------- statements
@stmt_rule(N.Alloc)
def _alloc(g: _Gen, s: N.Alloc) -> None:
    if s.buffer.scope == "global":
        raise Unsupported("T.alloc_global workspace", s.loc)
    g.alloc(s.buffer)
    if s.init is not None:
        g.store(s.buffer, ["0"], g.conv(g.expr(s.init), s.init.dtype, s.buffer.dtype))


@stmt_rule(N.PtrTensor)
def _ptr_tensor(g: _Gen, s: N.PtrTensor) -> None:
    raise Unsupported("T.make_tensor (a tensor at a raw address)", s.loc)


@stmt_rule(N.Store)
def _store(g: _Gen, s: N.Store) -> None:
    value = g.conv(g.expr(s.value), s.value.dtype, s.buffer.dtype)
    g.store(s.buffer, [g.expr(i) for i in s.indices], value)


@stmt_rule(N.Let)
def _let(g: _Gen, s: N.Let) -> None:
    g.emit(f"{g.var(s.var)} = {g.conv(g.expr(s.value), s.value.dtype, s.var.dtype)}")


@stmt_rule(N.If)
def _if(g: _Gen, s: N.If) -> None:
    g.nested(f"if {g.expr(s.cond)}:", s.then)
    if s.orelse:
        g.nested("else:", s.orelse)


def for_header(g: _Gen, s: N.For) -> str:
    return f"for {g.var(s.var)} in range({g.expr(s.start)}, {g.expr(s.stop)}, {int(s.step)}):"


@stmt_rule(N.For)
def _for(g: _Gen, s: N.For) -> None:
    k = g.fused.get(id(s))
    if k is None:
        g.nested(for_header(g, s), s.body)
    else:  # a tiled-GEMM K loop whose group products the runtime may compute (codegen_gemm_loop.py)
        emit_fused(g, s, k, lambda: g.nested(for_header(g, s), s.body))


@stmt_rule(N.Parallel)
def _parallel(g: _Gen, s: N.Parallel) -> None:
    if elementwise_call(g, s):  # a common elementwise shape: one call of a cached helper (codegen_ew.py)
        return
    for v, n in zip(s.vars, s.extents):
        g.emit(f"for {g.var(v)} in range({n}):")
        g.depth += 1
    g.body(s.body)
    g.depth -= len(s.vars)


@stmt_rule(N.While)
def _while(g: _Gen, s: N.While) -> None:
    g.nested(f"while {g.expr(s.cond)}:", s.body)


@stmt_rule(N.DeviceAssert)
def _device_assert(g: _Gen, s: N.DeviceAssert) -> None:
    """A failed check raises ``AssertionError(k)``, k the assertion's index in ``LaunchSource.asserts``
    (the runtime reports it as a KernelRuntimeError at the assertion's source line)."""
    code = g.assert_code(s)
    g.emit(f"if not {g.conv(g.expr(s.cond), s.cond.dtype, 'bool')}:")
    g.emit(f"    raise AssertionError({code})")


@stmt_rule(N.Event)
def _event(g: _Gen, s: N.Event) -> None:
    """An iket event changes no value: a statement that does nothing (keeps an otherwise empty block valid)."""
    g.emit(f"pass  # iket {s.kind} {s.name!r}")


@stmt_rule(N.Break)
def _break(g: _Gen, s) -> None:
    g.emit("break")


@stmt_rule(N.Continue)
def _continue(g: _Gen, s) -> None:
    g.emit("continue")


@stmt_rule(N.SyncThreads)
def _sync(g: _Gen, s) -> None:
    """At tile level a block barrier has nothing to do (per-thread launches split at it: codegen_simt.py); a
    grid barrier needs every block to reach it first (the interpreter runs such a launch in lockstep)."""
    if s.grid:
        raise Unsupported("a grid barrier (T.sync_grid)", s.loc)


@stmt_rule(N.Launch, N.MBarrier, N.WarpSpec, N.ClusterCancel, N.PairIssue)
def _unsupported(g: _Gen, s) -> None:
    names = {N.Launch: "a launch inside a launch", N.MBarrier: "mbarriers",
             N.WarpSpec: "warp-specialised code (T.ws)", N.ClusterCancel: "cluster launch control",
             N.PairIssue: "2-CTA (use_2cta=True) tensor-memory instructions"}
    raise Unsupported(names[type(s)], s.loc)
