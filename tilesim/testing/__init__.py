"""Testing helpers for users and for tilesim's own tests: the reference comparison, Hypothesis strategies and
TileLang's ``tilelang.testing`` surface: ``set_random_seed``, ``requires_package``, the hardware marks
(``requires_cuda``, ``requires_cuda_compute_version*``, ``requires_rocm``/``cdna``/``gfx950``) and ``main``."""

from .compare import TOLERANCES, assert_matches_reference, compare_arrays, tolerance_for  # noqa: F401
from .gpu_marks import (  # noqa: F401
    main,
    requires_cdna,
    requires_cuda,
    requires_cuda_compute_version,
    requires_cuda_compute_version_eq,
    requires_cuda_compute_version_ge,
    requires_cuda_compute_version_gt,
    requires_cuda_compute_version_le,
    requires_cuda_compute_version_lt,
    requires_gfx,
    requires_gfx950,
    requires_rocm,
)
from .requires import requires_package  # noqa: F401
from .seed import set_random_seed  # noqa: F401
