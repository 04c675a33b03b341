"""Normalisation and activation kernels: LayerNorm, RMSNorm, GELU (tanh), fused LayerNorm+GELU next to
its two-kernel version, and row softmax.

Kernels (registry names):

* ``layernorm`` — ``y = (x - mean) · rsqrt(var + eps) · w + b`` per row (biased variance, two-pass in
  registers: mean first, then the mean of squared deviations);
* ``rmsnorm`` — ``y = x · rsqrt(mean(x²) + eps) · w``;
* ``gelu`` — ``y = 0.5 · x · (1 + tanh(sqrt(2/π) · (x + 0.044715 · x³)))`` elementwise, 2-D tiles;
* ``layernorm_gelu`` — ``gelu(layernorm(x))`` in one kernel: the normalised row stays in registers;
* ``layernorm_gelu_unfused`` — the same as a program of two launches, the LayerNorm kernel writing
  ``h`` (rounded to the input dtype) to a global workspace and the GELU kernel reading it back — what
  two separate library calls do. Simulating both shows the fusion gain (one round trip of ``h``
  through DRAM and one launch);
* ``softmax`` — row softmax. With ``block_N`` ≥ N (the default ``block_N=None``) the row is held in
  registers and read once; a smaller ``block_N`` streams the row in chunks with an online (running
  max / rescaled sum) first pass and a normalising second pass, for rows that do not fit (vocabulary).

Dtypes: inputs and outputs bf16 / fp16 / fp32 (weights in the input dtype); all math in fp32, one
rounding at the store. Rows are whole tiles (``block_M`` rows per block); sizes that ``block_M`` does
not divide work through ``T.copy``'s zero fill (padded rows compute finite junk that is never stored).

NaN/Inf policy: IEEE propagation within a row — a NaN anywhere in a row makes that row's LayerNorm /
RMSNorm / softmax output NaN, as in the float64 NumPy references. Softmax accepts ``-inf`` entries
(probability 0) as long as a row has a finite entry; an all ``-inf`` row gives NaN (0/0), as NumPy does.
RMSNorm/LayerNorm square in fp32, so ``|x|`` beyond ~1e18 overflows ``x²`` (as on a GPU) — the tests keep
large values below that.
"""

import numpy as np

import tilesim as tilelang
import tilesim.language as T
from kernels.registry import KernelSpec, register
from tilesim import dtypes as _dt

GELU_C = 0.7978845608028654  # sqrt(2 / pi)
_FLOATS = ("float32", "float16", "bfloat16")


@T.macro
def gelu_tanh(x):
    return 0.5 * x * (1.0 + T.tanh(GELU_C * (x + 0.044715 * x * x * x)))


@T.macro
def layernorm_tile(X, W, B, bx, x, block_M, N, eps):
    """Load ``block_M`` rows of ``X`` into the fp32 fragment ``x`` and layer-normalise them in place."""
    w = T.alloc_fragment((N,), "float32")
    b = T.alloc_fragment((N,), "float32")
    sq = T.alloc_fragment((block_M, N), "float32")
    mean = T.alloc_fragment((block_M,), "float32")
    rstd = T.alloc_fragment((block_M,), "float32")
    T.copy(X[bx * block_M, 0], x)
    T.copy(W, w)
    T.copy(B, b)
    T.reduce_sum(x, mean, dim=1)
    for i in T.Parallel(block_M):
        mean[i] = mean[i] / N
    for i, j in T.Parallel(block_M, N):
        x[i, j] = x[i, j] - mean[i]
        sq[i, j] = x[i, j] * x[i, j]
    T.reduce_sum(sq, rstd, dim=1)
    for i in T.Parallel(block_M):
        rstd[i] = T.rsqrt(rstd[i] / N + eps)
    for i, j in T.Parallel(block_M, N):
        x[i, j] = x[i, j] * rstd[i] * w[j] + b[j]


@T.macro
def gelu_tile(X, Y, bx, by, block_M, block_N):
    x = T.alloc_fragment((block_M, block_N), "float32")
    T.copy(X[by * block_M, bx * block_N], x)
    for i, j in T.Parallel(block_M, block_N):
        x[i, j] = gelu_tanh(x[i, j])
    T.copy(x, Y[by * block_M, bx * block_N])


