"""MoE group/expert bookkeeping kernels (TileKernels' ``topk_sum_and_topk_group_idx``, ``group_count``,
``aux_fi`` and ``inplace_unique_group_indices``).

Kernels (registry names):

* ``moe_topk_group_idx`` — ``Scores`` (T, G, E/G) fp32 → ``Idx`` (T, k) int32: each group's score is the
  sum of its ``s`` largest entries (``s = group_sum_topk`` ∈ {1, 2}; for 2: the maximum plus the maximum
  of the rest, so two equal maxima count twice, as with a sort), then the ``k`` best groups by a stable
  descending sort (equal scores: the smaller group index first). This is the group step of
  ``moe_topk_route`` exposed on its own. ``1 ≤ k ≤ G`` and ``s ≤ E/G`` (``ValueError``).
* ``moe_group_count`` — ``Idx`` (T, k) int32 → ``Counts`` (G,) int32, the number of entries equal to
  each group id (entries < 0 ignored; ids must be < G). Two launches: zero, then one ``T.atomic_add`` per
  entry (integer atomics: the result does not depend on their order).
* ``moe_aux_fi`` — ``Idx`` (T, k) int32 → ``Fi`` (E,) fp32, ``Fi[e] = float32(count[e]) · E / (T · a)``
  (``a = num_aux_topk``), the load-balancing frequency of the auxiliary loss; the product and the quotient
  are each rounded to fp32 as in TileKernels' reference. Three launches: zero a ``(E,)`` int32 workspace,
  count with atomics, scale.
* ``moe_unique_group_indices`` — ``Idx`` (T, k) int32 → ``Out`` (T, k) int32: an entry equal to an earlier
  entry of its row becomes -1 (the first occurrence stays). TileKernels rewrites its input in place; here
  the result is a separate output with the same values.

Edges: ragged T (rows past T are never stored), -1 entries, all-equal rows, -inf scores (a group whose
score is -inf is still ranked by index: a taken-group flag keeps a group from being chosen twice).
Scores must not be NaN. Fragments that are reduced are padded to powers of two (E/G and G may be 18 or
12, as in TileKernels' tests): padding entries are -inf and never chosen.
"""

import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.registry import KernelSpec, register

NEG_INF = float("-inf")


def _pow2(n):
    return 1 << max(0, (int(n) - 1).bit_length())


