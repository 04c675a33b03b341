"""The core's one seam to hardware models: :func:`resolve` turns a name into a loaded model.

Layers
------
The **core** (``tilesim`` minus the app layer below: language, frontend, ir, backends, analysis,
sim engine, kernel objects, errors, dtypes, testing) never imports the top-level packages
``kernels`` (the kernel library) or ``hwmodels`` (the hardware models); both import the core. The
simulator and the cost analysis read a hardware model through the attributes :class:`Hardware`
lists and take the model as an argument. A user who writes ``kernel.simulate(hw="h100")`` gives a
*name*; this module is the only place the core turns a name into a model.

The **app layer** sits above both packages and may import them at module level: ``tilesim.cli``
and ``tilesim.__main__`` (the command line), ``tilesim.cli_args``, ``tilesim.report`` (``tilesim
report``), ``tilesim.tune`` (``tilesim tune``), ``tilesim.bench``, ``tilesim.runner`` (``tilesim
run``), ``tilesim.sim.cli`` (``tilesim sim``) and ``tilesim.sim.validation`` (calibration of the
hardware-model data files). The core never imports the app layer.
``tests/meta/test_layers.py`` checks the rule and imports the core with both packages blocked.

Contract
--------
* :class:`Hardware` is a :class:`typing.Protocol` of what the core reads from a model;
  ``hwmodels.HardwareModel`` satisfies it. The core annotates with it and never names the class.
* ``resolve(hw) -> model``: a model (not a ``str``/``os.PathLike``, and its class has every method
  :class:`Hardware` lists; properties are not evaluated) is returned as it is; anything else (a
  built-in name, an alias, a ``.toml`` path, ``"file.toml:variant"``) goes to the installed
  resolver. Errors are the resolver's (``hwmodels``: :class:`~tilesim.errors.HardwareModelError`
  naming the file and key, or the unknown name and the built-ins).
* ``set_resolver(fn) -> previous``: install ``fn(name_or_path) -> model`` (``None`` restores the
  default). The default resolver is ``hwmodels.load``, imported through :mod:`importlib` the first
  time a name is resolved (never at import time); with ``hwmodels`` missing that raises
  ``ImportError``.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["Hardware", "resolve", "is_model", "set_resolver", "DEFAULT_PROVIDER"]

#: The package whose ``load`` resolves names when no resolver was installed.
DEFAULT_PROVIDER = "hwmodels"

_resolver: Callable[[Any], Any] | None = None


class Hardware(Protocol):
    """What the simulator and the cost analysis read from a hardware model (see :mod:`hwmodels`)."""

    name: str
    core_kinds: tuple
    memory: Any
    overheads: Any
    efficiencies: Any

    @property
    def primary_core(self) -> Any: ...

    @property
    def dram_bandwidth(self) -> float: ...

    @property
    def memory_latency_cycles(self) -> float | None: ...

    def core_kind(self, name: str) -> Any: ...

    def clock_hz(self, clock: str = "core_hz") -> float: ...

    def unit_clock_hz(self, core: Any, unit: Any = None) -> float: ...

    def units(self, unit: str | None = None) -> tuple: ...

    def unit_peak_flops(self, core: Any, unit: Any, dtype: object) -> float | None: ...

    def bandwidth(self, level: str = "dram") -> float: ...

    def buffer_for_scope(self, scope: str, core_kind: str | None = None) -> Any: ...

    def efficiency(self, what: str, dtype: object = None, default: float | None = None) -> Any: ...


def set_resolver(fn: Callable[[Any], Any] | None) -> Callable[[Any], Any] | None:
    """Install ``fn`` as the name → model resolver (``None``: the default); return the previous one."""
    global _resolver
    previous, _resolver = _resolver, fn
    return previous


def _default_resolver() -> Callable[[Any], Any]:
    return importlib.import_module(DEFAULT_PROVIDER).load


#: The methods a model's class must have to be taken as a model by :func:`resolve`.
_METHODS = tuple(n for n, v in vars(Hardware).items() if not n.startswith("_") and callable(v))


def is_model(hw) -> bool:
    """True if ``hw`` is a loaded model rather than a name or a path (see the module docstring)."""
    cls = type(hw)
    return not isinstance(hw, (str, os.PathLike)) and all(callable(getattr(cls, m, None)) for m in _METHODS)


def resolve(hw) -> Hardware:
    """The hardware model ``hw`` denotes: a model as it is, a name or path through the resolver."""
    if is_model(hw):
        return hw
    return (_resolver or _default_resolver())(hw)
