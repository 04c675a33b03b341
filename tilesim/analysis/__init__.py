"""Cost analysis: what one block of a kernel costs on a hardware model under a lowering profile.

``analyze(prim_func, hw, profile, **shapes)`` → one :class:`LaunchProgram` per launch: the block's
tile operations with FLOPs by unit and dtype, bytes by memory level, synchronisations and loop trip
counts, grouped into block classes of identical cost. ``tilesim.sim`` schedules these programs.
See ``docs/simulator.md``.
"""

from __future__ import annotations

from .cost import COST_RULES, EXPR_RULES, analyze, resolve_shapes
from .profiles import PROFILES, LoweringProfile, default_profile, get_profile
from .program import GAccess, LaunchProgram, Loop, Op, walk_ops

__all__ = ["analyze", "resolve_shapes", "COST_RULES", "EXPR_RULES", "PROFILES", "LoweringProfile",
           "get_profile", "default_profile", "LaunchProgram", "Loop", "Op", "GAccess", "walk_ops"]
