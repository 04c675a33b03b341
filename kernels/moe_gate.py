"""MoE gates with TileKernels' full option set: ``topk_gate`` and the options of ``top2_sum_gate``
(deepseek-ai/TileKernels, its PyTorch references ``stable_topk`` and ``top2_sum_gate``).

Kernels (registry names):

* ``moe_topk_gate`` — ``Scores (T, E)`` fp32 → ``Idx (T, k)`` int32: the ``k`` largest scores per row in
  descending order, ties → the smaller index (a stable descending sort). ``k`` rounds of tile code (row
  max, smallest untaken index attaining it, mark it taken). The taken flag — not a ``-inf`` overwrite —
  removes an expert, so ``-inf`` scores are still selected in index order once nothing larger is left
  (as the stable sort does). NaN scores: unspecified (TileKernels' kernel asserts finite inputs upstream).
* ``moe_top2_sum_gate`` — ``kernels.moe.moe_route``'s scoring, bias, top-2-sum group limiting and stable
  top-k (same tile code), plus TileKernels' options, all in one launch:

  - **token mask** ``Mask (T,)`` int32 (0 = skip): a skipped token gets ``Idx = -1``, ``W = 0``,
    ``Unmapped = -1``;
  - **fixed routing** ``FixMask (T,)`` int32 + ``FixIdx (T, k)`` int32 (read only when ``fix_routing``):
    a token with ``FixMask ≠ 0`` takes ``FixIdx``'s experts instead of its selection, weighted by its own
    unbiased scores (a negative id reads expert 0's score, as the reference's ``clamp(min=0)`` gather);
  - **shared experts as routed slots** (``num_shared_experts`` S ≥ 0): S more slots per token, logical ids
    ``E … E+S-1``, weight exactly 1;
  - **logical → physical map** ``ToPhys (E+S, D)`` int32 and ``LogicalCount (E+S,)`` int32 (read only
    when ``map_physical``): slot id ``l ≥ 0`` becomes ``ToPhys[l, (ep_rank + t·23333) mod LogicalCount[l]]``
    (``t`` the token's row; the product in int64); ``D − 1`` is the number of extra (duplicated) experts;
  - **EP/TP masking**: with ``per_rank = (E + D − 1) // num_ep_ranks`` and ``per_dp = per_rank ·
    num_tp_ranks``, an id whose EP rank ``id // per_rank`` is not ``≡ tp_rank (mod num_tp_ranks)`` becomes
    ``-1``; the others ``v = id − tp_rank·per_rank; v − (v // per_dp)·(per_dp − per_rank)`` (``-1`` if
    negative). ``num_ep_ranks = num_tp_ranks = 1`` (the defaults) is the identity.

  The expert axis of the fragments is padded to a power of two (what TileLang's butterfly reductions
  need; TileKernels pads to a warp multiple the same way): padding experts score ``-inf`` and are never
  selected (``topk_gate`` marks them taken).

  Outputs ``Idx (T, k+S)`` int32 (TileKernels: int64; same values), ``W (T, k+S)`` fp32 (routed slots
  ``s / max(Σ s, 1e-20) · routed_scaling_factor``, the sum left to right in fp32; shared slots 1; the
  weights are not masked by EP/TP, as in TileKernels) and ``Unmapped (T, k)`` int32, the logical routed
  ids before mapping and masking (TileKernels' in-place ``unmapped_topk_idx``).

Defaults are TileKernels' (no mask, no fixed routing, no shared slots, no map, one EP and one TP rank) on
DeepSeek-V3's routing (256 experts, top-8, 8 groups, top-4, sigmoid, 2.5). Invalid configurations raise
``ValueError`` at build time (those of ``moe_route``; shared slots need ``D − 1 ≥ S`` when mapped, as
TileKernels asserts; ranks must divide ``E + D − 1``). Fixed ids must lie in ``[-1, E)`` and mapped ids in
``[0, E+S)`` with positive counts (TileKernels' device asserts); logits and bias finite.
"""

import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.moe import SUM_FLOOR, _validate, compare_routing, router_inputs, scores_fp32
from kernels.registry import KernelSpec, register

NEG_INF = float("-inf")
PRIME = 23333  # TileKernels' duplicate-selection multiplier


def _pow2(n):
    return 1 << max(n - 1, 0).bit_length()


