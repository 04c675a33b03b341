"""mHC multilayer recompute: TileKernels' ``mhc_multilayer_recompute`` (``tile_kernels/mhc/multilayer_recompute_kernel.py``)
— the residual streams of ``L`` consecutive sublayers rebuilt from the first one in one pass (activation
recomputation for the backward), each layer's ``mhc_pre_apply_mix`` and ``mhc_post`` fused, the running residual
kept on chip (in shared memory, as the bf16 values it is stored as).

Kernel (registry name ``mhc_multilayer_recompute``, family ``mhc``); ``N`` tokens (TileKernels' ``(bs, seq)``
flattened), ``m`` streams, hidden ``H``, ``L`` layers of which the first ``Lp`` (``L − 1`` or ``L``) have a post step.
TileKernels passes per-layer tensor lists through device pointer tables; here each list is one stacked tensor
(layer axis first — the same values, one allocation):

* inputs ``Res0`` (N, m, H) bf16, ``PreMix`` (L, N, m) fp32, ``LayerOut`` (Lp, N, H) bf16, ``PostMix`` (Lp, N, m)
  fp32, ``CombMix`` (Lp, N, m, m) fp32;
* outputs ``LayerIn`` (L, N, H) bf16 and ``Resid`` (Lp, N, m, H) bf16.

With ``res = Res0``, for ``l = 0 … L−1``::

    LayerIn[l] = bf16(Σ_r PreMix[l, :, r] · res[:, r])                         (fp32, r ascending)
    if l < Lp:  Resid[l][:, n] = bf16(PostMix[l, :, n] · LayerOut[l]
                                      + Σ_r CombMix[l, :, r, n] · res[:, r])   (fp32, r ascending)
                res = Resid[l]

— exactly ``mhc_pre_apply_mix`` then ``mhc_post`` of ``kernels/mhc.py`` per layer (same fp32 operation order, so
the results are bit-identical to chaining those kernels, and to TileKernels' test, which chains its own two kernels).
One block per (``block_N`` tokens × ``block_H`` columns) tile walks all layers; shapes the tiles do not divide are
edge-filled and guard-stored. Errors: ``ValueError`` unless ``L ≥ 1`` and ``Lp ∈ {L−1, L}`` with ``Lp ≥ 1``
(``Lp = 0`` is one ``mhc_pre_apply_mix``). Inputs must be finite.
"""

import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.mhc import _isz
from kernels.registry import KernelSpec, register
from tilesim import dtypes as _dt


@tilelang.jit(out_idx=[5, 6])
def mhc_multilayer_recompute(N, m, H, L, Lp, block_N=4, block_H=256, dtype="bfloat16", threads=128):
    if L < 1 or Lp not in (L - 1, L) or Lp < 1:
        raise ValueError(f"mhc_multilayer_recompute needs L >= 1 layers and Lp in (L-1, L) post steps, Lp >= 1 "
                         f"(got L={L}, Lp={Lp}; Lp = 0 is one mhc_pre_apply_mix)")

    @T.prim_func
    def main(Res0: T.Tensor((N, m, H), dtype), PreMix: T.Tensor((L, N, m), "float32"),
             LayerOut: T.Tensor((Lp, N, H), dtype), PostMix: T.Tensor((Lp, N, m), "float32"),
             CombMix: T.Tensor((Lp, N, m, m), "float32"), LayerIn: T.Tensor((L, N, H), dtype),
             Resid: T.Tensor((Lp, N, m, H), dtype)):
        with T.Kernel(T.ceildiv(H, block_H), T.ceildiv(N, block_N), threads=threads) as (bx, by):
            rs = T.alloc_shared((block_N, m, block_H), dtype)  # the running residual (bf16 values)
            xs = T.alloc_shared((block_N, block_H), dtype)
            pw = T.alloc_shared((block_N, m), "float32")
            ps = T.alloc_shared((block_N, m), "float32")
            cs = T.alloc_shared((block_N, m, m), "float32")
            li = T.alloc_fragment((block_N, block_H), "float32")
            nr = T.alloc_fragment((block_N, m, block_H), "float32")
            T.copy(Res0[by * block_N, 0, bx * block_H], rs)
            for lay in T.serial(L):
                # pre_apply_mix: the layer's input
                T.copy(PreMix[lay, by * block_N, 0], pw)
                T.clear(li)
                for r in T.serial(m):
                    for i, j in T.Parallel(block_N, block_H):
                        li[i, j] = li[i, j] + T.cast(rs[i, r, j], "float32") * pw[i, r]
                T.copy(li, LayerIn[lay, by * block_N, bx * block_H])
                if lay < Lp:
                    # post: the next residual, rounded once to bf16, stored and kept on chip
                    T.copy(LayerOut[lay, by * block_N, bx * block_H], xs)
                    T.copy(PostMix[lay, by * block_N, 0], ps)
                    T.copy(CombMix[lay, by * block_N, 0, 0], cs)
                    for i, n, j in T.Parallel(block_N, m, block_H):
                        nr[i, n, j] = T.cast(xs[i, j], "float32") * ps[i, n]
                    for r in T.serial(m):
                        for i, n, j in T.Parallel(block_N, m, block_H):
                            nr[i, n, j] = nr[i, n, j] + cs[i, r, n] * T.cast(rs[i, r, j], "float32")
                    T.copy(nr, Resid[lay, by * block_N, 0, bx * block_H])
                    T.copy(nr, rs)

    return main


