"""The autotuner: pick the best configuration of a kernel factory, as TileLang's ``tilelang.autotuner`` does.

Contract
--------
* ``AutoTuner(fn, configs)`` / ``AutoTuner.from_kernel(kernel=fn, configs=...)``: ``fn(**config)`` returns a
  ``@T.prim_func`` (a plain factory) or a :class:`~tilesim.kernel.JITKernel` (a ``@tilesim.jit`` factory).
  ``configs`` is a list of dicts (keys are ``fn``'s parameter names) or a callable returning one.
  ``set_compile_args(out_idx=..., target=..., pass_configs=...)`` and ``set_profile_args(...)`` return the
  tuner (chainable); ``run(warmup, rep, timeout)`` returns an :class:`AutotuneResult`.
* ``@autotune(configs=..., warmup=..., rep=..., timeout=..., ref_prog=..., skip_check=..., ...)`` over a
  ``@tilesim.jit`` factory returns a callable with TileLang's meaning:

  - lazy factory (returns a prim_func): ``tuned(*args, **kwargs)`` → the best ``JITKernel``, with
    ``.config``, ``.latency`` (ms) and ``.ref_latency`` set;
  - eager kernel (tensors annotated in the body): ``tuned(*tensors, **scalars)`` tunes for those
    tensors' shapes and returns the best kernel's outputs; ``tuned.compile(...)`` returns the kernel;
  - tunable arguments the caller passes explicitly (positionally or by keyword) are not searched: when
    every key of the configs is given, no search runs and the kernel is built as given;
  - results are cached per call signature (shapes and scalars), so a second call does not tune again.

* **The oracle** (how candidates are ranked; ``oracle=`` on ``autotune``/``run``):

  - ``"measure"``: the median of ``rep`` timed calls after ``warmup`` calls (``do_bench``). On a GPU this
    is TileLang's behaviour. On the interpreter the time is the interpreter's, which ranks configurations
    by NumPy-call count rather than by GPU speed, so ``warmup``/``rep`` are capped at 1/3 there.
  - ``"sim"``: the cycle-approximate simulator's time on hardware ``hw`` (default
    ``TILESIM_TUNE_HW`` or the H200), so a laptop picks what the GPU would. No kernel runs for ranking.
  - ``"auto"`` (default): ``"measure"`` when the kernel's target is ``cuda``, else ``"sim"``; a candidate
    the simulator cannot cost (e.g. unknown symbolic sizes) is measured instead.

* **Correctness** (``ref_prog`` and not ``skip_check``): candidates are checked against ``ref_prog`` in
  ranked order, and the first that matches (``rtol``/``atol``/``max_mismatched_ratio``, or
  ``manual_check_prog(outputs, references)``) wins; TileLang checks every candidate, the winner is the same.
* **Errors**: a candidate that fails to build or run is recorded (``AutotuneResult.failures``) and skipped;
  if none succeeds, :class:`~tilesim.errors.KernelError` lists each configuration's first error line. A
  config key that is not a parameter of ``fn`` is an error naming the key. ``timeout`` (seconds) marks a
  candidate whose evaluation took longer as failed (Python cannot interrupt NumPy safely, so it is checked
  after the candidate finishes).
* **Inputs** for measuring and checking: ``set_autotune_inputs(*tensors)`` (a context manager), else
  ``supply_prog(params)`` (``params``: :class:`tilesim.engine.param.KernelParam` of each input), else the kernel
  profiler's inputs by ``supply_type``; an eager call uses its own
  tensors.
"""

from __future__ import annotations

import inspect
import itertools
import os
import time
from dataclasses import dataclass, field

from ..config import TensorSupplyType
from ..engine.param import KernelParam
from ..errors import KernelError, KernelTypeError
from ..ir import nodes as N
from ..kernel import JITKernel
from ..profiler import Profiler

__all__ = ["AutoTuner", "AutotuneResult", "set_autotune_inputs", "get_autotune_inputs"]

#: interpreter timing caps (its time ranks NumPy-call counts, not GPU speed)
INTERP_MAX_WARMUP = 1
INTERP_MAX_REP = 3
DEFAULT_HW = "h200_sxm_141gb"
#: a config key that is not a parameter: pass configs for that candidate's compilation (TileLang's)
PASS_CONFIGS_KEY = "pass_configs"

_captured: list[tuple] = []


class set_autotune_inputs:  # noqa: N801 (TileLang's name)
    """``with set_autotune_inputs(a, b): kernel = tuned(...)``: tune on these tensors."""

    def __init__(self, *tensors):
        self.tensors = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors

    def __enter__(self):
        _captured.append(tuple(self.tensors))
        return self

    def __exit__(self, *exc):
        _captured.pop()
        return False


def get_autotune_inputs():
    return _captured[-1] if _captured else None


