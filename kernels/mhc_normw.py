"""The gradient of mHC's RMSNorm weight merged into the mix projection (TileKernels' ``_MHCFnNormwMerge``).

Forward (TileKernels' ``mhc_pre_norm_fn_ref`` with ``mhc_norm_weight``): ``FnW = Fn · w``, elementwise, ``Fn``
(M, K) fp32 (M = M3 = m(2+m) mix rows, K = m·H) and ``w`` (K,) fp32 — the RMSNorm weight folded into the
projection. Backward for ``G = dFnW`` (M, K) fp32:

* ``FnG[i, k] = G[i, k] · w[k]`` (one fp32 rounding);
* ``WG[k] = Σ_i G[i, k] · Fn[i, k]`` — each product rounded to fp32, summed over the rows in row order (0, 1, …,
  M−1) from 0.0 in fp32.

With ``accumulate=True`` (TileKernels' ``main_grad`` path: it adds into the caller's gradient buffers) the kernel
also takes ``FnG0`` (M, K) and ``WG0`` (K,) and returns ``FnG0 + G·w`` and ``WG0 + Σ_i G·Fn`` (the column sum
completed first, then one add, as TileKernels' kernel does).

Kernel ``mhc_fn_normw_bwd``: one block per ``block_K`` columns (``block_K`` a power of two); the weight slice
and the column accumulator live in ``(block_K,)`` fragments indexed only by their own ``T.Parallel`` variable;
the block walks the M rows serially, so the sum order is fixed and the result deterministic (no atomics).
Columns past K are neither read nor written. Inputs finite (a NaN propagates to its column of ``WG`` and its
element of ``FnG``). ``ValueError`` for a ``block_K`` that is not a power of two.
"""

import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.registry import KernelSpec, register


@tilelang.jit(out_idx=[-2, -1])
def mhc_fn_normw_bwd(M, K, accumulate=False, block_K=256, threads=128):
    if block_K < 1 or block_K & (block_K - 1):
        raise ValueError(f"mhc_fn_normw_bwd: block_K must be a power of two, got {block_K}")
    f32 = "float32"

    @T.macro
    def body(Fn, W, G, FnG0, WG0, FnG, WG):
        with T.Kernel(T.ceildiv(K, block_K), threads=threads) as bx:
            w = T.alloc_fragment((block_K,), f32)
            acc = T.alloc_fragment((block_K,), f32)
            T.copy(W[bx * block_K], w)
            T.clear(acc)
            for i in T.serial(M):
                for k in T.Parallel(block_K):
                    if bx * block_K + k < K:
                        if accumulate:
                            FnG[i, bx * block_K + k] = FnG0[i, bx * block_K + k] + G[i, bx * block_K + k] * w[k]
                        else:
                            FnG[i, bx * block_K + k] = G[i, bx * block_K + k] * w[k]
                        acc[k] = acc[k] + G[i, bx * block_K + k] * Fn[i, bx * block_K + k]
            for k in T.Parallel(block_K):
                if bx * block_K + k < K:
                    if accumulate:
                        WG[bx * block_K + k] = WG0[bx * block_K + k] + acc[k]
                    else:
                        WG[bx * block_K + k] = acc[k]

    if accumulate:
        @T.prim_func
        def main(Fn: T.Tensor((M, K), f32), W: T.Tensor((K,), f32), G: T.Tensor((M, K), f32),
                 FnG0: T.Tensor((M, K), f32), WG0: T.Tensor((K,), f32),
                 FnG: T.Tensor((M, K), f32), WG: T.Tensor((K,), f32)):
            body(Fn, W, G, FnG0, WG0, FnG, WG)
    else:
        @T.prim_func
        def main(Fn: T.Tensor((M, K), f32), W: T.Tensor((K,), f32), G: T.Tensor((M, K), f32),
                 FnG: T.Tensor((M, K), f32), WG: T.Tensor((K,), f32)):
            body(Fn, W, G, None, None, FnG, WG)

    return main


def ref_fn_normw_bwd(Fn, W, G, FnG0=None, WG0=None, **_):
    """Exact fp32 meaning: products rounded to fp32, the row sum taken row by row in fp32."""
    fn, w, g = (np.asarray(a, np.float32) for a in (Fn, W, G))
    fng = g * w[None, :]
    wg = np.zeros(fn.shape[1], np.float32)
    for i in range(fn.shape[0]):
        wg = wg + g[i] * fn[i]
    if FnG0 is not None:
        fng, wg = np.asarray(FnG0, np.float32) + fng, np.asarray(WG0, np.float32) + wg
    return fng.astype(np.float32), wg.astype(np.float32)


def ref_fn_normw_bwd64(Fn, W, G, FnG0=None, WG0=None):
    """The float64 gradient of ``Σ G·(Fn·w)`` (for tolerance checks)."""
    fn, w, g = (np.asarray(a, np.float64) for a in (Fn, W, G))
    fng, wg = g * w[None, :], (g * fn).sum(axis=0)
    if FnG0 is not None:
        fng, wg = fng + FnG0, wg + WG0
    return fng, wg


def normw_inputs(rng, M, K, accumulate=False):
    """TileKernels' test data: ``Fn ~ 1e-4·N(0,1)``, ``w ~ 1 + 0.1·N(0,1)``, ``G ~ N(0,1)`` (fp32)."""
    out = [(rng.standard_normal((M, K)) * 1e-4).astype(np.float32),
           (1.0 + 0.1 * rng.standard_normal(K)).astype(np.float32),
           rng.standard_normal((M, K)).astype(np.float32)]
    if accumulate:
        out += [rng.standard_normal((M, K)).astype(np.float32) * 1e-3, rng.standard_normal(K).astype(np.float32) * 1e-3]
    return tuple(out)


register(KernelSpec(
    name="mhc_fn_normw_bwd", family="mhc_bwd",
    description="mHC RMSNorm weight merged into fn, backward: FnG = G*w, WG = sum over rows of G*Fn (row order, "
                "deterministic; optional accumulation into main_grad buffers)",
    build=lambda m, H, block_K, threads, accumulate=False, **_: mhc_fn_normw_bwd(
        m * (2 + m), m * H, accumulate, block_K, threads),
    make_inputs=lambda rng, m, H, accumulate=False, **_: normw_inputs(rng, m * (2 + m), m * H, accumulate),
    reference=lambda *a, **_: ref_fn_normw_bwd(*a),
    flops=lambda m, H, **_: 3 * m * (2 + m) * m * H,
    bytes=lambda m, H, accumulate=False, **_: 4 * (m * (2 + m) * m * H * (4 if accumulate else 3) + m * H * (3 if accumulate else 2)),
    shapes=({"label": "DeepSeek-V4-style mHC x4, hidden 7168 (fn 24 x 28672)", "H": 7168},
            {"label": "mHC x4, hidden 2560, accumulate into main_grad", "H": 2560, "accumulate": True}),
    test_shapes=({"label": "ragged: x4, hidden 200 (K 800)", "H": 200},
                 {"label": "m 2, hidden 70, accumulate", "m": 2, "H": 70, "accumulate": True, "block_K": 64}),
    tunables={"block_K": [64, 128, 256, 512], "threads": [64, 128, 256]},
    defaults={"m": 4, "block_K": 256, "threads": 128},
    tolerance={"exact": True}))
