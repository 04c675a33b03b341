"""``tilelang.tools``: TileLang's developer tools. tilesim provides ``tools.cuda.iket`` (IKET instrumentation
events, which change no value; see :mod:`.cuda.iket`); the others (layout plotting, the pass-timing and
lowering-trace tools) are not provided."""

from . import cuda  # noqa: F401
