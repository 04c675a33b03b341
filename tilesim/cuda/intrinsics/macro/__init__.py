"""Warp-level MMA macro emitters (:mod:`.mma_macro_generator`)."""

from .mma_macro_generator import TensorCoreIntrinEmitter  # noqa: F401
