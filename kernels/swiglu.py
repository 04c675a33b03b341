"""SwiGLU fused with the per-token FP8 cast (the MoE/FFN activation feeding an FP8 down projection).

Kernel (registry name ``swiglu_fp8``)::

    x (T, 2H) → gate = x[:, :H], up = x[:, H:]
    [optional clamp]  gate = min(gate, limit);  up = clamp(up, -limit, limit)
    h = silu(gate) · up = gate · sigmoid(gate) · up          (fp32, never rounded to bf16)
    Q, S = per-token e4m3 cast of h (groups of 128 along H)   (see kernels.fp8_cast for the exact rules)

The clamp (``clamp_limit``, default off) is the "SwiGLU limit" of recent MoE checkpoints: the gate is
clamped from above only (``silu`` is bounded below), the linear ``up`` branch on both sides.

The fusion keeps ``h`` in registers: x is read once, Q and S written once — versus an activation kernel
writing bf16 ``h`` and a cast kernel reading it back.

Edges: H need not be a multiple of the group size. The last group's gate columns ``≥ H`` would read
the *up* half (they are inside the (T, 2H) tensor, so the zero fill does not apply); the kernel masks
them to 0 explicitly, and ``silu(0) · 0 = 0`` does not raise the group's absmax. Rows past T read 0.

Numerics: ``h`` is fp32 math (sigmoid via ``exp``), so it can differ from the float64 reference in
its last bits; a quantised value can then land one e4m3 step away. Tests therefore compare ``Q`` to the
reference within one e4m3 unit (``rtol=0.125``, ``atol=2^-9``, the subnormal step) and ``S`` to
``rtol=1e-5``; everything downstream of ``h`` (amax floor, scale divisions, saturating RNE cast) is the
exact recipe of ``kernels.fp8_cast``. NaN/Inf policy: inputs must be finite (as for the casts).
"""

import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.fp8_cast import AMAX_FLOOR, FP8, FP8_MAX, scales_from_amax, to_e4m3
from kernels.registry import KernelSpec, register
from tilesim import dtypes as _dt
from tilesim.testing.compare import compare_arrays


@T.macro
def group_scale(amax, use_ue8m0):
    """(scale, quant multiplier) of one group from its fp32 absolute maximum — the recipe of
    ``kernels.fp8_cast.group_scale`` (amax floor; ``amax / 448`` and ``448 / amax``, or the UE8M0 power of
    two from the bits). Defined here rather than imported: a ``T.macro`` belongs to the language module
    it was made with, and this module is also loaded against real TileLang (benchmarks/), where a macro
    imported from a tilesim-loaded module would be foreign."""
    a = T.max(amax, AMAX_FLOOR)
    if use_ue8m0:
        bits = T.reinterpret("int32", a / FP8_MAX)  # 2^ceil(log2(a / 448)): exponent, +1 if mantissa != 0
        e = ((bits >> 23) & 0xFF) + T.if_then_else((bits & 0x7FFFFF) != 0, 1, 0)
        s = T.reinterpret("float32", e << 23)
        inv = 1.0 / s
    else:
        s = a / FP8_MAX
        inv = FP8_MAX / a
    return s, inv


@tilelang.jit(out_idx=[1, 2])
def swiglu_fp8(M, H, block_M=32, group_size=128, clamp_limit=None, in_dtype="bfloat16", use_ue8m0=False,
               threads=128):
    """``M`` tokens × ``2H`` → e4m3 ``Q`` (M, H) and fp32 scales ``S`` (M, ceil(H / group_size))."""
    G = T.ceildiv(H, group_size)

    @T.prim_func
    def main(X: T.Tensor((M, 2 * H), in_dtype), Q: T.Tensor((M, H), FP8), S: T.Tensor((M, G), "float32")):
        with T.Kernel(G, T.ceildiv(M, block_M), threads=threads) as (bx, by):
            h = T.alloc_fragment((block_M, group_size), "float32")
            q = T.alloc_fragment((block_M, group_size), FP8)
            amax = T.alloc_fragment((block_M,), "float32")
            inv = T.alloc_fragment((block_M,), "float32")
            for i, j in T.Parallel(block_M, group_size):
                col = bx * group_size + j
                gate = T.if_then_else(col < H, X[by * block_M + i, col], 0)
                up = T.if_then_else(col < H, X[by * block_M + i, H + col], 0)
                g = T.cast(gate, "float32")
                u = T.cast(up, "float32")
                if clamp_limit is not None:
                    g = T.min(g, clamp_limit)
                    u = T.clamp(u, -clamp_limit, clamp_limit)
                h[i, j] = g * T.sigmoid(g) * u
            T.reduce_absmax(h, amax, dim=1)
            for i in T.Parallel(block_M):
                s, m = group_scale(amax[i], use_ue8m0)
                inv[i] = m
                S[by * block_M + i, bx] = s
            for i, j in T.Parallel(block_M, group_size):
                q[i, j] = T.cast(h[i, j] * inv[i], FP8)
            T.copy(q, Q[by * block_M, bx * group_size])

    return main


