"""MoE dispatch/combine with scale factors: TileKernels' ``expand_to_fused_with_sf`` and ``reduce_fused``
with per-row scales, a global scale and an e4m3 output (the fused layout of ``kernels.moe_dispatch``).

Kernels (registry names):

* ``moe_expand_to_fused_sf`` — ``X`` (T, H) (e4m3 or any dtype) with per-token scales ``XSf`` (T, S) fp32
  → ``Out`` (P, H) and ``OutSf`` (P, S): row ``p`` gets token ``PosToToken[p]``'s data and scale row,
  padding rows (``-1``) zeros. Values move bitwise. One block per ``block_P`` rows × ``block_H`` columns;
  the blocks of the first column tile also move the scale rows.
* ``moe_reduce_fused_sf`` — per token an fp32 accumulator, for ``k = 0 … topk−1`` with
  ``pos = TokenTopkToPos[t, k] ≥ 0``: ``s = W[t, k]`` (or 1 without ``use_weights``), times
  ``XSf[pos]`` with ``use_row_sf``; ``acc = float32(X[pos]) · s + acc``; then ``acc · Sf[0]`` with
  ``use_global_sf``; rounded once to ``out_dtype`` (default ``None``: X's dtype, as TileKernels without
  ``fp8_format``; or ``float8_e4m3fn``, its ``fp8_format="e4m3"``). The inputs a flag turns off are still passed (and not read). TileKernels fuses ``x·s + acc`` into one fma (so does
  nvcc on CUDA); the interpreter rounds the product and the sum: an fp32 last-bit difference before the
  final rounding, which is within one ulp of a bf16/e4m3 output (tested at that tolerance, reported
  bitwise as well).

Edges: ragged T, H and P; unused slots; padding rows; tokens with no valid slot give 0. e4m3 outputs
saturate at ±448 (the GPU's ``satfinite``; TileKernels' torch reference's ``.to(float8_e4m3fn)`` gives NaN
above 464 instead — the comparisons stay inside the range). NaN/Inf in ``X`` propagate to their token.
"""

import ml_dtypes
import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.moe_dispatch import fused_mapping, max_fused_rows, routed_topk
from kernels.registry import KernelSpec, register
from tilesim import dtypes as _dt
from tilesim.testing.compare import compare_arrays

FP8 = "float8_e4m3fn"


@tilelang.jit(out_idx=[3, 4])
def expand_to_fused_sf(num_tokens, hidden, hidden_sf, num_pos, block_P=16, block_H=256, dtype=FP8, threads=128):
    S = hidden_sf

    @T.prim_func
    def main(X: T.Tensor((num_tokens, hidden), dtype), XSf: T.Tensor((num_tokens, S), "float32"),
             PosToToken: T.Tensor((num_pos,), "int32"), Out: T.Tensor((num_pos, hidden), dtype),
             OutSf: T.Tensor((num_pos, S), "float32")):
        with T.Kernel(T.ceildiv(hidden, block_H), T.ceildiv(num_pos, block_P), threads=threads) as (bx, by):
            tok = T.alloc_shared((block_P,), "int32")
            tile = T.alloc_shared((block_P, block_H), dtype)
            sf = T.alloc_shared((block_P, S), "float32")
            T.copy(PosToToken[by * block_P], tok)
            for i, j in T.Parallel(block_P, block_H):
                tile[i, j] = T.if_then_else((tok[i] >= 0) & (bx * block_H + j < hidden),
                                            X[tok[i], bx * block_H + j], T.cast(0, dtype))
            T.copy(tile, Out[by * block_P, bx * block_H])
            if bx == 0:
                for i, j in T.Parallel(block_P, S):
                    sf[i, j] = T.if_then_else(tok[i] >= 0, XSf[tok[i], j], 0.0)
                T.copy(sf, OutSf[by * block_P, 0])

    return main