@tilelang.jit(out_idx=[1])
def topk_gate(num_tokens, num_experts, topk, block_T=8, threads=128):
    E = num_experts
    if not 1 <= topk <= E:
        raise ValueError(f"topk={topk} must be in [1, num_experts={E}]")

    Ep = _pow2(E)

    @T.prim_func
    def main(Scores: T.Tensor((num_tokens, E), "float32"), Idx: T.Tensor((num_tokens, topk), "int32")):
        with T.Kernel(T.ceildiv(num_tokens, block_T), threads=threads) as bx:
            b = T.alloc_fragment((block_T, Ep), "float32")
            taken = T.alloc_fragment((block_T, Ep), "int32")
            cand = T.alloc_fragment((block_T, Ep), "int32")
            row_max = T.alloc_fragment((block_T,), "float32")
            first = T.alloc_fragment((block_T,), "int32")
            idx_shared = T.alloc_shared((block_T, topk), "int32")
            for i, e in T.Parallel(block_T, Ep):  # experts padded to a power of two: -inf, never taken
                b[i, e] = T.if_then_else(e < E, Scores[T.min(bx * block_T + i, num_tokens - 1), T.min(e, E - 1)],
                                         NEG_INF)
                taken[i, e] = T.if_then_else(e < E, 0, 1)
            for r in T.serial(topk):
                T.reduce_max(b, row_max, dim=1)
                for i, e in T.Parallel(block_T, Ep):
                    cand[i, e] = T.if_then_else((b[i, e] == row_max[i]) & (taken[i, e] == 0), e, E)
                T.reduce_min(cand, first, dim=1)
                for i in T.Parallel(block_T):
                    idx_shared[i, r] = first[i]
                for i, e in T.Parallel(block_T, Ep):
                    taken[i, e] = T.if_then_else(e == first[i], 1, taken[i, e])
                    b[i, e] = T.if_then_else(e == first[i], NEG_INF, b[i, e])
            T.copy(idx_shared, Idx[bx * block_T, 0])

    return main


def _validate_gate(E, S, D, map_physical, num_ep_ranks, tp_rank, num_tp_ranks):
    if S < 0 or (S and not map_physical):
        raise ValueError("shared experts as routed slots need the logical -> physical map (map_physical=True)")
    if map_physical and D - 1 < S:
        raise ValueError(f"the map's {D - 1} extra experts must hold the {S} shared experts")
    if num_ep_ranks < 1 or (E + D - 1) % num_ep_ranks:
        raise ValueError(f"num_ep_ranks={num_ep_ranks} must divide the {E + D - 1} physical experts")
    if num_tp_ranks < 1 or not 0 <= tp_rank < num_tp_ranks:
        raise ValueError(f"tp_rank={tp_rank} must be in [0, num_tp_ranks={num_tp_ranks})")


