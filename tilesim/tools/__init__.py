"""``tilelang.tools``: TileLang's developer tools. tilesim provides ``Analyzer`` (a kernel's FLOPs, global bytes
and time estimate from the simulator; see :mod:`.analyzer`) and ``tools.cuda.iket`` (IKET instrumentation
events, which change no value; see :mod:`.cuda.iket`); the others (layout plotting, the pass-timing and
lowering-trace tools) are not provided."""

from . import cuda  # noqa: F401
from .analyzer import AnalysisResult, Analyzer  # noqa: F401
