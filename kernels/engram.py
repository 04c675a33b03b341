"""Engram kernels (forward), with TileKernels' semantics (``tile_kernels/torch/engram.py``: ``engram_hash_ref``,
``engram_gate_ref``).

Kernels (registry names):

* ``engram_hash`` — ``Ids`` (N, n) int32 n-gram token ids, ``Mul`` (L, n) int64 per-layer multipliers,
  ``Vocab`` (L, n−1, J) int32 table sizes, ``Off`` (L, (n−1)·J) int32 table offsets → ``Out`` (L, N, (n−1)·J)
  int32: for layer ``l`` and order ``g = 1 … n−1``, ``h_g = (Ids[:, 0]·Mul[l, 0]) xor … xor (Ids[:, g]·Mul[l, g])``
  in int64 (wrapping), and ``Out[l, :, (g−1)·J + j] = int32(h_g mod Vocab[l, g−1, j]) + Off[l, (g−1)·J + j]``
  (floor modulo, as torch's ``%``; the int32 conversion and the sum wrap). Bitwise.
* ``engram_gate`` — ``X``, ``Kx`` (N, hc, H) bf16, ``V`` (N, H) bf16, ``Wh``, ``We`` (hc, H) bf16 →
  ``Out`` (N, hc, H) bf16: per row ``(t, c)`` in fp32, ``rstd_x = rsqrt(mean(x²) + eps)``, the same for k,
  ``dot = Σ (x·wh)·(k·we) · rstd_x · rstd_k · H^-1/2``, ``g = sigmoid(sign(dot)·sqrt(max(|dot|, clamp)))``
  (``sign(0) = 0``: ``g = 1/2``), ``Out = x + g·v`` rounded once. One block per ``block_R`` rows of the
  flattened (N·hc, H) view walks H twice in ``block_H`` chunks (statistics, then the output); ``v`` and the
  weights are gathered per row (row ``r`` uses ``V[r // hc]`` and ``W[r % hc]``) through shared memory.

Numerics: the gate is fp32 (``rsqrt``, ``sqrt``, ``exp`` may differ from torch's by an ulp and the sums are
in a different order), so ``Out`` agrees with TileKernels' reference within one bf16 ulp; the hash is
exact. Edges: ragged N and H (edge-filled loads, guarded stores). Inputs must be finite.
"""

import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.registry import KernelSpec, register
from tilesim import dtypes as _dt


@tilelang.jit(out_idx=[4])
def engram_hash(N, n, L, J, block_N=64, threads=128):
    if n < 2:
        raise ValueError(f"engram_hash needs n-grams of at least 2 tokens (got max_ngram_size={n})")
    C = (n - 1) * J

    @T.prim_func
    def main(Ids: T.Tensor((N, n), "int32"), Mul: T.Tensor((L, n), "int64"), Vocab: T.Tensor((L, n - 1, J), "int32"),
             Off: T.Tensor((L, C), "int32"), Out: T.Tensor((L, N, C), "int32")):
        with T.Kernel(T.ceildiv(N, block_N), L, threads=threads) as (bx, ly):
            ids = T.alloc_shared((block_N, n), "int32")
            hs = T.alloc_shared((block_N, n - 1), "int64")
            o = T.alloc_fragment((block_N, C), "int32")
            T.copy(Ids[bx * block_N, 0], ids)
            for i in T.Parallel(block_N):
                h = T.alloc_var("int64", init=T.cast(ids[i, 0], "int64") * Mul[ly, 0])
                for q in T.serial(n - 1):  # the running xor, one hash per order
                    h = h ^ (T.cast(ids[i, q + 1], "int64") * Mul[ly, q + 1])
                    hs[i, q] = h
            for i, c in T.Parallel(block_N, C):
                g = c // J
                o[i, c] = T.cast(T.floormod(hs[i, g], T.cast(Vocab[ly, g, c % J], "int64")), "int32") + Off[ly, c]
            T.copy(o, Out[ly, bx * block_N, 0])

    return main


