"""``tilelang.rocm.intrinsics``: MFMA (AMD matrix core) macro emitters (:mod:`.mfma_macro_generator`)."""

from .mfma_macro_generator import MatrixCoreIntrinEmitter, MatrixCorePreshuffleIntrinEmitter  # noqa: F401
