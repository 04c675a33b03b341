"""tilesim's LLM kernel library: one family per module, each with NumPy references and a registry entry.

Importing the package imports every module in it, so each module only has to call
``kernels.registry.register``.
"""

from __future__ import annotations

import importlib
import pkgutil

for _m in pkgutil.iter_modules(__path__):
    if not _m.name.startswith("_") and _m.name != "registry":
        importlib.import_module(f"{__name__}.{_m.name}")
