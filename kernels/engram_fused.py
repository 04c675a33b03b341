"""Engram fused weight and the fused-weight gate forward (TileKernels' ``fused_weight`` and ``engram_gate_fwd``, the
two forward launches of its ``EngramGateFn``; semantics of ``engram_gate_ref`` in ``tile_kernels/torch/engram.py``).

Kernels (registry names):

* ``engram_fused_weight`` — ``Wh``, ``We`` (hc, H) bf16 → ``Wf`` (hc, H) fp32, ``Wf = float(wh) · float(we)``: one
  fp32 rounding, exact for bf16 operands (8 + 8 significant bits) unless the product leaves fp32's normal range.
  One block per head × ``block_H`` columns. Bitwise (TileKernels' test: ``assert_equal`` with ``wh.float() *
  we.float()``).
* ``engram_gate_fused`` — ``X``, ``Kx`` (N, hc, H) bf16, ``V`` (N, H) bf16, ``Wf`` (hc, H) fp32 → ``Out`` (N, hc, H)
  bf16 and the statistics TileKernels' forward saves for its backward, each (N, hc) fp32: ``Dot = Σ x·wf·k`` (the
  raw dot, products ``(x·wf)·k`` in fp32 as TileKernels' kernel), ``Gate = sigmoid(sign(z)·sqrt(max(|z|,
  clamp)))`` with ``z = Dot·RstdX·RstdK·H^-1/2``, ``RstdX = rsqrt(Σx²/H + eps)``, ``RstdK`` likewise; ``Out = x +
  Gate·v`` rounded once. One block per ``block_R`` rows of the flattened (N·hc, H) view walks H twice in
  ``block_H`` chunks (statistics, then the output); ``Wf`` and ``V`` are gathered per row (row ``r`` uses
  ``Wf[r % hc]``, ``V[r // hc]``) through shared memory. ``sign(0) = 0`` (gate 1/2) as the reference; TileKernels'
  GPU kernel uses ``copysign`` (a zero dot gives ``sigmoid(+sqrt(clamp))``).

Numerics: fp32 sums in a different order from torch's einsum and ``rsqrt``/``sqrt``/``exp`` that may differ by
an ulp, so the statistics agree with the reference within fp32 rounding (TileKernels' own test bound is
``calc_diff < 2e-10``) and ``Out`` within one bf16 ulp. Ragged N and H: edge loads are masked to 0 (they add
nothing), stores guarded. Inputs finite. ``engram_gate_fused`` after ``engram_fused_weight`` computes what
``kernels.engram.engram_gate`` computes, up to the product order ``(x·wh)·(k·we)`` there.
"""

import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.engram import gate_inputs
from kernels.registry import KernelSpec, register
from tilesim import dtypes as _dt

BF16 = "bfloat16"


@tilelang.jit(out_idx=[2])
def engram_fused_weight(hc, H, block_H=1024, threads=128):
    @T.prim_func
    def main(Wh: T.Tensor((hc, H), BF16), We: T.Tensor((hc, H), BF16), Wf: T.Tensor((hc, H), "float32")):
        with T.Kernel(T.ceildiv(H, block_H), hc, threads=threads) as (bx, c):
            a = T.alloc_fragment((block_H,), "float32")
            b = T.alloc_fragment((block_H,), "float32")
            T.copy(Wh[c, bx * block_H], a)
            T.copy(We[c, bx * block_H], b)
            for j in T.Parallel(block_H):
                a[j] = a[j] * b[j]
            T.copy(a, Wf[c, bx * block_H])  # clipped at H

    return main


