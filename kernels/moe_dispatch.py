"""MoE dispatch and combine around the fused expert-major layout, with the semantics of TileKernels'
``expand_to_fused``, ``reduce_fused``, ``normalize_weight`` and ``mask_indices_by_tp``
(deepseek-ai/TileKernels, its PyTorch references).

The fused layout: the ``T × k`` routed (token, slot) pairs are laid out expert-major in ``P`` rows
(each expert's rows padded to an alignment); ``TokenTopkToPos (T, k)`` int32 gives the row of each pair
(``-1``: the slot is unused, e.g. an expert of another rank) and ``PosToToken (P,)`` int32 the token of
each row (``-1``: padding). :func:`fused_mapping` builds a consistent pair with NumPy (TileKernels builds
it with ``get_fused_mapping``, a GPU kernel without a PyTorch reference; tilesim's kernel for it is
``kernels.moe_mapping``, which produces exactly this layout).

Kernels (registry names):

* ``moe_expand_to_fused`` — ``Out[p, :] = X[PosToToken[p], :]``, zeros for padding rows. One block per
  ``block_P`` rows × ``block_H`` columns; the token ids are copied to shared memory and every element is a
  guarded load (``T.if_then_else``: padding rows and columns past ``H`` never read ``X``). Any dtype,
  bitwise (values move).
* ``moe_reduce_fused`` — the weighted combine back to tokens: per token, an fp32 accumulator starts at 0
  and for ``k = 0 … topk−1`` with ``pos = TokenTopkToPos[t, k] ≥ 0`` becomes
  ``float32(X[pos]) · W[t, k] + acc`` (the product and the sum each rounded to fp32); ``Out`` is ``acc``
  rounded once to X's dtype. TileKernels fuses the multiply-add (``a·b + c`` under ``torch.compile``),
  so the two can differ in an fp32 last bit before the final rounding (bf16 output: rarely visible).
  One block per ``block_T`` tokens × ``block_H`` columns; positions and weights go through shared memory.
* ``moe_normalize_weight`` — ``Den[t] = 1e-20 + W[t, 0] + … + W[t, k−1]`` (fp32, left to right) and
  ``Out = W / Den``: bitwise TileKernels' order.
* ``moe_mask_indices_by_tp`` — expert ids of ``num_experts`` experts over ``num_ep_ranks`` ranks,
  ``per_gpu = num_experts // num_ep_ranks``: an id whose rank ``id // per_gpu`` is not ``≡ tp_rank
  (mod num_tp_ranks)``, or a negative id, becomes ``-1``; the others are renumbered locally
  (``v = id − tp_rank·per_gpu``; ``v −= (v // (num_tp_ranks·per_gpu))·(num_tp_ranks − 1)·per_gpu``).
  Integer floor division, bitwise.

The rest of TileKernels' MoE family lives beside this module: the variants with scale factors
(``kernels.moe_dispatch_sf``), the layout kernel (``kernels.moe_mapping``) and the group/expert
bookkeeping (``kernels.moe_groups``).

Errors: shapes and ranks that do not divide raise ``ValueError`` at build time. NaN/Inf in ``X`` move
(expand) or propagate to their token (reduce); weights are finite.
"""

import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.registry import KernelSpec, register
from tilesim import dtypes as _dt

SUM_FLOOR = 1e-20


@tilelang.jit(out_idx=[-1])
def expand_to_fused(num_tokens, hidden, num_pos, block_P=16, block_H=256, dtype="bfloat16", threads=128):
    @T.prim_func
    def main(X: T.Tensor((num_tokens, hidden), dtype), PosToToken: T.Tensor((num_pos,), "int32"),
             Out: T.Tensor((num_pos, hidden), dtype)):
        with T.Kernel(T.ceildiv(hidden, block_H), T.ceildiv(num_pos, block_P), threads=threads) as (bx, by):
            tok = T.alloc_shared((block_P,), "int32")
            tile = T.alloc_shared((block_P, block_H), dtype)
            T.copy(PosToToken[by * block_P], tok)
            for i, j in T.Parallel(block_P, block_H):
                tile[i, j] = T.if_then_else((tok[i] >= 0) & (bx * block_H + j < hidden),
                                            X[tok[i], bx * block_H + j], T.cast(0, dtype))
            T.copy(tile, Out[by * block_P, bx * block_H])

    return main


