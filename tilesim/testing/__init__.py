"""Testing helpers for users and for tilesim's own tests: the reference comparison and Hypothesis strategies."""

from .compare import TOLERANCES, assert_matches_reference, compare_arrays, tolerance_for  # noqa: F401
