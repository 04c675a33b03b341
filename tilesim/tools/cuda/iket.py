"""``tilelang.tools.cuda.iket``: TileLang's IKET instrumentation API, with its meaning on tilesim.

IKET is an external GPU profiler. In TileLang, ``iket.mark`` / ``iket.range`` put named events (with an
optional 32-bit payload) into a kernel; while an ``iket.session`` is active at compile time the generated CUDA
stores a timestamp per event into a buffer that the external profiler (``python -m iket.cli.main profile --
...``) collects into ``*.trace.json`` / Perfetto files. Run directly, without the profiler, the program compiles
and runs the instrumented kernel and no trace is written. An event never changes what a kernel computes.

tilesim gives the API that meaning:

* **In a kernel** (``@T.prim_func`` / ``@tilesim.jit`` body, inside ``with T.Kernel(...)``):
  ``mark(name, payload=None)``, ``range(name, payload=None)`` (``with iket.range(name):``, also as an extra item
  of ``with T.Kernel(...) as bx, iket.range(name):``), ``range_push(name, payload=None)`` /
  ``range_pop(name=None)`` (aliases ``range_start`` / ``range_end``) and ``payload(expr, dtype=None)`` build
  :class:`tilesim.ir.nodes.Event` statements. Every backend runs them as events that change no value; the
  printer shows them; the CUDA lowering emits a comment (no IKET NativeDump stores: tilesim's CUDA code is not
  run under the IKET profiler); the cost model charges nothing.
* **Checks, as TileLang's**: names are non-empty and at most 32 UTF-8 bytes; payload dtypes are int32, uint32 or
  float32 (aliases ``int``/``uint``/``float``; inferred from the expression's dtype or a Python bool/int/float);
  one ``(kind, name)`` keeps one payload dtype; ``range_pop`` needs an open ``range_push`` of the same name (in
  the same launch). Violations are :class:`~tilesim.errors.KernelTypeError` /
  :class:`~tilesim.errors.KernelSyntaxError` at the call's file:line:col. Called outside a kernel, the
  kernel-side functions raise :class:`~tilesim.errors.KernelSyntaxError`.
* **Host side, as TileLang's**: the event registry (``event_table()``: ``name``, ``event_id`` (1, 2, ... skipping
  31, the range-end id), ``kind`` (``"mark"``/``"range"``), ``range_id`` (CRC-32 of the name, or 0),
  ``payload_type``, ``payload_iket_id`` (int32 5, uint32 6, float32 13), ``runtime_payload_iket_id``), ``reset()``,
  ``enable()``/``disable()``/``is_enabled()`` (nesting depth), ``enable_runtime_payloads()`` /
  ``disable_runtime_payloads()`` / ``runtime_payloads_enabled()``, ``session(reset_events=True, override=True,
  disable_on_exit=True, output_dir=None, runtime_payloads=None, disable_cache=True)`` (enters all of these and
  restores them on exit, even on an exception) and the path helpers ``set_output_dir`` (creates the directory,
  sets ``TL_IKET_OUTPUT_DIR``), ``output_dir(default=None)``, ``output_path(name, directory=None)``,
  ``trace_files(directory=None)`` (the ``*.trace.json`` files there, largest first) and ``profile_command``.
* **Not given**: traces. Only the external profiler on an NVIDIA GPU writes them; tilesim writes none, so
  ``trace_files`` lists only what such a run left in the directory (as TileLang's helper, which also only reads
  the directory). tilesim's own timeline of a kernel is ``kernel.simulate()``.
"""

from __future__ import annotations

import os
import shlex
import threading
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import KernelSyntaxError, KernelTypeError

__all__ = ["PayloadSpec", "disable", "disable_runtime_payloads", "enable", "enable_runtime_payloads", "event_table",
           "is_enabled", "mark", "output_dir", "output_path", "payload", "profile_command", "range", "range_end",
           "range_pop", "range_push", "range_start", "reset", "runtime_payloads_enabled", "session",
           "set_output_dir", "trace_files"]

MAX_EVENT_NAME_BYTES = 32
RANGE_END_EVENT_ID = 31
PAYLOAD_IKET_IDS = {"int32": 5, "uint32": 6, "float32": 13}
_ALIASES = {"int": "int32", "uint": "uint32", "float": "float32"}


@dataclass(frozen=True)
class PayloadSpec:
    """A payload for an event: ``expr`` (a kernel expression or Python scalar) stored as ``dtype``."""

    expr: Any
    dtype: str
    iket_id: int


@dataclass(frozen=True)
class EventInfo:
    """One registered event (a row of :func:`event_table`)."""

    name: str
    event_id: int
    kind: str
    range_id: int = 0
    payload_type: str = "NoPayload"
    payload_iket_id: int = 0