def _check_dtype(dtype):
    if _dt.canon(dtype) not in _FLOATS:
        raise ValueError(f"dtype must be one of {_FLOATS}, got {dtype!r}")


# ------------------------------------------------------------------------------------------ kernels
@tilelang.jit(out_idx=[-1])
def layer_norm(M, N, block_M=1, eps=1e-5, dtype="bfloat16", threads=256):
    _check_dtype(dtype)

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype),
             Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            layernorm_tile(X, W, B, bx, x, block_M, N, eps)
            T.copy(x, Y[bx * block_M, 0])

    return main


@tilelang.jit(out_idx=[-1])
def rms_norm(M, N, block_M=1, eps=1e-6, dtype="bfloat16", threads=256):
    _check_dtype(dtype)

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            sq = T.alloc_fragment((block_M, N), "float32")
            w = T.alloc_fragment((N,), "float32")
            rstd = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.copy(W, w)
            for i, j in T.Parallel(block_M, N):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, rstd, dim=1)
            for i in T.Parallel(block_M):
                rstd[i] = T.rsqrt(rstd[i] / N + eps)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * rstd[i] * w[j]
            T.copy(x, Y[bx * block_M, 0])

    return main


@tilelang.jit(out_idx=[-1])
def gelu(M, N, block_M=32, block_N=256, dtype="bfloat16", threads=128):
    _check_dtype(dtype)

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            gelu_tile(X, Y, bx, by, block_M, block_N)

    return main


@tilelang.jit(out_idx=[-1])
def layer_norm_gelu(M, N, block_M=1, eps=1e-5, dtype="bfloat16", threads=256):
    """Fused: one read of ``x``, one write of ``gelu(layernorm(x))``."""
    _check_dtype(dtype)

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype),
             Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            layernorm_tile(X, W, B, bx, x, block_M, N, eps)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = gelu_tanh(x[i, j])
            T.copy(x, Y[bx * block_M, 0])

    return main


@tilelang.jit(out_idx=[-1])
def layer_norm_gelu_unfused(M, N, block_M=1, gelu_block_M=32, gelu_block_N=256, eps=1e-5, dtype="bfloat16",
                            threads=256):
    """Two launches: the LayerNorm kernel writes ``h`` (in ``dtype``) to DRAM, the GELU kernel reads it."""
    _check_dtype(dtype)

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype),
             Y: T.Tensor((M, N), dtype)):
        H = T.alloc_global((M, N), dtype)
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            layernorm_tile(X, W, B, bx, x, block_M, N, eps)
            T.copy(x, H[bx * block_M, 0])
        with T.Kernel(T.ceildiv(N, gelu_block_N), T.ceildiv(M, gelu_block_M), threads=threads) as (bx, by):
            gelu_tile(H, Y, bx, by, gelu_block_M, gelu_block_N)

    return main


