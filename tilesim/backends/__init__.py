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

:func:`get_target` resolves a user's ``target=`` value (a string, a TileLang target dict
``{"kind": "cuda", ...}`` or a ``tvm.target.Target``): ``None``/``"auto"`` picks the available
target of highest ``auto_rank``; a name or alias picks that target (case-insensitive, anything after
the first word ignored, as in ``"cuda -arch=sm_90"``); anything else is a ``KernelTypeError`` that
lists the registered targets.

GPU targets this machine cannot run
-----------------------------------
:func:`gpu_fallback` decides the rule ``JITKernel`` applies: a target whose kind is one of TileLang's GPU
kinds (:data:`GPU_KINDS`: ``cuda``, ``hip``, ``rocm``, ``metal``, ``webgpu``, ``cutedsl``) and which is
either not registered here or whose backend does not run on this machine (``target="cuda"`` without a
usable GPU) is not an error: the program runs its tile-level meaning on the interpreter, and
:func:`warn_fallback` emits one :class:`~tilesim.errors.TargetFallbackWarning` per requested target text
(and reason: a kernel the requested backend refuses is named) and process (``TILESIM_TARGET_WARN=0`` switches the warning off). Any other unknown kind
(``"tpu"``, ``"llvm"``) stays a ``KernelTypeError``.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Callable

from ..errors import KernelTypeError, TargetFallbackWarning

__all__ = ["GPU_KINDS", "Program", "Target", "get_target", "gpu_fallback", "register", "registered", "target_text",
           "warn_fallback"]

#: TileLang's GPU target kinds (its docs/get_started/targets.md)
GPU_KINDS = ("cuda", "hip", "rocm", "metal", "webgpu", "cutedsl")


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


def target_text(target) -> str:
    """A user's ``target=`` value as text: a dict ``{"kind": k, "arch": a}`` -> ``"k -arch=a"``."""
    if target is None:
        return "auto"
    if isinstance(target, dict):
        return " ".join([str(target.get("kind", ""))] + [f"-{k}={v}" for k, v in target.items() if k != "kind"])
    return " ".join(str(target).split())


def _kind(target) -> str:
    words = target_text(target).split()
    return words[0].lower() if words else ""


def get_target(target) -> Target:
    """The registered target for a user's ``target=`` value (see the module docstring)."""
    name = _kind(target)
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


def gpu_fallback(target) -> str | None:
    """Why a GPU ``target`` cannot run here (the program then runs on the interpreter), or None: ``target`` is
    not a GPU kind of :data:`GPU_KINDS` or its backend runs on this machine (see the module docstring)."""
    kind = _kind(target)
    if kind not in GPU_KINDS:
        return None
    registered_target = next((t for t in _TARGETS.values() if kind == t.name or kind in t.aliases), None)
    if registered_target is None:
        return f"tilesim has no {kind} backend"
    return None if registered_target.runs_here() else registered_target.missing


_WARNED: set = set()


def warn_fallback(target, why: str, kernel: str, loc=None) -> None:
    """One :class:`TargetFallbackWarning` per requested target text, reason ``why`` and process
    (``TILESIM_TARGET_WARN=0``: none), attributed to ``loc`` (the kernel's source location) when given."""
    text = target_text(target)
    if (text, why) in _WARNED or os.environ.get("TILESIM_TARGET_WARN", "1").strip().lower() in ("0", "false", "no", "off"):
        return
    _WARNED.add((text, why))
    file, line = (loc.file, loc.line) if loc is not None else ("<tilesim>", 0)
    warnings.warn_explicit(f"target '{text}' does not run on this machine ({why}): kernel {kernel} and every later "
                           f"kernel for that target run their tile-level meaning on the NumPy interpreter "
                           f"(target='interp'); TILESIM_TARGET_WARN=0 silences this", TargetFallbackWarning,
                           file, line, module="tilesim.backends")
