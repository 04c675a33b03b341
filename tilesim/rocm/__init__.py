"""``tilelang.rocm``: AMD-specific helpers TileLang programs import (``rocm.intrinsics``: the MFMA macro emitters
and their layouts). Kernels written with them run on the interpreter like any other (a ``target="hip ..."`` is
not available here: docs/language.md, "GPU targets this machine does not have")."""

from . import intrinsics  # noqa: F401
