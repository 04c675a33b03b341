"""SwiGLU backward on FP8 activations, fused with the per-token e4m3 cast of the gradient (MoE experts).

Kernel (registry name ``swiglu_bwd_fp8``; TileKernels' ``swiglu_backward_and_per_token_cast``, whose
reference is ``swiglu_backward`` followed by ``cast(x_grad, 'e4m3', (1, c))``)::

    inputs   Xq (P, 2H) e4m3, Xs (P, 2H/c) fp32        the expert-major activations x and y, per-token scales
             G (P, H) bf16/fp32                          gradient of the weighted SwiGLU output
             W (T, k) fp32                               routing weights
             PosToTokenTopk (P,) int32                   flat slot ``t·k + s`` of each row, -1 for padding rows
             TokenTopkToPos (T, k) int32                 row of each slot, -1 for unused slots
    outputs  Out (P, H)      w · silu(x) · y                               in G's dtype
             Gq (P, 2H) e4m3, Gs (P, 2H/c) fp32          per-token cast of [dx | dy] (groups of c columns)
             Gx (P, 2H)      [dx | dy]                                     in G's dtype
             Wgrad (T, k) fp32                            Σ_j G[pos, j] · silu(x)·y [pos, j]; 0 for unused slots

Per element (fp32, TileKernels' operation order): ``x = Xq·Xs``, ``y`` likewise (the scale of the group of
``c`` columns each lies in; ``c`` = ``num_per_channels`` ∈ {32, 128} must divide H, else ``ValueError``);
with ``clamp_limit`` ``x = min(x, L)``, ``y = clamp(y, -L, L)``; ``t = 1 + exp(-x)``, ``s = 1 / t``;
``w`` the row's routing weight (0 for a padding row); ``gws = (g·w)·s``; ``dx = (gws·y)·(x·(1 - s) + 1)``,
``dy = gws·x``, each 0 where its input was clamped (``x > L``; ``|y| > L``); ``act = (x / t)·y``,
``Out = act·w``. ``Wgrad[t, s]`` is the fp32 sum over H of ``g·act`` of the row of slot (t, s). The
gradient is cast with the per-token e4m3 recipe of ``kernels.fp8_cast`` (amax floor 1e-4, ``amax / 448``
and ``448 / amax``, or UE8M0 with ``use_ue8m0``).

One program of two launches: launch 1, one block per ``block_M`` rows, walks H in chunks of ``c``
columns (one x scale group, one y scale group, and one group of each gradient half), writes ``Out``,
``Gx``, ``Gq``, ``Gs`` and accumulates each row's dot product, which it stores in a ``(P,)`` fp32
workspace; launch 2, one block per ``block_T`` tokens, gathers ``Wgrad[t, s] = dot[TokenTopkToPos[t, s]]``
(0 where the slot is unused), so every ``Wgrad`` entry is written.

Numerics: ``exp`` may differ from torch's or NumPy's by an ulp, and ``x·(1 - s) + 1`` is one fused
multiply-add in TileKernels' reference (``torch.compile``) and on CUDA (nvcc contracts it) but two
roundings in the interpreter: ``Out`` and ``Gx`` are compared within one ulp of their dtype (relative
``2^-7`` for bf16) plus a small absolute term, ``Gq`` within one e4m3 step, ``Gs`` to 1e-5, ``Wgrad``
to TileKernels' own tolerance (``rtol = atol = 1e-4``; the summation order differs). Inputs must be finite.
"""

import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.fp8_cast import ref_per_token_cast
from kernels.moe_dispatch import fused_mapping, max_fused_rows, routed_topk
from kernels.registry import KernelSpec, register
from tilesim import dtypes as _dt
from tilesim.testing.compare import compare_arrays

FP8 = "float8_e4m3fn"
FP8_MAX = 448.0
AMAX_FLOOR = 1e-4


@T.macro
def e4m3_scale(amax, use_ue8m0):
    """(scale, quant multiplier) of one group (the recipe of ``kernels.fp8_cast.group_scale``; defined here
    because a ``T.macro`` belongs to the module it was made in, see docs/kernels-1.md)."""
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


