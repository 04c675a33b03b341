"""``target="auto"`` without a GPU: the interpreter, tiering up to the compiled CPU target for kernels that
run long.

Contract
--------
``TieredProgram(pf)`` runs every call on the interpreter until the program has been compiled for the CPU
target (:class:`~.runtime.CpuProgram`), and on the compiled code from then on. So the first result comes
at the interpreter's speed, with no compilation wait, and a kernel called again and again (a training
step, a benchmark loop) gets compiled speed without the caller asking.

* **When it compiles.** Once the interpreter calls of one argument signature (dtypes and ranks of the
  arrays, types of the scalars, the options) have taken :func:`tier_up_seconds` in all (environment
  ``TILESIM_TIER_UP_S``, default 0.5 s): one long call, or many short ones (a kernel called hundreds of
  times tiers up; one called a few times for 1 ms never pays for a compilation). It compiles on one worker
  thread, with the types of the call that crossed the threshold; calls made meanwhile keep running on the
  interpreter. ``TILESIM_TIER_UP_S=0`` compiles after the first call; ``off`` (or a negative number) never
  compiles. Durations come from ``clock`` (default ``time.perf_counter``; tests inject their own).
* **Checking options** (``oob`` other than ``"zero"``, ``races``) and code generated for other
  ``uninit``/``tf32`` options than those of the compiling call always run on the interpreter.
* **When it cannot.** A program outside what the CPU target compiles, or a compilation that raises, stays
  on the interpreter for good: said once through the ``tilesim`` logger at debug level; ``fallback`` holds
  the reason. Nothing of it reaches the caller.
* **Results.** The compiled target equals the interpreter bitwise where the interpreter's order is fixed,
  and within the tolerance ``docs/cpu-backend.md`` documents elsewhere (reductions of floats): a kernel's
  results can change in their last bits when it tiers up. ``target="interp"`` keeps the reference meaning
  on every call; ``target="cpu"`` compiles before the first call.
* ``state`` is ``"interp"``, ``"compiling"``, ``"compiled"`` or ``"fallback"``; ``wait(timeout)`` blocks
  until a started compilation has ended (tests, benchmarks) and returns ``state``.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from .. import Program
from ..interp import run as interp_run
from ..interp.options import InterpOptions

__all__ = ["TieredProgram", "tier_up_seconds"]

log = logging.getLogger("tilesim")

DEFAULT_TIER_UP_S = 0.5


def tier_up_seconds() -> float | None:
    """The interpreter-call duration after which a program is compiled (``None``: never)."""
    raw = os.environ.get("TILESIM_TIER_UP_S", "").strip().lower()
    if raw in ("", "default"):
        return DEFAULT_TIER_UP_S
    if raw in ("off", "never", "no", "false"):
        return None
    try:
        value = float(raw)
    except ValueError:
        log.warning("tilesim: TILESIM_TIER_UP_S=%r is not a number of seconds or 'off'; using %g s",
                    raw, DEFAULT_TIER_UP_S)
        return DEFAULT_TIER_UP_S
    return None if value < 0 else value


class TieredProgram(Program):
    """The interpreter until the CPU target's code is ready (see the module docstring)."""

    def __init__(self, pf, pass_configs=None, compile_program=None, clock=time.perf_counter):
        self.pf = pf
        self._clock = clock
        self._spent: dict = {}  # argument signature -> interpreter seconds summed over its calls
        self.fallback: str | None = None
        self._compile_program = compile_program  # (pf, uninit, tf32) -> CpuProgram
        self._compiled = None
        self._key = None  # the (uninit, tf32) the compiled code was generated for
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def source(self):
        return self._compiled.source if self._compiled is not None else None

    @property
    def state(self) -> str:
        if self._compiled is not None:
            return "compiled"
        if self.fallback is not None:
            return "fallback"
        return "compiling" if self._thread is not None else "interp"

    def wait(self, timeout: float | None = None) -> str:
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return self.state

    def run(self, pf, arrays, scalars, options, progress=None):
        options = options or InterpOptions()
        checking = options.oob != "zero" or options.races
        compiled = self._compiled
        if compiled is not None and not checking and (options.uninit, options.tf32) == self._key:
            return compiled.run(pf, arrays, scalars, options, progress)
        t0 = self._clock()
        interp_run(pf, arrays, scalars, options, progress=progress)
        elapsed = self._clock() - t0
        limit = tier_up_seconds()
        if checking or limit is None or self._thread is not None or self.fallback is not None:
            return
        sig = _signature(arrays, scalars, options)
        spent = self._spent[sig] = self._spent.get(sig, 0.0) + elapsed
        if spent >= limit:
            self._start(arrays, scalars, options)

    def interpreted_seconds(self) -> float:
        """The largest interpreter time summed over the calls of one argument signature (what the trigger
        compares with :func:`tier_up_seconds`; 0 before any counted call)."""
        return max(self._spent.values(), default=0.0)

    def _start(self, arrays, scalars, options) -> None:
        with self._lock:
            if self._thread is not None or self.fallback is not None or self._compile_program is None:
                return
            self._thread = threading.Thread(target=self._build, args=(dict(arrays), dict(scalars), options),
                                            name=f"tilesim-tier-up-{self.pf.name}", daemon=True)
        self._thread.start()

    def _build(self, arrays, scalars, options) -> None:
        try:
            program = self._compile_program(self.pf, options.uninit, options.tf32)
            if program.fallback:
                self._give_up(program.fallback)
                return
            program.prepare(self.pf, arrays, scalars, options)
        except Exception as e:  # noqa: BLE001 - any failure keeps the interpreter, whose result is right
            self._give_up(f"compiling for the CPU target raised {type(e).__name__}: {e}")
            return
        self._key = (options.uninit, options.tf32)
        self._compiled = program
        log.debug("tilesim: %s now runs compiled for the CPU (target='auto' tiered up)", self.pf.name)

    def _give_up(self, reason: str) -> None:
        self.fallback = reason
        log.debug("tilesim: %s stays on the interpreter (target='auto'): %s", self.pf.name, reason)


def _signature(arrays, scalars, options) -> tuple:
    """What one compiled specialisation covers: array dtypes and ranks (not sizes), scalar types, options."""
    arr = tuple(sorted((k, str(getattr(a, "dtype", type(a).__name__)), getattr(a, "ndim", 0)) for k, a in arrays.items()))
    sca = tuple(sorted((k, type(v).__name__) for k, v in scalars.items()))
    return arr, sca, options.uninit, options.tf32