@tilelang.jit(out_idx=[1])
def topk_group_idx(num_tokens, num_groups, group_size, topk_groups, group_sum_topk=2, block_T=8, threads=128):
    """Stable top-``topk_groups`` of the groups ranked by the sum of their ``group_sum_topk`` best scores."""
    G, Eg, K = num_groups, group_size, topk_groups
    if group_sum_topk not in (1, 2) or group_sum_topk > Eg:
        raise ValueError(f"group_sum_topk={group_sum_topk} must be 1 or 2 and at most the group size {Eg}")
    if not 1 <= K <= G:
        raise ValueError(f"topk_groups={K} must be in [1, num_groups={G}]")
    Gp, Ep = _pow2(G), _pow2(Eg)

    @T.prim_func
    def main(Scores: T.Tensor((num_tokens, G, Eg), "float32"), Idx: T.Tensor((num_tokens, K), "int32")):
        with T.Kernel(T.ceildiv(num_tokens, block_T), threads=threads) as bx:
            ss = T.alloc_shared((block_T, G, Eg), "float32")
            bg = T.alloc_fragment((block_T, G, Ep), "float32")
            cand = T.alloc_fragment((block_T, G, Ep), "int32")
            m1 = T.alloc_fragment((block_T, G), "float32")
            m2 = T.alloc_fragment((block_T, G), "float32")
            first = T.alloc_fragment((block_T, G), "int32")
            gs = T.alloc_shared((block_T, Gp), "float32")
            gscore = T.alloc_fragment((block_T, Gp), "float32")
            taken = T.alloc_fragment((block_T, Gp), "int32")
            gcand = T.alloc_fragment((block_T, Gp), "int32")
            row_max = T.alloc_fragment((block_T,), "float32")
            pick = T.alloc_fragment((block_T,), "int32")
            idx = T.alloc_shared((block_T, K), "int32")
            T.copy(Scores[bx * block_T, 0, 0], ss)
            for i, g, e in T.Parallel(block_T, G, Ep):
                bg[i, g, e] = T.if_then_else(e < Eg, ss[i, g, T.min(e, Eg - 1)], NEG_INF)
            T.reduce_max(bg, m1, dim=2)
            if group_sum_topk == 2:  # the maximum plus the maximum of the rest (first arg-max removed)
                for i, g, e in T.Parallel(block_T, G, Ep):
                    cand[i, g, e] = T.if_then_else((bg[i, g, e] == m1[i, g]) & (e < Eg), e, Ep)
                T.reduce_min(cand, first, dim=2)
                for i, g, e in T.Parallel(block_T, G, Ep):
                    bg[i, g, e] = T.if_then_else(e == first[i, g], NEG_INF, bg[i, g, e])
                T.reduce_max(bg, m2, dim=2)
                for i, g in T.Parallel(block_T, G):
                    m1[i, g] = m1[i, g] + m2[i, g]
            T.fill(gs, NEG_INF)
            for i, g in T.Parallel(block_T, G):
                gs[i, g] = m1[i, g]
            T.copy(gs, gscore)
            T.clear(taken)
            for r in T.serial(K):
                for i, g in T.Parallel(block_T, Gp):
                    gscore[i, g] = T.if_then_else(taken[i, g] != 0, NEG_INF, gscore[i, g])
                T.reduce_max(gscore, row_max, dim=1)
                for i, g in T.Parallel(block_T, Gp):
                    gcand[i, g] = T.if_then_else((gscore[i, g] == row_max[i]) & (taken[i, g] == 0) & (g < G), g, Gp)
                T.reduce_min(gcand, pick, dim=1)
                for i in T.Parallel(block_T):
                    idx[i, r] = pick[i]
                for i, g in T.Parallel(block_T, Gp):
                    taken[i, g] = T.if_then_else(g == pick[i], 1, taken[i, g])
            T.copy(idx, Idx[bx * block_T, 0])

    return main


@tilelang.jit(out_idx=[1])
def group_count(num_tokens, topk, num_groups, block_T=64, threads=128):
    """Per-group counts of the non-negative entries of ``Idx`` (zero, then integer atomics)."""
    @T.prim_func
    def main(Idx: T.Tensor((num_tokens, topk), "int32"), Counts: T.Tensor((num_groups,), "int32")):
        with T.Kernel(T.ceildiv(num_groups, 256), threads=threads) as bx:
            for e in T.Parallel(256):
                if bx * 256 + e < num_groups:
                    Counts[bx * 256 + e] = 0
        with T.Kernel(T.ceildiv(num_tokens, block_T), threads=threads) as bx:
            v = T.alloc_shared((block_T, topk), "int32")
            T.copy(Idx[bx * block_T, 0], v)
            for i, k in T.Parallel(block_T, topk):
                if (bx * block_T + i < num_tokens) & (v[i, k] >= 0):
                    T.atomic_add(Counts[v[i, k]], 1)

    return main


@tilelang.jit(out_idx=[1])
def aux_fi(num_tokens, topk, num_experts, num_aux_topk, block_T=64, threads=128):
    """``Fi[e] = float32(count[e]) · E / (T · num_aux_topk)``: zero, count with atomics, scale."""
    E = num_experts
    denom = float(num_tokens * num_aux_topk)

    @T.prim_func
    def main(Idx: T.Tensor((num_tokens, topk), "int32"), Fi: T.Tensor((E,), "float32")):
        C = T.alloc_global((E,), "int32")
        with T.Kernel(T.ceildiv(E, 256), threads=threads) as bx:
            for e in T.Parallel(256):
                if bx * 256 + e < E:
                    C[bx * 256 + e] = 0
        with T.Kernel(T.ceildiv(num_tokens, block_T), threads=threads) as bx:
            v = T.alloc_shared((block_T, topk), "int32")
            T.copy(Idx[bx * block_T, 0], v)
            for i, k in T.Parallel(block_T, topk):
                if (bx * block_T + i < num_tokens) & (v[i, k] >= 0):
                    T.atomic_add(C[v[i, k]], 1)
        with T.Kernel(T.ceildiv(E, 256), threads=threads) as bx:
            for e in T.Parallel(256):
                if bx * 256 + e < E:
                    Fi[bx * 256 + e] = T.cast(C[bx * 256 + e], "float32") * T.float32(E) / T.float32(denom)

    return main


