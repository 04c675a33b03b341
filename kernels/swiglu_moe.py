"""SwiGLU forward on the fused MoE layout with per-row routing weights and clamp counters, fused with the
per-token e4m3 cast (TileKernels' ``swiglu_forward_and_per_token_cast`` with ``pos_to_token_topk``,
``topk_weights`` and ``clamped_count``; reference ``swiglu_forward`` then ``cast(…, 'e4m3', (1, g))``).

Kernel (registry name ``swiglu_fp8_routed``)::

    X (P, 2H) bf16/fp32, W (T, k) fp32, PosToTokenTopk (P,) int32 (flat slot t·k + s, -1 on padding rows)
      → Q (P, H) e4m3, S (P, ceil(H/g)) fp32, Counts (3,) int32

Per element in fp32, TileKernels' operation order: ``a = x[:, :H]``, ``b = x[:, H:]``; with ``clamp_limit``
``L``: ``Counts = [#(a > L), #(b > L), #(b < -L)]`` over the whole tensor (padding rows included, as the
reference counts them), then ``a = min(a, L)``, ``b = clamp(b, -L, L)``; ``h = a / (1 + exp(-a)) · b · w``
with ``w = W[slot // k, slot % k]`` (0 on padding rows, so their Q is 0). ``h`` is cast per token and group
of ``g`` columns with the recipe of ``kernels.fp8_cast`` (amax floor 1e-4, ``amax/448`` and ``448/amax``,
or UE8M0). One block per ``block_M`` rows × one group; the counters are zeroed by a first launch and
added with integer ``T.atomic_add`` (one per block and counter; without a clamp they stay 0). TileKernels
adds into a caller's int64 tensor; here the counts are a fresh int32 output (equal below 2^31).

Numerics: ``exp`` may differ from torch's by an ulp, so Q is compared within one e4m3 step and S to
``1e-5`` (as ``swiglu_fp8``); the counts are exact. Edges: ragged P and H (the last group's gate columns
``≥ H`` are masked, as in ``swiglu_fp8``). Inputs must be finite.
"""

import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.fp8_cast import ref_per_token_cast
from kernels.moe_dispatch import max_fused_rows
from kernels.registry import KernelSpec, register
from kernels.swiglu_bwd import routed_inputs
from tilesim import dtypes as _dt
from tilesim.testing.compare import compare_arrays

FP8 = "float8_e4m3fn"
FP8_MAX = 448.0
AMAX_FLOOR = 1e-4


@T.macro
def e4m3_group_scale(amax, use_ue8m0):
    """(scale, quant multiplier) of a group: the recipe of ``kernels.fp8_cast.group_scale`` (a macro
    belongs to its module's language, so each kernel module defines the ones it calls)."""
    a = T.max(amax, AMAX_FLOOR)
    if use_ue8m0:
        bits = T.reinterpret("int32", a / FP8_MAX)
        e = ((bits >> 23) & 0xFF) + T.if_then_else((bits & 0x7FFFFF) != 0, 1, 0)
        s = T.reinterpret("float32", e << 23)
        inv = 1.0 / s
    else:
        s = a / FP8_MAX
        inv = FP8_MAX / a
    return s, inv