_lock = threading.RLock()
_events: dict[tuple[str, str], EventInfo] = {}
_next_id = [1]
_state = {"depth": 0, "payloads": False, "output_dir": None}


# ----------------------------------------------------------------------------- the event registry
def reset() -> None:
    """Forget registered events: kernels built afterwards number theirs from 1."""
    with _lock:
        _events.clear()
        _next_id[0] = 1


def event_table() -> list[dict]:
    """The events registered while building recent kernels, by event id."""
    payloads = runtime_payloads_enabled()
    with _lock:
        return [{"name": e.name, "event_id": e.event_id, "kind": e.kind, "range_id": e.range_id,
                 "payload_type": e.payload_type, "payload_iket_id": e.payload_iket_id,
                 "runtime_payload_iket_id": e.payload_iket_id if payloads else 0}
                for e in sorted(_events.values(), key=lambda e: e.event_id)]


def check_name(name) -> str:
    if not isinstance(name, str) or not name:
        raise KernelTypeError(f"iket event name must be a non-empty string, got {name!r}")
    if len(name.encode("utf-8")) > MAX_EVENT_NAME_BYTES:
        raise KernelTypeError(f"iket event name must be at most {MAX_EVENT_NAME_BYTES} UTF-8 bytes: {name!r}")
    return name


def normalize_dtype(dtype) -> str:
    """``dtype`` as one of int32 / uint32 / float32 (aliases accepted), else a KernelTypeError."""
    d = _ALIASES.get(str(dtype).lower(), str(dtype).lower())
    if d not in PAYLOAD_IKET_IDS:
        raise KernelTypeError(f"iket payload dtype {dtype!r} is not supported",
                              hint="IKET payloads are 32-bit scalars: int32, uint32 or float32")
    return d


def register(name: str, kind: str, payload_dtype: str) -> EventInfo:
    """The event ``(kind, name)`` (``kind`` "mark" or "range"), registered on first use with the next id."""
    check_name(name)
    with _lock:
        e = _events.get((kind, name))
        if e is not None:
            if e.payload_type != payload_dtype:
                raise KernelTypeError(f"iket event {name!r} was first registered with payload type "
                                      f"{e.payload_type!r}, but is now used with {payload_dtype!r}",
                                      hint="one event name keeps one payload dtype")
            return e
        if _next_id[0] == RANGE_END_EVENT_ID:
            _next_id[0] += 1
        eid = _next_id[0]
        _next_id[0] += 1
        rid = (zlib.crc32(name.encode("utf-8")) & 0xFFFFFFFF or 1) if kind == "range" else 0
        e = EventInfo(name, eid, kind, rid, payload_dtype, PAYLOAD_IKET_IDS.get(payload_dtype, 0))
        _events[(kind, name)] = e
        return e


# ----------------------------------------------------------------------------- kernel-side markers
def _kernel_only(prim: str, sig):
    def outside(*args, **kwargs):
        raise KernelSyntaxError(f"iket.{prim} can only be used inside a kernel body",
                                hint="call it in a @T.prim_func / @tilesim.jit body, within `with T.Kernel(...)`")

    outside.__name__ = outside.__qualname__ = prim
    outside.__doc__ = sig.__doc__
    outside.__tilesim_prim__ = "iket_" + prim
    outside.__tilesim_sig__ = sig
    outside.__tilesim_display__ = f"iket.{prim}"  # how the frontend names it in argument errors
    return outside


def _mark(name, payload=None):
    """An instant event at this program point (``payload``: a :func:`payload` or a 32-bit scalar)."""


def _range(name, payload=None):
    """``with iket.range(name):`` a range-start event before the body and a range-end event after it."""


def _range_pop(name=None):
    """The range-end event of the innermost open :func:`range_push` (named ``name`` if given)."""


def _payload(expr, dtype=None):
    """A payload descriptor: ``expr`` stored as ``dtype`` (int32, uint32 or float32)."""


mark = _kernel_only("mark", _mark)
range = _kernel_only("range", _range)  # noqa: A001 - TileLang's name
range_push = _kernel_only("range_push", _range)
range_start = _kernel_only("range_start", _range)
range_pop = _kernel_only("range_pop", _range_pop)
range_end = _kernel_only("range_end", _range_pop)
payload = _kernel_only("payload", _payload)


# ----------------------------------------------------------------------------- enable / payload mode
def enable(*, override: bool = True) -> None:
    """Open one instrumentation scope (they nest)."""
    with _lock:
        _state["depth"] += 1


