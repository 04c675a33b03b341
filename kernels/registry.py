"""The kernel registry: how the report, the simulator, the autotuner and the CLI find kernels.

Contract
--------
Each kernel family module in ``kernels/`` calls :func:`register` once per kernel with a
:class:`KernelSpec`. ``import kernels`` imports every module of the package, so registering is all a
new module has to do; and since importing ``kernels.registry`` first imports the package, every family
is registered by the time :func:`get` or :func:`all_specs` can be called.

A spec's callables take plain keyword parameters:

* ``build(**params) -> JITKernel`` — ``params`` is a shape dict merged over ``defaults`` (tunables);
* ``make_inputs(rng, **params) -> tuple`` — NumPy inputs in the kernel's positional order (fresh random
  data, never all zeros);
* ``reference(*inputs, **params)`` — NumPy result(s) computed in float64/float32 as the math calls for,
  in the order the kernel returns its outputs (one array, or a tuple);
* ``flops(**params)`` / ``bytes(**params)`` — useful work and the fewest DRAM bytes (each input read
  once, each output written once), for roofline points.

* ``compare(outs, refs, params)`` (optional) — custom comparison called with the kernel's outputs, the
  reference's outputs (both lists) and the parameter dict, positionally; raises ``AssertionError``.
* ``data_hints(**params) -> dict`` (optional) — keyword arguments for ``tilesim.sim.simulate`` when trip
  counts depend on tensor data: tensors by parameter name (``{"SeqLens": np.array([...])}``) or
  ``{"hints": {...}}``.

``shapes`` are the LLM shapes a report uses (each a dict with a ``"label"``); ``test_shapes`` are
small shapes that tiles do not divide, for the test-suite; ``tunables`` maps a parameter to its
candidate values (the autotuner's search space); ``tolerance`` is ``{"rtol": .., "atol": ..}`` or
``{"exact": True}`` for bitwise comparisons.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Callable

from tilesim.errors import KernelTypeError


@dataclass(frozen=True)
class KernelSpec:
    name: str
    family: str
    description: str
    build: Callable
    make_inputs: Callable
    reference: Callable
    flops: Callable
    bytes: Callable
    shapes: tuple = ()
    test_shapes: tuple = ()
    tunables: dict = field(default_factory=dict)
    defaults: dict = field(default_factory=dict)
    tolerance: dict = field(default_factory=lambda: {"rtol": 1e-2, "atol": 1e-2})
    data_hints: Callable | None = None  # params -> hints for data-dependent trip counts (simulator)
    compare: Callable | None = None  # custom comparison (e.g. index sets); raises AssertionError

    def params(self, shape: dict, **overrides) -> dict:
        p = dict(self.defaults)
        p.update({k: v for k, v in shape.items() if k != "label"})
        p.update(overrides)
        return p


_REGISTRY: dict[str, KernelSpec] = {}


def register(spec: KernelSpec) -> KernelSpec:
    if spec.name in _REGISTRY and _REGISTRY[spec.name] is not spec:
        raise KernelTypeError(f"kernel {spec.name!r} is registered twice")
    _REGISTRY[spec.name] = spec
    return spec


def get(name: str) -> KernelSpec:
    if name not in _REGISTRY:
        close = difflib.get_close_matches(name, list(_REGISTRY), n=3)
        raise KernelTypeError(f"unknown kernel {name!r}",
                              hint=("did you mean " + ", ".join(close) + "?") if close else "run `tilesim kernels list`")
    return _REGISTRY[name]


def all_specs() -> list[KernelSpec]:
    return sorted(_REGISTRY.values(), key=lambda s: (s.family, s.name))

