"""The fused MoE layout built on the GPU: TileKernels' ``get_fused_mapping`` as a kernel.

Kernel (registry name ``moe_fused_mapping``)::

    TopkIdx (T, k) int32 expert ids (-1: unused slot)
      → PosToExpert, PosToToken, PosToTokenTopk (P,) int32   (-1 on padding rows)
        TokenTopkToPos (T, k) int32                           (-1 for unused slots)
        ExpertStart, ExpertEnd, NumTokensPerExpert (E,) int32 (sizes padded to ``alignment``)

``P`` defaults to TileKernels' bound ``⌊(T·k + (alignment−1)·E) / alignment⌋·alignment`` (what
``kernels.moe_dispatch.max_fused_rows`` returns), so the shape does not depend on the routing. Expert
``e`` owns rows ``[ExpertStart[e], ExpertEnd[e])``, ``NumTokensPerExpert[e] = ExpertEnd[e] −
ExpertStart[e]`` is its pair count rounded up to the alignment (TileKernels' meaning: their sum is the
used part of ``P``), experts in order from row 0. Inside an expert the pairs are in token-major
(flat ``t·k + s``) order — deterministic, and exactly ``kernels.moe_dispatch.fused_mapping``; TileKernels'
kernel orders them by SM-sized token chunks, and its tests check only the layout's invariants (each
pair once, in its expert's range, maps consistent both ways), which this order satisfies.

Four launches: (1) one block per expert counts its pairs (a ``T.reduce_sum`` over chunks of the flat
pairs); (2) one block scans the padded counts (``T.serial`` over experts) into start/end/size;
(3) every row of the ``P`` arrays is set to -1; (4) one block per expert walks the flat pairs again in
``chunk``-sized pieces, ranks its pairs with ``T.cumsum`` plus a running count, and scatters
``pos = start + rank``; the expert-0 block also writes -1 into ``TokenTopkToPos`` for unused slots.
Each expert block reads all of ``TopkIdx`` (``4·T·k`` bytes, L2-resident): ``E·T·k`` comparisons,
traded for a scan without inter-block communication.

Contract: ids are -1 or in ``[0, E)`` (others are out of contract); ``ValueError`` for a ``num_pos``
below the bound or a non-positive alignment.
"""

import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.moe_dispatch import fused_mapping, max_fused_rows, routed_topk
from kernels.registry import KernelSpec, register