def disable(*, restore: bool = True) -> None:
    """Close one instrumentation scope (no-op when none is open)."""
    with _lock:
        _state["depth"] = max(0, _state["depth"] - 1)


def is_enabled() -> bool:
    with _lock:
        return _state["depth"] > 0


def enable_runtime_payloads() -> None:
    with _lock:
        _state["payloads"] = True


def disable_runtime_payloads() -> None:
    with _lock:
        _state["payloads"] = False


def runtime_payloads_enabled() -> bool:
    with _lock:
        return _state["payloads"]


# ----------------------------------------------------------------------------- output paths
def set_output_dir(path) -> Path | None:
    """Set (and create) the export directory; ``None`` clears it. Mirrors it in ``TL_IKET_OUTPUT_DIR``."""
    if path is None:
        _state["output_dir"] = None
        os.environ.pop("TL_IKET_OUTPUT_DIR", None)
        return None
    p = Path(path).expanduser().absolute()
    p.mkdir(parents=True, exist_ok=True)
    _state["output_dir"] = p
    os.environ["TL_IKET_OUTPUT_DIR"] = str(p)
    return p


def output_dir(default=None) -> Path | None:
    """The export directory: the one set, else ``TL_IKET_OUTPUT_DIR``, else ``default`` (or None)."""
    if _state["output_dir"] is not None:
        return _state["output_dir"]
    env = os.environ.get("TL_IKET_OUTPUT_DIR")
    if env:
        return Path(env).expanduser().absolute()
    return None if default is None else Path(default).expanduser().absolute()


def output_path(name: str, *, directory=None) -> Path:
    """``name`` under the export directory (created); a RuntimeError when none is configured."""
    base = output_dir(directory)
    if base is None:
        raise RuntimeError("IKET output directory is not configured")
    base.mkdir(parents=True, exist_ok=True)
    return base / name


def trace_files(*, directory=None) -> list[Path]:
    """The ``*.trace.json`` files of the export directory, largest first (tilesim writes none)."""
    base = output_dir(directory)
    if base is None or not base.exists():
        return []
    return sorted(base.glob("*.trace.json"), key=lambda p: p.stat().st_size, reverse=True)


def profile_command(command: str | Sequence[str], *, directory, postprocess: str = "all",
                    clobber: bool = True) -> str:
    """The shell command that runs ``command`` under the external IKET profiler (not run here)."""
    parts = ["python", "-m", "iket.cli.main", "--output-dir", str(Path(directory).expanduser())]
    parts += (["--clobber"] if clobber else []) + ["profile", "--postprocess", postprocess, "--"]
    prefix = " ".join(shlex.quote(str(x)) for x in parts)
    if isinstance(command, str):
        return f"{prefix} {command}"
    return " ".join([prefix, *(shlex.quote(str(x)) for x in command)])


# ----------------------------------------------------------------------------- sessions
class _Session:
    def __init__(self, reset_events, output_dir, runtime_payloads):
        self.reset_events = reset_events
        self.output_dir = output_dir
        self.runtime_payloads = runtime_payloads
        self._saved = None

    def __enter__(self):
        if self._saved is not None:
            raise RuntimeError("An IKET session object cannot be entered more than once at a time")
        saved = (_state["output_dir"], os.environ.get("TL_IKET_OUTPUT_DIR"), runtime_payloads_enabled())
        try:
            if self.output_dir is not None:
                set_output_dir(self.output_dir)
            if self.runtime_payloads is not None:
                (enable_runtime_payloads if self.runtime_payloads else disable_runtime_payloads)()
        except BaseException:
            self._restore(saved)
            raise
        enable()
        if self.reset_events:
            reset()
        self._saved = saved
        return self

    def __exit__(self, exc_type, exc, tb):
        disable()
        self._restore(self._saved)
        self._saved = None
        return False

    @staticmethod
    def _restore(saved):
        _state["output_dir"], env, payloads = saved
        if env is None:
            os.environ.pop("TL_IKET_OUTPUT_DIR", None)
        else:
            os.environ["TL_IKET_OUTPUT_DIR"] = env
        _state["payloads"] = payloads


def session(*, reset_events: bool = True, override: bool = True, disable_on_exit: bool = True, output_dir=None,
            runtime_payloads: bool | None = None, disable_cache: bool = True) -> _Session:
    """A scope that enables instrumentation, optionally resets the registry, sets the export directory and the
    payload mode, and restores all of them on exit. ``override``/``disable_on_exit`` (TileLang's CUDA callback)
    and ``disable_cache`` (TileLang's on-disk kernel cache) have nothing to switch here."""
    return _Session(reset_events, output_dir, runtime_payloads)