@tilelang.jit(out_idx=[-1])
def reduce_fused(num_pos, hidden, num_tokens, topk, block_T=8, block_H=256, dtype="bfloat16", threads=128):
    @T.prim_func
    def main(X: T.Tensor((num_pos, hidden), dtype), W: T.Tensor((num_tokens, topk), "float32"),
             TokenTopkToPos: T.Tensor((num_tokens, topk), "int32"), Out: T.Tensor((num_tokens, hidden), dtype)):
        with T.Kernel(T.ceildiv(hidden, block_H), T.ceildiv(num_tokens, block_T), threads=threads) as (bx, by):
            pos = T.alloc_shared((block_T, topk), "int32")
            w = T.alloc_shared((block_T, topk), "float32")
            acc = T.alloc_fragment((block_T, block_H), "float32")
            T.copy(TokenTopkToPos[by * block_T, 0], pos)
            T.copy(W[by * block_T, 0], w)
            T.clear(acc)
            for k in T.serial(topk):
                for i, j in T.Parallel(block_T, block_H):
                    acc[i, j] = T.if_then_else(
                        (pos[i, k] >= 0) & (bx * block_H + j < hidden),
                        T.cast(X[pos[i, k], bx * block_H + j], "float32") * w[i, k] + acc[i, j], acc[i, j])
            T.copy(acc, Out[by * block_T, bx * block_H])

    return main


@tilelang.jit(out_idx=[1, 2])
def normalize_weight(num_tokens, topk, block_T=64, threads=128):
    @T.prim_func
    def main(W: T.Tensor((num_tokens, topk), "float32"), Den: T.Tensor((num_tokens,), "float32"),
             Out: T.Tensor((num_tokens, topk), "float32")):
        with T.Kernel(T.ceildiv(num_tokens, block_T), threads=threads) as bx:
            w = T.alloc_shared((block_T, topk), "float32")
            den = T.alloc_fragment((block_T,), "float32")
            out = T.alloc_fragment((block_T, topk), "float32")
            T.copy(W[bx * block_T, 0], w)
            T.fill(den, SUM_FLOOR)
            for k in T.serial(topk):  # left to right, as TileKernels
                for i in T.Parallel(block_T):
                    den[i] = den[i] + w[i, k]
            for i, k in T.Parallel(block_T, topk):
                out[i, k] = w[i, k] / den[i]
            T.copy(den, Den[bx * block_T])
            T.copy(out, Out[bx * block_T, 0])

    return main


def _validate_tp(num_experts, num_ep_ranks, num_tp_ranks, tp_rank):
    if num_experts % num_ep_ranks:
        raise ValueError(f"num_ep_ranks={num_ep_ranks} must divide num_experts={num_experts}")
    if num_ep_ranks % num_tp_ranks:
        raise ValueError(f"num_tp_ranks={num_tp_ranks} must divide num_ep_ranks={num_ep_ranks}")
    if not 0 <= tp_rank < num_tp_ranks:
        raise ValueError(f"tp_rank={tp_rank} must be in [0, {num_tp_ranks})")


@tilelang.jit(out_idx=[-1])
def mask_indices_by_tp(num_tokens, topk, num_experts, num_ep_ranks, tp_rank, num_tp_ranks, block_T=64,
                       threads=128):
    _validate_tp(num_experts, num_ep_ranks, num_tp_ranks, tp_rank)
    per_gpu = num_experts // num_ep_ranks
    per_dp = num_tp_ranks * per_gpu

    @T.prim_func
    def main(Idx: T.Tensor((num_tokens, topk), "int32"), Out: T.Tensor((num_tokens, topk), "int32")):
        with T.Kernel(T.ceildiv(num_tokens, block_T), threads=threads) as bx:
            v = T.alloc_fragment((block_T, topk), "int32")
            o = T.alloc_fragment((block_T, topk), "int32")
            T.copy(Idx[bx * block_T, 0], v)
            for i, k in T.Parallel(block_T, topk):
                local = v[i, k] - tp_rank * per_gpu
                local = local - T.floordiv(local, per_dp) * (per_dp - per_gpu)
                o[i, k] = T.if_then_else((v[i, k] < 0) | (T.floormod(T.floordiv(v[i, k], per_gpu), num_tp_ranks)
                                                          != tp_rank) | (local < 0), -1, local)
            T.copy(o, Out[bx * block_T, 0])

    return main