@tilelang.jit(out_idx=[3, 4, 5])
def swiglu_fp8_routed(P, H, num_tokens, topk, group_size=128, block_M=32, clamp_limit=None, in_dtype="bfloat16",
                      use_ue8m0=False, threads=128):
    G, K = T.ceildiv(H, group_size), topk

    @T.prim_func
    def main(X: T.Tensor((P, 2 * H), in_dtype), W: T.Tensor((num_tokens, K), "float32"),
             PosToTokenTopk: T.Tensor((P,), "int32"), Q: T.Tensor((P, H), FP8), S: T.Tensor((P, G), "float32"),
             Counts: T.Tensor((3,), "int32")):
        with T.Kernel(1, threads=threads) as _:
            for c in T.Parallel(3):
                Counts[c] = 0
        with T.Kernel(G, T.ceildiv(P, block_M), threads=threads) as (bx, by):
            r0 = by * block_M
            slot = T.alloc_shared((block_M,), "int32")
            w = T.alloc_fragment((block_M,), "float32")
            h = T.alloc_fragment((block_M, group_size), "float32")
            q = T.alloc_fragment((block_M, group_size), FP8)
            amax = T.alloc_fragment((block_M,), "float32")
            inv = T.alloc_fragment((block_M,), "float32")
            flags = T.alloc_fragment((block_M, group_size), "int32")
            rowcnt = T.alloc_fragment((block_M,), "int32")
            n = T.alloc_fragment((1,), "int32")
            T.copy(PosToTokenTopk[r0], slot)
            for i in T.Parallel(block_M):
                f = slot[i]
                w[i] = T.if_then_else((f >= 0) & (r0 + i < P), W[T.floordiv(T.max(f, 0), K), T.floormod(T.max(f, 0), K)], 0.0)
            for i, j in T.Parallel(block_M, group_size):
                ok = (bx * group_size + j < H) & (r0 + i < P)
                r, c = T.min(r0 + i, P - 1), T.min(bx * group_size + j, H - 1)
                a = T.if_then_else(ok, T.cast(X[r, c], "float32"), 0.0)
                b = T.if_then_else(ok, T.cast(X[r, H + c], "float32"), 0.0)
                if clamp_limit is not None:
                    h[i, j] = T.min(a, clamp_limit) / (1.0 + T.exp(-T.min(a, clamp_limit))) * T.clamp(
                        b, -clamp_limit, clamp_limit) * w[i]
                else:
                    h[i, j] = a / (1.0 + T.exp(-a)) * b * w[i]
            if clamp_limit is not None:
                for k in T.serial(3):
                    for i, j in T.Parallel(block_M, group_size):
                        ok = (bx * group_size + j < H) & (r0 + i < P)
                        r, c = T.min(r0 + i, P - 1), T.min(bx * group_size + j, H - 1)
                        v = T.cast(X[r, T.if_then_else(k == 0, c, H + c)], "float32")
                        hit = T.if_then_else(k == 2, v < -clamp_limit, v > clamp_limit)
                        flags[i, j] = T.if_then_else(ok & hit, 1, 0)
                    T.reduce_sum(flags, rowcnt, dim=1)
                    T.reduce_sum(rowcnt, n, dim=0)
                    T.atomic_add(Counts[k], n[0])
            T.reduce_absmax(h, amax, dim=1)
            for i in T.Parallel(block_M):
                s, m = e4m3_group_scale(amax[i], use_ue8m0)
                inv[i] = m
                if r0 + i < P:
                    S[r0 + i, bx] = s
            for i, j in T.Parallel(block_M, group_size):
                q[i, j] = T.cast(h[i, j] * inv[i], FP8)
            T.copy(q, Q[r0, bx * group_size])

    return main


# ------------------------------------------------------------------------------------------ reference
def ref_swiglu_fp8_routed(X, W, PosToTokenTopk, group_size=128, clamp_limit=None, use_ue8m0=False, **_):
    """float64 SwiGLU times the row's weight, then the per-token cast recipe; exact clamp counts."""
    x = np.asarray(X).astype(np.float64)
    H = x.shape[1] // 2
    a, b = x[:, :H], x[:, H:]
    counts = np.zeros(3, np.int32)
    if clamp_limit is not None:
        counts[:] = [(a > clamp_limit).sum(), (b > clamp_limit).sum(), (b < -clamp_limit).sum()]
        a, b = np.minimum(a, clamp_limit), np.clip(b, -clamp_limit, clamp_limit)
    slot = np.asarray(PosToTokenTopk)
    w = np.where(slot >= 0, np.asarray(W, np.float64).reshape(-1)[np.maximum(slot, 0)], 0.0)
    with np.errstate(over="ignore"):
        h = a / (1 + np.exp(-a)) * b * w[:, None]
    q, sc = ref_per_token_cast(h.astype(np.float32), group_size, use_ue8m0)
    return q, sc, counts