@tilelang.jit(out_idx=[1, 2, 3, 4, 5, 6, 7])
def get_fused_mapping(num_tokens, topk, num_experts, alignment=128, num_pos=None, chunk=256, threads=128):
    """Build the fused layout of a routing (see the module docstring)."""
    if alignment < 1:
        raise ValueError(f"alignment must be positive (got {alignment})")
    E, K = num_experts, topk
    bound = max_fused_rows(num_tokens, topk, num_experts, alignment)
    P = bound if num_pos is None else num_pos
    if P < bound:
        raise ValueError(f"num_pos={P} is below the {bound} rows a routing may need")
    n = num_tokens * K
    n_chunks = -(-n // chunk)

    @T.prim_func
    def main(TopkIdx: T.Tensor((num_tokens, K), "int32"), PosToExpert: T.Tensor((P,), "int32"),
             PosToToken: T.Tensor((P,), "int32"), PosToTokenTopk: T.Tensor((P,), "int32"),
             TokenTopkToPos: T.Tensor((num_tokens, K), "int32"), ExpertStart: T.Tensor((E,), "int32"),
             ExpertEnd: T.Tensor((E,), "int32"), NumTokensPerExpert: T.Tensor((E,), "int32")):
        Cnt = T.alloc_global((E,), "int32")
        with T.Kernel(E, threads=threads) as e:
            flag = T.alloc_fragment((chunk,), "int32")
            part = T.alloc_fragment((1,), "int32")
            total = T.alloc_fragment((1,), "int32")
            T.clear(total)
            for c in T.serial(n_chunks):
                for j in T.Parallel(chunk):
                    f = c * chunk + j
                    flag[j] = T.if_then_else((f < n) & (TopkIdx[T.min(f, n - 1) // K, T.min(f, n - 1) % K] == e), 1, 0)
                T.reduce_sum(flag, part, dim=0)
                total[0] = total[0] + part[0]
            Cnt[e] = total[0]
        with T.Kernel(1, threads=threads) as _:
            start = T.alloc_var("int32", init=0)
            for e in T.serial(E):
                size = (Cnt[e] + (alignment - 1)) // alignment * alignment
                ExpertStart[e] = start
                ExpertEnd[e] = start + size
                NumTokensPerExpert[e] = size
                start = start + size
        with T.Kernel(T.ceildiv(P, 256), threads=threads) as bx:
            for j in T.Parallel(256):
                if bx * 256 + j < P:
                    PosToExpert[bx * 256 + j] = -1
                    PosToToken[bx * 256 + j] = -1
                    PosToTokenTopk[bx * 256 + j] = -1
        with T.Kernel(E, threads=threads) as e:
            ids = T.alloc_shared((chunk,), "int32")
            mine = T.alloc_shared((chunk,), "int32")
            rank = T.alloc_shared((chunk,), "int32")
            base = ExpertStart[e]
            seen = T.alloc_var("int32", init=0)
            for c in T.serial(n_chunks):
                for j in T.Parallel(chunk):
                    f = c * chunk + j
                    ids[j] = T.if_then_else(f < n, TopkIdx[T.min(f, n - 1) // K, T.min(f, n - 1) % K], -2)
                    mine[j] = T.if_then_else(ids[j] == e, 1, 0)
                T.cumsum(mine, rank)
                for j in T.Parallel(chunk):
                    f = c * chunk + j
                    if mine[j] > 0:
                        pos = base + seen + rank[j] - 1
                        PosToExpert[pos] = e
                        PosToToken[pos] = f // K
                        PosToTokenTopk[pos] = f
                        TokenTopkToPos[f // K, f % K] = pos
                    if (e == 0) & (ids[j] == -1):
                        TokenTopkToPos[f // K, f % K] = -1
                seen = seen + rank[chunk - 1]

    return main


# ------------------------------------------------------------------------------------------ reference
def ref_get_fused_mapping(TopkIdx, num_experts, alignment=128, num_pos=None, **_):
    """NumPy: (PosToExpert, PosToToken, PosToTokenTopk, TokenTopkToPos, ExpertStart, ExpertEnd, NumTokensPerExpert)."""
    idx = np.asarray(TopkIdx)
    k = idx.shape[1]
    t2p, p2t, p2e = fused_mapping(idx, num_experts, alignment, num_pos)
    p2tt = np.full_like(p2t, -1)
    tt, ss = np.nonzero(t2p >= 0)
    p2tt[t2p[tt, ss]] = tt * k + ss
    counts = np.bincount(idx[idx >= 0].ravel(), minlength=num_experts)
    size = (-(-counts // alignment) * alignment).astype(np.int32)
    start = np.concatenate([[0], np.cumsum(size)[:-1]]).astype(np.int32)
    return p2e, p2t, p2tt, t2p, start, (start + size).astype(np.int32), size


# ------------------------------------------------------------------------------------------ registry
def _inputs(rng, num_tokens, topk, num_experts, drop=0.1, **_):
    return (routed_topk(rng, num_tokens, num_experts, topk, drop=drop),)


register(KernelSpec(
    name="moe_fused_mapping", family="moe_dispatch",
    description="the fused expert-major layout of a routing on the GPU: counts, padded scan, ranked scatter "
                "(TileKernels' get_fused_mapping)",
    build=lambda num_tokens, topk, num_experts, alignment, chunk, threads, **_: get_fused_mapping(
        num_tokens, topk, num_experts, alignment, chunk=chunk, threads=threads),
    make_inputs=_inputs, reference=lambda TopkIdx, num_experts, alignment, **_: ref_get_fused_mapping(
        TopkIdx, num_experts, alignment),
    flops=lambda num_tokens, topk, num_experts, **_: 2 * num_tokens * topk * num_experts,
    bytes=lambda num_tokens, topk, num_experts, alignment, **_: 4 * (2 * num_tokens * topk + 3 * num_experts
                                                                     + 3 * max_fused_rows(num_tokens, topk,
                                                                                          num_experts, alignment)),
    shapes=({"label": "DeepSeek-V3 4096 tok top-8 of 256, align 128", "num_tokens": 4096},
            {"label": "DeepSeek-V3 16384 tok, align 64", "num_tokens": 16384, "alignment": 64}),
    test_shapes=({"label": "13 tok top-3 of 16, align 8", "num_tokens": 13, "topk": 3, "num_experts": 16,
                  "alignment": 8, "chunk": 16},
                 {"label": "70 tok top-6 of 72, align 32", "num_tokens": 70, "topk": 6, "num_experts": 72,
                  "alignment": 32, "chunk": 64}),
    tunables={"chunk": [64, 128, 256, 512], "threads": [64, 128, 256]},
    defaults={"topk": 8, "num_experts": 256, "alignment": 128, "chunk": 256, "threads": 128},
    tolerance={"exact": True},
))