@tilelang.jit(out_idx=[-1])
def reduce_fused_sf(num_pos, hidden, num_tokens, topk, use_weights=True, use_row_sf=True, use_global_sf=False,
                    dtype=FP8, out_dtype=None, block_T=8, block_H=256, threads=128):
    out_dtype = out_dtype or dtype

    @T.prim_func
    def main(X: T.Tensor((num_pos, hidden), dtype), W: T.Tensor((num_tokens, topk), "float32"),
             XSf: T.Tensor((num_pos,), "float32"), Sf: T.Tensor((1,), "float32"),
             TokenTopkToPos: T.Tensor((num_tokens, topk), "int32"), Out: T.Tensor((num_tokens, hidden), out_dtype)):
        with T.Kernel(T.ceildiv(hidden, block_H), T.ceildiv(num_tokens, block_T), threads=threads) as (bx, by):
            pos = T.alloc_shared((block_T, topk), "int32")
            s = T.alloc_shared((block_T, topk), "float32")
            acc = T.alloc_fragment((block_T, block_H), "float32")
            T.copy(TokenTopkToPos[by * block_T, 0], pos)
            if use_weights:
                T.copy(W[by * block_T, 0], s)
            else:
                T.fill(s, 1.0)
            if use_row_sf:
                for i, k in T.Parallel(block_T, topk):
                    s[i, k] = s[i, k] * T.if_then_else(pos[i, k] >= 0, XSf[T.max(pos[i, k], 0)], 0.0)
            T.clear(acc)
            for k in T.serial(topk):
                for i, j in T.Parallel(block_T, block_H):
                    acc[i, j] = T.if_then_else(
                        (pos[i, k] >= 0) & (bx * block_H + j < hidden),
                        T.cast(X[pos[i, k], bx * block_H + j], "float32") * s[i, k] + acc[i, j], acc[i, j])
            if use_global_sf:
                g = Sf[0]
                for i, j in T.Parallel(block_T, block_H):
                    acc[i, j] = acc[i, j] * g
            T.copy(acc, Out[by * block_T, bx * block_H])

    return main


# ------------------------------------------------------------------------------------------ references
def ref_expand_to_fused_sf(X, XSf, PosToToken, **_):
    valid = PosToToken >= 0
    out = np.zeros((PosToToken.shape[0], X.shape[1]), X.dtype)
    out_sf = np.zeros((PosToToken.shape[0], XSf.shape[1]), np.float32)
    out[valid], out_sf[valid] = X[PosToToken[valid]], XSf[PosToToken[valid]]
    return out, out_sf


def ref_reduce_fused_sf(X, W, XSf, Sf, TokenTopkToPos, use_weights=True, use_row_sf=True, use_global_sf=False,
                        dtype=FP8, out_dtype=None, **_):
    """fp32 emulation in the kernel's order (product and sum each rounded); one final (saturating) rounding."""
    f32 = np.float32
    Tn, K = TokenTopkToPos.shape
    xf = np.asarray(X).astype(f32)
    acc = np.zeros((Tn, X.shape[1]), f32)
    for k in range(K):
        p = TokenTopkToPos[:, k]
        s = np.asarray(W[:, k], f32) if use_weights else np.ones(Tn, f32)
        if use_row_sf:
            s = (s * np.where(p >= 0, XSf[np.maximum(p, 0)], f32(0))).astype(f32)
        term = (xf[np.maximum(p, 0)] * s[:, None]).astype(f32)
        acc = np.where((p >= 0)[:, None], (term + acc).astype(f32), acc)
    if use_global_sf:
        acc = (acc * f32(Sf[0])).astype(f32)
    od = _dt.canon(out_dtype or dtype)
    if od == FP8:
        return np.clip(acc, -448.0, 448.0).astype(ml_dtypes.float8_e4m3fn)
    return _dt.convert(acc, od)


def compare_reduce_sf(outs, refs, *_args, **_kw):
    """Registry ``compare``: within one ulp of the output dtype (the fma/two-rounding difference)."""
    o, r = outs[0], refs[0]
    rt = {"bfloat16": 2.0 ** -7, "float16": 2.0 ** -10, "float32": 1e-6}.get(str(o.dtype), 0.125)
    p = compare_arrays(o, r, rtol=rt, atol=2.0 ** -9 if rt == 0.125 else 1e-6, name="Out")
    if p:
        raise AssertionError(p)


# ------------------------------------------------------------------------------------------ registry
def _mapping(rng, num_tokens, num_experts, topk, alignment, drop=0.1):
    return fused_mapping(routed_topk(rng, num_tokens, num_experts, topk, drop=drop), num_experts, alignment)


