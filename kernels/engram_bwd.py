"""Engram gate backward and the weight-gradient reduce (TileKernels' ``engram_gate_bwd`` + ``grad_w_reduce``: the
gradient of ``engram_gate_ref`` in ``tile_kernels/torch/engram.py``, which is what TileKernels' tests compare with).

Forward (``kernels/engram.py``'s ``engram_gate``), per row ``(t, c)`` of ``X``, ``Kx`` (N, hc, H) bf16 with ``V``
(N, H), ``Wh``, ``We`` (hc, H) bf16: ``rx = rsqrt(Σx²/H + eps)``, ``rk`` likewise, ``sd = Σ x·wh·k·we``,
``z = sd·rx·rk·H^-1/2``, ``g = sigmoid(sign(z)·sqrt(max(|z|, clamp)))``, ``Out = x + g·v``.

Kernels (registry names):

* ``engram_gate_bwd`` — ``GO`` (N, hc, H) bf16 and the forward's inputs → ``GX``, ``GK`` (N, hc, H) bf16, ``GV``
  (N, H) bf16 and ``GWP`` (P, hc, H) fp32 with ``P = ceil(N / block_T)``, the per-token-block partial sums of
  ``Σ_t dr·x·k`` (TileKernels' ``grad_w_partial``, one row per persistent block there). Per row: ``sgv = Σ go·v``,
  ``dr = sgv·g(1−g)·½·sqrt(H^-1/2·rx·rk / |sd|)`` (0 where ``|z| < clamp``: the clamp's gradient),
  ``GX = go + dr·(k·wf − x·sd·rx²/H)``, ``GK = dr·(x·wf − k·sd·rk²/H)`` with ``wf = wh·we`` (fp32, exact for bf16
  weights), each rounded once; ``GV = Σ_c go_c·g_c`` (heads in order, one rounding). The forward statistics are
  recomputed (TileKernels takes them saved from its forward; same values up to fp32 sum order).
  Two launches: (1) one block per ``block_R`` rows of the flattened (N·hc, H) view walks H twice in ``block_H``
  chunks (statistics, then ``GX``/``GK``) and stores ``g`` and ``dr`` per row in an fp32 workspace; (2) one block
  per ``block_T`` tokens × ``block_H`` columns loops over the heads, accumulating ``GV`` and reducing ``dr·x·k`` over
  its tokens (``T.reduce_sum`` over a power-of-two ``block_T``) into ``GWP``. No atomics: deterministic.
* ``engram_grad_w_reduce`` — ``GWP`` (P, hc, H) fp32, ``Wh``, ``We`` bf16, ``GWH0``, ``GWE0`` (hc, H) fp32 →
  ``GWH = GWH0 + gw·we``, ``GWE = GWE0 + gw·wh`` with ``gw = Σ_p GWP[p]`` summed in ``p`` order (TileKernels
  accumulates into ``main_grad``; pass zeros for a fresh gradient). One block per head × ``block_H`` columns.

Errors (``ValueError`` at build time): ``block_T`` or ``block_H`` not a power of two. Inputs finite. Rows whose
``sd`` is 0 get ``dr = 0`` (``|z| = 0 < clamp``), never a division by zero.
"""

import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.registry import KernelSpec, register
from tilesim import dtypes as _dt

BF16 = "bfloat16"


def _pow2(name, v):
    if v < 1 or v & (v - 1):
        raise ValueError(f"{name} must be a power of two, got {v}")


