"""MoE routing: scoring, bias-adjusted group-limited top-k and normalised routing weights, with the
semantics of TileKernels' ``top2_sum_gate`` (deepseek-ai/TileKernels, its PyTorch reference).

Kernel (registry name ``moe_topk_route``), per token (DeepSeek-V3 recipe; its defaults)::

    s      = sigmoid(logits)  |  sqrt(softplus(logits))  |  softmax(logits) over experts     (scoring)
    b      = s + bias         for sigmoid / sqrtsoftplus  (the bias steers *selection* only)
           = logits + bias    for softmax  (ranking on the raw logits: softmax is monotone per row)
    group  = sum of the top-2 values of b in each of n_groups groups (E / n_groups experts each)
    keep the topk_groups best groups (ties → smaller group); the other groups' experts are out (b = -inf).
    Grouping applies only when topk_groups < n_groups (n_groups == topk_groups is plain top-k).
    idx    = top-k of b  (k rounds; ties go to the smaller index, in descending order of b)
    w      = s[idx] / max(sum(s[idx]), 1e-20) * routed_scaling_factor   (unbiased scores)

The ``1e-20`` floor makes a token whose selected scores are all 0 (sigmoid of logits ≤ -89 in fp32)
get weights 0, not NaN. ``softplus(x)`` is ``x`` above 20 and ``log1p(exp(x))`` otherwise (torch's
threshold). DeepSeek-V3: 256 experts, top-8, 8 groups of 32, top-4 groups, sigmoid, factor 2.5.
``n_groups=1`` is plain top-k (Mixtral / Qwen-MoE style, usually with softmax scoring).

The options of ``top2_sum_gate`` this kernel leaves out — shared experts appended as routed slots, the
token mask and fixed routing, the logical → physical expert map, and EP/TP index masking — are options of
``kernels.moe_gate.top2_sum_gate`` (registry ``moe_top2_sum_gate``), which computes the same selection.

The kernel holds ``block_T`` tokens × all experts in registers. Fragments are only ever indexed by their
own ``T.Parallel`` variables; every other access goes through shared memory: the unbiased scores (the
data-dependent gather of the selected experts' weights), the ``(block_T, G, E/G)`` regrouping of the
biased scores, the kept-group flags looked up per expert (``e // (E/G)``), and the selected indices and
weights written per round. Each top-k round is tile code: a row
max (``T.reduce_max``), the smallest index attaining it (``T.reduce_min`` over the index where the score
equals the max, ``E`` elsewhere), then that expert is masked to ``-inf``. Group scores use the same
trick inside each group (max, first arg-max masked, max again — so tied maxima count twice, as in a
sort). Ties are exact comparisons of fp32 values, so equal logits (with equal bias) tie exactly on any
backend; the tests draw logits from a coarse grid to make ties frequent.

Outputs: ``Idx`` (T, topk) int32 — compared bitwise, order included — and ``W`` (T, topk) fp32
(relative error 1e-5: the normaliser is an fp32 sum). The reference uses a different algorithm
(stable ``argsort``) on the same fp32 scores (``1 / (1 + exp(-x))`` or ``exp(x - max) / sum``).

Requirements: ``n_groups`` divides ``E``; with group limiting, at least 2 experts per group; ``topk`` ≤
the experts in the kept groups. NaN policy: logits and bias must be finite (a NaN never equals the row
max, so its token's selection is unspecified); ``±large`` logits are fine (sigmoid scores saturate to
0/1 and tie; all-zero selected scores give zero weights).
"""

import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.registry import KernelSpec, register
from tilesim.testing.compare import compare_arrays

NEG_INF = float("-inf")
SCORINGS = ("sigmoid", "sqrtsoftplus", "softmax")
SUM_FLOOR = 1e-20  # floor of the selected scores' sum (TileKernels' clamp)


