"""Thread-block clusters: ``T.ClusterKernel``, cluster barriers and the block's rank in its cluster.

Contract
--------
A **cluster** is a group of ``cx * cy * cz`` blocks of a launch (``cluster_dims``; an int ``n`` means
``(n, 1, 1)``) that run concurrently and reach each other's shared memory and barriers. Block
``(bx, by, bz)`` belongs to cluster ``(bx // cx, by // cy, bz // cz)`` with rank
``bx % cx + cx * (by % cy + cy * (bz % cz))`` (``T.block_rank_in_cluster()``; CUDA's ``%cluster_ctarank``).
Every grid extent must be a multiple of its cluster extent.

tilesim runs the blocks of one cluster together (one chunk of the interpreter holds whole clusters; their
warp groups are concurrent tasks switched at barrier waits, ``backends/interp/coroutines.py``), so:

* ``T.alloc_cluster_barrier(counts)`` is ``T.alloc_barrier`` (each block holds its own barriers) whose
  barriers other blocks of the cluster may arrive on: ``T.mbarrier_arrive(b, cta_id)`` arrives on ``b`` of
  the block of rank ``cta_id``;
* ``T.tcgen05_gemm(..., use_2cta=True)`` issued by one block of a 2-block cluster computes the pair's product:
  each block ``r`` of the pair gets ``C_r (+)= A_r @ [B_0 | B_1]`` (its own rows of A, the two blocks'
  halves of B joined along N) in its own ``C``; its ``mbar`` and ``T.tcgen05_mma_arrive(b, arrive_2cta=True)``
  arrive once on ``b`` in both blocks;
* cluster launch control (``T.clc_*``) is refused (:data:`tilesim.language.annotate.UNSUPPORTED`).

The CUDA backend refuses cluster launches (Numba cannot launch clusters); the simulator refuses them too.
``docs/language.md`` ("Thread-block clusters") has the details.
"""

from __future__ import annotations

from ._marker import marker


@marker("Kernel")
def ClusterKernel(*blocks, cluster_dims, threads=128, prelude=None):  # noqa: N802
    """``with T.ClusterKernel(gx, gy, threads=128, cluster_dims=2) as (bx, by):`` a launch whose blocks are
    grouped into clusters of ``cluster_dims`` (an int or up to 3 ints) blocks."""


@marker()
def alloc_cluster_barrier(arrive_count):
    """Barriers of the block (as :func:`tilesim.language.ws.alloc_barrier`) that the other blocks of its cluster
    may arrive on (``T.mbarrier_arrive(b, cta_id)``)."""


@marker()
def block_rank_in_cluster():
    """The block's rank in its cluster: ``bx % cx + cx * (by % cy + cy * (bz % cz))`` (0 outside a cluster)."""
