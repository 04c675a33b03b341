"""What TileLang programs reach through ``tvm`` (the compiler TileLang ships), as far as tilesim can mean it.

TileLang programs import a few names from TVM: ``from tvm import DataType`` (dtype facts such as ``.bits``),
``from tvm import tirx`` (``tirx.const``, ``tirx.reinterpret`` and the ``PrimExpr`` type in helper
functions that build kernel expressions) and ``tilelang.tvm``. With tilesim they are ``tilesim.tvm``:
``DataType`` is tilesim's dtype class (``T.dtype``), and :mod:`.tirx` maps ``const``/``reinterpret`` onto
``T.cast``/``T.reinterpret``; :mod:`.target` is ``tvm.target.Target`` (a parsed target description) and
:mod:`.testing` ``tvm.testing.requires_package``. TVM's IR (schedules, passes, ``IRModule``) has no meaning here; using it
fails with Python's ``AttributeError`` on this module.
"""

from __future__ import annotations

from ..language.types import DType as DataType  # noqa: N812
from . import target, testing, tirx

__all__ = ["DataType", "target", "testing", "tirx"]