def _validate(E, topk, n_groups, topk_groups, scoring):
    if scoring not in SCORINGS:
        raise ValueError(f"scoring must be one of {', '.join(SCORINGS)}, got {scoring!r}")
    if E % n_groups:
        raise ValueError(f"n_groups={n_groups} must divide the {E} experts")
    if topk_groups < n_groups and E // n_groups < 2:
        raise ValueError("group-limited routing needs at least 2 experts per group (top-2 group score)")
    if not 1 <= topk_groups <= n_groups:
        raise ValueError(f"topk_groups={topk_groups} must be in [1, n_groups={n_groups}]")
    if not 1 <= topk <= topk_groups * (E // n_groups):
        raise ValueError(f"topk={topk} exceeds the {topk_groups * (E // n_groups)} experts of the kept groups")


@tilelang.jit(out_idx=[2, 3])
def moe_route(num_tokens, num_experts=256, topk=8, n_groups=8, topk_groups=4, scoring="sigmoid",
              routed_scaling_factor=2.5, block_T=8, threads=128):
    E, G = num_experts, n_groups
    Eg = E // G
    _validate(E, topk, G, topk_groups, scoring)

    @T.prim_func
    def main(Logits: T.Tensor((num_tokens, E), "float32"), Bias: T.Tensor((E,), "float32"),
             Idx: T.Tensor((num_tokens, topk), "int32"), W: T.Tensor((num_tokens, topk), "float32")):
        with T.Kernel(T.ceildiv(num_tokens, block_T), threads=threads) as bx:
            s = T.alloc_fragment((block_T, E), "float32")  # unbiased scores
            b = T.alloc_fragment((block_T, E), "float32")  # biased scores, masked as experts are taken
            bias = T.alloc_fragment((E,), "float32")
            cand = T.alloc_fragment((block_T, E), "int32")
            row_max = T.alloc_fragment((block_T,), "float32")
            row_sum = T.alloc_fragment((block_T,), "float32")
            first = T.alloc_fragment((block_T,), "int32")
            w = T.alloc_fragment((block_T, topk), "float32")
            # data-dependent or loop-indexed accesses go through shared memory; fragments are indexed
            # by their own T.Parallel variables only (what TileLang's layout inference can map to threads)
            s_shared = T.alloc_shared((block_T, E), "float32")
            idx_shared = T.alloc_shared((block_T, topk), "int32")
            w_shared = T.alloc_shared((block_T, topk), "float32")

            T.copy(Logits[bx * block_T, 0], s)
            T.copy(Bias, bias)
            if scoring == "softmax":  # ranked on the raw logits + bias
                for i, e in T.Parallel(block_T, E):
                    b[i, e] = s[i, e] + bias[e]
                T.reduce_max(s, row_max, dim=1)
                for i, e in T.Parallel(block_T, E):
                    s[i, e] = T.exp(s[i, e] - row_max[i])
                T.reduce_sum(s, row_sum, dim=1)
                for i, e in T.Parallel(block_T, E):
                    s[i, e] = s[i, e] / row_sum[i]
            elif scoring == "sigmoid":
                for i, e in T.Parallel(block_T, E):
                    s[i, e] = T.sigmoid(s[i, e])
                    b[i, e] = s[i, e] + bias[e]
            else:  # sqrtsoftplus
                for i, e in T.Parallel(block_T, E):
                    s[i, e] = T.sqrt(T.if_then_else(s[i, e] > 20.0, s[i, e], T.log1p(T.exp(s[i, e]))))
                    b[i, e] = s[i, e] + bias[e]
            T.copy(s, s_shared)

            if topk_groups < G:
                b_shared = T.alloc_shared((block_T, E), "float32")
                keep_shared = T.alloc_shared((block_T, G), "int32")
                bg = T.alloc_fragment((block_T, G, Eg), "float32")
                gcand = T.alloc_fragment((block_T, G, Eg), "int32")
                m1 = T.alloc_fragment((block_T, G), "float32")
                m2 = T.alloc_fragment((block_T, G), "float32")
                gfirst = T.alloc_fragment((block_T, G), "int32")
                gscore = T.alloc_fragment((block_T, G), "float32")
                gkeep = T.alloc_fragment((block_T, G), "int32")
                gcand2 = T.alloc_fragment((block_T, G), "int32")
                # the (block_T, G, E/G) view of b, regrouped through shared memory
                T.copy(b, b_shared)
                for i, g, e in T.Parallel(block_T, G, Eg):
                    bg[i, g, e] = b_shared[i, g * Eg + e]
                # group score: top-2 sum = max + max of the rest (first arg-max removed)
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
                for i, e in T.Parallel(block_T, E):  # experts of dropped groups are out
                    b[i, e] = T.if_then_else(keep_shared[i, e // Eg] != 0, b[i, e], NEG_INF)

            T.clear(row_sum)
            for r in T.serial(topk):
                T.reduce_max(b, row_max, dim=1)
                for i, e in T.Parallel(block_T, E):
                    cand[i, e] = T.if_then_else(b[i, e] == row_max[i], e, E)
                T.reduce_min(cand, first, dim=1)
                for i in T.Parallel(block_T):
                    idx_shared[i, r] = first[i]
                    w_shared[i, r] = s_shared[i, first[i]]
                    row_sum[i] = row_sum[i] + s_shared[i, first[i]]
                for i, e in T.Parallel(block_T, E):
                    b[i, e] = T.if_then_else(e == first[i], NEG_INF, b[i, e])

            for i, k in T.Parallel(block_T, topk):
                w[i, k] = w_shared[i, k] / T.max(row_sum[i], SUM_FLOOR) * routed_scaling_factor
            T.copy(idx_shared, Idx[bx * block_T, 0])
            T.copy(w, W[bx * block_T, 0])

    return main


# ------------------------------------------------------------------------------------------ reference
def scores_fp32(logits, scoring="sigmoid"):
    x = np.asarray(logits, dtype=np.float32)
    with np.errstate(over="ignore"):
        if scoring == "sigmoid":
            return (np.float32(1.0) / (np.float32(1.0) + np.exp(-x))).astype(np.float32)
        if scoring == "sqrtsoftplus":
            return np.sqrt(np.where(x > np.float32(20.0), x, np.log1p(np.exp(x)))).astype(np.float32)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def ref_moe_route(logits, bias, topk=8, n_groups=8, topk_groups=4, scoring="sigmoid", routed_scaling_factor=2.5,
                  **_):
    """(Idx int32, W fp32) by stable argsort (ties → smaller index) on the fp32 biased scores (softmax:
    on the logits + bias), the selected scores' sum floored at 1e-20."""
    s = scores_fp32(logits, scoring)
    ranked = np.asarray(logits, dtype=np.float32) if scoring == "softmax" else s
    b = ranked + np.asarray(bias, dtype=np.float32)
    Tn, E = b.shape
    if topk_groups < n_groups:
        Eg = E // n_groups
        top2 = -np.sort(-b.reshape(Tn, n_groups, Eg), axis=-1)[..., :2]
        gscore = top2[..., 0] + top2[..., 1]
        keep = np.zeros((Tn, n_groups), dtype=bool)
        np.put_along_axis(keep, np.argsort(-gscore, axis=1, kind="stable")[:, :topk_groups], True, axis=1)
        b = np.where(np.repeat(keep, Eg, axis=1), b, np.float32(-np.inf))
    idx = np.argsort(-b, axis=1, kind="stable")[:, :topk]
    w = np.take_along_axis(s, idx, axis=1).astype(np.float64)
    w = w / np.maximum(w.sum(axis=1, keepdims=True), SUM_FLOOR) * routed_scaling_factor
    return idx.astype(np.int32), w


def compare_routing(out, ref, *_args, **_kw):
    """Registry ``compare``: indices bitwise (order included), weights to rtol 1e-5."""
    problems = [compare_arrays(out[0], ref[0], exact=True, name="Idx"),
                compare_arrays(out[1], ref[1], rtol=1e-5, atol=1e-6, name="W")]
    problems = [p for p in problems if p]
    if problems:
        raise AssertionError("; ".join(problems))


# ------------------------------------------------------------------------------------------ registry
def router_inputs(rng, num_tokens, num_experts=256, grid=8.0, span=4.0, **_):
    """Logits on a coarse grid (multiples of 1/grid in [-span, span]: frequent exact ties) and a small
    expert bias on a coarse grid; never all zeros."""
    logits = rng.integers(-int(span * grid), int(span * grid) + 1, size=(num_tokens, num_experts)) / grid
    bias = rng.integers(-2, 3, size=num_experts) / 32.0
    return logits.astype(np.float32), bias.astype(np.float32)


def _build(num_tokens, num_experts, topk, n_groups, topk_groups, scoring, routed_scaling_factor, block_T, threads,
           **_):
    return moe_route(num_tokens, num_experts=num_experts, topk=topk, n_groups=n_groups, topk_groups=topk_groups,
                     scoring=scoring, routed_scaling_factor=routed_scaling_factor, block_T=block_T, threads=threads)


register(KernelSpec(
    name="moe_topk_route", family="moe",
    description="MoE router: sigmoid/softmax scores, bias for selection only, group-limited stable top-k "
                "(top-2 group sums), weights normalised to 1 and scaled (DeepSeek-V3 defaults)",
    build=_build, make_inputs=router_inputs, reference=ref_moe_route,
    flops=lambda num_tokens, num_experts, topk, n_groups=8, topk_groups=4, **_:
        num_tokens * num_experts * (6 + 3 * topk + (6 if n_groups > 1 else 0)) + 6 * num_tokens * n_groups * topk_groups,
    bytes=lambda num_tokens, num_experts, topk, **_: 4 * (num_tokens * num_experts + num_experts + 2 * num_tokens * topk),
    shapes=(
        {"label": "DeepSeek-V3 256 experts, top-8, 8 groups/top-4, 4096 tok", "num_tokens": 4096},
        {"label": "DeepSeek-V3 256 experts, top-8, 8 groups/top-4, 16384 tok", "num_tokens": 16384},
        {"label": "Qwen3-MoE 128 experts, top-8, softmax, 8192 tok", "num_tokens": 8192, "num_experts": 128,
         "n_groups": 1, "topk_groups": 1, "scoring": "softmax", "routed_scaling_factor": 1.0},
        {"label": "Mixtral 8 experts, top-2, softmax, 16384 tok", "num_tokens": 16384, "num_experts": 8, "topk": 2,
         "n_groups": 1, "topk_groups": 1, "scoring": "softmax", "routed_scaling_factor": 1.0},
    ),
    test_shapes=(
        {"label": "DeepSeek-V3 routing, 13 tok", "num_tokens": 13, "block_T": 4},  # < 48 KB static smem (CUDA backend)
        {"label": "softmax 64 experts top-6, 4 groups/top-2", "num_tokens": 10, "num_experts": 64, "topk": 6,
         "n_groups": 4, "topk_groups": 2, "scoring": "softmax", "routed_scaling_factor": 1.0, "block_T": 4},
        {"label": "plain top-2 of 8, 7 tok", "num_tokens": 7, "num_experts": 8, "topk": 2, "n_groups": 1,
         "topk_groups": 1, "block_T": 4},
    ),
    tunables={"block_T": [1, 2, 4, 8, 16, 32], "threads": [64, 128, 256]},
    defaults={"num_experts": 256, "topk": 8, "n_groups": 8, "topk_groups": 4, "scoring": "sigmoid",
              "routed_scaling_factor": 2.5, "block_T": 8, "threads": 128},
    tolerance={"rtol": 1e-5, "atol": 1e-6},
    compare=compare_routing,
))