@tilelang.jit(out_idx=[5])
def engram_gate(N, hc, H, clamp_value=1e-6, eps=1e-20, block_R=8, block_H=256, threads=128):
    R = N * hc
    nh = -(-H // block_H)
    scalar = float(H) ** -0.5

    @T.prim_func
    def main(X: T.Tensor((N, hc, H), "bfloat16"), Kx: T.Tensor((N, hc, H), "bfloat16"), V: T.Tensor((N, H), "bfloat16"),
             Wh: T.Tensor((hc, H), "bfloat16"), We: T.Tensor((hc, H), "bfloat16"), Out: T.Tensor((N, hc, H), "bfloat16")):
        with T.Kernel(T.ceildiv(R, block_R), threads=threads) as bx:
            r0 = bx * block_R
            x = T.alloc_fragment((block_R, block_H), "float32")
            k = T.alloc_fragment((block_R, block_H), "float32")
            t = T.alloc_fragment((block_R, block_H), "float32")
            g = T.alloc_shared((block_R, block_H), "float32")  # weights (then v) gathered per row
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
                for i, j in T.Parallel(block_R, block_H):
                    t[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(t, sx, dim=1, clear=False)
                for i, j in T.Parallel(block_R, block_H):
                    t[i, j] = k[i, j] * k[i, j]
                T.reduce_sum(t, sk, dim=1, clear=False)
                for i, j in T.Parallel(block_R, block_H):
                    ok = (r0 + i < R) & (hb * block_H + j < H)
                    g[i, j] = T.if_then_else(ok, T.cast(Wh[(r0 + i) % hc, T.min(hb * block_H + j, H - 1)], "float32"), 0.0)
                for i, j in T.Parallel(block_R, block_H):
                    t[i, j] = x[i, j] * g[i, j]
                for i, j in T.Parallel(block_R, block_H):
                    ok = (r0 + i < R) & (hb * block_H + j < H)
                    g[i, j] = T.if_then_else(ok, T.cast(We[(r0 + i) % hc, T.min(hb * block_H + j, H - 1)], "float32"), 0.0)
                for i, j in T.Parallel(block_R, block_H):
                    t[i, j] = t[i, j] * (k[i, j] * g[i, j])
                T.reduce_sum(t, sd, dim=1, clear=False)
            for i in T.Parallel(block_R):
                d = sd[i] * T.rsqrt(sx[i] / H + eps) * T.rsqrt(sk[i] / H + eps) * scalar
                sg = T.if_then_else(d > 0, 1.0, T.if_then_else(d < 0, -1.0, 0.0))
                gate[i] = T.sigmoid(T.sqrt(T.max(T.abs(d), clamp_value)) * sg)
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
def ref_engram_hash(Ids, Mul, Vocab, Off, **_):
    ids = np.asarray(Ids).astype(np.int64)
    L, n = Mul.shape
    J = Vocab.shape[2]
    out = np.zeros((L, ids.shape[0], (n - 1) * J), np.int64)
    with np.errstate(over="ignore"):
        for li in range(L):
            h = ids[:, 0] * Mul[li, 0]
            for q in range(1, n):
                h = h ^ (ids[:, q] * Mul[li, q])
                out[li, :, (q - 1) * J: q * J] = np.mod(h[:, None], Vocab[li, q - 1].astype(np.int64)[None, :])
    return (out.astype(np.int32) + Off[:, None, :]).astype(np.int32)


def ref_engram_gate(X, Kx, V, Wh, We, clamp_value=1e-6, eps=1e-20, **_):
    x, k = X.astype(np.float64), Kx.astype(np.float64)
    H = x.shape[-1]
    rx = 1 / np.sqrt((x * x).mean(-1) + eps)
    rk = 1 / np.sqrt((k * k).mean(-1) + eps)
    d = ((x * Wh.astype(np.float64)) * (k * We.astype(np.float64))).sum(-1) * rx * rk * H ** -0.5
    g = 1 / (1 + np.exp(-(np.sqrt(np.maximum(np.abs(d), clamp_value)) * np.sign(d))))
    return _dt.convert((x + g[..., None] * V.astype(np.float64)[:, None, :]).astype(np.float32), "bfloat16")


# ------------------------------------------------------------------------------------------ registry
def hash_inputs(rng, N, n, L, J, **_):
    ids = rng.integers(0, 100000, (N, n), dtype=np.int64).astype(np.int32)
    mul = rng.integers(0, 100000, (L, n), dtype=np.int64)
    vocab = rng.integers(100000, 1000000, (L, n - 1, J), dtype=np.int64).astype(np.int32)
    off = np.concatenate([np.zeros((L, 1), np.int64), np.cumsum(vocab.reshape(L, -1), axis=1)[:, :-1]], axis=1)
    return ids, mul, vocab, off.astype(np.int32)


def gate_inputs(rng, N, hc, H, **_):
    def bf(*s):
        return _dt.convert(rng.standard_normal(s).astype(np.float32), "bfloat16")
    return bf(N, hc, H), bf(N, hc, H), bf(N, H), bf(hc, H), bf(hc, H)


register(KernelSpec(
    name="engram_hash", family="engram",
    description="Engram n-gram hash: running int64 xor of id*multiplier per order, floor mod table size + offset",
    build=lambda N, n, L, J, block_N, threads, **_: engram_hash(N, n, L, J, block_N, threads),
    make_inputs=hash_inputs, reference=ref_engram_hash,
    flops=lambda N, n, L, J, **_: L * N * (2 * n + 2 * (n - 1) * J),
    bytes=lambda N, n, L, J, **_: 4 * N * n + 4 * L * N * (n - 1) * J,
    shapes=({"label": "3-grams, 2 layers, 8 tables, 16384 tok", "N": 16384},),
    test_shapes=({"label": "ragged 37 tok", "N": 37}, {"label": "4-grams, 3 layers, 5 tables", "N": 20, "n": 4, "L": 3,
                                                       "J": 5, "block_N": 16}),
    tunables={"block_N": [32, 64, 128], "threads": [64, 128, 256]},
    defaults={"n": 3, "L": 2, "J": 8, "block_N": 64, "threads": 128}, tolerance={"exact": True}))

register(KernelSpec(
    name="engram_gate", family="engram",
    description="Engram gate: x + sigmoid(signed_sqrt(<RMSNorm(x)·wh, RMSNorm(k)·we> / sqrt(H))) · v, bf16 out",
    build=lambda N, hc, H, block_R, block_H, threads, clamp_value=1e-6, eps=1e-20, **_: engram_gate(
        N, hc, H, clamp_value, eps, block_R, block_H, threads),
    make_inputs=gate_inputs, reference=ref_engram_gate,
    flops=lambda N, hc, H, **_: 10 * N * hc * H, bytes=lambda N, hc, H, **_: 2 * N * H * (3 * hc + 1),
    shapes=({"label": "hc 4, hidden 7168, 4096 tok", "N": 4096, "H": 7168},),
    test_shapes=({"label": "ragged: 13 tok, hidden 200", "N": 13, "H": 200, "block_H": 128},
                 {"label": "hc 2, 5 tok, hidden 64", "N": 5, "hc": 2, "H": 64, "block_R": 4, "block_H": 64}),
    tunables={"block_R": [4, 8, 16], "block_H": [128, 256, 512], "threads": [64, 128, 256]},
    defaults={"hc": 4, "block_R": 8, "block_H": 256, "threads": 128}, tolerance={"rtol": 2.0 ** -7, "atol": 1e-5}))
