"""SwiGLU forward → per-channel (b × 1) e4m3 cast → transpose (TileKernels'
``swiglu_forward_and_per_channel_cast_and_transpose``; registry ``swiglu_per_channel_cast_transpose``).

``swiglu_per_channel_cast(M, H, block_rows=128, block_N=64, clamp_limit=None, transpose=True, in_dtype, use_ue8m0)``:
``X`` (M, 2H) → ``h = g / (1 + exp(−g)) · u`` in fp32 (``g = X[:, :H]``, ``u = X[:, H:]``; with ``clamp_limit = c``:
``g = min(g, c)``, ``u = clamp(u, −c, c)``, TileKernels' ``swiglu_clamp_value``; the division form of TileKernels'
kernel and reference, not ``g · sigmoid(g)``), **rounded to the input dtype** (bf16 in TileKernels: its kernel keeps
the activation tile in the input type, its test casts the reference ``.bfloat16()``), then the per-channel cast of
``kernels.quant_channel_fused`` (one scale per column and ``b = block_rows`` rows, 32 or 128 in TileKernels; any
positive value here; ``use_ue8m0`` is TileKernels' ``round_sf``). Outputs ``Q`` (H, M) e4m3 transposed, or (M, H)
with ``transpose=False`` (TileKernels' ``without_transpose``), and ``S`` (ceil(M/b), H) fp32. TileKernels' fused
kernel has no routed-weight option (``swiglu_forward``'s ``topk_weights`` belong to the per-token variant,
``kernels/swiglu_moe.py``).

Edges: any M, H (TileKernels: M a multiple of 128, 2H of 128); rows and columns past the edges are masked to 0
(``0 / 2 · 0 = 0``: no effect on a column maximum) and not written. A gate so negative that ``exp(−g)`` overflows
gives ``g / inf = −0`` (times ``u``), as in TileKernels. NaN/Inf policy: inputs must be finite (TileKernels' kernel
takes maxima with ``fmax``, its reference with NaN-propagating ``max``). ``M = 0`` or ``H = 0`` is refused by the
builder (``ValueError``). Numerics: ``exp`` is fp32 (the interpreter's ``np.exp``); a last-bit difference from
another ``exp`` could move a bf16 rounding, but the fidelity run against TileKernels' torch reference found none
(docs/kernels-1.md).
"""

import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.quant_channel_fused import FLOOR, QMAX, ref_channel_cast
from kernels.registry import KernelSpec, register
from tilesim import dtypes as _dt

FP8 = "float8_e4m3fn"


@T.macro
def channel_scale(amax, use_ue8m0):
    """(dequant scale, quant multiplier) of one column block: the recipe of
    ``kernels.quant_channel_fused.channel_scale``, defined here as ``kernels.swiglu.group_scale`` is (a macro
    belongs to the language module it was made with)."""
    a = T.max(amax, FLOOR)
    if use_ue8m0:
        bits = T.reinterpret("int32", a / QMAX)  # 2^ceil(log2(a / 448)): exponent, +1 if mantissa != 0
        e = ((bits >> 23) & 0xFF) + T.if_then_else((bits & 0x7FFFFF) != 0, 1, 0)
        s = T.reinterpret("float32", e << 23)
        inv = 1.0 / s
    else:
        s = a / QMAX
        inv = QMAX / a
    return s, inv


# ------------------------------------------------------------------------------------------ kernel
@tilelang.jit(out_idx=[1, 2])
def swiglu_per_channel_cast(M, H, block_rows=128, block_N=64, clamp_limit=None, transpose=True, in_dtype="bfloat16",
                            use_ue8m0=False, threads=128):
    """SwiGLU (rounded to ``in_dtype``) → per-channel e4m3, written transposed (H, M) or straight (M, H)."""
    if M < 1 or H < 1 or block_rows < 1:
        raise ValueError(f"SwiGLU per-channel cast needs M, H and block_rows >= 1 (got {M}, {H}, {block_rows}); "
                         "TileKernels returns empty tensors for zero tokens without launching")
    GM = T.ceildiv(M, block_rows)
    q_shape = (H, M) if transpose else (M, H)

    @T.prim_func
    def main(X: T.Tensor((M, 2 * H), in_dtype), Q: T.Tensor(q_shape, FP8), S: T.Tensor((GM, H), "float32")):
        with T.Kernel(T.ceildiv(H, block_N), GM, threads=threads) as (bx, by):
            hs = T.alloc_shared((block_rows, block_N + 1), "float32")  # +1 column: conflict-free column reads
            x = T.alloc_fragment((block_rows, block_N), "float32")
            amax = T.alloc_fragment((block_N,), "float32")
            sc = T.alloc_fragment((block_N,), "float32")
            inv = T.alloc_shared((block_N,), "float32")
            for i, j in T.Parallel(block_rows, block_N):
                row = by * block_rows + i
                col = bx * block_N + j
                ok = (row < M) & (col < H)
                g = T.cast(T.if_then_else(ok, X[row, col], T.cast(0, in_dtype)), "float32")
                u = T.cast(T.if_then_else(ok, X[row, H + col], T.cast(0, in_dtype)), "float32")
                if clamp_limit is not None:
                    g = T.min(g, clamp_limit)
                    u = T.max(T.min(u, clamp_limit), -clamp_limit)
                hv = T.cast(T.cast(g / (1.0 + T.exp(-g)) * u, in_dtype), "float32")
                hs[i, j] = hv
                x[i, j] = hv
            T.reduce_absmax(x, amax, dim=0)
            for j in T.Parallel(block_N):
                s, m = channel_scale(amax[j], use_ue8m0)
                sc[j] = s
                inv[j] = m
            T.copy(sc, S[by, bx * block_N])
            if transpose:
                qt = T.alloc_fragment((block_N, block_rows), FP8)
                for j, i in T.Parallel(block_N, block_rows):
                    qt[j, i] = T.cast(hs[i, j] * inv[j], FP8)
                T.copy(qt, Q[bx * block_N, by * block_rows])
            else:
                q = T.alloc_fragment((block_rows, block_N), FP8)
                for i, j in T.Parallel(block_rows, block_N):
                    q[i, j] = T.cast(hs[i, j] * inv[j], FP8)
                T.copy(q, Q[by * block_rows, bx * block_N])

    return main



