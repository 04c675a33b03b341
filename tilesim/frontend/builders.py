"""The frontend's one table of primitive builders: ``BUILDERS[name](tracer, loc, *args) -> IR``.

``@builder("copy", ...)`` registers a function beside its implementation; the builder modules
(:mod:`.prims`, :mod:`.prims_compat`, :mod:`.simt`, :mod:`.ws`) fill it when imported (:mod:`.tracer` imports
them all), so the table is complete once the frontend is imported.
"""

from __future__ import annotations

__all__ = ["BUILDERS", "builder"]

BUILDERS: dict = {}


def builder(*names):
    def deco(fn):
        for n in names:
            BUILDERS[n] = fn
        return fn
    return deco
