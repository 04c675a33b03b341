"""The AST visitor: kernel source → tile IR.

Contract
--------
* Python-level values (closure constants, ``if is_causal:``, tile sizes) are evaluated at trace
  time; only what depends on block indices, loop variables, tensor data or ``T.dynamic`` symbols
  becomes IR.
* Every IR node gets the :class:`~tilesim.errors.Loc` of the AST node it came from.
* Any exception while visiting a node is turned into a ``KernelError`` carrying that node's
  location: user errors keep their class; a Python exception from user code called at trace time
  becomes ``KernelSyntaxError``; a bug of ours becomes ``InternalError``.
* Assigning an IR value to a name emits a :class:`~tilesim.ir.nodes.Let`. Re-binding a name inside an
  IR loop or ``if`` that was bound outside it is rejected (Python would carry the value across
  iterations; the kernel cannot): the message says to use ``T.alloc_var``.
"""

from __future__ import annotations

import ast
import builtins
import contextlib

from .. import dtypes as dt
from ..errors import InternalError, KernelError, KernelRuntimeError, KernelSyntaxError, KernelTypeError
from ..ir import nodes as N
from ..language.types import TensorSpec
from . import (  # noqa: F401 (builder modules)
    blackwell,
    blockscaled,
    helpers,
    iket,
    pointers,
    prims,
    prims_compat,
    simplify,
    tcgen05_sf,
    tile_schedule,
    ws_schedule,
)
from . import exprs as X
from .source import Source, get_source, python_env
from .tracer_exprs import _BINOPS, ExprVisitor

_MAX_PY_UNROLL = 100_000
_ENDED = 1 << 30  # binding depth of a name whose IR body has ended


class _StopDiscovery(Exception):
    """Raised in eager discovery mode once every tensor parameter has its annotation."""


class _Frame:
    """Name bindings of one function being traced (the kernel, or an inlined macro/helper/lambda)."""

    def __init__(self, src: Source, env: dict, inline: str | None = None, base_depth: int = 0,
                 base_launch: bool = False):
        self.src = src
        self.env = env  # name -> value
        self.depth: dict[str, int] = {}  # name -> IR nesting depth where it was bound
        self.inline = inline  # what is inlined ("macro m", "helper f"), None for the kernel itself
        self.base_depth = base_depth  # IR nesting depth at the call site (a `return` must be at it)
        self.base_launch = base_launch  # whether the call site is inside a launch


