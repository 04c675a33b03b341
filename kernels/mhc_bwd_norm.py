"""mHC backward of the RMS-normalised mix projection (TileKernels' ``MHCPreNormFn``: the gradient of
``mhc_pre_norm_fn_ref`` without the norm weight — with one, ``Fn·w`` is a separate elementwise step whose
gradient is ``FnG·w`` and ``Σ FnG·Fn`` per column).

Forward (``kernels/mhc.py``'s ``mhc_pre_norm_fn``), per token with ``K = m·H``: ``mul = Res @ Fnᵀ`` (M3),
``S = Σ Res²``, ``r = rsqrt(S/K + eps)``, ``Mixes = mul·r``. Backward, for ``G = dMixes`` (N, M3) fp32:
``dmul = G·r``, ``dS = −½·r³/K · Σ_o G·mul``, ``ResG = dmul @ Fn + 2·Res·dS`` (rounded once to Res's dtype),
``FnG = dmulᵀ @ Res`` (M3, K) fp32.

Kernel ``mhc_pre_norm_fn_bwd`` (two launches): launch 1, one block per ``block_N`` tokens, walks K twice in
``block_K`` chunks — first recomputing ``mul`` (a ``T.gemm`` into a (block_N, 32) fp32 accumulator, M3 ≤ 32,
``Fn`` rows past M3 read as zeros) and ``S``, then writing ``ResG`` chunk by chunk (``T.gemm`` of ``dmul``
with the Fn chunk) — and stores ``dmul`` in an (N, 32) fp32 workspace; launch 2, one block per ``block_K``
columns, accumulates ``dmulᵀ @ Res`` over token chunks (``T.gemm(transpose_A=True)``) and stores the M3
valid rows. Deterministic (no atomics). fp32 accumulation (TileKernels rounds ``Fn`` and ``dmul`` to TF32
for its tensor-core GEMMs; the interpreter's fp32 GEMM is more exact). ``ValueError`` for ``M3 > 32``.
Inputs finite.

``fuse_grad_acc=True`` (TileKernels' default, its ``mhc_pre_norm_fn(..., fuse_grad_acc=True)``) is the fused
gradient accumulation into the buffer ``mhc_post``'s backward fills (``grad_from_mhc_post``): the kernel also reads
``ResG0`` (N, K) in Res's dtype and returns ``ResG0 + dmul @ Fn + Res·2dS`` — the buffer, widened to fp32, is the
initial value of the GEMM accumulator (as in TileKernels' ``_mhc_pre_norm_fn_bwd_mul``), one rounding at the end.
TileKernels updates the buffer in place; here the sum is a new output with the same values.
``fuse_grad_acc=False``: ``(G, Res, Fn) → (ResG, FnG)`` (TileKernels' path with a zero buffer).
"""

import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.registry import KernelSpec, register
from tilesim import dtypes as _dt


def mhc_pre_norm_fn_bwd(N, K, M3, eps=1e-6, block_N=32, block_K=128, dtype="bfloat16", threads=128,
                        fuse_grad_acc=True):
    """``fuse_grad_acc=True`` (TileKernels' default): ``(G, Res, Fn, ResG0) -> (ResG0 + ResG, FnG)``; ``False``:
    ``(G, Res, Fn) -> (ResG, FnG)``."""
    return _pre_norm_fn_bwd(N, K, M3, eps, block_N, block_K, dtype, threads, bool(fuse_grad_acc))


@tilelang.jit(out_idx=[-2, -1])
def _pre_norm_fn_bwd(N, K, M3, eps, block_N, block_K, dtype, threads, fuse):
    if M3 > 32:
        raise ValueError(f"mhc_pre_norm_fn_bwd keeps the {M3} mixes in one 32-wide accumulator (M3 <= 32)")
    nk = (K + block_K - 1) // block_K

    @T.macro
    def body(G, Res, Fn, ResG0, ResG, FnG):
        DMul = T.alloc_global((N, 32), "float32")
        with T.Kernel(T.ceildiv(N, block_N), threads=threads) as bx:
            rs = T.alloc_shared((block_N, block_K), "float32")
            fs = T.alloc_shared((32, block_K), "float32")
            dm = T.alloc_shared((block_N, 32), "float32")
            sq = T.alloc_fragment((block_N, block_K), "float32")
            acc = T.alloc_fragment((block_N, 32), "float32")
            t = T.alloc_fragment((block_N, 32), "float32")
            dx = T.alloc_fragment((block_N, block_K), "float32")
            ss = T.alloc_fragment((block_N,), "float32")
            dr = T.alloc_fragment((block_N,), "float32")
            gs = T.alloc_shared((block_N, 32), "float32")
            T.clear(acc)
            T.clear(ss)
            for kb in T.serial(nk):
                T.copy(Res[bx * block_N, kb * block_K], rs)
                T.copy(Fn[0, kb * block_K], fs)  # rows past M3 read as zeros
                T.gemm(rs, fs, acc, transpose_B=True)
                for i, k in T.Parallel(block_N, block_K):
                    sq[i, k] = rs[i, k] * rs[i, k]
                T.reduce_sum(sq, ss, dim=1, clear=False)
            T.copy(G[bx * block_N, 0], gs)  # columns past M3 read as zeros
            for i, o in T.Parallel(block_N, 32):
                t[i, o] = gs[i, o] * acc[i, o]
            T.reduce_sum(t, dr, dim=1)
            for i in T.Parallel(block_N):
                ss[i] = T.rsqrt(ss[i] / K + eps)  # r
                dr[i] = -(ss[i] * ss[i] * ss[i]) / K * dr[i]  # 2·dS
            for i, o in T.Parallel(block_N, 32):
                dm[i, o] = gs[i, o] * ss[i]
            T.copy(dm, DMul[bx * block_N, 0])
            for kb in T.serial(nk):
                T.copy(Res[bx * block_N, kb * block_K], rs)
                T.copy(Fn[0, kb * block_K], fs)
                if fuse:  # TileKernels' order: the buffer is the GEMM's initial accumulator
                    T.copy(ResG0[bx * block_N, kb * block_K], dx)
                else:
                    T.clear(dx)
                T.gemm(dm, fs, dx)
                for i, k in T.Parallel(block_N, block_K):
                    dx[i, k] = dx[i, k] + rs[i, k] * dr[i]
                T.copy(dx, ResG[bx * block_N, kb * block_K])
        with T.Kernel(nk, threads=threads) as kx:
            rs = T.alloc_shared((block_N, block_K), "float32")
            dm = T.alloc_shared((block_N, 32), "float32")
            acc = T.alloc_fragment((32, block_K), "float32")
            T.clear(acc)
            for nb in T.serial(T.ceildiv(N, block_N)):
                T.copy(DMul[nb * block_N, 0], dm)  # tokens past N read as zeros
                T.copy(Res[nb * block_N, kx * block_K], rs)
                T.gemm(dm, rs, acc, transpose_A=True)
            for o, k in T.Parallel(32, block_K):
                if (o < M3) & (kx * block_K + k < K):
                    FnG[o, kx * block_K + k] = acc[o, k]

    if fuse:
        @T.prim_func
        def main(G: T.Tensor((N, M3), "float32"), Res: T.Tensor((N, K), dtype), Fn: T.Tensor((M3, K), "float32"),
                 ResG0: T.Tensor((N, K), dtype), ResG: T.Tensor((N, K), dtype), FnG: T.Tensor((M3, K), "float32")):
            body(G, Res, Fn, ResG0, ResG, FnG)
    else:
        @T.prim_func
        def main(G: T.Tensor((N, M3), "float32"), Res: T.Tensor((N, K), dtype), Fn: T.Tensor((M3, K), "float32"),
                 ResG: T.Tensor((N, K), dtype), FnG: T.Tensor((M3, K), "float32")):
            body(G, Res, Fn, None, ResG, FnG)

    return main


