"""Arguments shared by the ``tilesim`` commands: ``FILE.py::NAME`` targets and ``KEY=VALUE`` lists.

Contract
--------
* ``load_factory("path/to/file.py::name")`` returns the object ``name`` defined in that file. A file
  inside a package (``__init__.py`` up the tree, e.g. ``kernels/norms.py``) is imported under its
  dotted name, so a module that registers kernels runs once; any other file is executed as the module
  ``_tilesim_user_module``. A malformed target, a file that cannot be loaded or a missing name raises
  ``SystemExit`` with a ``tilesim: ...`` message.
* ``parse_kv(["M=1024", "dtype=float16", "causal=true"])`` returns a dict with ints, floats and
  bools parsed (``true``/``false`` in any case), other values kept as strings; an item without ``=``
  raises ``SystemExit``.

Layer: app (used by ``tilesim.cli`` and ``tilesim.sim.cli``; see :mod:`tilesim.hw`).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

__all__ = ["load_factory", "parse_kv"]


def _package_module(path: str):
    """``kernels/norms.py`` → ``"kernels.norms"`` when the file sits in a package (``__init__.py`` up
    the tree), else None. Importing such a file under its package name runs it once, so a module that
    registers kernels (the library) is not executed a second time."""
    path = os.path.realpath(path)
    d, base = os.path.split(path)
    if not base.endswith(".py"):
        return None
    parts = [base[:-3]]
    while os.path.isfile(os.path.join(d, "__init__.py")):
        d, pkg = os.path.split(d)
        parts.append(pkg)
    return ".".join(reversed(parts)) if len(parts) > 1 else None


def load_factory(spec: str):
    """``path/to/file.py::name`` → the object ``name`` defined in that file."""
    if "::" not in spec:
        raise SystemExit(f"tilesim: expected FILE.py::NAME, got {spec!r}")
    path, name = spec.split("::", 1)
    dotted = _package_module(path)
    if dotted is not None:  # a module of an installed package (e.g. kernels/norms.py): import it once
        try:
            mod = importlib.import_module(dotted)
        except ImportError:
            mod = None
        if mod is not None and os.path.realpath(getattr(mod, "__file__", "") or "") == os.path.realpath(path):
            if not hasattr(mod, name):
                raise SystemExit(f"tilesim: {path} has no {name!r}")
            return getattr(mod, name)
    mod_spec = importlib.util.spec_from_file_location("_tilesim_user_module", path)
    if mod_spec is None or mod_spec.loader is None:
        raise SystemExit(f"tilesim: cannot load {path}")
    mod = importlib.util.module_from_spec(mod_spec)
    sys.modules["_tilesim_user_module"] = mod
    mod_spec.loader.exec_module(mod)
    if not hasattr(mod, name):
        raise SystemExit(f"tilesim: {path} has no {name!r}")
    return getattr(mod, name)


def parse_kv(items) -> dict:
    """``["M=1024", "dtype=float16", "causal=true"]`` → dict with ints/floats/bools parsed."""
    out = {}
    for it in items or []:
        if "=" not in it:
            raise SystemExit(f"tilesim: expected KEY=VALUE, got {it!r}")
        k, v = it.split("=", 1)
        low = v.lower()
        if low in ("true", "false"):
            out[k] = low == "true"
            continue
        try:
            out[k] = int(v)
            continue
        except ValueError:
            pass
        try:
            out[k] = float(v)
            continue
        except ValueError:
            pass
        out[k] = v
    return out
