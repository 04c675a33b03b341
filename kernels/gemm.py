"""GEMM family: tiled matrix multiply with fp32 accumulation, epilogues and split-K.

Kernels (registry names):

* ``gemm`` — ``C = A @ B`` (``A`` (M, K), ``B`` (K, N)); fp32 / fp16 / bf16 inputs, fp32 accumulation,
  ``C`` in ``out_dtype`` (default: the input dtype).
* ``gemm_nt`` — ``C = A @ B.T`` with ``B`` stored (N, K), the ``nn.Linear`` weight layout.
* ``gemm_epilogue`` — ``C = act(A @ op(B) + bias)``: optional bias (N,), activation ``None``, ``"relu"``,
  ``"gelu_tanh"`` or ``"silu"``, applied on the fp32 accumulator before the single rounding to ``C``.
* ``gemm_splitk`` — split-K: the K loop is cut into ``split_k`` slices of ``ceil(nk / split_k)`` K blocks
  (a constant trip count; blocks past K read as zeros), each slice a block of a 3-D grid
  that adds its partial tile into ``C`` (fp32) with ``T.atomic_add``. Outputs are uninitialised, so the
  program is two launches: the first zeroes ``C``, the second accumulates.

Numerics: products are formed exactly and summed in fp32 (``T.gemm`` into a float32 fragment); the
epilogue runs in fp32; ``C`` is rounded once. The NumPy references compute in float64 from the same
(rounded) inputs. NaN/Inf policy: IEEE propagation — a NaN or Inf in a row of ``A``/column of ``B``
reaches the matching outputs (no special handling); the references do the same.

Tiles: ``block_M × block_N`` output tiles, ``block_K`` reduction steps through shared memory with
``T.Pipelined(num_stages)``. Sizes that tiles do not divide rely on ``T.copy``'s edge semantics (reads
past the edge give 0, writes are skipped).
"""


import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.registry import KernelSpec, register
from tilesim import dtypes as _dt

ACTIVATIONS = (None, "relu", "gelu_tanh", "silu")
_GELU_C = 0.7978845608028654  # sqrt(2 / pi)


def _check(activation, dtype):
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
    if _dt.canon(dtype) not in ("float32", "float16", "bfloat16"):
        raise ValueError(f"gemm inputs must be float32, float16 or bfloat16, got {dtype!r}")


# ------------------------------------------------------------------------------------------ kernels
@tilelang.jit(out_idx=[-1])
def matmul(M, N, K, block_M=128, block_N=128, block_K=64, num_stages=3, threads=128, dtype="bfloat16",
           out_dtype=None, accum_dtype="float32", trans_B=False, bias=False, activation=None):
    """``C = act(A @ op(B) [+ bias])``; ``op(B) = B.T`` (B stored (N, K)) when ``trans_B``."""
    _check(activation, dtype)
    out_dtype = out_dtype or dtype
    B_shape = (N, K) if trans_B else (K, N)
    B_tile = (block_N, block_K) if trans_B else (block_K, block_N)

    @T.macro
    def mainloop(A, B, C_local, bx, by):
        A_shared = T.alloc_shared((block_M, block_K), dtype)
        B_shared = T.alloc_shared(B_tile, dtype)
        T.clear(C_local)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            T.copy(A[by * block_M, k * block_K], A_shared)
            if trans_B:
                T.copy(B[bx * block_N, k * block_K], B_shared)
            else:
                T.copy(B[k * block_K, bx * block_N], B_shared)
            T.gemm(A_shared, B_shared, C_local, transpose_B=trans_B)

    @T.macro
    def activate(C_local):
        if activation == "relu":
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.max(C_local[i, j], 0)
        elif activation == "gelu_tanh":
            for i, j in T.Parallel(block_M, block_N):
                x = C_local[i, j]
                C_local[i, j] = 0.5 * x * (1.0 + T.tanh(_GELU_C * (x + 0.044715 * x * x * x)))
        elif activation == "silu":
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = C_local[i, j] * T.sigmoid(C_local[i, j])

    if bias:
        @T.prim_func
        def main(A: T.Tensor((M, K), dtype), B: T.Tensor(B_shape, dtype), Bias: T.Tensor((N,), dtype),
                 C: T.Tensor((M, N), out_dtype)):
            with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
                C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
                bias_local = T.alloc_fragment((block_N,), accum_dtype)
                mainloop(A, B, C_local, bx, by)
                T.copy(Bias[bx * block_N], bias_local)
                for i, j in T.Parallel(block_M, block_N):
                    C_local[i, j] = C_local[i, j] + bias_local[j]
                activate(C_local)
                T.copy(C_local, C[by * block_M, bx * block_N])
    else:
        @T.prim_func
        def main(A: T.Tensor((M, K), dtype), B: T.Tensor(B_shape, dtype), C: T.Tensor((M, N), out_dtype)):
            with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
                C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
                mainloop(A, B, C_local, bx, by)
                activate(C_local)
                T.copy(C_local, C[by * block_M, bx * block_N])

    return main


