"""``tilelang.tools.cuda.iket``: refused, with the reason.

IKET is an external GPU profiler: TileLang's ``iket`` API (``session``, ``range``, ``mark``, ``payload``,
``event_table``, ``trace_files``, ...) instruments the generated CUDA source so that the IKET tool records
device timestamps and payloads of a kernel running on an NVIDIA GPU, and the programs read those traces back.
None of it changes what a kernel computes, and tilesim has no device trace to record or return (its
simulator's timeline is ``kernel.simulate()``). Importing this module works; every function of the API
raises :class:`~tilesim.errors.KernelError` naming the call and saying so, rather than returning empty traces
a program would take for a profile.
"""

from __future__ import annotations

from ...errors import KernelError

__all__ = ["session", "range", "mark", "payload", "event_table", "output_dir", "output_path", "trace_files",
           "runtime_payloads_enabled"]

_WHY = ("it instruments generated CUDA source for the external IKET GPU profiler, which records device "
        "timestamps of a kernel running on an NVIDIA GPU; tilesim runs kernels without a GPU and has no device "
        "trace to record")
_HINT = "run the program with TileLang on a GPU for IKET traces; use kernel.simulate() for tilesim's timeline"


def _refuse(name: str):
    def refused(*args, **kwargs):
        raise KernelError(f"tilelang.tools.cuda.iket.{name} is not supported by tilesim: {_WHY}", hint=_HINT)

    refused.__name__ = name
    refused.__qualname__ = name
    refused.__doc__ = f"Refused: see :mod:`{__name__}`."
    return refused


session = _refuse("session")
range = _refuse("range")  # noqa: A001 - TileLang's name
mark = _refuse("mark")
payload = _refuse("payload")
event_table = _refuse("event_table")
output_dir = _refuse("output_dir")
output_path = _refuse("output_path")
trace_files = _refuse("trace_files")
runtime_payloads_enabled = _refuse("runtime_payloads_enabled")
