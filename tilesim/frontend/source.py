"""Reading a kernel function's source: AST, file, line/column offsets, and its Python environment."""

from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
from dataclasses import dataclass

from ..errors import KernelSyntaxError, Loc


@dataclass
class Source:
    """The parsed function and how to map its AST positions back to the file."""

    file: str
    fn_node: ast.FunctionDef
    line_offset: int  # add to ast line numbers
    col_offset: int  # add to ast column numbers (indentation removed by dedent)

    def loc(self, node: ast.AST) -> Loc:
        line = getattr(node, "lineno", 1) + self.line_offset
        col = getattr(node, "col_offset", 0) + self.col_offset
        end_col = getattr(node, "end_col_offset", None)
        if end_col is not None and getattr(node, "end_lineno", None) == getattr(node, "lineno", None):
            end_col += self.col_offset
        else:
            end_col = None
        return Loc(self.file, line, col, end_col)


def get_source(fn) -> Source:
    """Parse ``fn``'s source. Raises ``KernelSyntaxError`` if the source cannot be read."""
    try:
        lines, start = inspect.getsourcelines(fn)
        file = inspect.getsourcefile(fn) or inspect.getfile(fn)
    except (OSError, TypeError) as e:
        raise KernelSyntaxError(
            f"cannot read the source of {getattr(fn, '__name__', fn)!r}: {e}",
            hint="define kernels in a .py file (not in an interactive prompt or exec'd string)") from None
    text = "".join(lines)
    dedented = textwrap.dedent(text)
    first = next((ln for ln in lines if ln.strip()), "")
    first_d = next((ln for ln in dedented.splitlines(True) if ln.strip()), "")
    col_offset = len(first) - len(first.lstrip()) - (len(first_d) - len(first_d.lstrip()))
    tree = ast.parse(dedented)
    fn_node = next(n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return Source(file=file, fn_node=fn_node, line_offset=start - 1, col_offset=col_offset)


def python_env(fn) -> dict:
    """Names visible to ``fn``: builtins, then its globals, then its closure cells."""
    env = dict(vars(builtins))
    env.update(fn.__globals__)
    if fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                env[name] = cell.cell_contents
            except ValueError:  # empty cell: the name is assigned after the def
                pass
    return env