@dataclass
class AutotuneResult:
    """What a tuning run found. ``latency``/``ref_latency`` are milliseconds (simulated with ``oracle="sim"``)."""

    latency: float | None = None
    config: dict | None = None
    ref_latency: float | None = None
    libcode: str | None = None
    func: N.PrimFunc | None = None
    kernel: JITKernel | None = None
    oracle: str = "auto"
    ranking: list = field(default_factory=list)    # [(latency_ms, config)] best first
    failures: list = field(default_factory=list)   # [(config, first error line)]


@dataclass
class _Profile:
    warmup: int = 25
    rep: int = 100
    timeout: float | None = None
    supply_type: object = None
    ref_prog: object = None
    supply_prog: object = None
    rtol: float = 1e-2
    atol: float = 1e-2
    max_mismatched_ratio: float = 0.01
    skip_check: bool = False
    manual_check_prog: object = None
    cache_input_tensors: bool = False
    oracle: str = "auto"
    hw: str | None = None


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


class AutoTuner:
    """Search ``configs`` of the factory ``fn`` (see the module docstring)."""

    def __init__(self, fn, configs, parameters: set | None = None):
        self.fn = fn
        self.configs = configs
        self.parameters = parameters if parameters is not None else _parameters(fn)
        self.compile_args: dict = {}
        self.profile = _Profile()

    @classmethod
    def from_kernel(cls, kernel, configs):
        return cls(kernel, configs)

    def set_compile_args(self, out_idx=None, target="auto", execution_backend=None, target_host=None,
                         verbose=False, pass_configs=None, **_ignored):
        self.compile_args = {"out_idx": out_idx, "target": target, "pass_configs": pass_configs}
        return self

    def set_profile_args(self, warmup=None, rep=None, timeout=None, supply_type=None, ref_prog=None,
                         supply_prog=None, rtol=1e-2, atol=1e-2, max_mismatched_ratio=0.01, skip_check=False,
                         manual_check_prog=None, cache_input_tensors=False, oracle=None, hw=None, **_ignored):
        p = self.profile
        p.warmup = p.warmup if warmup is None else warmup
        p.rep = p.rep if rep is None else rep
        p.timeout = timeout if timeout is not None else p.timeout
        p.supply_type, p.ref_prog, p.supply_prog = supply_type, ref_prog, supply_prog
        p.rtol, p.atol, p.max_mismatched_ratio = rtol, atol, max_mismatched_ratio
        p.skip_check, p.manual_check_prog, p.cache_input_tensors = skip_check, manual_check_prog, cache_input_tensors
        p.oracle = oracle or p.oracle
        p.hw = hw or p.hw
        return self

    # -- building candidates ------------------------------------------------------------------------

    def _configs(self, args=(), kwargs=None) -> list[dict]:
        cfgs = self.configs(*args, **(kwargs or {})) if callable(self.configs) else self.configs
        cfgs = [dict(c) for c in (cfgs or [])]
        if not cfgs:
            raise KernelTypeError("autotune: no configurations to tune",
                                  hint="pass configs=[{...}, ...] or a function returning such a list")
        return cfgs

    def _build(self, config: dict) -> JITKernel:
        config = dict(config)
        extra = config.pop(PASS_CONFIGS_KEY, None) or {}  # TileLang: per-candidate pass configs
        k = self.fn(**config)
        if isinstance(k, JITKernel):
            if not extra:
                return k
            return JITKernel(k.prim_func, out_idx=k.out_idx, target=k.target, pass_configs={**k.pass_configs, **extra})
        if isinstance(k, N.PrimFunc):
            ca = self.compile_args
            return JITKernel(k, out_idx=ca.get("out_idx"), target=ca.get("target", "auto"),
                             pass_configs={**(ca.get("pass_configs") or {}), **extra})
        raise KernelTypeError(f"autotune: the factory returned {type(k).__name__}, not a @T.prim_func",
                              hint="the tuned function must return a prim_func or a tilesim kernel")

    # -- ranking ------------------------------------------------------------------------------------

    def _oracle(self, kernel: JITKernel) -> str:
        o = self.profile.oracle
        if o == "auto":
            return "measure" if kernel.target == "cuda" else "sim"
        if o not in ("sim", "measure", "interp"):
            raise KernelTypeError(f"autotune: unknown oracle {o!r}", hint="use 'auto', 'sim' or 'measure'")
        return "measure" if o == "interp" else o

    def _inputs(self, kernel: JITKernel, call_inputs=None):
        if call_inputs is not None:
            return list(call_inputs)
        captured = get_autotune_inputs()
        if captured is not None:
            return list(captured)
        if self.profile.supply_prog is not None:
            return list(self.profile.supply_prog([KernelParam.of(p) for p in kernel.input_params]))
        return Profiler(kernel, self.profile.supply_type or TensorSupplyType.Auto,
                        tensor_type="auto").inputs()

    def _measure(self, fn, inputs, on_gpu: bool) -> float:
        warm, rep = self.profile.warmup, self.profile.rep
        if not on_gpu:
            warm, rep = min(warm, INTERP_MAX_WARMUP), min(rep, INTERP_MAX_REP)
        for _ in range(max(0, int(warm))):
            fn(*inputs)
        times = []
        for _ in range(max(1, int(rep))):
            t0 = time.perf_counter()
            fn(*inputs)
            times.append(time.perf_counter() - t0)
        times.sort()
        return times[len(times) // 2] * 1e3

    def _latency(self, kernel: JITKernel, call_inputs) -> tuple[float, str]:
        how = self._oracle(kernel)
        if how == "sim":
            try:
                hw = self.profile.hw or os.environ.get("TILESIM_TUNE_HW", DEFAULT_HW)
                return kernel.simulate(hw=hw).time_s * 1e3, "sim"
            except KernelError:
                how = "measure"  # the simulator cannot cost it (e.g. symbolic sizes): time it instead
        on_gpu = kernel.target == "cuda"
        return self._measure(kernel, self._inputs(kernel, call_inputs), on_gpu), how

    def _check(self, kernel: JITKernel, call_inputs) -> None:
        p = self.profile
        if p.ref_prog is None or p.skip_check:
            return
        inputs = self._inputs(kernel, call_inputs)
        if p.manual_check_prog is not None:
            p.manual_check_prog(kernel(*inputs), p.ref_prog(*inputs))
            return
        prof = Profiler(kernel, p.supply_type, tensor_type="auto")
        prof._inputs = inputs
        prof.assert_allclose(p.ref_prog, rtol=p.rtol, atol=p.atol, max_mismatched_ratio=p.max_mismatched_ratio)

    def run(self, warmup=None, rep=None, timeout=None, *, _args=(), _kwargs=None, _call_inputs=None,
            **_ignored) -> AutotuneResult:
        """Tune: rank every configuration by the oracle, then check the best ones against ``ref_prog``."""
        self.set_profile_args(warmup=warmup, rep=rep, timeout=timeout, supply_type=self.profile.supply_type,
                              ref_prog=self.profile.ref_prog, supply_prog=self.profile.supply_prog,
                              rtol=self.profile.rtol, atol=self.profile.atol,
                              max_mismatched_ratio=self.profile.max_mismatched_ratio,
                              skip_check=self.profile.skip_check, manual_check_prog=self.profile.manual_check_prog,
                              cache_input_tensors=self.profile.cache_input_tensors)
        params = self.parameters
        ranked, failures, used = [], [], "auto"
        for cfg in self._configs(_args, _kwargs):
            unknown = sorted(set(cfg) - set(params) - {PASS_CONFIGS_KEY}) if params is not None else []
            if unknown:
                raise KernelTypeError(f"autotune: config key(s) {unknown} are not parameters of "
                                      f"{getattr(self.fn, '__name__', 'the kernel')}",
                                      hint=f"its parameters are {sorted(params)}")
            t0 = time.perf_counter()
            try:
                kernel = self._build(cfg)
                lat, used = self._latency(kernel, _call_inputs)
            except Exception as e:  # a candidate that fails is skipped, as in TileLang
                failures.append((cfg, _first_line(e)))
                continue
            if self.profile.timeout is not None and time.perf_counter() - t0 > self.profile.timeout:
                failures.append((cfg, f"timeout: took longer than {self.profile.timeout} s"))
                continue
            ranked.append((lat, next(_order), cfg, kernel))
        ranked.sort(key=lambda r: (r[0], r[1]))
        for lat, _, cfg, kernel in ranked:
            try:
                self._check(kernel, _call_inputs)
            except AssertionError as e:
                failures.append((cfg, _first_line(e)))
                continue
            ref_latency = None
            if used == "measure" and self.profile.ref_prog is not None:
                on_gpu = kernel.target == "cuda"
                ref_latency = self._measure(self.profile.ref_prog, self._inputs(kernel, _call_inputs), on_gpu)
            kernel.config, kernel.latency, kernel.ref_latency = dict(cfg), lat, ref_latency
            return AutotuneResult(latency=lat, config=dict(cfg), ref_latency=ref_latency,
                                  libcode=kernel.get_kernel_source(), func=kernel.prim_func, kernel=kernel,
                                  oracle=used, ranking=[(r[0], r[2]) for r in ranked], failures=failures)
        lines = "\n".join(f"  {c}: {msg}" for c, msg in failures) or "  (no configurations)"
        raise KernelError(f"autotune: no configuration of {getattr(self.fn, '__name__', 'the kernel')} "
                          f"built, ran and matched the reference:\n{lines}")

    def __call__(self):
        return self.run()


_order = itertools.count()


def _parameters(fn):
    target = getattr(fn, "fn", fn)
    try:
        return set(inspect.signature(target).parameters)
    except (TypeError, ValueError):
        return None
