"""``tilelang.cuda.intrinsics``: warp-level MMA macros and their layouts, given per-thread meaning.

:mod:`.macro.mma_macro_generator` (``TensorCoreIntrinEmitter``) and :mod:`.layout.mma_layout` (fragment
layouts, ``get_swizzle_layout``, ``make_mma_swizzle_layout``).
"""

from . import layout, macro, sparse_layout  # noqa: F401
from .layout.mma_layout import get_swizzle_layout, make_mma_swizzle_layout  # noqa: F401
from .macro.mma_macro_generator import TensorCoreIntrinEmitter  # noqa: F401