# ------------------------------------------------------------------------------------------ references
def ref_swiglu_rounded(X, clamp_limit=None, in_dtype="bfloat16"):
    """fp32 ``g / (1 + exp(−g)) · u`` (optional clamp), rounded to ``in_dtype`` and widened back to fp32."""
    x = np.asarray(X).astype(np.float32)
    H = x.shape[1] // 2
    g, u = x[:, :H], x[:, H:]
    if clamp_limit is not None:
        g = np.minimum(g, np.float32(clamp_limit))
        u = np.clip(u, np.float32(-clamp_limit), np.float32(clamp_limit))
    with np.errstate(over="ignore", invalid="ignore"):
        h = (g / (np.float32(1) + np.exp(-g)) * u).astype(np.float32)
    return h.astype(_dt.np_dtype(in_dtype)).astype(np.float32)


def ref_swiglu_per_channel_cast(X, block_rows=128, clamp_limit=None, transpose=True, in_dtype="bfloat16",
                                use_ue8m0=False, **_):
    """NumPy reference of ``swiglu_per_channel_cast``."""
    q, s = ref_channel_cast(ref_swiglu_rounded(X, clamp_limit, in_dtype), block_rows, use_ue8m0)
    return (np.ascontiguousarray(q.T) if transpose else q), s



# ------------------------------------------------------------------------------------------ registry
def _swiglu_inputs(rng, M, H, in_dtype="bfloat16", **_):
    x = rng.standard_normal((M, 2 * H)) * 2.0
    x[:, rng.choice(H, size=max(1, H // 64), replace=False)] *= 20.0  # outlier gate channels
    if M > 2:
        x[1] = 0.0
    return (x.astype(_dt.np_dtype(in_dtype)),)


register(KernelSpec(
    name="swiglu_per_channel_cast_transpose", family="swiglu",
    description="SwiGLU (optional clamp), rounded to bf16, then per-channel (128x1 / 32x1) e4m3 cast, written "
                "transposed or not (TileKernels' swiglu_forward_and_per_channel_cast_and_transpose)",
    build=lambda M, H, block_rows, block_N, threads, clamp_limit=None, transpose=True, in_dtype="bfloat16",
    use_ue8m0=False, **_: swiglu_per_channel_cast(M, H, block_rows=block_rows, block_N=block_N,
                                                  clamp_limit=clamp_limit, transpose=transpose, in_dtype=in_dtype,
                                                  use_ue8m0=use_ue8m0, threads=threads),
    make_inputs=_swiglu_inputs, reference=ref_swiglu_per_channel_cast, flops=lambda M, H, **_: 10 * M * H,
    bytes=lambda M, H, block_rows=128, in_dtype="bfloat16", **_: int(
        2 * M * H * _dt.itemsize(_dt.canon(in_dtype)) + M * H + 4 * H * (-(-M // block_rows))),
    shapes=(
        {"label": "DeepSeek-V3 routed expert (H=2048), 16384 tok-expert rows, transposed", "M": 16384, "H": 2048},
        {"label": "DeepSeek-V3 dense FFN (H=18432), 4096 tok, clamp 10, UE8M0, 32x1", "M": 4096, "H": 18432,
         "clamp_limit": 10.0, "use_ue8m0": True, "block_rows": 32},
        {"label": "DeepSeek-V3 routed expert (H=2048), 8192 rows, not transposed", "M": 8192, "H": 2048,
         "transpose": False},
    ),
    test_shapes=(
        {"label": "edges bf16 transposed", "M": 150, "H": 70, "block_N": 32},
        {"label": "edges bf16 clamp 0.5 ue8m0 32x1 straight", "M": 45, "H": 100, "clamp_limit": 0.5,
         "use_ue8m0": True, "block_rows": 32, "transpose": False},
    ),
    tunables={"block_N": [16, 32, 64, 128], "threads": [64, 128, 256]},
    defaults={"block_rows": 128, "block_N": 64, "threads": 128, "in_dtype": "bfloat16", "use_ue8m0": False,
              "clamp_limit": None, "transpose": True},
    tolerance={"exact": True},
))
