"""The package's import structure: no import cycle, and imports at module level.

The graph is built from the source with ``ast`` (nothing is imported): an edge ``a -> b`` for every
module-level ``import``/``from ... import`` in module ``a`` that names module ``b`` of ``tilesim``,
``kernels`` or ``hwmodels`` (``from pkg import name`` names ``pkg.name`` when that is a module, else
``pkg``). Imports inside functions and under ``if TYPE_CHECKING:`` are not edges; ``from __future__``
is not counted at all.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("tilesim", "kernels", "hwmodels")
#: the issue-12 target: imports hidden inside functions are under 5% of all of tilesim's imports
MAX_FUNCTION_LEVEL_SHARE = 0.05


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join(parts)] = path
    return mods


def _targets(mod: str, is_pkg: bool, node, mods: dict) -> list[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = mod if is_pkg else mod.rpartition(".")[0]
        if node.level:
            parts = base.split(".")
            base = ".".join(parts[: len(parts) - (node.level - 1)])
            full = base + ("." + node.module if node.module else "")
        else:
            full = node.module
        names = [f"{full}.{a.name}" if f"{full}.{a.name}" in mods else full for a in node.names]
    out = []
    for t in names:
        while t and t not in mods:  # `import a.b.c` of a non-module name: the nearest enclosing module
            t = t.rpartition(".")[0]
        if t:
            out.append(t)
    return out


def _is_type_checking(node) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _visit(node, mod: str, is_pkg: bool, mods: dict, graph: dict, imports: list, in_function=False, edges=True):
    for ch in ast.iter_child_nodes(node):
        if isinstance(ch, (ast.Import, ast.ImportFrom)):
            if isinstance(ch, ast.ImportFrom) and ch.module == "__future__":
                continue
            imports.append((mod, ch.lineno, in_function))
            if edges and not in_function:
                graph[mod].update(t for t in _targets(mod, is_pkg, ch, mods) if t != mod)
            continue
        inner = in_function or isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        _visit(ch, mod, is_pkg, mods, graph, imports, inner, edges and not _is_type_checking(ch))


def scan():
    """(graph: module -> set of modules, [(module, line, inside a function) of every counted import])."""
    mods = _modules()
    graph: dict[str, set] = {m: set() for m in mods}
    imports: list = []
    for mod, path in mods.items():
        _visit(ast.parse(path.read_text(), str(path)), mod, path.name == "__init__.py", mods, graph, imports)
    return graph, imports


def cycles(graph: dict) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_cycle_finder_finds_cycles():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles(g) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle():
    graph, _ = scan()
    assert any(graph.values()), "the scan found no imports at all"
    found = cycles(graph)
    assert not found, "module-level import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_function_level_imports_are_rare():
    _, imports = scan()
    ours = [(m, line, inner) for m, line, inner in imports if m.split(".")[0] == "tilesim"]
    hidden = [(m, line) for m, line, inner in ours if inner]
    share = len(hidden) / len(ours)
    listing = "\n".join(f"  {m}:{line}" for m, line in hidden)
    assert share < MAX_FUNCTION_LEVEL_SHARE, (
        f"{len(hidden)} of {len(ours)} imports in tilesim/ are inside functions ({share:.1%}, limit "
        f"{MAX_FUNCTION_LEVEL_SHARE:.0%}); move them to module level (optional packages: tilesim.optional):\n"
        + listing)