@tilelang.jit(out_idx=[-1])
def softmax(M, N, block_M=1, block_N=None, dtype="bfloat16", threads=256):
    """Row softmax in fp32: one pass from registers when a row fits (``block_N`` None or ≥ N), else
    an online max/sum pass over ``block_N`` chunks and a second, normalising pass."""
    _check_dtype(dtype)
    NEG_INF = float("-inf")
    if block_N is None or block_N >= N:
        @T.prim_func
        def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
            with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
                x = T.alloc_fragment((block_M, N), "float32")
                row_max = T.alloc_fragment((block_M,), "float32")
                row_sum = T.alloc_fragment((block_M,), "float32")
                T.copy(X[bx * block_M, 0], x)
                T.reduce_max(x, row_max, dim=1)
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = T.exp(x[i, j] - row_max[i])
                T.reduce_sum(x, row_sum, dim=1)
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = x[i, j] / row_sum[i]
                T.copy(x, Y[bx * block_M, 0])

        return main

    n_chunks = T.ceildiv(N, block_N)

    @T.prim_func
    def main_chunked(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, block_N), "float32")
            row_max = T.alloc_fragment((block_M,), "float32")
            prev_max = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            chunk_sum = T.alloc_fragment((block_M,), "float32")
            T.fill(row_max, NEG_INF)
            T.clear(row_sum)
            for c in T.serial(n_chunks):
                T.copy(X[bx * block_M, c * block_N], x)
                for i, j in T.Parallel(block_M, block_N):  # columns past the edge do not take part
                    x[i, j] = T.if_then_else(c * block_N + j < N, x[i, j], NEG_INF)
                T.copy(row_max, prev_max)
                T.reduce_max(x, row_max, dim=1, clear=False)
                # all-(-inf) so far: nothing to rescale and nothing to add (avoids -inf - -inf)
                for i, j in T.Parallel(block_M, block_N):
                    x[i, j] = T.if_then_else(row_max[i] == NEG_INF, 0.0, T.exp(x[i, j] - row_max[i]))
                T.reduce_sum(x, chunk_sum, dim=1)
                for i in T.Parallel(block_M):
                    row_sum[i] = T.if_then_else(prev_max[i] == NEG_INF, 0.0,
                                                row_sum[i] * T.exp(prev_max[i] - row_max[i])) + chunk_sum[i]
            for c in T.serial(n_chunks):
                T.copy(X[bx * block_M, c * block_N], x)
                for i, j in T.Parallel(block_M, block_N):
                    x[i, j] = T.exp(x[i, j] - row_max[i]) / row_sum[i]
                T.copy(x, Y[bx * block_M, c * block_N])

    return main_chunked


# ------------------------------------------------------------------------------------------ references
def _f64(a):
    return np.asarray(a).astype(np.float64)


def ref_layernorm(X, W, B, eps=1e-5, **_):
    x = _f64(X)
    mu = x.mean(axis=1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * _f64(W) + _f64(B)


def ref_rmsnorm(X, W, eps=1e-6, **_):
    x = _f64(X)
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps) * _f64(W)


def ref_gelu(X, **_):
    x = _f64(X)
    return 0.5 * x * (1.0 + np.tanh(GELU_C * (x + 0.044715 * x ** 3)))


def ref_layernorm_gelu(X, W, B, eps=1e-5, **_):
    return ref_gelu(ref_layernorm(X, W, B, eps))


def ref_layernorm_gelu_unfused(X, W, B, eps=1e-5, **_):
    """As the fused reference, with ``h`` rounded to the input dtype between the two kernels."""
    h = ref_layernorm(X, W, B, eps).astype(np.float32).astype(np.asarray(X).dtype)
    return ref_gelu(h)


def ref_softmax(X, **_):
    x = _f64(X)
    with np.errstate(invalid="ignore"):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)


# ------------------------------------------------------------------------------------------ registry
def _rows(rng, M, N, dtype, scale=1.0, offset=0.0):
    return (rng.standard_normal((M, N)) * scale + offset).astype(_dt.np_dtype(dtype))


def _inputs_ln(rng, M, N, dtype="bfloat16", **_):
    return (_rows(rng, M, N, dtype, 2.0, 0.5), _rows(rng, 1, N, dtype, 0.2, 1.0)[0],
            _rows(rng, 1, N, dtype, 0.1)[0])


def _inputs_rms(rng, M, N, dtype="bfloat16", **_):
    return _rows(rng, M, N, dtype, 2.0, 0.5), _rows(rng, 1, N, dtype, 0.2, 1.0)[0]


def _inputs_x(rng, M, N, dtype="bfloat16", **_):
    return (_rows(rng, M, N, dtype, 3.0),)


def _isz(dtype):
    return _dt.itemsize(_dt.canon(dtype))


def _build_ln(M, N, block_M, threads, dtype="bfloat16", eps=1e-5, **_):
    return layer_norm(M, N, block_M=block_M, eps=eps, dtype=dtype, threads=threads)


def _build_rms(M, N, block_M, threads, dtype="bfloat16", eps=1e-6, **_):
    return rms_norm(M, N, block_M=block_M, eps=eps, dtype=dtype, threads=threads)


