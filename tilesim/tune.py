"""Autotuning with the simulator as the oracle: works on any laptop, for any hardware model.

Contract
--------
``tune_spec(spec, shape, hw, profile=None, budget=16, seed=0) -> TuneResult`` tries up to ``budget``
configurations of a registered kernel's ``tunables`` (the registry defaults first, then the whole grid
when it is small enough, else a deterministic sample of it), simulates each at ``shape`` on ``hw`` and
returns every trial, the fastest, and the Pareto front of (simulated time, shared memory per block) —
the trade-off between speed and on-chip footprint the seeds' "AutoTuner with a Pareto result" names.
Configurations that do not fit the device (shared memory, registers) are recorded with their error and
never chosen. ``@tilesim.autotune(..., oracle="sim")`` uses the same oracle for user factories.
``hw`` is a loaded model or a name/path (resolved by :func:`tilesim.hw.resolve`).
With ``executor=`` (a :mod:`tilesim.sweep` executor: local processes, Dask, Ray) the candidates are
simulated there and the result is the same as in process; ``run_trials`` does that for any list of
``(spec, shape, model, profile, config)`` candidates (several kernels, shapes and devices in one sweep).

Layer: app (``tilesim tune``, ``tilesim report``; see :mod:`tilesim.hw`). It takes a registry entry
(``kernels.registry.KernelSpec``) as an argument and imports neither ``kernels`` nor ``hwmodels``.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

from . import dtypes as dt
from .errors import KernelTypeError, TilesimError
from .hw import resolve
from .ir import nodes as N
from .ir.traverse import bodies
from .sim import simulate


@dataclass(frozen=True)
class Trial:
    config: dict
    time_s: float | None
    smem_bytes: int | None
    bound: str = ""
    error: str | None = None


@dataclass(frozen=True)
class TuneResult:
    kernel: str
    hw: str
    shape: str
    best: Trial
    trials: tuple
    pareto: tuple

    def table(self) -> str:
        lines = [f"{self.kernel} @ {self.shape} on {self.hw}: {len(self.trials)} configs, best "
                 f"{self.best.time_s * 1e6:.1f} µs with {self.best.config}",
                 f"{'time':>12} {'smem/block':>11}  {'bound':<22} config"]
        for t in sorted(self.trials, key=lambda t: (t.time_s is None, t.time_s or 0)):
            mark = "*" if t in self.pareto else " "
            if t.error:
                lines.append(f"{'—':>12} {'—':>11}  {'does not fit':<22} {t.config}  ({t.error.splitlines()[0][:60]})")
            else:
                lines.append(f"{t.time_s * 1e6:10.1f}µs {t.smem_bytes / 1024:9.1f}KiB{mark} {t.bound:<22} {t.config}")
        lines.append("* = on the Pareto front of (time, shared memory)")
        return "\n".join(lines)


def smem_bytes(pf: N.PrimFunc) -> int:
    """Largest shared-memory footprint of one block over the program's launches.

    A shared buffer filled by a copy inside ``T.Pipelined(num_stages=s)`` counts ``s`` times, as a
    production compiler multi-buffers it.
    """
    best = 0
    for launch in pf.launches:
        stages: dict[int, int] = {}
        _staged(launch.body, 1, stages)
        total = 0
        for s in launch.body:
            if isinstance(s, N.Alloc) and s.buffer.scope == "shared" and s.buffer.alias_of is None:
                n = 1
                for d in s.buffer.shape:
                    n *= d
                total += int(n * dt.itemsize(s.buffer.dtype)) * stages.get(s.buffer.uid, 1)
        best = max(best, total)
    return best


def _staged(body, depth_stages, out):
    for s in body:
        if isinstance(s, N.Copy) and s.dst.scope == "shared" and depth_stages > 1:
            out[s.dst.buffer.uid] = max(out.get(s.dst.buffer.uid, 1), depth_stages)
        inner = depth_stages
        if isinstance(s, N.For) and s.kind == "pipelined":
            inner = max(1, s.annotation("num_stages", 0) or 1)
        for b in bodies(s):
            _staged(b, inner, out)


def search_space(tunables: dict, defaults: dict, budget: int, seed: int = 0) -> list[dict]:
    keys = list(tunables)
    default = {k: defaults.get(k, tunables[k][0]) for k in keys}
    grid = [dict(zip(keys, vals)) for vals in itertools.product(*(tunables[k] for k in keys))]
    rest = [g for g in grid if g != default]
    if len(rest) > budget - 1:
        rest = random.Random(seed).sample(rest, budget - 1)
    return [default] + rest


def pareto_front(trials) -> tuple:
    ok = [t for t in trials if t.error is None]
    front = []
    for t in ok:
        dominated = any(o is not t and o.time_s <= t.time_s and o.smem_bytes <= t.smem_bytes and
                        (o.time_s < t.time_s or o.smem_bytes < t.smem_bytes) for o in ok)
        if not dominated:
            front.append(t)
    return tuple(sorted(front, key=lambda t: t.time_s))


def evaluate(spec, shape: dict, model, profile, cfg: dict) -> Trial:
    """Build and simulate one configuration; a configuration that does not fit is a Trial with its error."""
    params = spec.params(shape, **cfg)
    try:
        kernel = spec.build(**params)
        hints = spec.data_hints(**params) if spec.data_hints else {}
        rep = simulate(kernel.prim_func, model, profile, name=spec.name, **hints)
        return Trial(cfg, rep.time_s, smem_bytes(kernel.prim_func), rep.bound)
    except TilesimError as e:
        return Trial(cfg, None, None, "", f"{type(e).__name__}: {e}")


def _build_key(task) -> str:
    spec, shape, _, _, cfg = task
    return f"{spec.name}|{sorted(shape.items())!r}|{sorted(cfg.items(), key=lambda kv: kv[0])!r}"


def run_trials(tasks, executor=None, progress=None) -> list[Trial]:
    """``evaluate(*task)`` for each ``(spec, shape, model, profile, cfg)`` task, in task order.

    With an executor (:mod:`tilesim.sweep`) the tasks run there; a task that fails for another reason
    than a ``TilesimError`` (a bug, a lost worker) becomes a Trial whose error says so, and the others
    are kept.
    """
    if executor is None:
        return [evaluate(*t) for t in tasks]
    # candidates of one kernel build (same kernel, shape and configuration on several devices) go to
    # one worker together, so its build cache serves them all, as the in-process run's does
    order = sorted(range(len(tasks)), key=lambda i: _build_key(tasks[i]))
    outs = executor.run(evaluate, tasks, progress=progress, order=order)
    return [o.value if o.ok else Trial(t[4], None, None, "", o.error) for o, t in zip(outs, tasks)]


def tune_spec(spec, shape: dict, hw, profile=None, budget: int = 16, seed: int = 0, executor=None,
              progress=None) -> TuneResult:
    model = resolve(hw)
    tasks = [(spec, shape, model, profile, cfg) for cfg in search_space(spec.tunables, spec.defaults, budget, seed)]
    trials = run_trials(tasks, executor, progress)
    return tune_result(spec, shape, model, trials)


def tune_result(spec, shape: dict, model, trials) -> TuneResult:
    """The best trial and the Pareto front of ``trials``; raises when no configuration fits."""
    ok = [t for t in trials if t.error is None]
    if not ok:
        unsupported = next((t.error for t in trials if "has no known rate" in t.error), None)
        if unsupported:  # the device lacks the data type: say that, not "does not fit"
            raise KernelTypeError(unsupported.split(": ", 1)[1].splitlines()[0])
        raise KernelTypeError(f"no configuration of {spec.name} fits {model.name} at {shape.get('label', shape)}",
                              hint="first error: " + trials[0].error.splitlines()[0] if trials else None)
    best = min(ok, key=lambda t: t.time_s)
    return TuneResult(spec.name, model.name, shape.get("label", ""), best, tuple(trials), pareto_front(trials))