@tilelang.jit(out_idx=[1])
def unique_group_indices(num_tokens, topk, block_T=64, threads=128):
    """Entries equal to an earlier entry of their row become -1."""
    @T.prim_func
    def main(Idx: T.Tensor((num_tokens, topk), "int32"), Out: T.Tensor((num_tokens, topk), "int32")):
        with T.Kernel(T.ceildiv(num_tokens, block_T), threads=threads) as bx:
            v = T.alloc_shared((block_T, topk), "int32")
            o = T.alloc_fragment((block_T, topk), "int32")
            T.copy(Idx[bx * block_T, 0], v)
            for i, k in T.Parallel(block_T, topk):
                o[i, k] = v[i, k]
            for kp in T.serial(topk):
                for i, k in T.Parallel(block_T, topk):
                    o[i, k] = T.if_then_else((kp < k) & (v[i, kp] == v[i, k]), -1, o[i, k])
            T.copy(o, Out[bx * block_T, 0])

    return main


# ------------------------------------------------------------------------------------------ references
def ref_topk_group_idx(Scores, topk_groups, group_sum_topk=2, **_):
    s = np.asarray(Scores, np.float32)
    gscore = np.sort(s, axis=-1)[..., ::-1][..., :group_sum_topk].sum(axis=-1, dtype=np.float32)
    return np.argsort(-gscore, axis=1, kind="stable")[:, :topk_groups].astype(np.int32)


def ref_group_count(Idx, num_groups, **_):
    v = np.asarray(Idx).ravel()
    return np.bincount(v[v >= 0], minlength=num_groups).astype(np.int32)


def ref_aux_fi(Idx, num_experts, num_aux_topk, **_):
    c = ref_group_count(Idx, num_experts).astype(np.float32)
    return (c * np.float32(num_experts)).astype(np.float32) / np.float32(Idx.shape[0] * num_aux_topk)


def ref_unique_group_indices(Idx, **_):
    v = np.asarray(Idx)
    out = v.copy()
    for k in range(1, v.shape[1]):
        out[:, k] = np.where((v[:, :k] == v[:, k: k + 1]).any(axis=1), -1, v[:, k])
    return out.astype(np.int32)


# ------------------------------------------------------------------------------------------ registry
def _scores(rng, num_tokens, num_groups, group_size, **_):
    """Scores on a coarse grid (exact ties in and across groups) with one all -inf token."""
    s = (rng.integers(-8, 9, (num_tokens, num_groups, group_size)) / 4).astype(np.float32)
    if num_tokens > 1:
        s[1] = NEG_INF
    return (s,)


def _idx(rng, num_tokens, topk, num_groups=None, num_experts=None, **_):
    n = num_groups if num_groups is not None else num_experts
    v = rng.integers(-1, n, (num_tokens, topk)).astype(np.int32)
    if num_tokens > 1:
        v[1] = n - 1  # one id repeated across a row
    return (v,)


def _small_idx(rng, num_tokens, topk, **_):
    v = rng.integers(-1, 6, (num_tokens, topk)).astype(np.int32)  # few distinct ids: many duplicates
    return (v,)


_TOK = ({"label": "DeepSeek-V3 4096 tok", "num_tokens": 4096}, {"label": "16384 tok", "num_tokens": 16384})