@T.macro
def cast_group(v, Gq, Gs, row0, col0, grp, amax, inv, P, block_M, c, use_ue8m0):
    """Per-token e4m3 cast of the fp32 fragment ``v`` (block_M, c) into Gq[row0:, col0:] and Gs[:, grp]."""
    q = T.alloc_fragment((block_M, c), FP8)
    T.reduce_absmax(v, amax, dim=1)
    for i in T.Parallel(block_M):
        s, m = e4m3_scale(amax[i], use_ue8m0)
        inv[i] = m
        if row0 + i < P:
            Gs[row0 + i, grp] = s
    for i, j in T.Parallel(block_M, c):
        q[i, j] = T.cast(v[i, j] * inv[i], FP8)
    T.copy(q, Gq[row0, col0])


@tilelang.jit(out_idx=[6, 7, 8, 9, 10])
def swiglu_backward(P, H, num_tokens, topk, num_per_channels=128, block_M=16, block_T=32, clamp_limit=None,
                    grad_dtype="bfloat16", use_ue8m0=False, threads=128):
    """Fused SwiGLU backward + per-token e4m3 cast of the gradient (see the module docstring)."""
    c = num_per_channels
    if H % c:
        raise ValueError(f"num_per_channels={c} must divide H={H} (the x and y halves have whole scale groups)")
    G, nc = 2 * H // c, H // c
    K = topk

    @T.prim_func
    def main(Xq: T.Tensor((P, 2 * H), FP8), Xs: T.Tensor((P, G), "float32"), Gr: T.Tensor((P, H), grad_dtype),
             W: T.Tensor((num_tokens, K), "float32"), PosToTokenTopk: T.Tensor((P,), "int32"),
             TokenTopkToPos: T.Tensor((num_tokens, K), "int32"),
             Out: T.Tensor((P, H), grad_dtype), Gq: T.Tensor((P, 2 * H), FP8), Gs: T.Tensor((P, G), "float32"),
             Gx: T.Tensor((P, 2 * H), grad_dtype), Wgrad: T.Tensor((num_tokens, K), "float32")):
        Dot = T.alloc_global((P,), "float32")
        with T.Kernel(T.ceildiv(P, block_M), threads=threads) as bx:
            r0 = bx * block_M
            slot = T.alloc_shared((block_M,), "int32")
            w = T.alloc_fragment((block_M,), "float32")
            sx = T.alloc_fragment((block_M,), "float32")
            sy = T.alloc_fragment((block_M,), "float32")
            dot = T.alloc_fragment((block_M,), "float32")
            amax = T.alloc_fragment((block_M,), "float32")
            inv = T.alloc_fragment((block_M,), "float32")
            x = T.alloc_fragment((block_M, c), "float32")
            y = T.alloc_fragment((block_M, c), "float32")
            g = T.alloc_fragment((block_M, c), "float32")
            dx = T.alloc_fragment((block_M, c), "float32")
            dy = T.alloc_fragment((block_M, c), "float32")
            out = T.alloc_fragment((block_M, c), "float32")
            prod = T.alloc_fragment((block_M, c), "float32")
            T.copy(PosToTokenTopk[r0], slot)  # rows past P read 0: a valid slot, never stored
            for i in T.Parallel(block_M):
                f = slot[i]
                w[i] = T.if_then_else(f >= 0, W[T.floordiv(f, K), T.floormod(f, K)], 0.0)
            T.clear(dot)
            for jc in T.serial(nc):
                T.copy(Xq[r0, jc * c], x)
                T.copy(Xq[r0, H + jc * c], y)
                T.copy(Gr[r0, jc * c], g)
                for i in T.Parallel(block_M):
                    sx[i] = T.if_then_else(r0 + i < P, Xs[r0 + i, jc], 0.0)
                    sy[i] = T.if_then_else(r0 + i < P, Xs[r0 + i, nc + jc], 0.0)
                for i, j in T.Parallel(block_M, c):
                    xv = x[i, j] * sx[i]
                    yv = y[i, j] * sy[i]
                    if clamp_limit is not None:
                        xc = T.min(xv, clamp_limit)
                        yc = T.clamp(yv, -clamp_limit, clamp_limit)
                    else:
                        xc = xv
                        yc = yv
                    t = 1.0 + T.exp(-xc)
                    s = 1.0 / t
                    gws = g[i, j] * w[i] * s
                    act = xc / t * yc
                    out[i, j] = act * w[i]
                    prod[i, j] = g[i, j] * act
                    if clamp_limit is not None:
                        dx[i, j] = T.if_then_else(xv > clamp_limit, 0.0, gws * yc * (xc * (1.0 - s) + 1.0))
                        dy[i, j] = T.if_then_else((yv > clamp_limit) | (yv < -clamp_limit), 0.0, gws * xc)
                    else:
                        dx[i, j] = gws * yc * (xc * (1.0 - s) + 1.0)
                        dy[i, j] = gws * xc
                T.reduce_sum(prod, dot, dim=1, clear=False)
                T.copy(out, Out[r0, jc * c])
                T.copy(dx, Gx[r0, jc * c])
                T.copy(dy, Gx[r0, H + jc * c])
                cast_group(dx, Gq, Gs, r0, jc * c, jc, amax, inv, P, block_M, c, use_ue8m0)
                cast_group(dy, Gq, Gs, r0, H + jc * c, nc + jc, amax, inv, P, block_M, c, use_ue8m0)
            T.copy(dot, Dot[r0])
        with T.Kernel(T.ceildiv(num_tokens, block_T), threads=threads) as bx:
            pos = T.alloc_shared((block_T, K), "int32")
            wg = T.alloc_fragment((block_T, K), "float32")
            T.copy(TokenTopkToPos[bx * block_T, 0], pos)
            for i, k in T.Parallel(block_T, K):
                wg[i, k] = T.if_then_else(pos[i, k] >= 0, Dot[pos[i, k]], 0.0)
            T.copy(wg, Wgrad[bx * block_T, 0])

    return main