@tilelang.jit(out_idx=[7, 8, 9])
def top2_sum_gate(num_tokens, num_experts=256, topk=8, n_groups=8, topk_groups=4, scoring="sigmoid",
                  routed_scaling_factor=2.5, num_shared_experts=0, num_duplicates=1, use_mask=False,
                  fix_routing=False, map_physical=False, ep_rank=0, num_ep_ranks=1, tp_rank=0, num_tp_ranks=1,
                  block_T=8, threads=128):
    E, G, S, D = num_experts, n_groups, num_shared_experts, num_duplicates
    Eg = E // G
    K = topk + S
    _validate(E, topk, G, topk_groups, scoring)
    _validate_gate(E, S, D, map_physical, num_ep_ranks, tp_rank, num_tp_ranks)
    per_rank = (E + D - 1) // num_ep_ranks
    per_dp = per_rank * num_tp_ranks
    Ep = _pow2(E)  # the expert axis padded to a power of two (-inf, never selected)

    @T.prim_func
    def main(Logits: T.Tensor((num_tokens, E), "float32"), Bias: T.Tensor((E,), "float32"),
             Mask: T.Tensor((num_tokens,), "int32"), FixMask: T.Tensor((num_tokens,), "int32"),
             FixIdx: T.Tensor((num_tokens, topk), "int32"), ToPhys: T.Tensor((E + S, D), "int32"),
             LogicalCount: T.Tensor((E + S,), "int32"), Idx: T.Tensor((num_tokens, K), "int32"),
             W: T.Tensor((num_tokens, K), "float32"), Unmapped: T.Tensor((num_tokens, topk), "int32")):
        with T.Kernel(T.ceildiv(num_tokens, block_T), threads=threads) as bx:
            s = T.alloc_fragment((block_T, Ep), "float32")
            b = T.alloc_fragment((block_T, Ep), "float32")
            bias = T.alloc_fragment((Ep,), "float32")
            cand = T.alloc_fragment((block_T, Ep), "int32")
            row_max = T.alloc_fragment((block_T,), "float32")
            row_sum = T.alloc_fragment((block_T,), "float32")
            first = T.alloc_fragment((block_T,), "int32")
            ids = T.alloc_fragment((block_T, K), "int32")
            w = T.alloc_fragment((block_T, K), "float32")
            um = T.alloc_fragment((block_T, topk), "int32")
            s_shared = T.alloc_shared((block_T, Ep), "float32")
            idx_shared = T.alloc_shared((block_T, topk), "int32")
            w_shared = T.alloc_shared((block_T, topk), "float32")
            flags = T.alloc_shared((block_T, 2), "int32")  # [route, fixed] per token

            for i, e in T.Parallel(block_T, Ep):
                s[i, e] = T.if_then_else(e < E, Logits[T.min(bx * block_T + i, num_tokens - 1), T.min(e, E - 1)],
                                         NEG_INF)
            for e in T.Parallel(Ep):
                bias[e] = T.if_then_else(e < E, Bias[T.min(e, E - 1)], 0.0)
            for i in T.Parallel(block_T):
                if use_mask:
                    flags[i, 0] = Mask[T.min(bx * block_T + i, num_tokens - 1)]
                else:
                    flags[i, 0] = 1
                if fix_routing:
                    flags[i, 1] = FixMask[T.min(bx * block_T + i, num_tokens - 1)]
                else:
                    flags[i, 1] = 0
            if scoring == "softmax":
                for i, e in T.Parallel(block_T, Ep):
                    b[i, e] = s[i, e] + bias[e]
                T.reduce_max(s, row_max, dim=1)
                for i, e in T.Parallel(block_T, Ep):
                    s[i, e] = T.exp(s[i, e] - row_max[i])
                T.reduce_sum(s, row_sum, dim=1)
                for i, e in T.Parallel(block_T, Ep):
                    s[i, e] = s[i, e] / row_sum[i]
            elif scoring == "sigmoid":
                for i, e in T.Parallel(block_T, Ep):
                    s[i, e] = T.sigmoid(s[i, e])
                    b[i, e] = s[i, e] + bias[e]
            else:
                for i, e in T.Parallel(block_T, Ep):
                    s[i, e] = T.sqrt(T.if_then_else(s[i, e] > 20.0, s[i, e], T.log1p(T.exp(s[i, e]))))
                    b[i, e] = s[i, e] + bias[e]
            for i, e in T.Parallel(block_T, Ep):
                b[i, e] = T.if_then_else(e < E, b[i, e], NEG_INF)
            T.copy(s, s_shared)

            if topk_groups < G:
                b_shared = T.alloc_shared((block_T, Ep), "float32")
                keep_shared = T.alloc_shared((block_T, G), "int32")
                bg = T.alloc_fragment((block_T, G, Eg), "float32")
                gcand = T.alloc_fragment((block_T, G, Eg), "int32")
                m1 = T.alloc_fragment((block_T, G), "float32")
                m2 = T.alloc_fragment((block_T, G), "float32")
                gfirst = T.alloc_fragment((block_T, G), "int32")
                gscore = T.alloc_fragment((block_T, G), "float32")
                gkeep = T.alloc_fragment((block_T, G), "int32")
                gcand2 = T.alloc_fragment((block_T, G), "int32")
                T.copy(b, b_shared)
                for i, g, e in T.Parallel(block_T, G, Eg):
                    bg[i, g, e] = b_shared[i, g * Eg + e]
                T.reduce_max(bg, m1, dim=2)
                for i, g, e in T.Parallel(block_T, G, Eg):
                    gcand[i, g, e] = T.if_then_else(bg[i, g, e] == m1[i, g], e, Eg)
                T.reduce_min(gcand, gfirst, dim=2)
                for i, g, e in T.Parallel(block_T, G, Eg):
                    bg[i, g, e] = T.if_then_else(e == gfirst[i, g], NEG_INF, bg[i, g, e])
                T.reduce_max(bg, m2, dim=2)
                for i, g in T.Parallel(block_T, G):
                    gscore[i, g] = m1[i, g] + m2[i, g]
                T.clear(gkeep)
                for _ in T.serial(topk_groups):
                    T.reduce_max(gscore, row_max, dim=1)
                    for i, g in T.Parallel(block_T, G):
                        gcand2[i, g] = T.if_then_else(gscore[i, g] == row_max[i], g, G)
                    T.reduce_min(gcand2, first, dim=1)
                    for i, g in T.Parallel(block_T, G):
                        gkeep[i, g] = T.if_then_else(g == first[i], 1, gkeep[i, g])
                        gscore[i, g] = T.if_then_else(g == first[i], NEG_INF, gscore[i, g])
                T.copy(gkeep, keep_shared)
                for i, e in T.Parallel(block_T, Ep):
                    b[i, e] = T.if_then_else(keep_shared[i, T.min(e // Eg, G - 1)] != 0, b[i, e], NEG_INF)

            for r in T.serial(topk):
                T.reduce_max(b, row_max, dim=1)
                for i, e in T.Parallel(block_T, Ep):
                    cand[i, e] = T.if_then_else(b[i, e] == row_max[i], e, Ep)
                T.reduce_min(cand, first, dim=1)
                for i in T.Parallel(block_T):
                    idx_shared[i, r] = first[i]
                for i, e in T.Parallel(block_T, Ep):
                    b[i, e] = T.if_then_else(e == first[i], NEG_INF, b[i, e])

            # fixed routing replaces the selection; the scores of the final ids, summed left to right
            for i, k in T.Parallel(block_T, topk):
                fid = FixIdx[T.min(bx * block_T + i, num_tokens - 1), k]
                idx_shared[i, k] = T.if_then_else(flags[i, 1] != 0, fid, idx_shared[i, k])
            for i, k in T.Parallel(block_T, topk):
                w_shared[i, k] = s_shared[i, T.max(idx_shared[i, k], 0)]
            T.clear(row_sum)
            for k in T.serial(topk):
                for i in T.Parallel(block_T):
                    row_sum[i] = row_sum[i] + w_shared[i, k]

            for i, k in T.Parallel(block_T, K):
                logical = T.if_then_else(k < topk, idx_shared[i, T.min(k, topk - 1)], E + k - topk)
                w[i, k] = T.if_then_else(
                    k < topk, w_shared[i, T.min(k, topk - 1)] / T.max(row_sum[i], SUM_FLOOR) * routed_scaling_factor,
                    1.0)
                if map_physical:
                    lc = T.max(logical, 0)
                    dup = T.cast(T.floormod(T.cast(ep_rank, "int64") + T.cast(bx * block_T + i, "int64") * PRIME,
                                            T.cast(T.max(LogicalCount[lc], 1), "int64")), "int32")
                    phys = T.if_then_else(logical >= 0, ToPhys[lc, dup], logical)
                else:
                    phys = logical
                local = phys - tp_rank * per_rank
                local = local - T.floordiv(local, per_dp) * (per_dp - per_rank)
                masked = T.if_then_else((phys < 0) | (T.floormod(T.floordiv(phys, per_rank), num_tp_ranks) != tp_rank)
                                        | (local < 0), -1, local)
                ids[i, k] = T.if_then_else(flags[i, 0] != 0, masked, -1)
                w[i, k] = T.if_then_else(flags[i, 0] != 0, w[i, k], 0.0)
            for i, k in T.Parallel(block_T, topk):
                um[i, k] = T.if_then_else(flags[i, 0] != 0, idx_shared[i, k], -1)
            T.copy(ids, Idx[bx * block_T, 0])
            T.copy(w, W[bx * block_T, 0])
            T.copy(um, Unmapped[bx * block_T, 0])

    return main


# ------------------------------------------------------------------------------------------ references
def ref_topk_gate(scores, topk, **_):
    """Stable descending argsort (ties → smaller index), the first ``topk`` columns, int32."""
    return np.argsort(-np.asarray(scores, np.float32), axis=1, kind="stable")[:, :topk].astype(np.int32)


def ref_top2_sum_gate(logits, bias, mask, fix_mask, fix_idx, to_phys, count, topk=8, n_groups=8, topk_groups=4,
                      scoring="sigmoid", routed_scaling_factor=2.5, num_shared_experts=0, use_mask=False,
                      fix_routing=False, map_physical=False, ep_rank=0, num_ep_ranks=1, tp_rank=0, num_tp_ranks=1,
                      **_):
    """(Idx int32, W fp32, Unmapped int32) in NumPy, step by step as documented above (stable argsort)."""
    logits = np.asarray(logits, np.float32)
    Tn, E = logits.shape
    S = num_shared_experts
    s = scores_fp32(logits, scoring)
    b = (logits if scoring == "softmax" else s) + np.asarray(bias, np.float32)
    if topk_groups < n_groups:
        Eg = E // n_groups
        top2 = -np.sort(-b.reshape(Tn, n_groups, Eg), axis=-1)[..., :2]
        gscore = top2[..., 0] + top2[..., 1]
        keep = np.zeros((Tn, n_groups), dtype=bool)
        np.put_along_axis(keep, np.argsort(-gscore, axis=1, kind="stable")[:, :topk_groups], True, axis=1)
        b = np.where(np.repeat(keep, Eg, axis=1), b, np.float32(-np.inf))
    sel = np.argsort(-b, axis=1, kind="stable")[:, :topk].astype(np.int64)
    if fix_routing:
        sel = np.where(np.asarray(fix_mask)[:, None] != 0, np.asarray(fix_idx, np.int64), sel)
    sc = np.take_along_axis(s, np.maximum(sel, 0), axis=1)
    tot = np.zeros(Tn, np.float32)
    for k in range(topk):
        tot = (tot + sc[:, k]).astype(np.float32)
    w = sc.astype(np.float64) / np.maximum(tot, np.float32(SUM_FLOOR))[:, None] * routed_scaling_factor
    ids = np.concatenate([sel, np.broadcast_to(np.arange(E, E + S), (Tn, S))], axis=1)
    w = np.concatenate([w, np.ones((Tn, S))], axis=1)
    if map_physical:
        to_phys, count = np.asarray(to_phys, np.int64), np.asarray(count, np.int64)
        lc = np.maximum(ids, 0)
        dup = (ep_rank + np.arange(Tn, dtype=np.int64)[:, None] * PRIME) % count[lc]
        ids = np.where(ids >= 0, to_phys[lc, dup], ids)
    D = np.asarray(to_phys).shape[1]
    per_rank = (E + D - 1) // num_ep_ranks
    per_dp = per_rank * num_tp_ranks
    local = ids - tp_rank * per_rank
    local = local - (local // per_dp) * (per_dp - per_rank)
    bad = (ids < 0) | ((ids // per_rank) % num_tp_ranks != tp_rank) | (local < 0)
    ids = np.where(bad, -1, local)
    route = (np.asarray(mask) != 0) if use_mask else np.ones(Tn, bool)
    ids = np.where(route[:, None], ids, -1)
    w = np.where(route[:, None], w, 0.0)
    unmapped = np.where(route[:, None], sel, -1)
    return ids.astype(np.int32), w, unmapped.astype(np.int32)


def compare_gate(out, ref, *_args, **_kw):
    """Registry ``compare``: Idx and Unmapped bitwise (order included), W to rtol 1e-5."""
    compare_routing(out[:2], ref[:2])
    if not np.array_equal(np.asarray(out[2]), np.asarray(ref[2])):
        raise AssertionError("Unmapped differs")


# ------------------------------------------------------------------------------------------ registry
def gate_inputs(rng, num_tokens, num_experts=256, topk=8, num_shared_experts=0, num_duplicates=1,
                use_mask=False, fix_routing=False, map_physical=False, **_):
    """Router inputs on a coarse grid plus the option tensors: a mask dropping about 1/5 of the tokens,
    fixed routing for about 1/3 of them (random distinct ids), and a map giving every logical expert
    1 … D random physical copies among the ``E + D - 1`` physical experts."""
    logits, bias = router_inputs(rng, num_tokens, num_experts)
    E, S, D = num_experts, num_shared_experts, num_duplicates
    mask = (rng.random(num_tokens) > 0.2).astype(np.int32) if use_mask else np.ones(num_tokens, np.int32)
    fix = (rng.random(num_tokens) < 0.33).astype(np.int32) if fix_routing else np.zeros(num_tokens, np.int32)
    fix_idx = np.stack([rng.permutation(E)[:topk] for _ in range(num_tokens)]).astype(np.int32)
    if map_physical:
        to_phys = rng.integers(0, E + D - 1, (E + S, D)).astype(np.int32)
        count = rng.integers(1, D + 1, E + S).astype(np.int32)
    else:
        to_phys = np.arange(E + S, dtype=np.int32)[:, None].repeat(D, axis=1)
        count = np.ones(E + S, np.int32)
    return logits, bias, mask, fix, fix_idx, to_phys, count


def _topk_inputs(rng, num_tokens, num_experts, **_):
    x = rng.integers(-16, 17, (num_tokens, num_experts)) / 8.0  # exact ties
    return (x.astype(np.float32),)


register(KernelSpec(
    name="moe_topk_gate", family="moe",
    description="top-k expert indices per token by a stable descending selection (TileKernels' topk_gate)",
    build=lambda num_tokens, num_experts, topk, block_T, threads, **_: topk_gate(
        num_tokens, num_experts, topk, block_T=block_T, threads=threads),
    make_inputs=_topk_inputs, reference=ref_topk_gate,
    flops=lambda num_tokens, num_experts, topk, **_: 4 * num_tokens * num_experts * topk,
    bytes=lambda num_tokens, num_experts, topk, **_: 4 * num_tokens * (num_experts + topk),
    shapes=({"label": "DeepSeek-V3 256 experts top-8, 16384 tok", "num_tokens": 16384},
            {"label": "72 experts top-6, 8192 tok", "num_tokens": 8192, "num_experts": 72, "topk": 6}),
    test_shapes=({"label": "72 experts top-6, 13 tok", "num_tokens": 13, "num_experts": 72, "topk": 6, "block_T": 4},
                 {"label": "36 experts top-6, 7 tok", "num_tokens": 7, "num_experts": 36, "topk": 6, "block_T": 4}),
    tunables={"block_T": [1, 2, 4, 8, 16, 32], "threads": [64, 128, 256]},
    defaults={"num_experts": 256, "topk": 8, "block_T": 8, "threads": 128},
    tolerance={"exact": True},
))


def _build_gate(num_tokens, **kw):
    return top2_sum_gate(num_tokens, **kw)


register(KernelSpec(
    name="moe_top2_sum_gate", family="moe",
    description="MoE router with TileKernels' top2_sum_gate options: token mask, fixed routing, shared experts "
                "as routed slots, logical -> physical map, EP/TP masking",
    build=_build_gate, make_inputs=gate_inputs, reference=ref_top2_sum_gate,
    flops=lambda num_tokens, num_experts, topk, **_: num_tokens * num_experts * (12 + 3 * topk),
    bytes=lambda num_tokens, num_experts, topk, num_shared_experts=0, **_:
        4 * (num_tokens * (num_experts + 2 + 3 * topk + 2 * (topk + num_shared_experts)) + num_experts),
    shapes=(
        {"label": "DeepSeek-V3 gate, 2 shared, 32 extra, EP 4 / TP 2, 4096 tok", "num_tokens": 4096,
         "num_shared_experts": 2, "num_duplicates": 33, "map_physical": True, "use_mask": True,
         "fix_routing": True, "num_ep_ranks": 4, "num_tp_ranks": 2, "tp_rank": 1},
        {"label": "DeepSeek-V3 gate, no options, 16384 tok", "num_tokens": 16384},
    ),
    test_shapes=(
        {"label": "all options, 256 experts, 13 tok", "num_tokens": 13, "num_shared_experts": 2,
         "num_duplicates": 33, "map_physical": True, "use_mask": True, "fix_routing": True,
         "num_ep_ranks": 4, "num_tp_ranks": 2, "tp_rank": 1, "block_T": 4},
        {"label": "softmax 72 experts top-6, mask + fixed, 10 tok", "num_tokens": 10, "num_experts": 72, "topk": 6,
         "n_groups": 1, "topk_groups": 1, "scoring": "softmax", "routed_scaling_factor": 1.5, "use_mask": True,
         "fix_routing": True, "block_T": 4},
    ),
    tunables={"block_T": [1, 2, 4, 8, 16], "threads": [64, 128, 256]},
    defaults={"num_experts": 256, "topk": 8, "n_groups": 8, "topk_groups": 4, "scoring": "sigmoid",
              "routed_scaling_factor": 2.5, "num_shared_experts": 0, "num_duplicates": 1, "use_mask": False,
              "fix_routing": False, "map_physical": False, "ep_rank": 0, "num_ep_ranks": 1, "tp_rank": 0,
              "num_tp_ranks": 1, "block_T": 8, "threads": 128},
    tolerance={"rtol": 1e-5, "atol": 1e-6},
    compare=compare_gate,
))
