"""Plain Python helpers, lambdas and ``@T.macro`` functions called inside a kernel: inlined at the call.

Contract
--------
* TileLang evaluates helper functions at trace time on its symbolic values, so a plain (undecorated)
  Python function of the user's program called with kernel values (loop variables, buffers, element
  expressions) is **inlined** here exactly like a ``@T.macro``: its body is traced statement by
  statement in a new frame whose names are the function's globals, closure cells and bound arguments.
  Statements it contains (``T.copy``, assignments, loops) are emitted at the call site; its ``return``
  value is the call's value. Called with Python values only, a helper still just runs as Python.
* A ``return`` ends the inlined function when it is reached through Python-level control flow
  (``if`` on a Python value, a Python ``for``); a ``return`` under kernel control flow (an ``if`` on a
  kernel value, a kernel loop, a launch opened inside the helper) is a ``KernelSyntaxError``: the kernel
  has one straight-line body per call site (use ``T.if_then_else`` for a value that depends on data).
* Lambdas are inlined the same way: a lambda written in a kernel body becomes a :class:`KernelLambda`
  (a value that can be passed around, e.g. to ``T.Layout(shape, lambda i, j: ...)``, and called);
  a lambda defined outside the kernel is found in its file's source by line and position. An
  undecorated ``def`` inside a kernel body or an inlined helper (:func:`define_function`) is the same
  kind of value with a statement body (its ``return`` follows the rule above); a decorated one is a
  ``KernelSyntaxError``.
* Only functions whose source is the user's (not tilesim's, not the standard library's, not an
  installed package's) are traced; a function without readable source called with kernel values stays
  a ``KernelSyntaxError`` naming it (:func:`traceable` decides).
* Inlining depth is bounded (:data:`MAX_DEPTH`), so unbounded recursion is a located error.
* Comprehensions (list, set, dict, generator) over Python iterables are evaluated at trace time in their
  own scope (:func:`comprehension`); their elements may be kernel values.
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import linecache
import sysconfig
import types
from pathlib import Path

from ..errors import KernelSyntaxError, KernelTypeError
from .exprs import is_ir
from .source import Source, get_source, python_env

MAX_DEPTH = 64


class Return(Exception):  # noqa: N818 - control flow, not an error
    """Raised by a ``return`` of an inlined function; carries the returned value."""

    def __init__(self, value):
        super().__init__("return")
        self.value = value


@functools.lru_cache(maxsize=1)
def _library_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    dirs.add(str(Path(__file__).resolve().parents[1]))  # tilesim itself
    return tuple(str(Path(d).resolve()) for d in dirs if d)


def traceable(fn) -> bool:
    """True if ``fn`` is a plain Python function of the user's program (so it is inlined)."""
    if not isinstance(fn, types.FunctionType):
        return False
    if (getattr(fn, "__module__", "") or "").split(".")[0] == "tilesim":
        return False
    file = fn.__code__.co_filename
    if file.startswith("<"):
        return False
    try:
        path = str(Path(file).resolve())
    except OSError:
        return False
    return not any(path.startswith(d + "/") or path == d for d in _library_dirs())


# ---------------------------------------------------------------------------------------- lambdas
def _lambda_node(fn) -> tuple[Source, ast.Lambda]:
    """The ``ast.Lambda`` of a lambda function object, from its file (by line, arguments and column)."""
    code = fn.__code__
    file = code.co_filename
    lines = linecache.getlines(file)
    if not lines:
        raise KernelSyntaxError(f"cannot read the source of the lambda at {file}:{code.co_firstlineno}",
                                hint="define helpers in a .py file, or use a named function")
    tree = _parse_file(file, "".join(lines))
    want = [a for a in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]]
    cands = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda) and n.lineno == code.co_firstlineno
             and [a.arg for a in n.args.posonlyargs + n.args.args + n.args.kwonlyargs] == want]
    if len(cands) > 1:
        cols = {p[2] for p in code.co_positions() if p[2] is not None}
        cands = [n for n in cands if n.body.col_offset in cols] or cands[:1]
    if not cands:
        raise KernelSyntaxError(f"cannot find the source of the lambda at {file}:{code.co_firstlineno}",
                                hint="use a named helper function instead")
    return Source(file=file, fn_node=None, line_offset=0, col_offset=0), cands[0]


@functools.lru_cache(maxsize=64)
def _parse_file(file: str, text: str) -> ast.Module:
    return ast.parse(text, filename=file)


class KernelLambda:
    """A lambda (or nested ``def``) written inside a kernel body: traced each time it is called, in its
    defining scope."""

    def __init__(self, tracer, node: ast.Lambda | ast.FunctionDef, src: Source, env: dict,
                 signature: inspect.Signature):
        self.tracer = tracer
        self.node = node
        self.src = src
        self.env = env  # the defining frame's names (late binding, as Python closures)
        self.__signature__ = signature
        self.__name__ = getattr(node, "name", "<lambda>")

    def __call__(self, *args, **kwargs):
        return call_kernel_lambda(self.tracer, self, args, kwargs, self.node)


def make_kernel_lambda(tr, node: ast.Lambda | ast.FunctionDef) -> KernelLambda:
    """``lambda ...: expr`` (or a nested ``def``) in a kernel body; defaults are evaluated now, as Python
    does."""
    a = node.args
    P = inspect.Parameter
    params = []
    pos = a.posonlyargs + a.args
    defaults = [tr.ev(d) for d in a.defaults]
    first_default = len(pos) - len(defaults)
    for k, arg in enumerate(pos):
        kind = P.POSITIONAL_ONLY if k < len(a.posonlyargs) else P.POSITIONAL_OR_KEYWORD
        dflt = defaults[k - first_default] if k >= first_default else P.empty
        params.append(P(arg.arg, kind, default=dflt))
    if a.vararg:
        params.append(P(a.vararg.arg, P.VAR_POSITIONAL))
    for arg, d in zip(a.kwonlyargs, a.kw_defaults):
        params.append(P(arg.arg, P.KEYWORD_ONLY, default=P.empty if d is None else tr.ev(d)))
    if a.kwarg:
        params.append(P(a.kwarg.arg, P.VAR_KEYWORD))
    return KernelLambda(tr, node, tr.frame.src, tr.frame.env, inspect.Signature(params))