register(KernelSpec(
    name="moe_topk_group_idx", family="moe",
    description="group scores = sum of the top-1/2 scores per group, then the stable top-k groups "
                "(TileKernels' topk_sum_and_topk_group_idx)",
    build=lambda num_tokens, num_groups, group_size, topk_groups, group_sum_topk, block_T, threads, **_:
        topk_group_idx(num_tokens, num_groups, group_size, topk_groups, group_sum_topk, block_T, threads),
    make_inputs=_scores, reference=ref_topk_group_idx,
    flops=lambda num_tokens, num_groups, group_size, topk_groups, **_: num_tokens * num_groups * (3 * group_size + 3 * topk_groups),
    bytes=lambda num_tokens, num_groups, group_size, topk_groups, **_: 4 * num_tokens * (num_groups * group_size + topk_groups),
    shapes=tuple(dict(s, num_groups=8, group_size=32, topk_groups=4) for s in _TOK),
    test_shapes=(
        {"label": "72 experts in 12 groups, top-4, ragged tokens", "num_tokens": 37, "num_groups": 12, "group_size": 6},
        {"label": "256 in 16 groups, top-1 sum, top-2", "num_tokens": 10, "num_groups": 16, "group_size": 16,
         "group_sum_topk": 1, "topk_groups": 2},
    ),
    tunables={"block_T": [4, 8, 16, 32], "threads": [64, 128, 256]},
    defaults={"topk_groups": 4, "group_sum_topk": 2, "block_T": 8, "threads": 128},
    tolerance={"exact": True},
))

register(KernelSpec(
    name="moe_group_count", family="moe",
    description="per-group counts of non-negative ids with integer atomics (TileKernels' group_count)",
    build=lambda num_tokens, topk, num_groups, block_T, threads, **_: group_count(num_tokens, topk, num_groups,
                                                                                   block_T, threads),
    make_inputs=_idx, reference=ref_group_count,
    flops=lambda num_tokens, topk, **_: num_tokens * topk,
    bytes=lambda num_tokens, topk, num_groups, **_: 4 * (num_tokens * topk + num_groups),
    shapes=tuple(dict(s, topk=8, num_groups=256) for s in _TOK),
    test_shapes=({"label": "ragged", "num_tokens": 37, "topk": 6, "num_groups": 72},
                 {"label": "more groups than one block", "num_tokens": 20, "topk": 8, "num_groups": 300}),
    tunables={"block_T": [32, 64, 128], "threads": [64, 128, 256]},
    defaults={"block_T": 64, "threads": 128},
    tolerance={"exact": True},
))

register(KernelSpec(
    name="moe_aux_fi", family="moe",
    description="aux-loss frequency f_i = count_i * E / (T * num_aux_topk), counts by atomics (TileKernels' aux_fi)",
    build=lambda num_tokens, topk, num_experts, num_aux_topk, block_T, threads, **_: aux_fi(
        num_tokens, topk, num_experts, num_aux_topk, block_T, threads),
    make_inputs=_idx, reference=ref_aux_fi,
    flops=lambda num_tokens, topk, num_experts, **_: num_tokens * topk + 2 * num_experts,
    bytes=lambda num_tokens, topk, num_experts, **_: 4 * (num_tokens * topk + num_experts),
    shapes=tuple(dict(s, topk=8, num_experts=256, num_aux_topk=8) for s in _TOK),
    test_shapes=({"label": "ragged, aux top-1", "num_tokens": 37, "topk": 6, "num_experts": 72, "num_aux_topk": 1},
                 {"label": "aux top-k", "num_tokens": 13, "topk": 8, "num_experts": 256, "num_aux_topk": 8}),
    tunables={"block_T": [32, 64, 128], "threads": [64, 128, 256]},
    defaults={"block_T": 64, "threads": 128},
    tolerance={"exact": True},
))

register(KernelSpec(
    name="moe_unique_group_indices", family="moe",
    description="entries repeating an earlier entry of their row become -1 (TileKernels' inplace_unique_group_indices)",
    build=lambda num_tokens, topk, block_T, threads, **_: unique_group_indices(num_tokens, topk, block_T, threads),
    make_inputs=_small_idx, reference=ref_unique_group_indices,
    flops=lambda num_tokens, topk, **_: num_tokens * topk * topk,
    bytes=lambda num_tokens, topk, **_: 8 * num_tokens * topk,
    shapes=tuple(dict(s, topk=8) for s in _TOK),
    test_shapes=({"label": "ragged", "num_tokens": 37, "topk": 6}, {"label": "top-9", "num_tokens": 70, "topk": 9}),
    tunables={"block_T": [32, 64, 128], "threads": [64, 128, 256]},
    defaults={"block_T": 64, "threads": 128},
    tolerance={"exact": True},
))
