"""Blackwell tensor memory in the CUDA lowering: refused, naming the construct.

Contract
--------
``T.alloc_tmem`` (an ``Alloc`` of scope ``"tmem"``) is Blackwell (sm_100) tensor memory, and the
``T.tcgen05_*`` gemms that accumulate into it are sm_100 instructions; Numba's CUDA target has neither and
the lent GPU is an H200 (sm_90), on which sm_100 code cannot run. :func:`refuse` raises a
``KernelTypeError`` at the launch's first tensor-memory allocation, before any planning (``lower.py``
calls it first); so does a thread-block cluster launch (``T.ClusterKernel``: Numba cannot launch clusters).
The ``T.tcgen05_mma_arrive`` / ``mbar=`` arrivals are mbarrier operations, refused by
:mod:`.ws`. The interpreter runs these programs.
"""

from __future__ import annotations

from ...errors import KernelTypeError
from ...ir import nodes as N
from ...ir.traverse import walk_stmts


def refuse(g) -> None:
    """Raise for a cluster launch, or at the launch's first ``T.alloc_tmem``, if any."""
    dims = g.launch.annotation("cluster")
    if dims:
        raise KernelTypeError(
            f"a thread-block cluster launch (cluster_dims {tuple(dims)}) is not supported by the CUDA backend: Numba "
            "cannot launch clusters (no cluster dimensions, no distributed shared memory)", g.launch.loc,
            hint="run it on the interpreter (target='interp'), or launch with T.Kernel for the GPU")
    for s in walk_stmts(g.launch.body):
        if type(s) is N.Alloc and s.buffer.scope == "tmem":
            raise KernelTypeError(
                f"T.alloc_tmem ({s.buffer.name}) is Blackwell (sm_100) tensor memory, which the CUDA backend does "
                "not support: Numba has no tcgen05 instructions and the GPU here is sm_90", s.loc,
                hint="run it on the interpreter (target='interp'), or accumulate into T.alloc_fragment with T.gemm "
                     "for the GPU")
