"""``tilelang.testing.requires_package`` (also ``tvm.testing.requires_package``): mark a test as needing
packages.

``requires_package(*names)`` is a decorator that returns the function itself, as TVM's does: a direct call
runs it whatever is installed (a program's ``main()`` may call a test function whose body does not use
the package). When any named package cannot be found (``importlib.util.find_spec``; nothing is imported)
and pytest is already imported (a test session), the function gets a ``pytest.mark.skipif`` mark naming
the missing packages, so pytest skips it; the list is also kept as ``fn.tilesim_missing_packages``.
"""

from __future__ import annotations

import importlib.util

from ..optional import loaded

__all__ = ["requires_package", "missing_packages"]


def missing_packages(*names: str) -> list[str]:
    """The names in ``names`` whose module cannot be found."""
    missing = []
    for name in names:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


def requires_package(*names: str):
    """Decorator: mark ``fn`` to be skipped by pytest when any of ``names`` is not installed."""

    def decorate(fn):
        missing = missing_packages(*names)
        fn.tilesim_missing_packages = missing
        pytest = loaded("pytest")
        if missing and pytest is not None:
            fn = pytest.mark.skipif(True, reason=f"needs the package(s) {', '.join(missing)}")(fn)
        return fn

    return decorate
