"""Frontend: Python kernel source → tile IR (``PrimFunc``).

``trace_prim_func(fn)`` traces a lazy-style ``@T.prim_func``; ``trace_eager(fn, ...)`` traces an
eager-style ``@tilesim.jit`` function for one specialisation. Both run the IR verifier.
"""

from __future__ import annotations

import ast

from ..ir.verify import verify_or_raise
from .source import get_source
from .tracer import Tracer


def trace_prim_func(fn, extra_env: dict | None = None):
    """Trace ``fn`` (parameters annotated with ``T.Tensor``) into a verified ``PrimFunc``.

    ``extra_env``: names of the enclosing factory, used to evaluate string annotations
    (``from __future__ import annotations``) and as a fallback for names not captured by closure.
    """
    pf = Tracer(fn, extra_env=extra_env).trace()
    verify_or_raise(pf)
    return pf


def discover_eager(fn, scalar_args: dict):
    """First pass of an eager kernel: the parameter buffers with ``T.const`` symbols unbound."""
    tr = Tracer(fn, eager=True, scalar_args=scalar_args, discovery=True)
    tr.trace()
    return tr.eager_specs, tr.const_vars


def trace_eager(fn, const_values: dict, scalar_args: dict):
    """Trace an eager kernel with its ``T.const`` symbols bound; returns (PrimFunc, output buffers)."""
    tr = Tracer(fn, eager=True, const_values=const_values, scalar_args=scalar_args)
    pf = tr.trace()
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