# ------------------------------------------------------------------------------------------ reference
def ref_swiglu(X, clamp_limit=None, **_):
    """float64 ``silu(gate) · up`` with the optional clamp."""
    x = np.asarray(X).astype(np.float64)
    H = x.shape[1] // 2
    g, u = x[:, :H], x[:, H:]
    if clamp_limit is not None:
        g = np.minimum(g, clamp_limit)
        u = np.clip(u, -clamp_limit, clamp_limit)
    with np.errstate(over="ignore"):
        return g / (1.0 + np.exp(-g)) * u


def ref_swiglu_fp8(X, group_size=128, clamp_limit=None, use_ue8m0=False, **_):
    """Reference (Q, S): float64 SwiGLU, then the per-token cast recipe on it."""
    h = ref_swiglu(X, clamp_limit)
    Tn, H = h.shape
    G = -(-H // group_size)
    hp = np.zeros((Tn, G * group_size))
    hp[:, :H] = h
    hp = hp.reshape(Tn, G, group_size)
    s, inv = scales_from_amax(np.abs(hp).max(axis=-1).astype(np.float32), use_ue8m0)
    q = to_e4m3(hp * inv[..., None]).reshape(Tn, G * group_size)[:, :H]
    return q, s


def compare_swiglu_fp8(out, ref, *_args, **_kw):
    """Registry ``compare``: Q within one e4m3 step, S to 1e-5 relative (see the module docstring)."""
    problems = [compare_arrays(out[0], ref[0], rtol=0.125, atol=2.0 ** -9, name="Q"),
                compare_arrays(out[1], ref[1], rtol=1e-5, atol=0.0, name="S")]
    problems = [p for p in problems if p]
    if problems:
        raise AssertionError("; ".join(problems))


# ------------------------------------------------------------------------------------------ registry
def _inputs(rng, M, H, in_dtype="bfloat16", **_):
    x = rng.standard_normal((M, 2 * H)) * 2.0
    x[:, rng.choice(H, size=max(1, H // 64), replace=False)] *= 20.0  # outlier gate channels
    return (x.astype(_dt.np_dtype(in_dtype)),)


def _build(M, H, block_M, group_size, threads, clamp_limit=None, in_dtype="bfloat16", use_ue8m0=False, **_):
    return swiglu_fp8(M, H, block_M=block_M, group_size=group_size, clamp_limit=clamp_limit, in_dtype=in_dtype,
                      use_ue8m0=use_ue8m0, threads=threads)


def _bytes(M, H, group_size=128, in_dtype="bfloat16", **_):
    return int(M * 2 * H * _dt.itemsize(_dt.canon(in_dtype)) + M * H + 4 * M * (-(-H // group_size)))


register(KernelSpec(
    name="swiglu_fp8", family="swiglu",
    description="SwiGLU silu(x[:, :H]) * x[:, H:] (optional clamp) fused with the per-token (1x128) e4m3 cast",
    build=_build, make_inputs=_inputs, reference=ref_swiglu_fp8,
    flops=lambda M, H, **_: 8 * M * H, bytes=_bytes,
    shapes=(
        {"label": "DeepSeek-V3 routed expert (H=2048), 16384 tok-expert rows", "M": 16384, "H": 2048},
        {"label": "DeepSeek-V3 dense FFN (H=18432), 4096 tok", "M": 4096, "H": 18432},
        {"label": "Llama-3-70B FFN (H=28672), 8192 tok, clamp 7, UE8M0", "M": 8192, "H": 28672,
         "clamp_limit": 7.0, "use_ue8m0": True},
    ),
    test_shapes=(
        {"label": "edges bf16", "M": 45, "H": 200},
        {"label": "edges fp16 clamp ue8m0", "M": 20, "H": 130, "in_dtype": "float16", "clamp_limit": 7.0,
         "use_ue8m0": True},
        {"label": "edges fp32 H < group", "M": 9, "H": 70, "in_dtype": "float32", "block_M": 4},
    ),
    tunables={"block_M": [1, 4, 8, 16, 32, 64], "threads": [64, 128, 256]},
    defaults={"block_M": 32, "group_size": 128, "threads": 128, "in_dtype": "bfloat16", "clamp_limit": None,
              "use_ue8m0": False},
    tolerance={"rtol": 0.125, "atol": 2.0 ** -9},
    compare=compare_swiglu_fp8,
))
