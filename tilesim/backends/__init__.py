"""Execution targets: each backend registers itself here; ``JITKernel`` looks targets up by name.

Contract
--------
A backend package registers a :class:`Target` when it is imported (``tilesim/__init__.py`` imports the
built-in ones: ``interp``, the NumPy interpreter, and ``cuda``, the Numba CUDA backend). This module
imports no backend: the dependency runs from the backends to the registry, never back.

``Target.compile(pf, pass_configs)`` returns a :class:`Program`. ``JITKernel`` then

1. binds the call's arguments (``tilesim.binding.split_call``);
2. if ``target.runs_here()`` is false, raises ``KernelRuntimeError`` saying ``target.missing``;
3. calls ``program.call(pf, out_idx, values)``: a backend that takes some arguments as they are
   (device tensors) returns the outputs, otherwise ``NotImplemented``;
4. else binds the arguments on the host (``binding.bind_host``) and calls
   ``program.run(pf, arrays, scalars, options, progress)``, which writes the outputs in place.

:func:`get_target` resolves a user's ``target=`` string: ``None``/``"auto"`` picks the available
target of highest ``auto_rank``; a name or alias picks that target (case-insensitive, anything after
the first word ignored, as in ``"cuda -arch=sm_90"``); anything else is a ``KernelTypeError`` that
lists the registered targets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import KernelTypeError

__all__ = ["Program", "Target", "get_target", "register", "registered"]


class Program:
    """What a target compiles a ``PrimFunc`` to (see the module docstring for how it is run)."""

    #: generated source shown by ``JITKernel.get_kernel_source()`` (``None``: the tile IR is shown)
    source: str | None = None

    def call(self, pf, out_idx: tuple, values: list):
        """Run with the caller's arguments as they are, or return ``NotImplemented`` (host binding)."""
        return NotImplemented

    def run(self, pf, arrays: dict, scalars: dict, options, progress=None) -> None:
        """Run on host-bound arguments (``binding.HostBinding``): outputs are written into ``arrays``."""
        raise NotImplementedError


def _always() -> bool:
    return True


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    compile: Callable  # (pf, pass_configs: dict) -> Program
    available: Callable[[], bool] = _always  # ``target="auto"`` may pick it
    runs_here: Callable[[], bool] = _always  # programs can run on this machine (may be wider than available)
    missing: str = ""  # what this machine lacks when ``runs_here()`` is false
    hint: str = ""  # how to get around it
    auto_rank: int = 0  # "auto" picks the available target of highest rank
    aliases: tuple = ()


_TARGETS: dict[str, Target] = {}


def register(target: Target) -> Target:
    """Add ``target`` (a backend calls this when it is imported); registering a name again replaces it."""
    _TARGETS[target.name] = target
    return target


def registered() -> tuple:
    """Names of the registered targets, in registration order."""
    return tuple(_TARGETS)


def get_target(target) -> Target:
    """The registered target for a user's ``target=`` value (see the module docstring)."""
    if target in (None, "auto"):
        name = "auto"
    else:
        words = str(target).split()
        name = words[0].lower() if words else ""
    if name == "auto":
        usable = [t for t in _TARGETS.values() if t.available()]
        if not usable:
            raise KernelTypeError("no registered target is available on this machine")
        return max(usable, key=lambda t: t.auto_rank)
    for t in _TARGETS.values():
        if name == t.name or name in t.aliases:
            return t
    names = ", ".join(f"'{n}'" for n in ("auto", *_TARGETS))
    raise KernelTypeError(f"unknown target {target!r}", hint=f"use one of the registered targets: {names}")
