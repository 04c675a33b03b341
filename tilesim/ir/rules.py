"""Rule tables: one rule per IR node class, for every consumer that dispatches on the node class.

Contract
--------
* ``table = RuleTable("interpreter statements", groups=G.STMTS)`` makes a named, initially empty
  table; ``@table.register(N.Copy, N.Fill)`` beside an implementation registers it for those classes
  (registering a class twice is an ``InternalError``: one rule per class).
* ``table[cls]`` is the rule of a class, ``table(node)`` the rule of a node's class; a missing rule
  is an ``InternalError`` naming the table and the class (and, for ``table(node)``, the node's source
  location) — never a bare ``KeyError``. :meth:`RuleTable.error` builds that error, for hot paths
  that look up :attr:`RuleTable.rules` (a plain dict) directly. ``get``, ``in``, iteration and
  ``len`` behave as for the dict of rules.
* How a rule is called is the consumer's business (``fn(node, ctx)``, ``fn(gen, node)``, ...): the
  table only finds it.
* ``groups`` are the node classes the table must cover; :meth:`RuleTable.missing` lists the
  uncovered ones and :meth:`RuleTable.check_coverage` raises for them (the tests call it).
* :func:`tables` lists every table made in the process; :func:`where` ``(cls)`` gives, for each,
  the implementing function's ``module:line`` (``tilesim ops NODE`` prints it).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable

from ..errors import InternalError

_TABLES: list[RuleTable] = []


def _loc_text(node) -> str:
    loc = getattr(node, "loc", None)
    return f" at {loc}" if loc is not None else " (no source location)"


def source_of(fn) -> tuple[str, int, str]:
    """``(module, line, name)`` of a rule function (through ``functools.partial`` and wrappers)."""
    f = inspect.unwrap(getattr(fn, "func", fn))
    code = getattr(f, "__code__", None)
    line = code.co_firstlineno if code is not None else 0
    try:  # the ``def`` line, below the decorators
        src, start = inspect.getsourcelines(f)
        line = start + next((i for i, t in enumerate(src) if t.lstrip().startswith(("def ", "async def "))), 0)
    except (OSError, TypeError):
        pass
    return getattr(f, "__module__", "?") or "?", line, getattr(f, "__qualname__", repr(f))


class RuleTable:
    """A named map node class → rule, with coverage of ``groups`` (see the module docstring)."""

    def __init__(self, name: str, groups: Iterable[type] = ()):
        self.name = name
        self.groups = frozenset(groups)
        self.rules: dict[type, Callable] = {}
        _TABLES.append(self)

    def __repr__(self) -> str:
        return f"RuleTable({self.name!r}, {len(self.rules)} rules)"

    # ------------------------------------------------------------------------- registration
    def register(self, *classes: type) -> Callable:
        """Decorator: ``fn`` is the rule of every class in ``classes``."""
        if not classes:
            raise InternalError(f"rule table '{self.name}': register() needs at least one node class")

        def deco(fn):
            for cls in classes:
                old = self.rules.get(cls)
                if old is not None and old is not fn:
                    m, line, _ = source_of(old)
                    raise InternalError(f"rule table '{self.name}': {cls.__name__} is registered twice "
                                        f"(first at {m}:{line})")
                self.rules[cls] = fn
            return fn
        return deco

    # ------------------------------------------------------------------------------- lookup
    def error(self, node=None, cls: type | None = None) -> InternalError:
        """The error for a class without a rule (``node`` gives its source location)."""
        cls = type(node) if cls is None else cls
        where_ = _loc_text(node) if node is not None else ""
        return InternalError(f"rule table '{self.name}' has no rule for {cls.__name__}{where_}")

    def __getitem__(self, cls: type) -> Callable:
        try:
            return self.rules[cls]
        except KeyError:
            raise self.error(cls=cls) from None

    def __call__(self, node) -> Callable:
        """The rule for ``node``'s class."""
        try:
            return self.rules[type(node)]
        except KeyError:
            raise self.error(node) from None

    def get(self, cls: type, default=None):
        return self.rules.get(cls, default)

    def __contains__(self, cls) -> bool:
        return cls in self.rules

    def __iter__(self):
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def keys(self):
        return self.rules.keys()

    # ----------------------------------------------------------------------------- coverage
    def missing(self) -> frozenset:
        """Classes of ``groups`` without a rule."""
        return frozenset(c for c in self.groups if c not in self.rules)

    def check_coverage(self) -> None:
        """``InternalError`` naming the classes of ``groups`` that have no rule."""
        miss = self.missing()
        if miss:
            raise InternalError(f"rule table '{self.name}' has no rule for "
                                + ", ".join(sorted(c.__name__ for c in miss)))


def tables() -> tuple[RuleTable, ...]:
    """Every rule table made in this process, in creation order."""
    return tuple(_TABLES)


def where(cls: type) -> list[tuple[str, str, str]]:
    """``[(table name, "module:line", function name)]`` of every table with a rule for ``cls``."""
    out = []
    for t in _TABLES:
        fn = t.rules.get(cls)
        if fn is not None:
            m, line, name = source_of(fn)
            out.append((t.name, f"{m}:{line}", name))
    return out


__all__ = ["RuleTable", "source_of", "tables", "where"]
