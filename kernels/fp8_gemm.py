"""FP8 GEMM with fine-grained scales (DeepSeek-V3 / DeepGEMM recipe).

Kernel (registry name ``fp8_gemm``)::

    C[m, n] = bf16( sum_kb  (A[m, kb] @ B[n, kb].T) · SA[m, kb] · SB[n // 128, kb] )

* ``A`` (M, K) e4m3 activations with per-token scales ``SA`` (M, ceil(K/128)) fp32 — one per row and
  128-wide K block (the 1 × 128 groups of :mod:`kernels.fp8_cast`);
* ``B`` (N, K) e4m3 weights (``nn.Linear`` layout) with per-block scales ``SB`` (ceil(N/128),
  ceil(K/128)) fp32 — one per 128 × 128 block;
* ``C`` (M, N) bf16.

Promotion per K block: each 128-wide K block's partial product is computed by ``T.gemm`` into its own
fp32 fragment (cleared each step), then scaled by ``SA[m, kb] · SB[n // 128, kb]`` and added into a
separate fp32 accumulator on CUDA cores. This is DeepGEMM's answer to the limited accumulation
precision of Hopper FP8 tensor cores: no partial sum ever spans more than one scale block, so no scale
is applied to a sum of differently scaled products. ``block_K`` is therefore fixed to the scale block
(128); ``block_N`` may be any size — each column looks up its own B scale block (``(n0 + j) // 128``).

Edges: M, N, K need not be multiples of the tiles. Out-of-range loads (A/B tiles and scales) give 0,
so a partial last K block adds zeros, and out-of-range outputs are not written.

NaN/Inf policy: IEEE propagation through the products and scales (e4m3fn has NaN but no Inf; scales
are finite by construction of the casts). The reference computes in float64 from the dequantised
operands and rounds once to bf16 only in the comparison.
"""

import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.fp8_cast import activations_like, ref_per_block_cast, ref_per_token_cast
from kernels.registry import KernelSpec, register

FP8 = "float8_e4m3fn"
SCALE_BLOCK = 128


@tilelang.jit(out_idx=[-1])
def fp8_gemm(M, N, K, block_M=128, block_N=128, num_stages=4, threads=128, out_dtype="bfloat16",
             accum_dtype="float32"):
    """Blockwise-scaled e4m3 GEMM (A row-major (M, K), B as (N, K)) with per-K-block fp32 promotion."""
    block_K = SCALE_BLOCK
    nkb = T.ceildiv(K, block_K)

    @T.prim_func
    def main(A: T.Tensor((M, K), FP8), B: T.Tensor((N, K), FP8), SA: T.Tensor((M, nkb), "float32"),
             SB: T.Tensor((T.ceildiv(N, SCALE_BLOCK), nkb), "float32"), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), FP8)
            B_shared = T.alloc_shared((block_N, block_K), FP8)
            C_shared = T.alloc_shared((block_M, block_N), out_dtype)
            partial = T.alloc_fragment((block_M, block_N), accum_dtype)
            acc = T.alloc_fragment((block_M, block_N), accum_dtype)
            sa = T.alloc_fragment((block_M,), "float32")
            sb = T.alloc_fragment((block_N,), "float32")
            T.clear(acc)
            for k in T.Pipelined(nkb, num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K], B_shared)
                for i in T.Parallel(block_M):
                    sa[i] = SA[by * block_M + i, k]
                for j in T.Parallel(block_N):
                    sb[j] = SB[(bx * block_N + j) // SCALE_BLOCK, k]
                T.gemm(A_shared, B_shared, partial, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(block_M, block_N):
                    acc[i, j] = acc[i, j] + partial[i, j] * (sa[i] * sb[j])
            T.copy(acc, C_shared)
            T.copy(C_shared, C[by * block_M, bx * block_N])

    return main


@tilelang.jit(out_idx=[-1])
def fp8_matmul(M, N, K, block_M=128, block_N=128, block_K=64, num_stages=3, threads=256, in_dtype=FP8,
               out_dtype="bfloat16"):
    """Plain fp8 GEMM ``C (M, N) = A (M, K) @ B (N, K).T`` (fp32 accumulation, no scales; TileLang's
    ``transpose_B=True`` fp8 form, the one the CUDA backend runs on tensor cores): the benchmark counterpart
    of ``torch._scaled_mm`` with unit scales."""

    @T.prim_func
    def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((N, K), in_dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_N, block_K), in_dtype)
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K], B_shared)
                T.gemm(A_shared, B_shared, acc, transpose_B=True)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


# ------------------------------------------------------------------------------------------ reference
def dequant_token(Q, S, group=SCALE_BLOCK):
    s = np.repeat(np.asarray(S, np.float64), group, axis=1)[:, : Q.shape[1]]
    return np.asarray(Q).astype(np.float64) * s


def dequant_block(Q, S, block=SCALE_BLOCK):
    s = np.repeat(np.repeat(np.asarray(S, np.float64), block, axis=0), block, axis=1)
    return np.asarray(Q).astype(np.float64) * s[: Q.shape[0], : Q.shape[1]]