# ------------------------------------------------------------------------------------------ reference
def ref_multilayer_recompute(Res0, PreMix, LayerOut, PostMix, CombMix, **_):
    """NumPy fp32 in the kernel's operation order (products and sums rounded to fp32 one at a time, r ascending;
    one bf16 rounding per stored value): (LayerIn, Resid)."""
    dt = Res0.dtype
    L, Lp, m = PreMix.shape[0], LayerOut.shape[0], Res0.shape[1]
    res = Res0.astype(np.float32)
    lin, resid = [], []
    for lay in range(L):
        acc = np.zeros_like(res[:, 0])
        for r in range(m):
            acc = acc + res[:, r] * PreMix[lay, :, r:r + 1]
        lin.append(acc.astype(dt))
        if lay < Lp:
            nr = LayerOut[lay].astype(np.float32)[:, None, :] * PostMix[lay, :, :, None]
            for r in range(m):
                nr = nr + CombMix[lay, :, r, :, None] * res[:, r:r + 1, :]
            resid.append(nr.astype(dt))
            res = resid[-1].astype(np.float32)
    return np.stack(lin), np.stack(resid)


def recompute_inputs(rng, N, m, H, L, Lp, dtype="bfloat16", **_):
    """TileKernels' test distribution: everything N(0, 1) (bf16 residual and layer outputs, fp32 mixes)."""
    def bf(*shape):
        return _dt.convert(rng.standard_normal(shape).astype(np.float32), _dt.canon(dtype))

    def f(*shape):
        return rng.standard_normal(shape).astype(np.float32)
    return bf(N, m, H), f(L, N, m), bf(Lp, N, H), f(Lp, N, m), f(Lp, N, m, m)


register(KernelSpec(
    name="mhc_multilayer_recompute", family="mhc",
    description="mHC multilayer recompute: L layers of pre_apply_mix + post fused, the residual kept on chip",
    build=lambda N, m, H, L, Lp, block_N, block_H, threads, dtype="bfloat16", **_: mhc_multilayer_recompute(
        N, m, H, L, Lp, block_N, block_H, dtype, threads),
    make_inputs=recompute_inputs, reference=ref_multilayer_recompute,
    flops=lambda N, m, H, L, Lp, **_: 2 * N * m * H * L + 2 * N * m * (m + 1) * H * Lp,
    bytes=lambda N, m, H, L, Lp, dtype="bfloat16", **_: int(
        N * m * H * _isz(dtype) + L * N * (4 * m + H * _isz(dtype))
        + Lp * N * (H * _isz(dtype) + 4 * m * (m + 1) + m * H * _isz(dtype))),
    shapes=({"label": "DeepSeek-V3 mHC x4, hidden 7168, 10 layers / 9 posts, 8192 tok", "N": 8192, "H": 7168, "L": 10,
             "Lp": 9},
            {"label": "TileKernels bench: x4, hidden 4096, 10 layers / 10 posts, 8192 tok", "N": 8192, "H": 4096,
             "L": 10, "Lp": 10}),
    test_shapes=({"label": "ragged: 37 tok, hidden 200, 3 layers / 2 posts", "N": 37, "H": 200, "L": 3, "Lp": 2},
                 {"label": "m 2, 5 tok, hidden 70, 2 layers / 2 posts", "N": 5, "H": 70, "m": 2, "L": 2, "Lp": 2}),
    tunables={"block_N": [2, 4, 8], "block_H": [128, 256, 512]},
    defaults={"m": 4, "threads": 128, "block_N": 4, "block_H": 256, "dtype": "bfloat16"},
    tolerance={"exact": True}))