# ------------------------------------------------------------------------------------------ references
def ref_swiglu_backward(Xq, Xs, Gr, W, PosToTokenTopk, TokenTopkToPos, num_per_channels=128, clamp_limit=None,
                        use_ue8m0=False, **_):
    """NumPy reference in fp32 with the kernel's operation order: (Out, Gq, Gs, Gx, Wgrad)."""
    c = num_per_channels
    P, H2 = Xq.shape
    H = H2 // 2
    K = W.shape[1]
    f32 = np.float32
    xf = (np.asarray(Xq).astype(f32) * np.repeat(np.asarray(Xs, f32), c, axis=1)).astype(f32)
    x, y = xf[:, :H], xf[:, H:]
    if clamp_limit is not None:
        L = f32(clamp_limit)
        xc, yc = np.minimum(x, L), np.clip(y, -L, L)
    else:
        xc, yc = x, y
    with np.errstate(over="ignore"):
        t = (f32(1) + np.exp(-xc)).astype(f32)
    s = (f32(1) / t).astype(f32)
    slot = np.asarray(PosToTokenTopk)
    w = np.where(slot >= 0, np.asarray(W, f32).reshape(-1)[np.maximum(slot, 0)], f32(0)).astype(f32)[:, None]
    g = np.asarray(Gr).astype(f32)
    gws = g * w * s
    dx = gws * yc * (xc * (f32(1) - s) + f32(1))
    dy = gws * xc
    if clamp_limit is not None:
        dx = np.where(x > L, f32(0), dx)
        dy = np.where(np.abs(y) > L, f32(0), dy)
    act = xc / t * yc
    out = act * w
    gx = np.concatenate([dx, dy], axis=1).astype(f32)
    dot = (g.astype(np.float64) * act).sum(axis=1).astype(f32)
    tp = np.asarray(TokenTopkToPos)
    wgrad = np.where(tp >= 0, dot[np.maximum(tp, 0)], f32(0)).astype(f32).reshape(-1, K)
    q, sc = ref_per_token_cast(gx, c, use_ue8m0)
    dt = np.asarray(Gr).dtype
    return out.astype(dt), q, sc, gx.astype(dt), wgrad


def compare_swiglu_backward(outs, refs, *_args, **_kw):
    """Registry ``compare``: Out/Gx within one ulp of their dtype, Gq one e4m3 step, Gs 1e-5, Wgrad 1e-4."""
    rt = 2.0 ** -7 if outs[0].dtype != np.float32 else 1e-5
    problems = [compare_arrays(outs[0], refs[0], rtol=rt, atol=1e-6, name="Out"),
                compare_arrays(outs[1], refs[1], rtol=0.125, atol=2.0 ** -9, name="Gq"),
                compare_arrays(outs[2], refs[2], rtol=1e-5, atol=0.0, name="Gs"),
                compare_arrays(outs[3], refs[3], rtol=rt, atol=1e-6, name="Gx"),
                compare_arrays(outs[4], refs[4], rtol=1e-4, atol=1e-4, name="Wgrad")]
    problems = [p for p in problems if p]
    if problems:
        raise AssertionError("; ".join(problems))


