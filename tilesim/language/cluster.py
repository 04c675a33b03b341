"""Thread-block clusters: ``T.ClusterKernel``, cluster barriers, the block's rank in its cluster, and
cluster launch control (``T.clc_*``).

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
* cluster launch control: a sequential interpreter starts the clusters of a launch in order (cluster 0,
  1, ... — the blocks of each cluster in rank order); ``T.clc_try_cancel_multicast`` takes the next cluster
  that has not started (it will never start) and answers with its first block, or "none" when every
  cluster has started or been taken. So a persistent cluster keeps fetching tiles until none are left;
  which cluster computes a tile depends on how many clusters run together (``mode="serial"``: one), the
  result does not.

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


@marker()
def clc_try_cancel_multicast(result, mbar):
    """Cluster launch control: ask for a cluster of the launch that has not started. ``result`` (4 uint32
    words) gets, in every block of this cluster, whether one was taken (``T.clc_is_canceled``) and its first
    block (``T.clc_get_first_ctaid_x``); the answer's bytes go to ``mbar`` (arrive on it with
    ``T.mbarrier_arrive_expect_tx`` as the hardware needs)."""


@marker()
def clc_is_canceled(result):
    """1 when the ``T.clc_try_cancel_multicast`` that wrote ``result`` took a cluster, else 0."""


@marker()
def clc_get_first_ctaid_x(result):
    """The x block index of the first block of the cluster ``result`` took."""


@marker()
def atomic_load(src, memory_order="seq_cst"):
    """The value of the global element ``src`` (an atomic load; blocks run in launch order, so a block sees
    what earlier blocks published)."""


@marker()
def atomic_store(dst, src, memory_order="seq_cst"):
    """Store ``src`` into the global element ``dst`` (an atomic store)."""