def ref_fp8_gemm(A, B, SA, SB, **_):
    """float64 ``dequant(A) @ dequant(B).T`` (equal to the per-block promoted sum in exact arithmetic)."""
    return dequant_token(A, SA) @ dequant_block(B, SB).T


def compare_fp8_gemm(outs, refs, p=None):
    """C element-wise within ``2^-7 |ref| + 2^-6 rms(ref)``: the comparison the registry's checks use, both
    against the float64 reference and the GPU against the interpreter.

    Why this bound: the interpreter computes each 128-wide K block's product in fp32, the GPU's fp8 tensor cores
    (``wgmma``) keep about 14 bits while they accumulate (DeepSeek-V3 report, section 3.3.2): each of a block's
    four k32 steps adds an error of at most ``2^-13`` of ``S = sum |a b|`` over the block, and for data like
    these ``S`` is ~``sqrt(128)`` times ``|C|``'s rms, so the accumulation differs by at most ~``4 · 2^-13 · 7 ≈
    3.4e-3`` of the rms per block — under the ``2^-6`` term with margin; the bf16 output adds one rounding
    (``2^-8 |ref|``, half of ``2^-7``). A lost or repeated k32 step changes an element by about a quarter of a
    block's contribution (~``rms / 2``), permuted rows or columns by ~``rms``: both far outside. The fp32
    ``1e-4`` norm rule of the CUDA checks cannot hold for bf16 outputs of a narrower accumulation."""
    (o,), (r,) = outs, refs
    o, r = np.asarray(o, np.float64), np.asarray(r, np.float64)
    if o.shape != r.shape:
        raise AssertionError(f"C: shape {o.shape} != {r.shape}")
    rms = float(np.sqrt(np.mean(r * r))) if r.size else 0.0
    bound = 2.0 ** -7 * np.abs(r) + 2.0 ** -6 * rms
    bad = ~(np.abs(o - r) <= bound)
    if bad.any():
        i = np.unravel_index(int(np.argmax(np.where(bad, np.abs(o - r) / np.maximum(bound, 1e-300), 0))), r.shape)
        raise AssertionError(f"C: {int(bad.sum())} of {r.size} values outside 2^-7 |ref| + 2^-6 rms(ref) "
                             f"(worst at {tuple(int(x) for x in i)}: {o[i]:.6g} vs {r[i]:.6g})")


# ------------------------------------------------------------------------------------------ registry
def _inputs(rng, M, N, K, **_):
    qa, sa = ref_per_token_cast(activations_like(rng, (M, K), "float32"), SCALE_BLOCK)
    w = (rng.standard_normal((N, K)) / np.sqrt(K)).astype(np.float32)
    qb, sb = ref_per_block_cast(w, SCALE_BLOCK)
    return qa, qb, sa, sb


def _build(M, N, K, block_M, block_N, num_stages, threads, out_dtype="bfloat16", **_):
    return fp8_gemm(M, N, K, block_M=block_M, block_N=block_N, num_stages=num_stages, threads=threads,
                    out_dtype=out_dtype)


def _bytes(M, N, K, **_):
    nkb = -(-K // SCALE_BLOCK)
    return int(M * K + N * K + 4 * (M * nkb + (-(-N // SCALE_BLOCK)) * nkb) + 2 * M * N)


register(KernelSpec(
    name="fp8_gemm", family="fp8_gemm",
    description="e4m3 GEMM, per-token (1x128) A scales and per-block (128x128) B scales, fp32 promotion "
                "per 128-wide K block, bf16 out (DeepGEMM recipe)",
    build=_build, make_inputs=_inputs, reference=ref_fp8_gemm, compare=compare_fp8_gemm,
    flops=lambda M, N, K, **_: 2 * M * N * K, bytes=_bytes,
    shapes=(
        {"label": "DeepSeek-V3 wq_b 4096 tok (4096x24576x1536)", "M": 4096, "N": 24576, "K": 1536},
        {"label": "DeepSeek-V3 wo, 4096 tok (4096x7168x16384)", "M": 4096, "N": 7168, "K": 16384},
        {"label": "DeepSeek-V3 dense FFN up, 8192 tok (8192x18432x7168)", "M": 8192, "N": 18432, "K": 7168},
        {"label": "DeepSeek-V3 shared expert down, 16384 tok (16384x7168x2048)", "M": 16384, "N": 7168,
         "K": 2048},
        {"label": "8192^3 fp8", "M": 8192, "N": 8192, "K": 8192},
    ),
    test_shapes=(
        {"label": "edges 1 K-block partial", "M": 70, "N": 150, "K": 100},
        {"label": "edges 3 K-blocks, block_N 64", "M": 33, "N": 200, "K": 300, "block_N": 64},
        {"label": "edges block_N 256 spans 2 scale blocks", "M": 40, "N": 300, "K": 260, "block_N": 256,
         "block_M": 64},
    ),
    tunables={"block_M": [64, 128], "block_N": [64, 128, 256], "num_stages": [1, 2, 3, 4, 5],
              "threads": [128, 256]},
    defaults={"block_M": 128, "block_N": 128, "num_stages": 4, "threads": 128, "out_dtype": "bfloat16"},
    tolerance={"rtol": 1.6e-2, "atol": 1e-2},
))
