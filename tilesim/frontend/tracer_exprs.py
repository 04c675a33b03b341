"""Expression visitors of the tracer (``ex_<AST class>``): Python expressions in a kernel → values or IR.

A mixin of :class:`tilesim.frontend.tracer.Tracer` (which supplies ``ev``, ``lookup``, ``error``, ``frame``,
``emit`` and the statement visitors); split out of ``tracer.py`` to keep modules under the size limit.
Contract as in :mod:`.tracer`: trace-time values stay Python values, values that depend on kernel data
become IR expressions, and every failure is a located ``KernelError``.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import operator

from .. import dtypes as dt
from ..errors import KernelError, KernelSyntaxError, KernelTypeError
from ..ir import nodes as N
from ..language.kernel import _Macro
from ..language.types import DType, Tensor
from . import exprs as X
from . import helpers, prims, prims_compat

_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv",
           ast.Mod: "floormod", ast.Pow: "pow", ast.BitAnd: "bitand", ast.BitOr: "bitor",
           ast.BitXor: "bitxor", ast.LShift: "shl", ast.RShift: "shr"}
_CMPOPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
_UNOPS = {ast.USub: "neg", ast.Not: "not", ast.Invert: "bitnot", ast.UAdd: "pos"}


class ExprVisitor:
    """``ex_*`` methods of the tracer (see the module docstring)."""

    def ex_Name(self, node):
        return self.lookup(node.id, node)

    def ex_Constant(self, node):
        return node.value

    def ex_Tuple(self, node):
        return tuple(self._elts(node.elts))

    def ex_List(self, node):
        return list(self._elts(node.elts))

    def _elts(self, elts):
        out = []
        for e in elts:
            if isinstance(e, ast.Starred):
                out.extend(self.ev(e.value))
            else:
                out.append(self.ev(e))
        return out

    def ex_Dict(self, node):
        return {self.ev(k): self.ev(v) for k, v in zip(node.keys, node.values)}

    def ex_JoinedStr(self, node):
        return "".join(str(self.ev(v)) if not isinstance(v, ast.Constant) else v.value for v in node.values)

    def ex_FormattedValue(self, node):
        return format(self.ev(node.value))

    def ex_Attribute(self, node):
        obj = self.ev(node.value)
        attr = node.attr
        if isinstance(obj, N.Buffer):
            if attr == "shape":
                return tuple(obj.shape)
            if attr == "dtype":
                return DType(obj.dtype)
            if attr == "ndim":
                return obj.ndim
            if attr == "name":
                return obj.name
            if attr == "data":
                return prims_compat.BufferData(obj)
            raise self.error(KernelSyntaxError, f"buffer has no attribute '{attr}'", node,
                             hint="buffers offer .shape, .dtype, .ndim, .data")
        if isinstance(obj, (N.Expr, X.Access)):
            if attr == "dtype":
                return DType(X.to_expr(obj, self.loc(node)).dtype)
            if attr == "astype":
                return _Astype(obj)
            raise self.error(KernelSyntaxError, f"kernel value has no attribute '{attr}'", node)
        try:
            return getattr(obj, attr)
        except AttributeError:
            if getattr(obj, "__tilesim_language__", False) is True:  # the `T` namespace
                close = difflib.get_close_matches(attr, [n for n in dir(obj) if not n.startswith("_")], n=3)
                hint = ("did you mean " + " or ".join(f"T.{c}" for c in close) + "?") if close else \
                    "see docs/language.md for the primitives tilesim supports"
                raise self.error(KernelSyntaxError, f"unknown primitive T.{attr}", node, hint=hint) from None
            raise self.error(KernelSyntaxError, f"{type(obj).__name__} object has no attribute '{attr}'", node) from None

    def ex_Subscript(self, node):
        obj = self.ev(node.value)
        if isinstance(obj, N.Buffer):
            return X.Access(obj, self.subscript_items(node.slice), self.loc(node), self.lets)
        if isinstance(obj, X.Access):
            raise self.error(KernelSyntaxError, "a region cannot be indexed again", node)
        idx = self.ev(node.slice)
        if X.is_ir(idx) and not isinstance(obj, type):
            raise self.error(KernelSyntaxError, f"a Python {type(obj).__name__} cannot be indexed by a kernel value",
                             node, hint="index buffers (T.alloc_fragment/T.alloc_shared) with kernel values")
        return obj[idx]

    def subscript_items(self, sl):
        elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        items = []
        for e in elts:
            if isinstance(e, ast.Slice):
                items.append(slice(self.ev(e.lower) if e.lower else None, self.ev(e.upper) if e.upper else None,
                                   self.ev(e.step) if e.step else None))
            elif isinstance(e, ast.Starred):
                items.extend(self.ev(e.value))
            else:
                v = self.ev(e)
                if isinstance(v, tuple):
                    items.extend(v)
                else:
                    items.append(v)
        return tuple(items)

    def ex_Slice(self, node):
        return slice(self.ev(node.lower) if node.lower else None, self.ev(node.upper) if node.upper else None,
                     self.ev(node.step) if node.step else None)

    def ex_BinOp(self, node):
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise self.error(KernelSyntaxError, f"operator {type(node.op).__name__} is not supported", node)
        return X.binop(op, self.ev(node.left), self.ev(node.right), self.loc(node))

    def ex_UnaryOp(self, node):
        return X.unary(_UNOPS[type(node.op)], self.ev(node.operand), self.loc(node))

    def ex_BoolOp(self, node):
        op = "and" if isinstance(node.op, ast.And) else "or"
        vals = node.values
        acc = self.ev(vals[0])
        for v in vals[1:]:
            if not X.is_ir(acc):  # Python short-circuit
                if (op == "and" and not acc) or (op == "or" and acc):
                    return acc
                acc = self.ev(v)
                continue
            acc = X.logical(op, acc, self.ev(v), self.loc(node))
        return acc

    def ex_Compare(self, node):
        loc = self.loc(node)
        left = self.ev(node.left)
        result = None
        for op, right_node in zip(node.ops, node.comparators):
            if type(op) not in _CMPOPS:
                if isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)):
                    r = self.ev(right_node)
                    if X.is_ir(left) or X.is_ir(r):
                        raise self.error(KernelSyntaxError, "`is`/`in` on kernel values", node)
                    fn = {ast.Is: operator.is_, ast.IsNot: operator.is_not, ast.In: lambda a, b: a in b,
                          ast.NotIn: lambda a, b: a not in b}[type(op)]
                    part = fn(left, r)
                    result = part if result is None else X.logical("and", result, part, loc)
                    left = r
                    continue
                raise self.error(KernelSyntaxError, "unsupported comparison", node)
            right = self.ev(right_node)
            part = X.compare(_CMPOPS[type(op)], left, right, loc)
            result = part if result is None else X.logical("and", result, part, loc)
            left = right
        return result

    def ex_IfExp(self, node):
        cond = self.ev(node.test)
        if not X.is_ir(cond):
            return self.ev(node.body) if cond else self.ev(node.orelse)
        return X.select(cond, self.ev(node.body), self.ev(node.orelse), self.loc(node))

    def call_args(self, node):
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                args.extend(self.ev(a.value))
            else:
                args.append(self.ev(a))
        kwargs = {}
        for k in node.keywords:
            if k.arg is None:
                kwargs.update(self.ev(k.value))
            else:
                kwargs[k.arg] = self.ev(k.value)
        return args, kwargs

    def ex_Call(self, node):
        fn = self.ev(node.func)
        args, kwargs = self.call_args(node)
        loc = self.loc(node)
        pname = getattr(fn, "__tilesim_prim__", None)
        if pname is not None:
            return prims.call(self, node, pname, fn, args, kwargs)
        if isinstance(fn, _Macro):
            return helpers.inline_function(self, fn.fn, args, kwargs, node, f"macro {fn.__name__}")
        if isinstance(fn, helpers.KernelLambda):
            return helpers.call_kernel_lambda(self, fn, args, kwargs, node)
        if isinstance(fn, DType):
            if len(args) != 1 or kwargs:
                raise self.error(KernelTypeError, f"T.{fn}(value) takes one value", node)
            v, d = args[0], dt.canon(fn)
            if X.is_ir(v):
                return X.cast_to(X.to_expr(v, loc), d, loc)
            return X.const(v, d, loc)
        if fn is Tensor and (len(args) > 2 or "data" in kwargs):
            return prims_compat.tensor_view(self, loc, args, kwargs)
        if isinstance(fn, _Astype):
            return X.cast_to(X.to_expr(fn.value, loc), dt.canon(args[0]), loc)
        any_ir = any(X.is_ir(a) for a in args) or any(X.is_ir(v) for v in kwargs.values())
        if any_ir:
            if fn is builtins.min or fn is builtins.max:
                if len(args) < 2:
                    raise self.error(KernelTypeError, f"{fn.__name__}() of kernel values needs two or more arguments", node)
                acc = args[0]
                for a in args[1:]:
                    acc = X.binop(fn.__name__, acc, a, loc)
                return acc
            if fn is builtins.abs:
                return X.call_math("abs", args, loc)
            if fn is builtins.float:
                return X.cast_to(X.to_expr(args[0], loc), "float32", loc)
            if fn is builtins.int:
                return X.cast_to(X.to_expr(args[0], loc), "int32", loc)
            if fn is builtins.bool:
                return X.to_bool(args[0], loc)
            if fn is builtins.len:
                return len(args[0].shape) if isinstance(args[0], N.Buffer) else len(args[0])
            if fn is builtins.isinstance or fn is builtins.callable:
                return fn(*args)
            if getattr(fn, "__tilesim_trace_time__", False):  # tilesim's own trace-time helpers (layouts)
                return fn(*args, **kwargs)
            if helpers.traceable(fn):
                return helpers.inline_function(self, fn, args, kwargs, node, f"helper {fn.__name__}")
            name = getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn)))
            hint = "use the T.* equivalent (e.g. T.exp, T.max)" if getattr(fn, "__module__", "") == "math" else \
                "decorate the helper with @T.macro so it is inlined into the kernel"
            raise self.error(KernelSyntaxError, f"the Python function {name} cannot take kernel values", node, hint=hint)
        if fn is builtins.range:
            raise self.error(KernelSyntaxError, "range() is only allowed as a for-loop iterator", node)
        try:
            return fn(*args, **kwargs)
        except KernelError as e:
            raise e.with_loc(loc)  # noqa: B904 - the same exception, located
        except Exception as e:  # noqa: BLE001
            name = getattr(fn, "__name__", repr(fn))
            raise KernelSyntaxError(f"calling {name}(...) at trace time raised {type(e).__name__}: {e}", loc) from e

    def ex_Lambda(self, node):
        return helpers.make_kernel_lambda(self, node)

    def ex_ListComp(self, node):
        return helpers.comprehension(self, node)

    ex_SetComp = ex_DictComp = ex_GeneratorExp = ex_ListComp

    def ex_Starred(self, node):
        return self.ev(node.value)


class _Astype:
    """``x.astype`` awaiting its dtype argument."""

    def __init__(self, value):
        self.value = value
