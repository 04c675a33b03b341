"""Testing helpers for users and for tilesim's own tests: the reference comparison, Hypothesis strategies and
TileLang's ``tilelang.testing.set_random_seed`` and ``requires_package``."""

from .compare import TOLERANCES, assert_matches_reference, compare_arrays, tolerance_for  # noqa: F401
from .requires import requires_package  # noqa: F401
from .seed import set_random_seed  # noqa: F401