def _fp8_rows(rng, shape, group):
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    G = -(-shape[1] // group)
    sf = np.exp2(rng.integers(-6, 3, (shape[0], G))).astype(np.float32)
    return np.clip(x, -448, 448).astype(ml_dtypes.float8_e4m3fn), sf


def _expand_inputs(rng, num_tokens, hidden, num_experts, topk, alignment, group=128, **_):
    _, p2t, _ = _mapping(rng, num_tokens, num_experts, topk, alignment)
    x, sf = _fp8_rows(rng, (num_tokens, hidden), group)
    return x, sf, p2t


def _reduce_inputs(rng, num_tokens, hidden, num_experts, topk, alignment, dtype=FP8, **_):
    t2p, p2t, _ = _mapping(rng, num_tokens, num_experts, topk, alignment)
    P = p2t.shape[0]
    x = _dt.convert((rng.standard_normal((P, hidden)) * 3).astype(np.float32), _dt.canon(dtype))
    w = rng.random((num_tokens, topk)).astype(np.float32)
    xsf = np.exp2(rng.integers(-4, 3, P)).astype(np.float32) * rng.random(P).astype(np.float32)
    return x, w, xsf, np.array([0.75], np.float32), t2p


def _rows(num_tokens, topk, num_experts, alignment, **_):
    return max_fused_rows(num_tokens, topk, num_experts, alignment)


DSV3 = {"num_experts": 256, "topk": 8, "alignment": 128}
SHAPES = ({"label": "DeepSeek-V3 hidden 7168, 4096 tok, top-8 of 256", "num_tokens": 4096, "hidden": 7168},)
TESTS = ({"label": "13 tok, hidden 200, 16 experts top-3, align 8", "num_tokens": 13, "hidden": 200, "num_experts": 16,
          "topk": 3, "alignment": 8, "block_H": 64, "block_P": 8},
         {"label": "7 tok, hidden 96, 8 experts top-2, align 4", "num_tokens": 7, "hidden": 96, "num_experts": 8,
          "topk": 2, "alignment": 4, "block_H": 32, "block_T": 4, "group": 32})

register(KernelSpec(
    name="moe_expand_to_fused_sf", family="moe_dispatch",
    description="MoE dispatch of e4m3 rows and their scale rows into the fused layout (expand_to_fused_with_sf)",
    build=lambda num_tokens, hidden, block_P, block_H, threads, group=128, **p: expand_to_fused_sf(
        num_tokens, hidden, -(-hidden // group), _rows(num_tokens, **p), block_P=block_P, block_H=block_H,
        threads=threads),
    make_inputs=_expand_inputs, reference=ref_expand_to_fused_sf, flops=lambda **_: 0,
    bytes=lambda num_tokens, hidden, group=128, **p: int((num_tokens + _rows(num_tokens, **p)) * hidden * (1 + 4 / group)
                                                        + 4 * _rows(num_tokens, **p)),
    shapes=SHAPES, test_shapes=TESTS,
    tunables={"block_P": [8, 16, 32], "block_H": [128, 256, 512], "threads": [128, 256]},
    defaults={**DSV3, "block_P": 16, "block_H": 256, "threads": 128, "group": 128},
    tolerance={"exact": True},
))

register(KernelSpec(
    name="moe_reduce_fused_sf", family="moe_dispatch",
    description="MoE combine with per-row scales, weights and a global scale, e4m3 or bf16 out (reduce_fused)",
    build=lambda num_tokens, hidden, topk, block_T, block_H, threads, dtype=FP8, out_dtype=None,
    use_weights=True, use_row_sf=True, use_global_sf=False, **p: reduce_fused_sf(
        _rows(num_tokens, topk=topk, **p), hidden, num_tokens, topk, use_weights, use_row_sf, use_global_sf,
        dtype=dtype, out_dtype=out_dtype, block_T=block_T, block_H=block_H, threads=threads),
    make_inputs=_reduce_inputs, reference=ref_reduce_fused_sf,
    flops=lambda num_tokens, hidden, topk=8, **_: 2 * num_tokens * topk * hidden,
    bytes=lambda num_tokens, hidden, topk=8, **_: int(num_tokens * (topk + 2) * hidden + 12 * num_tokens * topk),
    shapes=SHAPES + ({"label": "same, global scale", "num_tokens": 4096, "hidden": 7168,
                      "use_global_sf": True},),
    test_shapes=TESTS + ({"label": "bf16 in, no weights, global scale, e4m3 out", "num_tokens": 9, "hidden": 70,
                          "num_experts": 8, "topk": 2, "alignment": 4, "block_H": 32, "block_T": 4,
                          "dtype": "bfloat16", "use_weights": False, "use_row_sf": False, "use_global_sf": True,
                          "out_dtype": FP8},),
    tunables={"block_T": [4, 8, 16], "block_H": [128, 256, 512], "threads": [128, 256]},
    defaults={**DSV3, "block_T": 8, "block_H": 256, "threads": 128, "dtype": FP8, "out_dtype": None,
              "use_weights": True, "use_row_sf": True, "use_global_sf": False},
    tolerance={"rtol": 2.0 ** -7, "atol": 1e-6},
    compare=compare_reduce_sf,
))