def compare_routed(outs, refs, *_a, **_k):
    """Q within one e4m3 step, S to 1e-5 relative, the counts exactly."""
    bad = [compare_arrays(outs[0], refs[0], rtol=0.125, atol=2.0 ** -9, name="Q"),
           compare_arrays(outs[1], refs[1], rtol=1e-5, atol=0.0, name="S"),
           compare_arrays(outs[2], refs[2], exact=True, name="Counts")]
    bad = [b for b in bad if b]
    if bad:
        raise AssertionError("; ".join(bad))


# ------------------------------------------------------------------------------------------ registry
def _inputs(rng, num_tokens, H, topk=8, num_experts=16, alignment=32, in_dtype="bfloat16", **_):
    """Expert-major rows of a routing (padding rows 0) with outlier gate columns, the weights, the slots."""
    xq, xs, _g, w, slot, _t2p = routed_inputs(rng, num_tokens, H, topk, num_experts, alignment)
    P = slot.shape[0]
    x = rng.standard_normal((P, 2 * H)) * 3.0
    x[:, rng.integers(0, 2 * H, 3)] *= 10.0
    x[slot < 0] = 0.0
    return _dt.convert(x.astype(np.float32), _dt.canon(in_dtype)), w, slot


def _rows(num_tokens, topk, num_experts, alignment, **_):
    return max_fused_rows(num_tokens, topk, num_experts, alignment)


register(KernelSpec(
    name="swiglu_fp8_routed", family="swiglu",
    description="SwiGLU on the fused MoE layout times the routing weight, clamp counters, per-token e4m3 cast "
                "(TileKernels' swiglu_forward_and_per_token_cast with weights)",
    build=lambda num_tokens, H, topk, num_experts, alignment, group_size, block_M, threads, clamp_limit=None,
    in_dtype="bfloat16", use_ue8m0=False, **_: swiglu_fp8_routed(
        _rows(num_tokens, topk, num_experts, alignment), H, num_tokens, topk, group_size, block_M, clamp_limit,
        in_dtype, use_ue8m0, threads),
    make_inputs=_inputs, reference=ref_swiglu_fp8_routed,
    flops=lambda num_tokens, H, topk, num_experts, alignment, **_: 10 * _rows(num_tokens, topk, num_experts,
                                                                              alignment) * H,
    bytes=lambda num_tokens, H, topk, num_experts, alignment, **_: 5 * _rows(num_tokens, topk, num_experts,
                                                                             alignment) * H,
    shapes=({"label": "DeepSeek-V3 expert inter 2048, 4096 tok top-8 of 256", "num_tokens": 4096, "H": 2048,
             "num_experts": 256, "alignment": 128},),
    test_shapes=({"label": "13 tok top-3 of 8, H 200, clamp 7", "num_tokens": 13, "H": 200, "topk": 3,
                  "num_experts": 8, "alignment": 8, "clamp_limit": 7.0, "block_M": 16},
                 {"label": "fp32, ue8m0, H 96, 1x32", "num_tokens": 9, "H": 96, "topk": 2, "num_experts": 4,
                  "alignment": 4, "group_size": 32, "in_dtype": "float32", "use_ue8m0": True, "block_M": 8}),
    tunables={"block_M": [8, 16, 32, 64], "threads": [64, 128, 256]},
    defaults={"topk": 8, "num_experts": 16, "alignment": 32, "group_size": 128, "block_M": 32, "threads": 128,
              "clamp_limit": None, "in_dtype": "bfloat16", "use_ue8m0": False},
    tolerance={"rtol": 0.125, "atol": 2.0 ** -9},
    compare=compare_routed,
))
