"""Hypothesis strategies for kernel tests: shapes (including ones tiles do not divide), dtypes, tiles.

Valid cases are built by construction: tile sizes are drawn as powers of two, and shapes as
``tiles * n + remainder`` so a test can ask for shapes that tiles divide, do not divide, or either.
``assume`` is used only for size budgets.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from .. import dtypes as dt

FLOAT_DTYPES = ("float32", "float16", "bfloat16")
GEMM_DTYPES = ("float32", "float16", "bfloat16", "float8_e4m3fn")


@st.composite
def tile_sizes(draw, min_exp=3, max_exp=6):
    """A power-of-two tile size in [2**min_exp, 2**max_exp]."""
    return 2 ** draw(st.integers(min_exp, max_exp))


@st.composite
def dim(draw, tile: int, max_tiles=3, divisible: bool | None = False):
    """A dimension for ``tile``: a multiple of it (``divisible=True``), not a multiple (False), or either."""
    n = draw(st.integers(0 if divisible is False else 1, max_tiles))
    if divisible is True:
        return n * tile
    if divisible is False:
        return n * tile + draw(st.integers(1, tile - 1))
    return max(1, n * tile + draw(st.integers(0, tile - 1)))


@st.composite
def gemm_case(draw, dtypes=GEMM_DTYPES, max_tiles=2):
    """(M, N, K, block_M, block_N, block_K, dtype) with M, N, K not divisible by their tiles."""
    bm = draw(st.sampled_from([16, 32, 64]))
    bn = draw(st.sampled_from([16, 32, 64]))
    bk = draw(st.sampled_from([16, 32]))
    return (draw(dim(bm, max_tiles)), draw(dim(bn, max_tiles)), draw(dim(bk, max_tiles)), bm, bn, bk,
            draw(st.sampled_from(dtypes)))


def random_array(rng: np.random.Generator, shape, dtype: str, scale: float = 1.0) -> np.ndarray:
    """Fresh random data of ``dtype`` (never all zeros): normal values, rounded to the dtype."""
    x = rng.standard_normal(shape).astype(np.float32) * scale
    if dt.is_int(dtype):
        return rng.integers(-8, 8, size=shape).astype(dt.np_dtype(dtype))
    return dt.convert(x, dtype)
