"""Random numbers: ``T.rng_init`` / ``T.rng_rand`` / ``T.rng_rand_float`` (cuRAND's Philox4_32_10 device API).

Contract
--------
``T.rng_init(seed, seq=None, off=0)`` starts the executing thread's stream (``curand_init(seed, seq, off)``;
``seq`` defaults to ``tx + bx * threads_x`` as in TileLang). ``T.rng_rand()`` is the stream's next 32-bit
value (``curand()``), ``T.rng_rand_float()`` the next uniform float32 in (0, 1] (``curand_uniform``). The
values are bit-exact Philox4x32-10 (``tilesim/philox.py``: the same as cuRAND and Triton's
``tl.randint4x``). In per-thread code every call draws once per executing thread, in program order. Inside
``T.Parallel`` each element draws once, in the loop's row-major element order (what the one thread of a
one-thread block does); a block of several threads splits a parallel loop's elements among its threads by a
compiler layout, so there it is refused, as are a second draw in one parallel loop, ``generator`` other
than Philox, normal and 64-bit floats. The CUDA backend refuses the draws.
"""

from __future__ import annotations

from ._marker import marker


@marker()
def rng_init(seed, seq=None, off=0, generator="curandStatePhilox4_32_10_t"):
    """Start the thread's Philox stream at position ``off`` of subsequence ``seq``."""


@marker()
def rng_rand():
    """The next 32-bit value (uint32) of the thread's stream."""


@marker()
def rng_rand_float(bit=32, dist="uniform"):
    """The next uniform float32 in (0, 1] of the thread's stream."""