# ------------------------------------------------------------------------------------------ registry
def _rows(num_tokens, topk, num_experts, alignment, **_):
    return max_fused_rows(num_tokens, topk, num_experts, alignment)


def routed_inputs(rng, num_tokens, H, topk=8, num_experts=16, alignment=32, num_per_channels=128,
                  grad_dtype="bfloat16", drop=0.1, **_):
    """A routing in the fused layout, x/y expanded and cast per token (padding rows 0), a random gradient."""
    idx = routed_topk(rng, num_tokens, num_experts, topk, drop=drop)
    t2p, p2t, _ = fused_mapping(idx, num_experts, alignment)
    P = p2t.shape[0]
    slot = np.full(P, -1, np.int32)
    tt, jj = np.nonzero(t2p >= 0)
    slot[t2p[tt, jj]] = (tt * topk + jj).astype(np.int32)
    x = (rng.standard_normal((P, 2 * H)) * 2.0).astype(np.float32)
    x[:, rng.integers(0, 2 * H, 3)] *= 8.0
    x[p2t < 0] = 0.0
    xq, xs = ref_per_token_cast(x, num_per_channels)
    g = _dt.convert(rng.standard_normal((P, H)).astype(np.float32), _dt.canon(grad_dtype))
    w = rng.random((num_tokens, topk)).astype(np.float32)
    return xq, xs, g, w, slot, t2p


def _build(num_tokens, H, topk, num_experts, alignment, num_per_channels, block_M, block_T, threads,
           clamp_limit=None, grad_dtype="bfloat16", use_ue8m0=False, **_):
    return swiglu_backward(_rows(num_tokens, topk, num_experts, alignment), H, num_tokens, topk,
                           num_per_channels=num_per_channels, block_M=block_M, block_T=block_T,
                           clamp_limit=clamp_limit, grad_dtype=grad_dtype, use_ue8m0=use_ue8m0, threads=threads)


def _bytes(num_tokens, H, topk, num_experts, alignment, num_per_channels=128, grad_dtype="bfloat16", **_):
    P, e = _rows(num_tokens, topk, num_experts, alignment), _dt.itemsize(_dt.canon(grad_dtype))
    return int(P * 2 * H * (1 + 1 + e) + 2 * P * (2 * H // num_per_channels) * 4 + P * H * 2 * e
               + P * 4 + num_tokens * topk * 12)


register(KernelSpec(
    name="swiglu_bwd_fp8", family="swiglu",
    description="SwiGLU backward on e4m3 x/y with routing weights, fused with the per-token e4m3 cast of "
                "[dx|dy] (TileKernels' swiglu_backward_and_per_token_cast)",
    build=_build, make_inputs=routed_inputs, reference=ref_swiglu_backward,
    flops=lambda num_tokens, H, topk, num_experts, alignment, **_: 30 * _rows(num_tokens, topk, num_experts,
                                                                              alignment) * H,
    bytes=_bytes,
    shapes=(
        {"label": "DeepSeek-V3 expert inter 2048, 4096 tok top-8 of 256", "num_tokens": 4096, "H": 2048,
         "topk": 8, "num_experts": 256, "alignment": 128},
        {"label": "same, 1x32 groups, clamp 10, UE8M0", "num_tokens": 4096, "H": 2048, "topk": 8,
         "num_experts": 256, "alignment": 128, "num_per_channels": 32, "clamp_limit": 10.0, "use_ue8m0": True},
    ),
    test_shapes=(
        {"label": "edges: 13 tok top-3 of 8, H 96 (1x32)", "num_tokens": 13, "H": 96, "topk": 3, "num_experts": 8,
         "alignment": 8, "num_per_channels": 32, "block_M": 16, "block_T": 8},
        {"label": "clamp 0.5, ue8m0, fp32 grad, H 128", "num_tokens": 9, "H": 128, "topk": 2, "num_experts": 4,
         "alignment": 4, "clamp_limit": 0.5, "use_ue8m0": True, "grad_dtype": "float32", "block_M": 8},
    ),
    tunables={"block_M": [4, 8, 16, 32], "threads": [64, 128, 256]},
    defaults={"topk": 8, "num_experts": 16, "alignment": 32, "num_per_channels": 128, "block_M": 16,
              "block_T": 32, "threads": 128, "clamp_limit": None, "grad_dtype": "bfloat16", "use_ue8m0": False},
    tolerance={"rtol": 2.0 ** -7, "atol": 1e-4},
    compare=compare_swiglu_backward,
))
