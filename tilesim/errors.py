"""Errors raised by tilesim, and how they are shown.

Contract
--------
* ``KernelError`` and its subclasses are **user** errors: something in the kernel source, its
  arguments or a data file is wrong. Each carries an optional :class:`Loc` and a ``hint`` saying how
  to fix it. ``str(err)`` renders ``--> file:line:col``, the source line and a caret under the
  offending column, followed by ``hint: ...``.
* ``InternalError`` is a bug in tilesim. It says so, and names where to report it.
* Nothing user-triggerable is checked with ``assert``.

Subclasses: ``KernelSyntaxError`` (the source is not a kernel tilesim understands),
``KernelTypeError`` (shapes, dtypes, scopes, argument counts), ``KernelRuntimeError`` (a fault while
running: out-of-bounds access in checking mode, write conflicts, wrong tensors passed),
``HardwareModelError`` (a bad hardware data file; it names the file and the key).
``TileLangCompatWarning`` is a warning, not an error: tilesim runs the kernel, real TileLang would not.
"""

from __future__ import annotations

import functools
import linecache
from dataclasses import dataclass

ISSUE_URL = "the tilesim issue tracker"


@dataclass(frozen=True, slots=True)
class Loc:
    """A source position: 1-based line, 0-based column (as Python's ``ast`` reports them)."""

    file: str
    line: int
    col: int = 0
    end_col: int | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col + 1}"


def render_snippet(loc: Loc) -> str:
    """The ``--> file:line:col`` header, the source line and a caret row (empty if unreadable)."""
    head = f"  --> {loc}"
    text = linecache.getline(loc.file, loc.line).rstrip("\n")
    if not text:
        return head
    num = str(loc.line)
    pad = " " * len(num)
    width = 1
    if loc.end_col is not None and loc.end_col > loc.col:
        width = loc.end_col - loc.col
    caret = " " * loc.col + "^" * max(1, min(width, max(1, len(text) - loc.col)))
    return f"{head}\n {pad} |\n {num} | {text}\n {pad} | {caret}"


class TilesimError(Exception):
    """Base class of every error tilesim raises on purpose."""


class KernelError(TilesimError):
    """A user error, shown with the kernel's source location and a fix hint."""

    def __init__(self, message: str, loc: Loc | None = None, hint: str | None = None):
        self.message = message
        self.loc = loc
        self.hint = hint
        super().__init__(message)

    def with_loc(self, loc: Loc | None) -> KernelError:
        """Attach ``loc`` if the error has none yet (inner code may not know where it is)."""
        if self.loc is None and loc is not None:
            self.loc = loc
        return self

    def __str__(self) -> str:
        parts = [self.message]
        if self.loc is not None:
            parts.append(render_snippet(self.loc))
        if self.hint:
            parts.append(f"hint: {self.hint}")
        return "\n".join(parts)


class KernelSyntaxError(KernelError):
    """The kernel source uses a construct or primitive tilesim does not accept."""


class KernelTypeError(KernelError):
    """Shapes, dtypes, scopes or argument counts do not fit together."""


class KernelRuntimeError(KernelError):
    """A fault found while running a kernel (checking mode, bad arguments, conflicts)."""


class HardwareModelError(TilesimError):
    """A hardware model file is malformed; the message names the file and the key."""

    def __init__(self, file: str, key: str, problem: str):
        self.file, self.key, self.problem = file, key, problem
        super().__init__(f"{file}: key '{key}': {problem}")


class InternalError(TilesimError):
    """A bug in tilesim itself, not in the user's kernel."""

    def __init__(self, message: str, detail: str | None = None):
        self.detail = detail
        text = f"internal error (this is a bug in tilesim, please report it on {ISSUE_URL}): {message}"
        if detail:
            text += "\n" + detail
        super().__init__(text)


def user_facing(fn):
    """Decorate a public entry point: a ``KernelError`` leaves it without tilesim's internal frames.

    The error's text already points at the user's source (file:line:col, caret, hint); the Python
    traceback then shows only the user's frames down to the tilesim call they made.
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except KernelError as e:
            raise e.with_traceback(None) from None

    return wrapper


class TileLangCompatWarning(UserWarning):
    """A kernel tilesim runs but real TileLang rejects at compile time (``tilesim.lint``), warned when the
    kernel is compiled; switch off with ``TILESIM_LINT=0``, the pass config ``{"tilesim.lint": False}``
    or ``tilesim.lint.set_enabled(False)``."""


class TargetFallbackWarning(UserWarning):
    """A kernel compiled for a GPU target this machine cannot run (``target="cuda"`` without a usable CUDA GPU,
    ``"hip -mcpu=gfx950"``, ...) runs its tile-level meaning on the interpreter instead (``tilesim.backends``);
    warned once per requested target, switched off with ``TILESIM_TARGET_WARN=0``."""