@tilelang.jit(out_idx=[-1])
def matmul_splitk(M, N, K, block_M=128, block_N=128, block_K=64, split_k=4, num_stages=3, threads=128,
                  dtype="bfloat16", accum_dtype="float32", trans_B=False):
    """Split-K GEMM into an fp32 ``C``: launch 1 zeroes ``C``, launch 2 adds each K slice atomically.

    The K blocks (``nk = ceil(K / block_K)``) are dealt out in runs of ``k_per_split = ceil(nk / split_k)``:
    every slice runs the same constant trip count, and K blocks at or past ``nk`` (the tail of the last
    slices when ``split_k`` does not divide ``nk``) read as zeros through ``T.copy``'s edge fill, so they
    add nothing. A constant trip count keeps every loop bound and region extent a compile-time constant
    (TileLang's software pipeliner needs one to emit its ``cp.async`` waits).
    """
    _check(None, dtype)
    B_shape = (N, K) if trans_B else (K, N)
    B_tile = (block_N, block_K) if trans_B else (block_K, block_N)
    nk = -(-K // block_K)
    k_per_split = -(-nk // split_k)

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor(B_shape, dtype), C: T.Tensor((M, N), accum_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            zero = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(zero)
            T.copy(zero, C[by * block_M, bx * block_N])
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k, threads=threads) as (bx, by, bz):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared(B_tile, dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for ko in T.Pipelined(k_per_split, num_stages=num_stages):
                kb = bz * k_per_split + ko  # K block; kb >= nk reads zeros
                T.copy(A[by * block_M, kb * block_K], A_shared)
                if trans_B:
                    T.copy(B[bx * block_N, kb * block_K], B_shared)
                else:
                    T.copy(B[kb * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=trans_B)
            T.atomic_add(C[by * block_M, bx * block_N], C_local)

    return main


# ------------------------------------------------------------------------------------------ references
def _f64(x):
    return np.asarray(x).astype(np.float64)


def apply_activation(x, activation):
    """The epilogue activations in float64 (GELU in its tanh form)."""
    if activation is None:
        return x
    if activation == "relu":
        return np.maximum(x, 0.0)
    if activation == "gelu_tanh":
        return 0.5 * x * (1.0 + np.tanh(_GELU_C * (x + 0.044715 * x ** 3)))
    if activation == "silu":
        with np.errstate(over="ignore"):
            return x / (1.0 + np.exp(-x))
    raise ValueError(activation)


def ref_gemm(A, B, Bias=None, *, trans_B=False, activation=None, **_):
    """float64 ``act(A @ op(B) + bias)``."""
    b = _f64(B)
    c = _f64(A) @ (b.T if trans_B else b)
    if Bias is not None:
        c = c + _f64(Bias)[None, :]
    return apply_activation(c, activation)


# ------------------------------------------------------------------------------------------ registry
def _rand(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(_dt.np_dtype(dtype))


def _inputs(rng, M, N, K, dtype="bfloat16", trans_B=False, bias=False, **_):
    s = 1.0 / np.sqrt(K)
    A = _rand(rng, (M, K), dtype)
    B = _rand(rng, (N, K) if trans_B else (K, N), dtype, s)
    return (A, B, _rand(rng, (N,), dtype)) if bias else (A, B)


def _ref(*inputs, trans_B=False, bias=False, activation=None, **_):
    return ref_gemm(*inputs, trans_B=trans_B, activation=activation)


def _flops(M, N, K, **_):
    return 2 * M * N * K


def _bytes(M, N, K, dtype="bfloat16", out_dtype=None, bias=False, **_):
    i = _dt.itemsize(_dt.canon(dtype))
    o = _dt.itemsize(_dt.canon(out_dtype or dtype))
    return int((M * K + K * N + (N if bias else 0)) * i + M * N * o)


def _build(M, N, K, block_M, block_N, block_K, num_stages, threads, dtype="bfloat16", out_dtype=None,
           trans_B=False, bias=False, activation=None, **_):
    return matmul(M, N, K, block_M=block_M, block_N=block_N, block_K=block_K, num_stages=num_stages,
                  threads=threads, dtype=dtype, out_dtype=out_dtype, trans_B=trans_B, bias=bias,
                  activation=activation)


def _build_splitk(M, N, K, block_M, block_N, block_K, split_k, num_stages, threads, dtype="bfloat16",
                  trans_B=False, **_):
    return matmul_splitk(M, N, K, block_M=block_M, block_N=block_N, block_K=block_K, split_k=split_k,
                         num_stages=num_stages, threads=threads, dtype=dtype, trans_B=trans_B)


def _bytes_splitk(M, N, K, dtype="bfloat16", **_):
    return int((M * K + K * N) * _dt.itemsize(_dt.canon(dtype)) + M * N * 4)


_TUNABLES = {"block_M": [64, 128, 256], "block_N": [64, 128, 256], "block_K": [32, 64, 128],
             "num_stages": [0, 1, 2, 3, 4], "threads": [128, 256]}
_DEFAULTS = {"block_M": 128, "block_N": 128, "block_K": 64, "num_stages": 3, "threads": 128,
             "dtype": "bfloat16", "out_dtype": None}

_LLM_SHAPES = (
    {"label": "4096x7168x2048 bf16 (DeepSeek-V3 expert down_proj shape: MoE inter 2048 -> hidden 7168)",
     "M": 4096, "N": 7168, "K": 2048},
    {"label": "Llama-3-70B o_proj, 8192 tok (8192x8192x8192, bf16)", "M": 8192, "N": 8192, "K": 8192},
    {"label": "8192^3 fp16", "M": 8192, "N": 8192, "K": 8192, "dtype": "float16"},
    {"label": "Llama-3-70B down_proj, 16384 tok (16384x8192x28672, bf16)", "M": 16384, "N": 8192, "K": 28672},
    {"label": "4096x4096x4096 fp32 (TF32 tensor cores)", "M": 4096, "N": 4096, "K": 4096, "dtype": "float32",
     "out_dtype": "float32"},
)
_TEST_SHAPES = (
    {"label": "edges bf16", "M": 150, "N": 130, "K": 200},
    {"label": "edges fp16", "M": 70, "N": 190, "K": 72, "dtype": "float16"},
    {"label": "edges fp32", "M": 33, "N": 65, "K": 129, "dtype": "float32"},
)

register(KernelSpec(
    name="gemm", family="gemm",
    description="C = A @ B, fp32/fp16/bf16 inputs, fp32 accumulation through shared-memory tiles (T.Pipelined)",
    build=_build, make_inputs=_inputs, reference=_ref, flops=_flops, bytes=_bytes,
    shapes=_LLM_SHAPES, test_shapes=_TEST_SHAPES, tunables=dict(_TUNABLES), defaults=dict(_DEFAULTS),
    tolerance={"rtol": 1e-2, "atol": 1e-2},
))

register(KernelSpec(
    name="gemm_nt", family="gemm",
    description="C = A @ B.T with B stored (N, K) (nn.Linear layout), fp32 accumulation",
    build=_build, make_inputs=_inputs, reference=_ref, flops=_flops, bytes=_bytes,
    shapes=tuple({**s, "label": s["label"] + " [B as (N, K)]"} for s in _LLM_SHAPES),
    test_shapes=_TEST_SHAPES, tunables=dict(_TUNABLES), defaults={**_DEFAULTS, "trans_B": True},
    tolerance={"rtol": 1e-2, "atol": 1e-2},
))

register(KernelSpec(
    name="gemm_epilogue", family="gemm",
    description="C = act(A @ B.T + bias) with act in {none, relu, gelu_tanh, silu}, fused on the fp32 accumulator",
    build=_build, make_inputs=_inputs, reference=_ref, flops=lambda M, N, K, **_: 2 * M * N * K + 2 * M * N,
    bytes=_bytes,
    shapes=(
        {"label": "Llama-3-8B up_proj + SiLU, 8192 tok (8192x14336x4096)", "M": 8192, "N": 14336, "K": 4096,
         "activation": "silu"},
        {"label": "GPT-style fc1 + bias + GELU(tanh), 16384 tok (16384x28672x7168)", "M": 16384, "N": 28672,
         "K": 7168, "activation": "gelu_tanh"},
        {"label": "4096 tok x hidden 7168 x 2048 + bias + ReLU (DeepSeek-V3 expert down_proj shape)", "M": 4096,
         "N": 7168, "K": 2048, "activation": "relu"},
    ),
    test_shapes=(
        {"label": "edges gelu bf16", "M": 150, "N": 130, "K": 100, "activation": "gelu_tanh"},
        {"label": "edges silu fp16", "M": 70, "N": 140, "K": 72, "dtype": "float16", "activation": "silu"},
        {"label": "edges relu fp32", "M": 33, "N": 65, "K": 40, "dtype": "float32", "activation": "relu"},
    ),
    tunables=dict(_TUNABLES), defaults={**_DEFAULTS, "trans_B": True, "bias": True, "activation": "gelu_tanh"},
    tolerance={"rtol": 1e-2, "atol": 1e-2},
))

register(KernelSpec(
    name="gemm_splitk", family="gemm",
    description="split-K GEMM: launch 1 zeroes the fp32 C, launch 2 accumulates K slices with T.atomic_add",
    build=_build_splitk, make_inputs=_inputs, reference=_ref, flops=_flops, bytes=_bytes_splitk,
    shapes=(
        {"label": "decode-like skinny, 64 tok x 7168 x 16384 (bf16)", "M": 64, "N": 7168, "K": 16384},
        {"label": "512 tok x 4096 x hidden 7168 (DeepSeek-V3 hidden in)", "M": 512, "N": 4096, "K": 7168},
        {"label": "Llama-3-70B down_proj, 128 tok x 8192 x 28672", "M": 128, "N": 8192, "K": 28672, "split_k": 8},
    ),
    test_shapes=(
        {"label": "edges bf16", "M": 70, "N": 130, "K": 300},
        {"label": "edges fp16 uneven split", "M": 33, "N": 40, "K": 200, "dtype": "float16", "split_k": 3},
        {"label": "edges fp32 NT", "M": 40, "N": 33, "K": 150, "dtype": "float32", "trans_B": True},
    ),
    tunables={**_TUNABLES, "split_k": [2, 3, 4, 8, 16]},
    defaults={"block_M": 64, "block_N": 128, "block_K": 64, "split_k": 4, "num_stages": 3, "threads": 128,
              "dtype": "bfloat16"},
    tolerance={"rtol": 1e-3, "atol": 1e-3},
))