@tilelang.jit(out_idx=[4, 5, 6, 7, 8])
def engram_gate_fused(N, hc, H, clamp_value=1e-6, eps=1e-20, block_R=8, block_H=256, threads=128):
    R = N * hc
    nh = -(-H // block_H)
    scalar = float(H) ** -0.5

    @T.prim_func
    def main(X: T.Tensor((N, hc, H), BF16), Kx: T.Tensor((N, hc, H), BF16), V: T.Tensor((N, H), BF16),
             Wf: T.Tensor((hc, H), "float32"), Out: T.Tensor((N, hc, H), BF16), Dot: T.Tensor((N, hc), "float32"),
             Gate: T.Tensor((N, hc), "float32"), RstdX: T.Tensor((N, hc), "float32"),
             RstdK: T.Tensor((N, hc), "float32")):
        with T.Kernel(T.ceildiv(R, block_R), threads=threads) as bx:
            r0 = bx * block_R
            x = T.alloc_fragment((block_R, block_H), "float32")
            k = T.alloc_fragment((block_R, block_H), "float32")
            t = T.alloc_fragment((block_R, block_H), "float32")
            g = T.alloc_shared((block_R, block_H), "float32")  # Wf (then V) gathered per row
            sx = T.alloc_fragment((block_R,), "float32")
            sk = T.alloc_fragment((block_R,), "float32")
            sd = T.alloc_fragment((block_R,), "float32")
            gate = T.alloc_fragment((block_R,), "float32")
            T.clear(sx)
            T.clear(sk)
            T.clear(sd)
            for hb in T.serial(nh):
                for i, j in T.Parallel(block_R, block_H):
                    ok = (r0 + i < R) & (hb * block_H + j < H)
                    r, c = T.min(r0 + i, R - 1), T.min(hb * block_H + j, H - 1)
                    x[i, j] = T.if_then_else(ok, T.cast(X[r // hc, r % hc, c], "float32"), 0.0)
                    k[i, j] = T.if_then_else(ok, T.cast(Kx[r // hc, r % hc, c], "float32"), 0.0)
                    g[i, j] = T.if_then_else(ok, Wf[r % hc, c], 0.0)
                for i, j in T.Parallel(block_R, block_H):
                    t[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(t, sx, dim=1, clear=False)
                for i, j in T.Parallel(block_R, block_H):
                    t[i, j] = k[i, j] * k[i, j]
                T.reduce_sum(t, sk, dim=1, clear=False)
                for i, j in T.Parallel(block_R, block_H):
                    t[i, j] = x[i, j] * g[i, j] * k[i, j]
                T.reduce_sum(t, sd, dim=1, clear=False)
            for i in T.Parallel(block_R):
                rx = T.rsqrt(sx[i] / H + eps)
                rk = T.rsqrt(sk[i] / H + eps)
                d = sd[i] * rx * rk * scalar
                sg = T.if_then_else(d > 0, 1.0, T.if_then_else(d < 0, -1.0, 0.0))
                gate[i] = T.sigmoid(T.sqrt(T.max(T.abs(d), clamp_value)) * sg)
                if r0 + i < R:
                    Dot[(r0 + i) // hc, (r0 + i) % hc] = sd[i]
                    Gate[(r0 + i) // hc, (r0 + i) % hc] = gate[i]
                    RstdX[(r0 + i) // hc, (r0 + i) % hc] = rx
                    RstdK[(r0 + i) // hc, (r0 + i) % hc] = rk
            for hb in T.serial(nh):
                for i, j in T.Parallel(block_R, block_H):
                    ok = (r0 + i < R) & (hb * block_H + j < H)
                    r, c = T.min(r0 + i, R - 1), T.min(hb * block_H + j, H - 1)
                    x[i, j] = T.if_then_else(ok, T.cast(X[r // hc, r % hc, c], "float32"), 0.0)
                    g[i, j] = T.if_then_else(ok, T.cast(V[r // hc, c], "float32"), 0.0)
                for i, j in T.Parallel(block_R, block_H):
                    x[i, j] = x[i, j] + gate[i] * g[i, j]
                for i, j in T.Parallel(block_R, block_H):
                    if (r0 + i < R) & (hb * block_H + j < H):
                        Out[(r0 + i) // hc, (r0 + i) % hc, hb * block_H + j] = x[i, j]

    return main


# ------------------------------------------------------------------------------------------ references
def ref_fused_weight(Wh, We, **_):
    """fp32 ``wh · we`` (one rounding)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return (np.asarray(Wh, np.float32) * np.asarray(We, np.float32)).astype(np.float32)


def ref_gate_fused(X, Kx, V, Wf, clamp_value=1e-6, eps=1e-20, **_):
    """float64 meaning of ``engram_gate_fused``: (Out bf16, Dot, Gate, RstdX, RstdK)."""
    x, k, wf = X.astype(np.float64), Kx.astype(np.float64), np.asarray(Wf, np.float64)
    H = x.shape[-1]
    rx = 1 / np.sqrt((x * x).mean(-1) + eps)
    rk = 1 / np.sqrt((k * k).mean(-1) + eps)
    dot = (x * wf * k).sum(-1)
    z = dot * rx * rk * H ** -0.5
    g = 1 / (1 + np.exp(-(np.sqrt(np.maximum(np.abs(z), clamp_value)) * np.sign(z))))
    out = _dt.convert((x + g[..., None] * V.astype(np.float64)[:, None, :]).astype(np.float32), BF16)
    return out, dot, g, rx, rk


def compare_gate(outs, refs, p=None, inputs=None):
    """Out within one bf16 ulp (+1e-5); Gate, RstdX, RstdK within ``rtol 1e-5``; Dot within fp32 summation error
    (``1e-5`` of the largest |Dot| of the batch plus ``rtol 1e-5``)."""
    names = ("Out", "Dot", "Gate", "RstdX", "RstdK")
    for name, o, r in zip(names, outs, refs, strict=True):
        o, r = np.asarray(o, np.float64), np.asarray(r, np.float64)
        if name == "Out":
            rtol, atol = 2.0 ** -7, 1e-5
        elif name == "Dot":
            rtol, atol = 1e-5, 1e-5 * max(float(np.abs(r).max()), 1.0)
        else:
            rtol, atol = 1e-5, 0.0
        bad = ~np.isclose(o, r, rtol=rtol, atol=atol)
        if o.shape != r.shape or bad.any():
            raise AssertionError(f"{name}: {int(bad.sum())} of {r.size} values outside rtol {rtol:g} atol {atol:g}")


def gate_fused_inputs(rng, N, hc, H, **_):
    x, k, v, wh, we = gate_inputs(rng, N, hc, H)
    return x, k, v, ref_fused_weight(wh, we)


def weight_inputs(rng, hc, H, **_):
    return gate_inputs(rng, 1, hc, H)[3:]


register(KernelSpec(
    name="engram_fused_weight", family="engram",
    description="Engram fused RMSNorm weight: fp32 wh·we of two bf16 (hc, H) weights (TileKernels' fused_weight)",
    build=lambda hc, H, block_H, threads, **_: engram_fused_weight(hc, H, block_H, threads),
    make_inputs=weight_inputs, reference=ref_fused_weight,
    flops=lambda hc, H, **_: hc * H, bytes=lambda hc, H, **_: 8 * hc * H,
    shapes=({"label": "DeepSeek-V3 hidden 7168, hc 4", "H": 7168},),
    test_shapes=({"label": "ragged hidden 200, hc 4", "H": 200, "block_H": 64},
                 {"label": "hc 2, hidden 1000", "hc": 2, "H": 1000, "block_H": 256}),
    tunables={"block_H": [256, 512, 1024, 2048], "threads": [64, 128, 256]},
    defaults={"hc": 4, "block_H": 1024, "threads": 128}, tolerance={"exact": True}))

register(KernelSpec(
    name="engram_gate_fused", family="engram",
    description="Engram gate forward on the fused fp32 weight, saving dot / gate / rstd_x / rstd_k for the backward "
                "(TileKernels' engram_gate_fwd with save_for_backward)",
    build=lambda N, hc, H, block_R, block_H, threads, clamp_value=1e-6, eps=1e-20, **_: engram_gate_fused(
        N, hc, H, clamp_value, eps, block_R, block_H, threads),
    make_inputs=gate_fused_inputs, reference=ref_gate_fused, compare=compare_gate,
    flops=lambda N, hc, H, **_: 10 * N * hc * H,
    bytes=lambda N, hc, H, **_: 2 * N * H * (3 * hc + 1) + 4 * hc * H + 16 * N * hc,
    shapes=({"label": "DeepSeek-V3 hidden 7168, hc 4, 4096 tok", "N": 4096, "H": 7168},),
    test_shapes=({"label": "ragged: 13 tok, hidden 200", "N": 13, "H": 200, "block_H": 128},
                 {"label": "hc 2, 5 tok, hidden 64", "N": 5, "hc": 2, "H": 64, "block_R": 4, "block_H": 64}),
    tunables={"block_R": [4, 8, 16], "block_H": [128, 256, 512], "threads": [64, 128, 256]},
    defaults={"hc": 4, "block_R": 8, "block_H": 256, "threads": 128}, tolerance={"rtol": 2.0 ** -7, "atol": 1e-5}))