def _build_gelu(M, N, block_M, block_N, threads, dtype="bfloat16", **_):
    return gelu(M, N, block_M=block_M, block_N=block_N, dtype=dtype, threads=threads)


def _build_ln_gelu(M, N, block_M, threads, dtype="bfloat16", eps=1e-5, **_):
    return layer_norm_gelu(M, N, block_M=block_M, eps=eps, dtype=dtype, threads=threads)


def _build_ln_gelu_unfused(M, N, block_M, gelu_block_M, gelu_block_N, threads, dtype="bfloat16", eps=1e-5, **_):
    return layer_norm_gelu_unfused(M, N, block_M=block_M, gelu_block_M=gelu_block_M, gelu_block_N=gelu_block_N,
                                   eps=eps, dtype=dtype, threads=threads)


def _build_softmax(M, N, block_M, threads, block_N=None, dtype="bfloat16", **_):
    return softmax(M, N, block_M=block_M, block_N=block_N, dtype=dtype, threads=threads)


_ROW_SHAPES = (
    {"label": "DeepSeek-V3 hidden 7168, 4096 tok", "M": 4096, "N": 7168},
    {"label": "DeepSeek-V3 hidden 7168, 16384 tok", "M": 16384, "N": 7168},
    {"label": "Llama-3-70B hidden 8192, 8192 tok", "M": 8192, "N": 8192},
    {"label": "Llama-3-70B hidden 8192, 16384 tok, fp16", "M": 16384, "N": 8192, "dtype": "float16"},
)
_ROW_TEST = (
    {"label": "edges bf16", "M": 13, "N": 200, "block_M": 4},
    {"label": "edges fp16", "M": 7, "N": 96, "dtype": "float16", "block_M": 2},
    {"label": "edges fp32", "M": 5, "N": 130, "dtype": "float32", "block_M": 3},
)
_ROW_TUNABLES = {"block_M": [1, 2, 4, 8], "threads": [128, 256, 512]}
_ROW_DEFAULTS = {"block_M": 1, "threads": 256, "dtype": "bfloat16"}
_ELT_TUNABLES = {"block_M": [8, 16, 32, 64], "block_N": [128, 256, 512, 1024], "threads": [128, 256]}
_ELT_TEST = (
    {"label": "edges bf16", "M": 45, "N": 300},
    {"label": "edges fp16", "M": 33, "N": 70, "dtype": "float16", "block_M": 16, "block_N": 64},
    {"label": "edges fp32", "M": 20, "N": 130, "dtype": "float32", "block_M": 8, "block_N": 128},
)
_TOL = {"rtol": 1.6e-2, "atol": 1.6e-2}  # bf16 outputs; fp16/fp32 tests use tighter per-dtype limits

register(KernelSpec(
    name="layernorm", family="norms",
    description="LayerNorm over the hidden dim, fp32 two-pass mean/variance in registers, affine w, b",
    build=_build_ln, make_inputs=_inputs_ln, reference=ref_layernorm,
    flops=lambda M, N, **_: 8 * M * N, bytes=lambda M, N, dtype="bfloat16", **_: int((2 * M * N + 2 * N) * _isz(dtype)),
    shapes=_ROW_SHAPES, test_shapes=_ROW_TEST, tunables=_ROW_TUNABLES, defaults={**_ROW_DEFAULTS, "eps": 1e-5},
    tolerance=_TOL,
))

register(KernelSpec(
    name="rmsnorm", family="norms",
    description="RMSNorm over the hidden dim (fp32 sum of squares, rsqrt, weight)",
    build=_build_rms, make_inputs=_inputs_rms, reference=ref_rmsnorm,
    flops=lambda M, N, **_: 4 * M * N, bytes=lambda M, N, dtype="bfloat16", **_: int((2 * M * N + N) * _isz(dtype)),
    shapes=_ROW_SHAPES, test_shapes=_ROW_TEST, tunables=_ROW_TUNABLES, defaults={**_ROW_DEFAULTS, "eps": 1e-6},
    tolerance=_TOL,
))

