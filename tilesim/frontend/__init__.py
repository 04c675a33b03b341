"""Frontend: Python kernel source → tile IR (``PrimFunc``).

``trace_prim_func(fn)`` traces a lazy-style ``@T.prim_func``; ``trace_eager(fn, ...)`` traces an
eager-style ``@tilesim.jit`` function for one specialisation. Both run the IR verifier. An eager kernel
that makes an output with ``T.empty`` and does not return it → ``KernelSyntaxError`` at the ``T.empty``.

A ``@T.prim_func`` is traced where it is defined (its closure values are read then, as TileLang's
builder does), but a user error in it surfaces only where the program is **used** (compiled, called,
printed, any attribute read): ``trace_prim_func(fn, defer_errors=True)`` returns a
:class:`DeferredPrimFunc` carrying the error. A factory may define several prim_funcs and return the one
its parameters select; the others are never checked, as in TileLang, whose compile-time checks run
when a program is lowered.
"""

from __future__ import annotations

import ast

from ..errors import KernelError, KernelSyntaxError
from ..ir import nodes as N
from ..ir.verify import verify_or_raise
from .source import get_source
from .tracer import Tracer


def trace_prim_func(fn, extra_env: dict | None = None, defer_errors: bool = False):
    """Trace ``fn`` (parameters annotated with ``T.Tensor``) into a verified ``PrimFunc``.

    ``extra_env``: names of the enclosing factory, used to evaluate string annotations
    (``from __future__ import annotations``) and as a fallback for names not captured by closure.
    ``defer_errors``: a ``KernelError`` is returned inside a :class:`DeferredPrimFunc` instead of raised.
    """
    try:
        pf = Tracer(fn, extra_env=extra_env).trace()
        verify_or_raise(pf)
    except KernelError as e:
        if not defer_errors:
            raise
        return DeferredPrimFunc(fn.__name__, e)
    return pf


class DeferredPrimFunc(N.PrimFunc):
    """A ``@T.prim_func`` whose tracing failed: reading any of its fields raises the (located) error."""

    __slots__ = ("_fn_name", "_error")

    def __init__(self, fn_name: str, error: KernelError):  # noqa: D107 - fields stay unset on purpose
        object.__setattr__(self, "_fn_name", fn_name)
        object.__setattr__(self, "_error", error)

    def __getattr__(self, attr):
        raise self._error.with_traceback(None)

    def __repr__(self):
        return f"<prim_func {self._fn_name}: not traceable ({type(self._error).__name__})>"


def discover_eager(fn, scalar_args: dict):
    """First pass of an eager kernel: the parameter buffers with ``T.const`` symbols unbound."""
    tr = Tracer(fn, eager=True, scalar_args=scalar_args, discovery=True)
    tr.trace()
    return tr.eager_specs, tr.const_vars


def trace_eager(fn, const_values: dict, scalar_args: dict):
    """Trace an eager kernel with its ``T.const`` symbols bound; returns (PrimFunc, output buffers)."""
    tr = Tracer(fn, eager=True, const_values=const_values, scalar_args=scalar_args)
    pf = tr.trace()
    for buf in tr.outputs_declared():  # an output made but never returned would be dropped
        if buf not in tr.outputs:
            raise KernelSyntaxError(f"the output '{buf.name}' (T.empty) of eager kernel {fn.__name__} is never "
                                    "returned", buf.loc, hint=f"end the kernel with `return {buf.name}`")
    verify_or_raise(pf)
    return pf, tr.outputs


def is_eager_source(fn) -> bool:
    """True if ``fn`` is an eager kernel (no nested ``@T.prim_func`` definition)."""
    src = get_source(fn)
    for node in ast.walk(src.fn_node):
        if node is src.fn_node:
            continue
        if isinstance(node, ast.FunctionDef):
            for d in node.decorator_list:
                target = d.func if isinstance(d, ast.Call) else d
                name = getattr(target, "attr", getattr(target, "id", ""))
                if name == "prim_func":
                    return False
    return True
