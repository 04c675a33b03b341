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
  or with an empty key raises ``SystemExit``.
* ``call_factory(obj, args, target)`` calls a user's factory with ``args``: arguments that do not fit
  its signature, and any exception the user's own code raises that is not a tilesim error, become a
  one-line ``SystemExit``.
* ``ArgParser`` is the commands' ``argparse`` parser: a usage error is one line
  (``tilesim run: error: ... (see 'tilesim run -h')``) and exit status 2; ``positive_int`` and
  ``non_negative_int`` are its argument types.
* :func:`one_line` renders any error as one line (a ``KernelError``'s location and hint included).

Every failure here is one line on stderr and a non-zero exit status, never a traceback.

Layer: app (used by ``tilesim.cli`` and ``tilesim.sim.cli``; see :mod:`tilesim.hw`).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import os
import sys

from .errors import KernelError, TilesimError

__all__ = ["ArgParser", "call_factory", "load_factory", "non_negative_int", "one_line", "parse_kv", "positive_int"]


class ArgParser(argparse.ArgumentParser):
    """``argparse`` with one-line usage errors (exit status 2)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} -h')\n")


def _int_at_least(low: int, what: str):
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"expected {what}, got {v}")
        return v
    parse.__name__ = what
    return parse


positive_int = _int_at_least(1, "a positive integer")
non_negative_int = _int_at_least(0, "an integer >= 0")


def one_line(err: BaseException) -> str:
    """``err`` as one line: a ``KernelError``'s message, ``at file:line:col`` and its hint."""
    if isinstance(err, KernelError):
        text = err.message + (f" (at {err.loc})" if err.loc is not None else "") + (f"; hint: {err.hint}" if err.hint
                                                                                     else "")
    elif isinstance(err, OSError) and err.strerror:
        text = f"{err.filename}: {err.strerror}" if err.filename else err.strerror
    else:
        text = str(err) or type(err).__name__
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def call_factory(obj, args: dict, target: str):
    """``obj(**args)`` for the user's factory named by ``target`` (see the module docstring)."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        sig = None
    if sig is not None:
        try:
            sig.bind(**args)
        except TypeError as e:
            params = ", ".join(str(p) for p in sig.parameters.values())
            raise SystemExit(f"tilesim: {target}: {e} (it takes: {params}; give them with --args K=V ...)") from None
    try:
        return obj(**args)
    except TilesimError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's own code failed: say so in one line
        raise SystemExit(f"tilesim: {target}({', '.join(f'{k}={v!r}' for k, v in args.items())}) raised "
                         f"{type(e).__name__}: {one_line(e)}") from None


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
        except (ImportError, SyntaxError):
            mod = None
        if mod is not None and os.path.realpath(getattr(mod, "__file__", "") or "") == os.path.realpath(path):
            if not hasattr(mod, name):
                raise SystemExit(f"tilesim: {path} has no {name!r}")
            return getattr(mod, name)
    if not os.path.isfile(path):
        raise SystemExit(f"tilesim: {path}: no such file" if not os.path.exists(path) else f"tilesim: {path}: not a file")
    mod_spec = importlib.util.spec_from_file_location("_tilesim_user_module", path)
    if mod_spec is None or mod_spec.loader is None:
        raise SystemExit(f"tilesim: cannot load {path} (expected a .py file)")
    mod = importlib.util.module_from_spec(mod_spec)
    sys.modules["_tilesim_user_module"] = mod
    try:
        mod_spec.loader.exec_module(mod)
    except SyntaxError as e:
        raise SystemExit(f"tilesim: {path}:{e.lineno or '?'}: cannot parse it: {e.msg}") from None
    except TilesimError:
        raise
    except Exception as e:  # noqa: BLE001 - running the user's file failed: one line, not a traceback
        raise SystemExit(f"tilesim: importing {path} raised {type(e).__name__}: {one_line(e)}") from None
    if not hasattr(mod, name):
        raise SystemExit(f"tilesim: {path} has no {name!r}")
    return getattr(mod, name)


def parse_kv(items) -> dict:
    """``["M=1024", "dtype=float16", "causal=true"]`` → dict with ints/floats/bools parsed."""
    out = {}
    for it in items or []:
        if "=" not in it or not it.split("=", 1)[0].strip():
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