class Tracer(ExprVisitor):
    """Builds a :class:`~tilesim.ir.nodes.PrimFunc` from one Python function."""

    def __init__(self, fn, *, eager: bool = False, const_values: dict | None = None,
                 scalar_args: dict | None = None, discovery: bool = False, extra_env: dict | None = None):
        self.fn = fn
        self.src = get_source(fn)
        self.extra_env = extra_env or {}
        self.eager = eager
        self.const_values = const_values or {}
        self.scalar_args = scalar_args or {}
        self.discovery = discovery
        env = python_env(fn)
        for k, v in self.extra_env.items():
            env.setdefault(k, v)
        self.frames = [_Frame(self.src, env)]
        self.bodies: list[list] = [[]]
        self.ir_depth = 0  # nesting of IR control flow (loops, ifs)
        self.loop_depth = 0
        self.parallel_depth = 0
        self.parallel_axes: list = []  # (vars, extents) of the enclosing T.Parallel loops
        self.launch: dict | None = None  # {"allocs": [...], "annotations": [...]}
        self.params: list = []
        self.param_names: list[str] = []
        self.eager_specs: dict[str, object] = {}
        self.outputs: list[N.Buffer] = []
        self.returned = None
        self.dyn_vars: list[N.Var] = []
        self.const_vars: list[N.Var] = []
        self.top_prelude: list = []
        self.assign_name: str | None = None
        self.lets: dict = {}  # Let var -> value, for the pure ones (frontend/simplify.py expands them)

    # ------------------------------------------------------------------ helpers
    @property
    def frame(self) -> _Frame:
        return self.frames[-1]

    def loc(self, node):
        return self.frame.src.loc(node)

    def emit(self, stmt) -> None:
        self.bodies[-1].append(stmt)

    def in_launch(self) -> bool:
        return self.launch is not None

    def error(self, cls, msg, node, hint=None):
        return cls(msg, self.loc(node), hint)

    # ------------------------------------------------------------------ entry points
    def trace(self) -> N.PrimFunc:
        fn_node = self.src.fn_node
        if self.eager:
            self._bind_eager_params(fn_node)
        else:
            self._bind_lazy_params(fn_node)
        try:
            self.visit_body(fn_node.body)
        except _StopDiscovery:
            pass
        if self.eager:
            self._finish_eager_params(fn_node)
        body = tuple(self.top_prelude) + tuple(self.bodies[0])
        return N.PrimFunc(fn_node.name, tuple(self.params), body, tuple(self.dyn_vars), self.src.loc(fn_node))

    def _bind_lazy_params(self, fn_node):
        ann = getattr(self.fn, "__annotations__", {})
        for arg in fn_node.args.args:
            name = arg.arg
            spec = ann.get(name)
            if isinstance(spec, str):  # `from __future__ import annotations`
                spec = self.ev(arg.annotation)
            if spec is None:
                raise self.error(KernelSyntaxError, f"parameter '{name}' has no annotation", arg,
                                 hint=f"annotate it, e.g. {name}: T.Tensor((M, N), 'float16')")
            self._add_param(name, spec, arg)

    def _add_param(self, name, spec, node):
        loc = self.loc(node)
        if isinstance(spec, TensorSpec):
            shape = []
            for d in spec.shape:
                if isinstance(d, N.Var):
                    if d not in self.dyn_vars:
                        self.dyn_vars.append(d)
                    shape.append(d)
                elif isinstance(d, (int,)) or hasattr(d, "__index__"):
                    if int(d) < 0:
                        raise KernelTypeError(f"parameter '{name}' has a negative dimension {d}", loc)
                    shape.append(int(d))
                elif isinstance(d, N.Expr):
                    shape.append(d)
                else:
                    raise KernelTypeError(f"parameter '{name}': shape entry {d!r} is not an int or a symbol", loc,
                                          hint="use ints, T.dynamic('m') or T.const('M') symbols")
            buf = N.Buffer(name, tuple(shape), spec.dtype, "global", loc=loc)
            self.params.append(buf)
            self.param_names.append(name)
            self.frame.env[name] = buf
            self.frame.depth[name] = 0
            return buf
        try:
            dtype = dt.canon(spec)
        except KernelError:
            raise KernelTypeError(f"parameter '{name}': annotation {spec!r} is not T.Tensor(...) or a dtype",
                                  loc, hint="annotate tensors with T.Tensor(shape, dtype), scalars with a dtype") from None
        var = N.Var(name, dtype, kind="param", loc=loc)
        self.params.append(var)
        self.param_names.append(name)
        self.frame.env[name] = var
        self.frame.depth[name] = 0
        return var

    def _bind_eager_params(self, fn_node):
        for arg in fn_node.args.args:
            name = arg.arg
            if name in self.scalar_args:
                self.frame.env[name] = self.scalar_args[name]
            else:
                self.frame.env[name] = _Unannotated(name)
            self.frame.depth[name] = 0

    def _finish_eager_params(self, fn_node):
        for arg in fn_node.args.args:
            if arg.arg in self.scalar_args:
                continue
            if arg.arg not in self.eager_specs:
                raise self.error(KernelSyntaxError, f"parameter '{arg.arg}' has no T.Tensor annotation", arg,
                                 hint=f"add `{arg.arg}: T.Tensor((M, N), dtype)` at the top of the body")
        # inputs in signature order, then outputs (T.empty) in return order
        order = [a.arg for a in fn_node.args.args if a.arg not in self.scalar_args]
        self.params = [self.eager_specs[n] for n in order]
        self.param_names = order[:]
        outs = self.returned if self.returned is not None else []
        for b in outs:
            if b not in self.params:
                self.params.append(b)
                self.param_names.append(b.name)
        self.outputs = list(outs)

    # ------------------------------------------------------------------ statements
    def visit_body(self, stmts):
        for s in stmts:
            self.visit_stmt(s)

    def visit_stmt(self, node):
        meth = getattr(self, "stmt_" + type(node).__name__, None)
        if meth is None:
            raise self.error(KernelSyntaxError, f"`{type(node).__name__}` statements are not allowed in a kernel",
                             node, hint="kernels hold assignments, T.* calls, for/while/if and `with T.Kernel`")
        try:
            meth(node)
        except (_StopDiscovery, helpers.Return):
            raise
        except KernelError as e:
            raise e.with_loc(self.loc(node))  # noqa: B904 - the same exception, located at its statement
        except Exception as e:  # noqa: BLE001 - turn into a located error
            raise self._wrap(e, node) from e

    def _wrap(self, e, node):
        if isinstance(e, (AttributeError, TypeError, ValueError, IndexError, KeyError, ZeroDivisionError,
                          NameError, OverflowError)):
            return KernelSyntaxError(f"{type(e).__name__} while tracing the kernel: {e}", self.loc(node))
        return InternalError(f"{type(e).__name__}: {e}", detail=f"while tracing {self.loc(node)}")

    stmt_FunctionDef = helpers.define_function  # a nested def: a function value, inlined where called

    def stmt_Pass(self, node):
        pass

    def stmt_Expr(self, node):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring / comment string
        self.ev(node.value)

    def stmt_Assign(self, node):
        single = len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        self.assign_name = node.targets[0].id if single else None
        try:
            value = self.ev(node.value)
        finally:
            self.assign_name = None
        for t in node.targets:
            self.assign(t, value, node)

    def stmt_AugAssign(self, node):
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise self.error(KernelSyntaxError, "unsupported augmented assignment", node)
        cur = self.ev(node.target)
        val = self.ev(node.value)
        self.assign(node.target, X.binop(op, cur, val, self.loc(node)), node)

    def stmt_AnnAssign(self, node):
        ann = self.ev(node.annotation)
        if isinstance(node.target, ast.Name) and isinstance(ann, TensorSpec):
            name = node.target.id
            if not self.eager:
                raise self.error(KernelSyntaxError, f"tensor annotation of '{name}' inside a prim_func body", node,
                                 hint="annotate tensor parameters in the function signature")
            cur = self.frame.env.get(name)
            if name in self.scalar_args:  # the caller passed None, a number or a list for a tensor parameter
                raise self.error(KernelRuntimeError, f"argument '{name}' is a tensor, got {self.scalar_args[name]!r:.40}",
                                 node, hint="pass a NumPy array or a torch tensor")
            if not isinstance(cur, _Unannotated):
                raise self.error(KernelSyntaxError, f"'{name}' is not a parameter of the kernel", node,
                                 hint="only the function's own parameters can be annotated with T.Tensor")
            buf = self._add_param(name, ann, node)
            self.params.pop()
            self.param_names.pop()
            self.eager_specs[name] = buf
            if self.discovery and all(not isinstance(v, _Unannotated) for v in self.frame.env.values()):
                raise _StopDiscovery()
            return
        if node.value is None:
            raise self.error(KernelSyntaxError, "annotation without a value", node)
        if isinstance(ann, type) and ann in _PY_ANNOTATIONS or type(ann).__module__ == "typing":
            # `dtype: str = T.bfloat16`: a Python annotation; the assignment is a plain one
            self.assign(node.target, self.ev(node.value), node)
            return
        if ann in (int, float):  # `n: int = 4` binds a Python number; with a kernel value it declares a var
            value = self.ev(node.value)
            if not X.is_ir(value):
                self.assign(node.target, value, node)
                return
        dtype = dt.canon(ann)
        loc = self.loc(node)
        buf = N.Buffer(getattr(node.target, "id", "var"), (), dtype, "var", loc=loc)
        init = X.cast_to(X.to_expr(self.ev(node.value), loc, like=dtype), dtype, loc)
        self._alloc(buf, init)
        self.bind(node.target.id, buf, node)

    def assign(self, target, value, node):
        loc = self.loc(target)
        if isinstance(target, ast.Name):
            name = target.id
            cur = self.lookup(name, target, missing_ok=True)
            if isinstance(value, X.ElementVar):  # `v = T.alloc_var(...)` in T.Parallel (or an alias, as for vars)
                self.check_rebind(name, target)
                self.bind(name, value, target)
                return
            if isinstance(cur, X.ElementVar):  # a per-element variable of T.Parallel: store this element
                buf = cur.buffer
                self.emit(N.Store(buf, cur.items, X.cast_to(X.to_expr(value, loc, like=buf.dtype), buf.dtype, loc),
                                  loc))
                return
            if isinstance(cur, N.Buffer) and cur.scope == "var":
                if isinstance(value, N.Buffer) and value is cur:
                    return
                self.emit(N.Store(cur, (), X.cast_to(X.to_expr(value, loc, like=cur.dtype), cur.dtype, loc), loc))
                return
            if isinstance(cur, (N.Buffer,)) and cur.scope == "global" and name in self.param_names:
                raise KernelSyntaxError(f"cannot rebind the tensor parameter '{name}'", loc,
                                        hint="give the new value another name")
            if isinstance(value, X.Access) and not value.has_slice:
                value = X.to_expr(value, loc)
            if isinstance(value, N.Expr) and not isinstance(value, (N.Const, N.Var)):
                var = N.Var(name, value.dtype, kind="let", loc=loc)
                self.check_rebind(name, target)
                self.emit(N.Let(var, value, loc))
                if simplify.pure(value):
                    self.lets[var] = value
                self.bind(name, var, target)
                return
            self.check_rebind(name, target)
            self.bind(name, value, target)
        elif isinstance(target, ast.Subscript):
            obj = self.ev(target.value)
            if isinstance(obj, N.Buffer):
                items = self.subscript_items(target.slice)
                if any(isinstance(i, slice) for i in items):
                    raise KernelSyntaxError(f"slice assignment to {obj.name}", loc,
                                            hint="use T.copy(src, dst) or T.fill(region, value) for tiles")
                ld = X.make_load(obj, items, loc)
                v = X.cast_to(X.to_expr(value, loc, like=obj.dtype), obj.dtype, loc)
                self.emit(N.Store(obj, ld.indices, v, loc))
            elif X.is_ir(obj):
                raise KernelSyntaxError("cannot assign into this value", loc)
            else:
                obj[self.ev(target.slice)] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            if X.is_ir(value) or not hasattr(value, "__iter__"):
                raise KernelSyntaxError("cannot unpack a kernel value", loc)
            vals = list(value)
            if len(vals) != len(target.elts):
                raise KernelSyntaxError(f"cannot unpack {len(vals)} values into {len(target.elts)} names", loc)
            for t, v in zip(target.elts, vals):
                self.assign(t, v, node)
        else:
            raise KernelSyntaxError(f"cannot assign to a {type(target).__name__}", loc)

    def check_rebind(self, name, node):
        if name in self.frame.depth and self.frame.depth[name] < self.ir_depth and name in self.frame.env:
            cur = self.frame.env[name]
            if isinstance(cur, (int, float, bool, N.Var, N.Expr)) and not isinstance(cur, _Unannotated):
                raise KernelSyntaxError(
                    f"'{name}' is assigned inside a kernel loop or `if` but was defined outside it",
                    self.loc(node),
                    hint=f"declare it with `{name} = T.alloc_var(dtype)` (or a 1-element fragment) so the "
                         "kernel can update it; Python names are fixed when the kernel is traced")

    def bind(self, name, value, node, loop_var=False):
        """Bind ``name``; a loop variable (``loop_var``) belongs to its loop's body, so its scope ends
        with the loop and a later assignment to the name is a new binding (as in TileLang)."""
        self.frame.env[name] = value
        self.frame.depth[name] = self.ir_depth + int(loop_var)

    def stmt_If(self, node):
        cond = self.ev(node.test)
        if not X.is_ir(cond):
            self.visit_body(node.body if cond else node.orelse)
            return
        c = X.to_bool(cond, self.loc(node.test))
        then = self.sub_body(node.body)
        orelse = self.sub_body(node.orelse) if node.orelse else ()
        self.emit(N.If(c, then, orelse, self.loc(node)))

    def sub_body(self, stmts, loop=False):
        self.bodies.append([])
        self.ir_depth += 1
        self.loop_depth += int(loop)
        try:
            self.visit_body(stmts)
        finally:
            self.ir_depth -= 1
            self.loop_depth -= int(loop)
            body = self.bodies.pop()
            # names bound inside the body are out of scope now: a later binding is a new name
            # (a use still fails the verifier's scope check with its message)
            depth = self.frame.depth
            for n in [n for n, d in depth.items() if d > self.ir_depth]:
                depth[n] = _ENDED
        return tuple(body)

    def stmt_While(self, node):
        cond = self.ev(node.test)
        if not X.is_ir(cond):
            count = 0
            while cond:
                self.visit_body(node.body)
                count += 1
                if count > _MAX_PY_UNROLL:
                    raise self.error(KernelSyntaxError, "Python-level while loop does not terminate", node)
                cond = self.ev(node.test)
            return
        c = X.to_bool(cond, self.loc(node.test))
        body = self.sub_body(node.body, loop=True)
        self.emit(N.While(c, body, self.loc(node)))

    def stmt_Break(self, node):
        if self.loop_depth == 0:
            raise self.error(KernelSyntaxError, "`break` outside a kernel loop", node)
        self.emit(N.Break(self.loc(node)))

    def stmt_Continue(self, node):
        if self.loop_depth == 0:
            raise self.error(KernelSyntaxError, "`continue` outside a kernel loop", node)
        self.emit(N.Continue(self.loc(node)))

    def stmt_Return(self, node):
        fr = self.frame
        if fr.inline is not None:
            if self.ir_depth != fr.base_depth or self.in_launch() != fr.base_launch:
                raise self.error(KernelSyntaxError, f"`return` of the inlined {fr.inline} under kernel control flow",
                                 node, hint="an inlined function returns through Python-level code only; for a value "
                                            "that depends on kernel data use T.if_then_else(cond, a, b)")
            raise helpers.Return(self.ev(node.value) if node.value is not None else None)
        if not self.eager:
            raise self.error(KernelSyntaxError, "`return` inside a @T.prim_func body", node,
                             hint="prim_funcs write their outputs into tensor parameters")
        if self.ir_depth or self.in_launch():
            raise self.error(KernelSyntaxError, "`return` must be the last top-level statement", node)
        val = self.ev(node.value) if node.value is not None else None
        outs = list(val) if isinstance(val, (tuple, list)) else ([] if val is None else [val])
        for o in outs:
            if not (isinstance(o, N.Buffer) and o in self.outputs_declared()):
                raise self.error(KernelSyntaxError, "an eager kernel returns tensors made with T.empty", node)
        self.returned = outs

    def outputs_declared(self):
        return self._empties if hasattr(self, "_empties") else []

    def stmt_Assert(self, node):
        v = self.ev(node.test)
        if X.is_ir(v):
            raise self.error(KernelSyntaxError, "assert on kernel values is not supported", node,
                             hint="assert on Python values (shapes, tile sizes) only")
        if not v:
            msg = self.ev(node.msg) if node.msg is not None else "assertion failed"
            raise self.error(KernelTypeError, f"kernel assertion failed: {msg}", node)

    def stmt_With(self, node):
        if len(node.items) > 1:  # `with A, B: body` is `with A: with B: body`
            inner = ast.copy_location(ast.With(items=node.items[1:], body=node.body), node.items[1].context_expr)
            node = ast.copy_location(ast.With(items=node.items[:1], body=[inner]), node)
        item = node.items[0]
        call = item.context_expr
        fn = self.ev(call.func) if isinstance(call, ast.Call) else None
        if getattr(fn, "__tilesim_prim__", None) == "iket_range":
            return iket.with_range(self, node, call)
        if getattr(fn, "__tilesim_prim__", None) == "ws":
            return prims.W.with_ws(self, node, call)
        if getattr(fn, "__tilesim_prim__", None) == "ws_op":
            return ws_schedule.with_ws_op(self, node, call)
        if getattr(fn, "__tilesim_unsupported__", None):  # e.g. T.ClusterKernel: the reason, at the with
            raise self.error(KernelSyntaxError, f"T.{fn.__tilesim_prim__} is not supported by tilesim", call,
                             hint=fn.__tilesim_unsupported__)
        if getattr(fn, "__tilesim_prim__", None) == "attr":
            return prims.AR.with_attr(self, node, call)
        if getattr(fn, "__tilesim_prim__", None) != "Kernel":
            raise self.error(KernelSyntaxError, "only `with T.Kernel(...) as ...:` is allowed", node,
                             hint="a with-statement in a kernel opens a launch: with T.Kernel(gx, gy, threads=128) as (bx, by)")
        prims.launch(self, node, call, item.optional_vars)

    def stmt_For(self, node):
        if node.orelse:
            raise self.error(KernelSyntaxError, "for/else is not allowed in a kernel", node)
        it = node.iter
        if isinstance(it, ast.Call):
            fn = self.ev(it.func)
            pname = getattr(fn, "__tilesim_prim__", None)
            if pname in prims.LOOP_PRIMS or fn is builtins.range:
                args, kwargs = self.call_args(it)
                prims.loop(self, node, "range" if fn is builtins.range else pname, fn, args, kwargs)
                return
        seq = self.ev(it)
        if X.is_ir(seq):
            raise self.error(KernelSyntaxError, "cannot iterate over a kernel value", it,
                             hint="loop with T.serial(n), T.Pipelined(n), T.Parallel(...) or range(n)")
        for count, v in enumerate(seq):
            if count > _MAX_PY_UNROLL:
                raise self.error(KernelSyntaxError, "Python-level loop is too long to unroll", node)
            self.assign(node.target, v, node)
            self.visit_body(node.body)

    # ------------------------------------------------------------------ expressions
    def ev(self, node):
        meth = getattr(self, "ex_" + type(node).__name__, None)
        if meth is None:
            raise self.error(KernelSyntaxError, f"`{type(node).__name__}` expressions are not allowed in a kernel", node)
        try:
            return meth(node)
        except (_StopDiscovery, KernelError):
            raise
        except Exception as e:  # noqa: BLE001
            raise self._wrap(e, node) from e

    def lookup(self, name, node, missing_ok=False):
        env = self.frame.env
        if name in env:
            v = env[name]
            if isinstance(v, _Unannotated) and not missing_ok:
                raise self.error(KernelSyntaxError, f"parameter '{name}' is used before its T.Tensor annotation", node,
                                 hint=f"annotate it first: {name}: T.Tensor(shape, dtype)")
            return v
        if missing_ok:
            return None
        raise self.error(KernelSyntaxError, f"name '{name}' is not defined", node)

    # ------------------------------------------------------------------ macros, allocations
    @contextlib.contextmanager
    def inline_frame(self, src, env, bound, node, what):
        """Trace an inlined function's body in its own frame (see :mod:`.helpers`)."""
        if len(self.frames) > helpers.MAX_DEPTH:
            raise self.error(KernelSyntaxError, f"{what}: inlining is nested more than {helpers.MAX_DEPTH} deep",
                             node, hint="recursion of a helper must end at trace time (on Python values)")
        frame = _Frame(src, env, what, self.ir_depth, self.in_launch())
        for k in bound:
            frame.depth[k] = self.ir_depth
        self.frames.append(frame)
        try:
            yield frame
        finally:
            self.frames.pop()

    def _alloc(self, buf: N.Buffer, init=None):
        """Declare an allocation. On-chip ones are hoisted to the top of the launch."""
        stmt = N.Alloc(buf, init, buf.loc)
        if buf.scope in ("global",) and buf.alias_of is None:
            self.top_prelude.append(stmt) if not self.in_launch() else self.top_prelude.append(stmt)
            return
        if self.launch is None:
            if buf.alias_of is not None and buf.alias_of.scope == "global":
                self.emit(stmt)
                return
            raise KernelSyntaxError(f"T.alloc_* of a {buf.scope} buffer outside `with T.Kernel(...)`", buf.loc,
                                    hint="allocate on-chip buffers inside the kernel launch")
        if init is not None or (buf.alias_of is not None and buf.alias_of.scope == "global"):
            # a variable's initial value may depend on block indices: keep it in place
            if init is not None and self.ir_depth > 0:
                self.launch["allocs"].append(N.Alloc(buf, None, buf.loc))
                self.emit(N.Store(buf, (), init, buf.loc))
                return
            self.emit(stmt)
            return
        self.launch["allocs"].append(stmt)


class _Unannotated:
    """Placeholder for an eager parameter before its ``T.Tensor`` annotation is seen."""

    def __init__(self, name):
        self.name = name


_PY_ANNOTATIONS = (str, bool, list, tuple, dict, type(None))  # Python-only annotations (not dtypes)