register(KernelSpec(
    name="gelu", family="norms",
    description="GELU, tanh form, elementwise over 2-D tiles (fp32 math)",
    build=_build_gelu, make_inputs=_inputs_x, reference=ref_gelu,
    flops=lambda M, N, **_: 10 * M * N, bytes=lambda M, N, dtype="bfloat16", **_: int(2 * M * N * _isz(dtype)),
    shapes=(
        {"label": "GPT-3-like MLP 4x hidden 8192 -> 32768 wide, 4096 tok", "M": 4096, "N": 32768},
        {"label": "hidden 7168, 16384 tok", "M": 16384, "N": 7168},
        {"label": "hidden 8192, 8192 tok", "M": 8192, "N": 8192},
    ),
    test_shapes=_ELT_TEST, tunables=_ELT_TUNABLES,
    defaults={"block_M": 32, "block_N": 256, "threads": 128, "dtype": "bfloat16"}, tolerance=_TOL,
))

register(KernelSpec(
    name="layernorm_gelu", family="norms",
    description="fused LayerNorm + GELU(tanh): one read of x, one write of y, h stays in registers",
    build=_build_ln_gelu, make_inputs=_inputs_ln, reference=ref_layernorm_gelu,
    flops=lambda M, N, **_: 18 * M * N,
    bytes=lambda M, N, dtype="bfloat16", **_: int((2 * M * N + 2 * N) * _isz(dtype)),
    shapes=_ROW_SHAPES, test_shapes=_ROW_TEST, tunables=_ROW_TUNABLES, defaults={**_ROW_DEFAULTS, "eps": 1e-5},
    tolerance=_TOL,
))

register(KernelSpec(
    name="layernorm_gelu_unfused", family="norms",
    description="LayerNorm kernel then GELU kernel (two launches, h round-trips through a DRAM workspace); "
                "bytes count that round trip, the cost the fused kernel removes",
    build=_build_ln_gelu_unfused, make_inputs=_inputs_ln, reference=ref_layernorm_gelu_unfused,
    flops=lambda M, N, **_: 18 * M * N,
    bytes=lambda M, N, dtype="bfloat16", **_: int((4 * M * N + 2 * N) * _isz(dtype)),
    shapes=_ROW_SHAPES,
    test_shapes=tuple({**s, "gelu_block_M": 8, "gelu_block_N": 64} for s in _ROW_TEST),
    tunables={**_ROW_TUNABLES, "gelu_block_M": _ELT_TUNABLES["block_M"], "gelu_block_N": _ELT_TUNABLES["block_N"]},
    defaults={**_ROW_DEFAULTS, "eps": 1e-5, "gelu_block_M": 32, "gelu_block_N": 256},
    tolerance=_TOL,
))

register(KernelSpec(
    name="softmax", family="norms",
    description="row softmax, fp32 math; whole row in registers, or online max/sum over block_N chunks",
    build=_build_softmax, make_inputs=_inputs_x, reference=ref_softmax,
    flops=lambda M, N, **_: 5 * M * N, bytes=lambda M, N, dtype="bfloat16", **_: int(2 * M * N * _isz(dtype)),
    shapes=(
        {"label": "attention probs 32 heads x 4096 q, 4096 keys", "M": 131072, "N": 4096},
        {"label": "MoE router softmax, 16384 tok x 256 experts (fp32)", "M": 16384, "N": 256, "dtype": "float32",
         "block_M": 8},
        {"label": "LM head 4096 tok x vocab 129280 (DeepSeek-V3), chunked", "M": 4096, "N": 129280,
         "block_N": 8192, "dtype": "float32"},
    ),
    test_shapes=(
        {"label": "edges bf16 row in registers", "M": 13, "N": 200, "block_M": 4},
        {"label": "edges fp32 chunked", "M": 7, "N": 300, "block_M": 2, "block_N": 128, "dtype": "float32"},
        {"label": "edges fp16 chunked", "M": 5, "N": 70, "block_M": 2, "block_N": 32, "dtype": "float16"},
    ),
    tunables={"block_M": [1, 2, 4, 8], "block_N": [None, 1024, 2048, 4096, 8192], "threads": [128, 256, 512]},
    defaults={"block_M": 1, "block_N": None, "threads": 256, "dtype": "bfloat16"},
    tolerance=_TOL,
))
