"""``tilesim ops NODE``: where every consumer implements one IR node class.

Contract
--------
``describe(name) -> list[str]`` gives, for the node class ``name`` of :mod:`tilesim.ir.nodes` (any
case), one line per implementation: the frontend functions that build the node (found in the
frontend's source; the ``T.*`` primitives whose builder it is in brackets), then every rule table's
rule for it (verifier, printer, interpreter, CUDA lowering and barrier events, cost analysis), each as
``consumer: module:line function``. The consumer modules are imported by name (:data:`CONSUMERS`) so
that their tables exist; one that cannot be imported (an optional dependency missing) is listed as
unavailable. An unknown name is a ``KeyError`` whose text lists the known classes.
``main(name, out)`` prints that and returns the exit status (2 for an unknown name).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import sys

from .rules import where
from .traverse import DECLS

#: modules whose import registers every consumer's rule tables
CONSUMERS = ("tilesim.ir.verify", "tilesim.ir.printer", "tilesim.backends.interp.rules",
             "tilesim.backends.cuda.rules", "tilesim.analysis.cost")
FRONTEND = "tilesim.frontend"
#: consumers in pipeline order (by the first word of their tables' names)
_ORDER = {"verifier": 0, "printer": 1, "interpreter": 2, "CUDA": 3, "cost": 4}


def node_class(name: str) -> type:
    by_name = {c.__name__.lower(): c for c in DECLS}
    cls = by_name.get(name.lower())
    if cls is None:
        raise KeyError(f"unknown IR node class {name!r}; known: {', '.join(sorted(c.__name__ for c in DECLS))}")
    return cls


class _Builds(ast.NodeVisitor):
    """Functions of one module whose code calls ``N.<name>(...)``: ``(module, def line, function)``."""

    def __init__(self, module: str, name: str):
        self.module, self.name = module, name
        self.stack: list = []
        self.sites: list = []

    def visit_FunctionDef(self, f):
        self.stack.append(f)
        self.generic_visit(f)
        self.stack.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Call(self, c):
        fn = c.func
        if (isinstance(fn, ast.Attribute) and fn.attr == self.name and isinstance(fn.value, ast.Name)
                and fn.value.id == "N" and self.stack):
            site = (self.module, self.stack[-1].lineno, self.stack[-1].name)
            if site not in self.sites:
                self.sites.append(site)
        self.generic_visit(c)


def _frontend_sites(cls: type) -> list[tuple[str, int, str]]:
    """``(module, def line, function)`` of the frontend functions whose code constructs ``N.<cls>(...)``."""
    pkg = importlib.import_module(FRONTEND)
    out = []
    for info in pkgutil.iter_modules(pkg.__path__):
        mod = importlib.import_module(f"{FRONTEND}.{info.name}")
        v = _Builds(mod.__name__, cls.__name__)
        v.visit(ast.parse(inspect.getsource(mod)))
        out += v.sites
    return out


def _primitives(module: str, function: str) -> list[str]:
    prims = importlib.import_module(f"{FRONTEND}.prims")
    return sorted(f"T.{n}" for n, fn in prims.BUILDERS.items()
                  if getattr(fn, "__module__", None) == module and getattr(fn, "__name__", None) == function)


def describe(name: str) -> list[str]:
    cls = node_class(name)
    lines = [f"{cls.__name__} ({cls.__module__})"]
    unavailable = []
    for m in CONSUMERS:
        try:
            importlib.import_module(m)
        except ImportError as e:
            unavailable.append(f"{m} (unavailable: {e})")
    for module, line, fn in _frontend_sites(cls):
        prims = _primitives(module, fn)
        lines.append(f"frontend: {module}:{line} {fn}" + (f" [{', '.join(prims)}]" if prims else ""))
    for table, loc, fn in sorted(where(cls), key=lambda w: _ORDER.get(w[0].split()[0], len(_ORDER))):
        lines.append(f"{table}: {loc} {fn}")
    lines += [f"not loaded: {u}" for u in unavailable]
    return lines


def main(name: str, out=None) -> int:
    out = sys.stdout if out is None else out
    try:
        lines = describe(name)
    except KeyError as e:
        print(f"tilesim ops: {e.args[0]}", file=sys.stderr)
        return 2
    print("\n".join(lines), file=out)
    return 0


__all__ = ["CONSUMERS", "describe", "main", "node_class"]