def ref_pre_norm_fn_bwd(G, Res, Fn, ResG0=None, eps=1e-6, **_):
    x = np.asarray(Res).astype(np.float64)
    fn, g = Fn.astype(np.float64), G.astype(np.float64)
    K = x.shape[1]
    mul = x @ fn.T
    r = 1.0 / np.sqrt((x * x).sum(axis=1, keepdims=True) / K + eps)
    dmul = g * r
    ds = -0.5 * r ** 3 / K * (g * mul).sum(axis=1, keepdims=True)
    resg = dmul @ fn + 2.0 * x * ds + (0.0 if ResG0 is None else np.asarray(ResG0).astype(np.float64))
    return _dt.convert(resg.astype(np.float32), _dt.canon(str(Res.dtype))), (dmul.T @ x).astype(np.float32)


def _inputs(rng, N, m, H, dtype="bfloat16", fuse_grad_acc=True, **_):
    """``G``, ``Res``, ``Fn`` and, with ``fuse_grad_acc``, the gradient buffer ``ResG0`` (N, m·H) in Res's dtype."""
    M3 = m * (2 + m)
    ins = (rng.standard_normal((N, M3)).astype(np.float32),
           _dt.convert(rng.standard_normal((N, m * H)).astype(np.float32), _dt.canon(dtype)),
           (rng.standard_normal((M3, m * H)) * 0.05).astype(np.float32))
    if fuse_grad_acc:
        ins += (_dt.convert(rng.standard_normal((N, m * H)).astype(np.float32), _dt.canon(dtype)),)
    return ins


register(KernelSpec(
    name="mhc_pre_norm_fn_bwd", family="mhc_bwd",
    description="mHC pre-norm-fn backward: residual gradient (recomputed mixes, two K walks) and fn gradient "
                "(dmul^T @ residual, one block per K chunk)",
    build=lambda N, m, H, block_N, block_K, threads, eps=1e-6, dtype="bfloat16", fuse_grad_acc=True, **_:
    mhc_pre_norm_fn_bwd(N, m * H, m * (2 + m), eps, block_N, block_K, dtype, threads, fuse_grad_acc),
    make_inputs=_inputs, reference=ref_pre_norm_fn_bwd,
    flops=lambda N, m, H, **_: 6 * N * m * H * (m * (2 + m) + 1),
    bytes=lambda N, m, H, dtype="bfloat16", **_: int(3 * N * m * H * _dt.itemsize(_dt.canon(dtype)) + 8 * m * (2 + m) * m * H),
    shapes=({"label": "DeepSeek-V4-style mHC x4, hidden 7168, 4096 tok, into grad_from_mhc_post", "N": 4096,
             "H": 7168},
            {"label": "DeepSeek-V4-style mHC x4, hidden 7168, 4096 tok, gradient written", "N": 4096, "H": 7168,
             "fuse_grad_acc": False}),
    test_shapes=({"label": "ragged: 37 tok, hidden 200", "N": 37, "H": 200},
                 {"label": "m 2, 5 tok, hidden 70, fp32, gradient written", "N": 5, "H": 70, "m": 2,
                  "dtype": "float32", "fuse_grad_acc": False}),
    tunables={"block_N": [16, 32, 64], "block_K": [64, 128, 256]},
    defaults={"m": 4, "block_N": 32, "block_K": 128, "threads": 128, "dtype": "bfloat16", "fuse_grad_acc": True},
    tolerance={"rtol": 2.0 ** -7, "atol": 1e-4}))