@tilelang.jit(out_idx=[6, 7, 8, 9])
def engram_gate_bwd(N, hc, H, clamp_value=1e-6, eps=1e-20, block_R=8, block_H=256, block_T=16, threads=128):
    _pow2("block_T", block_T)
    _pow2("block_H", block_H)
    R = N * hc
    nh = -(-H // block_H)
    P = -(-N // block_T)
    scalar = float(H) ** -0.5

    @T.prim_func
    def main(GO: T.Tensor((N, hc, H), BF16), X: T.Tensor((N, hc, H), BF16), Kx: T.Tensor((N, hc, H), BF16),
             V: T.Tensor((N, H), BF16), Wh: T.Tensor((hc, H), BF16), We: T.Tensor((hc, H), BF16),
             GX: T.Tensor((N, hc, H), BF16), GK: T.Tensor((N, hc, H), BF16), GV: T.Tensor((N, H), BF16),
             GWP: T.Tensor((P, hc, H), "float32")):
        Gate = T.alloc_global((R,), "float32")
        Dr = T.alloc_global((R,), "float32")
        with T.Kernel(T.ceildiv(R, block_R), threads=threads) as bx:
            r0 = bx * block_R
            x = T.alloc_fragment((block_R, block_H), "float32")
            k = T.alloc_fragment((block_R, block_H), "float32")
            t = T.alloc_fragment((block_R, block_H), "float32")
            g = T.alloc_shared((block_R, block_H), "float32")  # gathered weights / v / go per row
            w = T.alloc_shared((block_R, block_H), "float32")
            sx = T.alloc_fragment((block_R,), "float32")
            sk = T.alloc_fragment((block_R,), "float32")
            sd = T.alloc_fragment((block_R,), "float32")
            sv = T.alloc_fragment((block_R,), "float32")
            dr = T.alloc_fragment((block_R,), "float32")
            cx = T.alloc_fragment((block_R,), "float32")
            ck = T.alloc_fragment((block_R,), "float32")
            T.clear(sx)
            T.clear(sk)
            T.clear(sd)
            T.clear(sv)
            for hb in T.serial(nh):
                for i, j in T.Parallel(block_R, block_H):
                    ok = (r0 + i < R) & (hb * block_H + j < H)
                    r, c = T.min(r0 + i, R - 1), T.min(hb * block_H + j, H - 1)
                    x[i, j] = T.if_then_else(ok, T.cast(X[r // hc, r % hc, c], "float32"), 0.0)
                    k[i, j] = T.if_then_else(ok, T.cast(Kx[r // hc, r % hc, c], "float32"), 0.0)
                    g[i, j] = T.if_then_else(ok, T.cast(Wh[r % hc, c], "float32"), 0.0)
                    w[i, j] = T.if_then_else(ok, T.cast(We[r % hc, c], "float32"), 0.0)
                for i, j in T.Parallel(block_R, block_H):
                    t[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(t, sx, dim=1, clear=False)
                for i, j in T.Parallel(block_R, block_H):
                    t[i, j] = k[i, j] * k[i, j]
                T.reduce_sum(t, sk, dim=1, clear=False)
                for i, j in T.Parallel(block_R, block_H):
                    t[i, j] = (x[i, j] * g[i, j]) * (k[i, j] * w[i, j])
                T.reduce_sum(t, sd, dim=1, clear=False)
                for i, j in T.Parallel(block_R, block_H):
                    ok = (r0 + i < R) & (hb * block_H + j < H)
                    r, c = T.min(r0 + i, R - 1), T.min(hb * block_H + j, H - 1)
                    g[i, j] = T.if_then_else(ok, T.cast(GO[r // hc, r % hc, c], "float32"), 0.0)
                    w[i, j] = T.if_then_else(ok, T.cast(V[r // hc, c], "float32"), 0.0)
                for i, j in T.Parallel(block_R, block_H):
                    t[i, j] = g[i, j] * w[i, j]
                T.reduce_sum(t, sv, dim=1, clear=False)
            for i in T.Parallel(block_R):
                rx = T.rsqrt(sx[i] / H + eps)
                rk = T.rsqrt(sk[i] / H + eps)
                z = sd[i] * rx * rk * scalar
                sg = T.if_then_else(z > 0, 1.0, T.if_then_else(z < 0, -1.0, 0.0))
                gt = T.sigmoid(T.sqrt(T.max(T.abs(z), clamp_value)) * sg)
                dr[i] = T.if_then_else(T.abs(z) < clamp_value, 0.0,
                                       sv[i] * gt * (1.0 - gt) * 0.5 * T.sqrt(scalar * rx * rk / T.abs(sd[i])))
                cx[i] = sd[i] * rx * rx / H
                ck[i] = sd[i] * rk * rk / H
                if r0 + i < R:
                    Gate[r0 + i] = gt
                    Dr[r0 + i] = dr[i]
            for hb in T.serial(nh):
                for i, j in T.Parallel(block_R, block_H):
                    ok = (r0 + i < R) & (hb * block_H + j < H)
                    r, c = T.min(r0 + i, R - 1), T.min(hb * block_H + j, H - 1)
                    x[i, j] = T.if_then_else(ok, T.cast(X[r // hc, r % hc, c], "float32"), 0.0)
                    k[i, j] = T.if_then_else(ok, T.cast(Kx[r // hc, r % hc, c], "float32"), 0.0)
                    g[i, j] = T.if_then_else(ok, T.cast(GO[r // hc, r % hc, c], "float32"), 0.0)
                    w[i, j] = T.if_then_else(ok, T.cast(Wh[r % hc, c], "float32") * T.cast(We[r % hc, c], "float32"), 0.0)
                for i, j in T.Parallel(block_R, block_H):
                    t[i, j] = g[i, j] + dr[i] * (k[i, j] * w[i, j] - x[i, j] * cx[i])
                    k[i, j] = dr[i] * (x[i, j] * w[i, j] - k[i, j] * ck[i])
                for i, j in T.Parallel(block_R, block_H):
                    if (r0 + i < R) & (hb * block_H + j < H):
                        GX[(r0 + i) // hc, (r0 + i) % hc, hb * block_H + j] = t[i, j]
                        GK[(r0 + i) // hc, (r0 + i) % hc, hb * block_H + j] = k[i, j]
        with T.Kernel(nh, P, threads=threads) as (hx, p):
            t0 = p * block_T
            gv = T.alloc_fragment((block_T, block_H), "float32")
            prod = T.alloc_fragment((block_T, block_H), "float32")
            gw = T.alloc_fragment((block_H,), "float32")
            go = T.alloc_shared((block_T, block_H), "float32")
            s = T.alloc_shared((block_T, 2), "float32")  # gate, dr of each token for the current head
            T.clear(gv)
            for c in T.serial(hc):
                for i, q in T.Parallel(block_T, 2):
                    rr = T.min(t0 + i, N - 1) * hc + c
                    s[i, q] = T.if_then_else(t0 + i < N, T.if_then_else(q == 0, Gate[rr], Dr[rr]), 0.0)
                for i, j in T.Parallel(block_T, block_H):
                    ok = (t0 + i < N) & (hx * block_H + j < H)
                    tt, cc = T.min(t0 + i, N - 1), T.min(hx * block_H + j, H - 1)
                    go[i, j] = T.if_then_else(ok, T.cast(GO[tt, c, cc], "float32"), 0.0)
                    prod[i, j] = T.if_then_else(ok, T.cast(X[tt, c, cc], "float32") * T.cast(Kx[tt, c, cc], "float32"), 0.0)
                for i, j in T.Parallel(block_T, block_H):
                    gv[i, j] = gv[i, j] + go[i, j] * s[i, 0]
                    prod[i, j] = s[i, 1] * prod[i, j]
                T.reduce_sum(prod, gw, dim=0)
                for j in T.Parallel(block_H):
                    if hx * block_H + j < H:
                        GWP[p, c, hx * block_H + j] = gw[j]
            for i, j in T.Parallel(block_T, block_H):
                if (t0 + i < N) & (hx * block_H + j < H):
                    GV[t0 + i, hx * block_H + j] = gv[i, j]

    return main


@tilelang.jit(out_idx=[5, 6])
def engram_grad_w_reduce(P, hc, H, block_H=256, threads=128):
    _pow2("block_H", block_H)

    @T.prim_func
    def main(GWP: T.Tensor((P, hc, H), "float32"), Wh: T.Tensor((hc, H), BF16), We: T.Tensor((hc, H), BF16),
             GWH0: T.Tensor((hc, H), "float32"), GWE0: T.Tensor((hc, H), "float32"),
             GWH: T.Tensor((hc, H), "float32"), GWE: T.Tensor((hc, H), "float32")):
        with T.Kernel(T.ceildiv(H, block_H), hc, threads=threads) as (hx, c):
            acc = T.alloc_fragment((block_H,), "float32")
            T.clear(acc)
            for p in T.serial(P):
                for j in T.Parallel(block_H):
                    acc[j] = acc[j] + T.if_then_else(hx * block_H + j < H, GWP[p, c, T.min(hx * block_H + j, H - 1)], 0.0)
            for j in T.Parallel(block_H):
                if hx * block_H + j < H:
                    GWH[c, hx * block_H + j] = GWH0[c, hx * block_H + j] + acc[j] * T.cast(We[c, hx * block_H + j], "float32")
                    GWE[c, hx * block_H + j] = GWE0[c, hx * block_H + j] + acc[j] * T.cast(Wh[c, hx * block_H + j], "float32")

    return main


# ------------------------------------------------------------------------------------------ references
def _f(a):
    return np.asarray(a).astype(np.float32).astype(np.float64)


def ref_gate_bwd(GO, X, Kx, V, Wh, We, clamp_value=1e-6, eps=1e-20, block_T=16, **_):
    """float64 gradient of the Engram gate (written out by hand); bf16 outputs rounded once, GWP per token block."""
    go, x, k, v, wh, we = (_f(a) for a in (GO, X, Kx, V, Wh, We))
    N, hc, H = x.shape
    rx = 1.0 / np.sqrt((x * x).mean(-1) + eps)
    rk = 1.0 / np.sqrt((k * k).mean(-1) + eps)
    sd = (x * wh * k * we).sum(-1)
    s = H ** -0.5
    z = sd * rx * rk * s
    g = 1.0 / (1.0 + np.exp(-np.sign(z) * np.sqrt(np.maximum(np.abs(z), clamp_value))))
    sgv = (go * v[:, None, :]).sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        dr = np.where(np.abs(z) < clamp_value, 0.0, sgv * g * (1 - g) * 0.5 * np.sqrt(s * rx * rk / np.abs(sd)))
    wf = wh * we
    gx = go + dr[..., None] * (k * wf - x * (sd * rx * rx / H)[..., None])
    gk = dr[..., None] * (x * wf - k * (sd * rk * rk / H)[..., None])
    gv = (go * g[..., None]).sum(1)
    P = -(-N // block_T)
    term = np.pad(dr[..., None] * x * k, ((0, P * block_T - N), (0, 0), (0, 0)))
    gwp = term.reshape(P, block_T, hc, H).sum(1)
    bf = lambda a: _dt.convert(a.astype(np.float32), BF16)  # noqa: E731
    return bf(gx), bf(gk), bf(gv), gwp.astype(np.float32)


def ref_grad_w_reduce(GWP, Wh, We, GWH0, GWE0, **_):
    """fp32 meaning: partials summed in order, then one multiply and one add each."""
    gw = np.zeros(GWP.shape[1:], np.float32)
    for p in range(GWP.shape[0]):
        gw = (gw + GWP[p]).astype(np.float32)
    wh, we = (np.asarray(a).astype(np.float32) for a in (Wh, We))
    return (GWH0 + gw * we).astype(np.float32), (GWE0 + gw * wh).astype(np.float32)


def gate_bwd_inputs(rng, N, hc, H, **_):
    """TileKernels' test data: every tensor ``N(0, 1)`` in bf16 (GO, X, K, V, Wh, We)."""
    bf = lambda *s: _dt.convert(rng.standard_normal(s).astype(np.float32), BF16)  # noqa: E731
    return bf(N, hc, H), bf(N, hc, H), bf(N, hc, H), bf(N, H), bf(hc, H), bf(hc, H)


def reduce_inputs(rng, P, hc, H, **_):
    bf = lambda *s: _dt.convert(rng.standard_normal(s).astype(np.float32), BF16)  # noqa: E731
    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    return f(P, hc, H), bf(hc, H), bf(hc, H), f(hc, H), f(hc, H)


def _gate_tol(outs, refs, p=None):
    """bf16 outputs within one ulp of the float64 gradient (plus 1e-3 of the largest value, at least 1e-6, for
    cancellation: with H = 1 the GK terms cancel exactly and fp32 leaves a residual); GWP
    within 1e-3 (``dr`` inherits the fp32 conditioning of ``sd = Σ x·wh·k·we``, which cancels)."""
    for name, o, r, rtol in zip(("GX", "GK", "GV", "GWP"), outs, refs, (2.0 ** -7,) * 3 + (1e-3,), strict=True):
        o, r = np.asarray(o, np.float64), np.asarray(r, np.float64)
        if not np.allclose(o, r, rtol=rtol, atol=1e-3 * max(1e-3, np.abs(r).max())):
            raise AssertionError(f"{name}: max error {np.abs(o - r).max():.3g}")


_SH = ({"label": "DeepSeek-V3 hidden 7168, hc 4, 4096 tok", "N": 4096, "H": 7168},
       {"label": "hidden 4096, hc 4, 16384 tok", "N": 16384, "H": 4096})

register(KernelSpec(
    name="engram_gate_bwd", family="engram",
    description="Engram gate backward: GX, GK (rows, two H walks with recomputed statistics), GV and per-token-block "
                "weight-gradient partials (TileKernels' engram_gate_bwd)",
    build=lambda N, hc, H, block_R, block_H, block_T, threads, **_: engram_gate_bwd(
        N, hc, H, 1e-6, 1e-20, block_R, block_H, block_T, threads),
    make_inputs=gate_bwd_inputs, reference=ref_gate_bwd, compare=_gate_tol,
    flops=lambda N, hc, H, **_: 24 * N * hc * H,
    bytes=lambda N, hc, H, block_T=16, **_: 2 * (6 * N * hc * H + 2 * N * H) + 4 * -(-N // block_T) * hc * H,
    shapes=_SH,
    test_shapes=({"label": "ragged: 37 tok, hc 4, hidden 200", "N": 37, "H": 200, "block_H": 128},
                 {"label": "5 tok, hc 2, hidden 70", "N": 5, "hc": 2, "H": 70, "block_H": 64, "block_T": 4}),
    tunables={"block_R": [4, 8, 16], "block_H": [128, 256, 512], "block_T": [8, 16, 32], "threads": [128, 256]},
    defaults={"hc": 4, "block_R": 8, "block_H": 256, "block_T": 16, "threads": 128}))

register(KernelSpec(
    name="engram_grad_w_reduce", family="engram",
    description="Engram weight-gradient reduce: partials summed in order, times the other weight, added to main_grad "
                "(TileKernels' grad_w_reduce)",
    build=lambda P, hc, H, block_H, threads, **_: engram_grad_w_reduce(P, hc, H, block_H, threads),
    make_inputs=reduce_inputs, reference=ref_grad_w_reduce,
    flops=lambda P, hc, H, **_: (P + 4) * hc * H,
    bytes=lambda P, hc, H, **_: 4 * P * hc * H + 20 * hc * H,
    shapes=({"label": "DeepSeek-V3 hidden 7168, hc 4, 256 token blocks", "P": 256, "H": 7168},),
    test_shapes=({"label": "ragged: 7 partials, hc 4, hidden 200", "P": 7, "H": 200, "block_H": 128},
                 {"label": "1 partial, hc 2, hidden 70", "P": 1, "hc": 2, "H": 70, "block_H": 64}),
    tunables={"block_H": [128, 256, 512], "threads": [64, 128, 256]},
    defaults={"hc": 4, "block_H": 256, "threads": 128},
    tolerance={"exact": True}))