def _bind(sig: inspect.Signature, args, kwargs, name, loc):
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise KernelTypeError(f"{name}: {e}", loc, hint=f"signature: {name}{sig}") from None
    bound.apply_defaults()
    return bound.arguments


def call_kernel_lambda(tr, lam: KernelLambda, args, kwargs, node):
    loc = lam.src.loc(lam.node) if node is lam.node else tr.loc(node)
    what = "lambda" if isinstance(lam.node, ast.Lambda) else f"function {lam.__name__}"
    bound = _bind(lam.__signature__, args, kwargs, what, loc)
    env = dict(lam.env)
    env.update(bound)
    with tr.inline_frame(lam.src, env, bound, node, what):
        if isinstance(lam.node, ast.Lambda):
            return tr.ev(lam.node.body)
        try:
            tr.visit_body(lam.node.body)
        except Return as r:
            return r.value
    return None


def define_function(tr, node: ast.FunctionDef) -> None:
    """``def f(...): ...`` inside a kernel body or inlined helper: binds ``f`` to a :class:`KernelLambda`."""
    if node.decorator_list:
        raise KernelSyntaxError(f"the decorated function {node.name} cannot be defined inside a kernel",
                                tr.loc(node), hint="define it outside the kernel (a @T.macro at module level)")
    tr.bind(node.name, make_kernel_lambda(tr, node), node)


# ---------------------------------------------------------------------------------------- functions
def inline_function(tr, fn, args, kwargs, node, what: str):
    """Trace ``fn``'s body at the call ``node`` with ``args`` bound; returns its ``return`` value.

    ``what`` names the function in errors ("macro scale_rows", "helper make_dq_layout").
    """
    loc = tr.loc(node)
    if fn.__name__ == "<lambda>":
        src, lam = _lambda_node(fn)
        env = python_env(fn)
        bound = _bind(inspect.signature(fn), args, kwargs, what, loc)
        env.update(bound)
        with tr.inline_frame(src, env, bound, node, what):
            return tr.ev(lam.body)
    src = get_source(fn)
    env = python_env(fn)
    bound = _bind(inspect.signature(fn), args, kwargs, what, loc)
    env.update(bound)
    with tr.inline_frame(src, env, bound, node, what):
        try:
            tr.visit_body(src.fn_node.body)
        except Return as r:
            return r.value
    return None


# ---------------------------------------------------------------------------------------- comprehensions
def comprehension(tr, node):
    """``[e for x in seq if c]`` (list, set, dict, generator) over **Python** iterables, at trace time.

    Targets live in their own scope (as in Python 3); elements may be kernel values. Iterating over a
    kernel value or filtering on one is a ``KernelSyntaxError`` (write a kernel loop instead). A
    generator expression is evaluated eagerly (an iterator over the list).
    """
    out: list = []
    with tr.inline_frame(tr.frame.src, dict(tr.frame.env), (), node, "comprehension"):
        _generate(tr, node, 0, out)
    if isinstance(node, ast.ListComp):
        return out
    if isinstance(node, ast.SetComp):
        return set(out)
    if isinstance(node, ast.DictComp):
        return dict(out)
    return iter(out)


def _generate(tr, node, k, out):
    if k == len(node.generators):
        if isinstance(node, ast.DictComp):
            out.append((tr.ev(node.key), tr.ev(node.value)))
        else:
            out.append(tr.ev(node.elt))
        return
    gen = node.generators[k]
    seq = _python_iterable(tr, gen.iter)
    for v in seq:
        _bind_target(tr, gen.target, v)
        keep = True
        for cond in gen.ifs:
            c = tr.ev(cond)
            if is_ir(c):
                raise tr.error(KernelSyntaxError, "a comprehension filter on a kernel value", cond,
                               hint="filter on Python values; use T.if_then_else or an `if` in a kernel loop")
            if not c:
                keep = False
                break
        if keep:
            _generate(tr, node, k + 1, out)


def _python_iterable(tr, it):
    if isinstance(it, ast.Call):
        fn = tr.ev(it.func)
        if fn is builtins.range:
            args, kwargs = tr.call_args(it)
            if kwargs or any(is_ir(a) for a in args):
                raise tr.error(KernelSyntaxError, "range() of kernel values in a comprehension", it,
                               hint="a comprehension is unrolled at trace time: its range must be Python ints")
            return range(*args)
    seq = tr.ev(it)
    if is_ir(seq):
        raise tr.error(KernelSyntaxError, "a comprehension over a kernel value", it,
                       hint="comprehensions are unrolled at trace time; loop with T.serial / T.Parallel instead")
    return seq


def _bind_target(tr, target, v):
    if isinstance(target, ast.Name):
        tr.bind(target.id, v, target)
        return
    if isinstance(target, (ast.Tuple, ast.List)) and not is_ir(v):
        vals = list(v)
        if len(vals) != len(target.elts):
            raise tr.error(KernelSyntaxError, f"cannot unpack {len(vals)} values into {len(target.elts)} names",
                           target)
        for t, x in zip(target.elts, vals):
            _bind_target(tr, t, x)
        return
    raise tr.error(KernelSyntaxError, "unsupported comprehension target", target)
