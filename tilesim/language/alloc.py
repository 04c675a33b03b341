"""Allocations: ``T.alloc_shared``, ``T.alloc_fragment``, ``T.alloc_local``, ``T.alloc_var``, ``T.alloc_global``,
and views ``T.reshape``/``T.view``."""

from __future__ import annotations

from ._marker import marker


@marker()
def alloc_shared(shape, dtype, scope="shared.dyn"):
    """A block-visible tile in shared memory (L1 on Ascend, NRAM on MLU).

    Example: ``A_s = T.alloc_shared((block_M, block_K), "float16")``
    """


@marker()
def alloc_fragment(shape, dtype, scope="local.fragment"):
    """A register tile with a block-level logical view (the compiler spreads it over threads).

    Example: ``acc = T.alloc_fragment((block_M, block_N), "float32")``
    """


@marker()
def alloc_local(shape, dtype, scope="local"):
    """A thread-private array; at tile level it behaves like a fragment of the same shape."""


@marker()
def alloc_var(dtype, init=None, scope="local.var"):
    """A scalar variable; plain assignment ``x = v`` stores into it. Optional initial value."""


@marker()
def alloc_global(shape, dtype):
    """A global-memory workspace living for the duration of the program."""


@marker()
def alloc_reducer(shape, dtype, op="sum", replication=None):
    """A fragment every ``T.Parallel`` iteration accumulates into with ``op`` (``r[i] += v`` over ``(i, j)``
    combines every ``j``'s ``v``); see ``tilesim/frontend/reducer.py``."""


@marker()
def finalize_reducer(reducer):
    """Combine the threads' replicas of a reducer (contributions are combined when made here)."""


@marker()
def make_tensor(ptr, shape, dtype="float32", strides=None):
    """A global tensor of ``shape`` and ``dtype`` at device address ``ptr`` (an element of a ``T.ptr`` table)."""


@marker()
def reshape(src, shape):
    """A view of ``src`` with a new shape (same number of elements, row-major)."""


@marker()
def view(src, shape=None, dtype=None):
    """A view of ``src`` with a new shape and/or dtype (reinterpreting bytes)."""