# ------------------------------------------------------------------------------------------ references
def max_fused_rows(num_tokens, topk, num_experts, alignment=128):
    """Rows that always hold the fused layout: ``⌊(T·k + (alignment−1)·E) / alignment⌋·alignment``
    (TileKernels' bound when the size is not synchronised to the host)."""
    return (num_tokens * topk + (alignment - 1) * num_experts) // alignment * alignment


def fused_mapping(topk_idx, num_experts, alignment=128, num_pos=None):
    """(TokenTopkToPos (T, k), PosToToken (P,), PosToExpert (P,)) int32: pairs with a negative expert id
    are unused; each expert's rows are its pairs in token-major order, padded to ``alignment``; rows past
    the last expert (up to ``num_pos``, default :func:`max_fused_rows`) are padding."""
    idx = np.asarray(topk_idx)
    Tn, k = idx.shape
    counts = np.bincount(idx[idx >= 0].ravel(), minlength=num_experts)
    sizes = -(-counts // alignment) * alignment
    start = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    P = max_fused_rows(Tn, k, num_experts, alignment) if num_pos is None else num_pos
    if P < sizes.sum():
        raise ValueError(f"num_pos={P} < the {int(sizes.sum())} rows the routing needs")
    t2p = np.full((Tn, k), -1, np.int32)
    p2t = np.full(P, -1, np.int32)
    p2e = np.full(P, -1, np.int32)
    fill = start.copy()
    for t in range(Tn):
        for j in range(k):
            e = idx[t, j]
            if e >= 0:
                t2p[t, j], p2t[fill[e]], p2e[fill[e]] = fill[e], t, e
                fill[e] += 1
    return t2p, p2t, p2e


def ref_expand_to_fused(X, PosToToken, **_):
    out = np.zeros((PosToToken.shape[0], X.shape[1]), X.dtype)
    valid = PosToToken >= 0
    out[valid] = X[PosToToken[valid]]
    return out


def ref_reduce_fused(X, W, TokenTopkToPos, **_):
    """fp32 emulation: acc = float32(float32(x·w) + acc) per valid slot, in slot order; one final rounding."""
    acc = np.zeros((W.shape[0], X.shape[1]), np.float32)
    xf = np.asarray(X).astype(np.float32)
    for k in range(W.shape[1]):
        p = TokenTopkToPos[:, k]
        term = (xf[np.maximum(p, 0)] * W[:, k:k + 1].astype(np.float32)).astype(np.float32)
        acc = np.where((p >= 0)[:, None], (term + acc).astype(np.float32), acc)
    return acc.astype(X.dtype)


def ref_normalize_weight(W, **_):
    den = np.full(W.shape[0], SUM_FLOOR, np.float32)
    for k in range(W.shape[1]):
        den = (den + W[:, k]).astype(np.float32)
    return den, (W / den[:, None]).astype(np.float32)


def ref_mask_indices_by_tp(Idx, num_experts, num_ep_ranks, tp_rank, num_tp_ranks, **_):
    per_gpu = num_experts // num_ep_ranks
    per_dp = num_tp_ranks * per_gpu
    v = np.asarray(Idx).astype(np.int64)
    bad = (v < 0) | ((v // per_gpu) % num_tp_ranks != tp_rank)
    v = v - tp_rank * per_gpu
    v = v - (v // per_dp) * (per_dp - per_gpu)
    return np.where(bad | (v < 0), -1, v).astype(np.int32)


# ------------------------------------------------------------------------------------------ registry
def routed_topk(rng, num_tokens, num_experts, topk, drop=0.1):
    """Distinct experts per token (random), a fraction ``drop`` of slots unused (-1)."""
    idx = np.argsort(rng.random((num_tokens, num_experts)), axis=1)[:, :topk].astype(np.int32)
    idx[rng.random(idx.shape) < drop] = -1
    return idx


def _x(rng, shape, dtype):
    return _dt.convert((rng.standard_normal(shape) * 3).astype(np.float32), _dt.canon(dtype))


def _expand_inputs(rng, num_tokens, hidden, num_experts=256, topk=8, alignment=128, dtype="bfloat16", **_):
    _, p2t, _ = fused_mapping(routed_topk(rng, num_tokens, num_experts, topk), num_experts, alignment)
    return _x(rng, (num_tokens, hidden), dtype), p2t


def _reduce_inputs(rng, num_tokens, hidden, num_experts=256, topk=8, alignment=128, dtype="bfloat16", **_):
    t2p, p2t, _ = fused_mapping(routed_topk(rng, num_tokens, num_experts, topk), num_experts, alignment)
    return _x(rng, (p2t.shape[0], hidden), dtype), rng.random((num_tokens, topk)).astype(np.float32), t2p


def _ref_expand(X, PosToToken, **_):
    return ref_expand_to_fused(X, PosToToken)


def _ref_reduce(X, W, TokenTopkToPos, **_):
    return ref_reduce_fused(X, W, TokenTopkToPos)


def _norm_inputs(rng, num_tokens, topk=8, **_):
    w = rng.random((num_tokens, topk)).astype(np.float32)
    w[rng.random(w.shape) < 0.1] = 0.0
    w[0] = 0.0  # an all-zero row: Den = 1e-20, weights 0
    return (w,)


def _tp_inputs(rng, num_tokens, topk=8, num_experts=256, **_):
    return (routed_topk(rng, num_tokens, num_experts, topk),)


def _rows(num_tokens, topk=8, num_experts=256, alignment=128, **_):
    return max_fused_rows(num_tokens, topk, num_experts, alignment)


def _isz(dtype):
    return _dt.itemsize(_dt.canon(dtype))


DSV3 = {"num_experts": 256, "topk": 8, "alignment": 128}
SHAPES = (
    {"label": "DeepSeek-V3 hidden 7168, 4096 tok, top-8 of 256", "num_tokens": 4096, "hidden": 7168},
    {"label": "DeepSeek-V3 hidden 7168, 16384 tok, top-8 of 256", "num_tokens": 16384, "hidden": 7168},
    {"label": "DeepSeek-V3 expert FFN out 2048, 8192 tok", "num_tokens": 8192, "hidden": 2048},
)
TEST_SHAPES = (
    {"label": "13 tok, hidden 200, 16 experts top-3, align 8", "num_tokens": 13, "hidden": 200, "num_experts": 16,
     "topk": 3, "alignment": 8, "block_H": 64},
    {"label": "fp32, 7 tok, hidden 33, 8 experts top-2, align 4", "num_tokens": 7, "hidden": 33, "num_experts": 8,
     "topk": 2, "alignment": 4, "dtype": "float32", "block_H": 32, "block_P": 8, "block_T": 4},
)

register(KernelSpec(
    name="moe_expand_to_fused", family="moe_dispatch",
    description="MoE dispatch: token rows copied into the expert-major fused layout (padding rows zero), "
                "TileKernels' expand_to_fused",
    build=lambda num_tokens, hidden, block_P, block_H, threads, dtype="bfloat16", **p: expand_to_fused(
        num_tokens, hidden, _rows(num_tokens, **p), block_P=block_P, block_H=block_H, dtype=dtype, threads=threads),
    make_inputs=_expand_inputs, reference=_ref_expand,
    flops=lambda **_: 0,
    bytes=lambda num_tokens, hidden, dtype="bfloat16", **p: int(
        (num_tokens + _rows(num_tokens, **p)) * hidden * _isz(dtype) + 4 * _rows(num_tokens, **p)),
    shapes=SHAPES, test_shapes=TEST_SHAPES,
    tunables={"block_P": [8, 16, 32], "block_H": [128, 256, 512], "threads": [128, 256]},
    defaults={**DSV3, "block_P": 16, "block_H": 256, "threads": 128, "dtype": "bfloat16"},
    tolerance={"exact": True},
))

register(KernelSpec(
    name="moe_reduce_fused", family="moe_dispatch",
    description="MoE combine: weighted fp32 sum of each token's expert rows from the fused layout, "
                "TileKernels' reduce_fused",
    build=lambda num_tokens, hidden, topk, block_T, block_H, threads, dtype="bfloat16", **p: reduce_fused(
        _rows(num_tokens, topk=topk, **p), hidden, num_tokens, topk, block_T=block_T, block_H=block_H, dtype=dtype,
        threads=threads),
    make_inputs=_reduce_inputs, reference=_ref_reduce,
    flops=lambda num_tokens, hidden, topk=8, **_: 2 * num_tokens * topk * hidden,
    bytes=lambda num_tokens, hidden, topk=8, dtype="bfloat16", **_: int(
        num_tokens * (topk + 1) * hidden * _isz(dtype) + 8 * num_tokens * topk),
    shapes=SHAPES, test_shapes=TEST_SHAPES,
    tunables={"block_T": [4, 8, 16], "block_H": [128, 256, 512], "threads": [128, 256]},
    defaults={**DSV3, "block_T": 8, "block_H": 256, "threads": 128, "dtype": "bfloat16"},
    tolerance={"exact": True},
))

register(KernelSpec(
    name="moe_normalize_weight", family="moe_dispatch",
    description="top-k weights over their sum (+1e-20, left to right): TileKernels' normalize_weight",
    build=lambda num_tokens, topk, block_T, threads, **_: normalize_weight(num_tokens, topk, block_T=block_T,
                                                                         threads=threads),
    make_inputs=_norm_inputs, reference=ref_normalize_weight,
    flops=lambda num_tokens, topk=8, **_: 2 * num_tokens * topk,
    bytes=lambda num_tokens, topk=8, **_: 4 * num_tokens * (2 * topk + 1),
    shapes=({"label": "DeepSeek-V3 top-8, 16384 tok", "num_tokens": 16384},
            {"label": "DeepSeek-V3 top-8, 65536 tok", "num_tokens": 65536}),
    test_shapes=({"label": "top-8, 45 tok", "num_tokens": 45}, {"label": "top-3, 7 tok", "num_tokens": 7, "topk": 3,
                                                               "block_T": 4}),
    tunables={"block_T": [32, 64, 128, 256], "threads": [64, 128, 256]},
    defaults={"topk": 8, "block_T": 64, "threads": 128},
    tolerance={"exact": True},
))

register(KernelSpec(
    name="moe_mask_indices_by_tp", family="moe_dispatch",
    description="expert ids kept for one TP rank and renumbered locally (-1 otherwise): TileKernels' "
                "mask_indices_by_tp",
    build=lambda num_tokens, topk, num_experts, num_ep_ranks, tp_rank, num_tp_ranks, block_T, threads, **_:
        mask_indices_by_tp(num_tokens, topk, num_experts, num_ep_ranks, tp_rank, num_tp_ranks, block_T=block_T,
                           threads=threads),
    make_inputs=_tp_inputs,
    reference=lambda Idx, num_experts, num_ep_ranks, tp_rank, num_tp_ranks, **_: ref_mask_indices_by_tp(
        Idx, num_experts, num_ep_ranks, tp_rank, num_tp_ranks),
    flops=lambda num_tokens, topk=8, **_: 8 * num_tokens * topk,
    bytes=lambda num_tokens, topk=8, **_: 8 * num_tokens * topk,
    shapes=({"label": "DeepSeek-V3 256 experts, EP 32, TP 4 rank 1, 16384 tok", "num_tokens": 16384},),
    test_shapes=({"label": "EP 8, TP 2 rank 1, 45 tok", "num_tokens": 45, "num_ep_ranks": 8, "num_tp_ranks": 2},
                 {"label": "16 experts top-3, EP 4, TP 4 rank 3, 9 tok", "num_tokens": 9, "topk": 3,
                  "num_experts": 16, "num_ep_ranks": 4, "num_tp_ranks": 4, "tp_rank": 3, "block_T": 4}),
    tunables={"block_T": [32, 64, 128], "threads": [64, 128, 256]},
    defaults={"topk": 8, "num_experts": 256, "num_ep_ranks": 32, "tp_rank": 1, "num_tp_ranks": 4, "block_T": 64,
              "threads": 128},
    tolerance={"exact": True},
))
