"""Normalisation and activation kernels: LayerNorm, RMSNorm, GELU (tanh), fused LayerNorm+GELU next to
its two-kernel version, and row softmax.

Kernels (registry names):

* ``layernorm`` — ``y = (x - mean) · rsqrt(var + eps) · w + b`` per row (biased variance);
* ``rmsnorm`` — ``y = x · rsqrt(mean(x²) + eps) · w``;
* ``gelu`` — ``y = 0.5 · x · (1 + tanh(sqrt(2/π) · (x + 0.044715 · x³)))`` elementwise, 2-D tiles;
* ``layernorm_gelu`` — ``gelu(layernorm(x))`` in one kernel: the normalised row is never stored;
* ``layernorm_gelu_unfused`` — the same as a program of two launches, the LayerNorm kernel writing
  ``h`` (rounded to the input dtype) to a global workspace and the GELU kernel reading it back — what
  two separate library calls do. Simulating both shows the fusion gain (one round trip of ``h``
  through DRAM and one launch);
* ``softmax`` — row softmax. When one ``block_N`` chunk covers the row (``block_N`` ≥ N; ``None`` means
  N rounded up to a power of two) the row is read once and normalised in registers; otherwise an online
  (running max / rescaled sum) first pass over the chunks and a normalising second pass, for long rows
  (vocabulary). The normalising step evaluates ``e^(x - max)`` as ``2^(x·log2 e - max·log2 e)`` (one FMA
  and one ``ex2`` on a GPU) and multiplies by ``1/sum`` (one division per row, not per element).

Row tiling (all row kernels): ``block_M`` rows per block, the row walked in ``block_N``-column chunks
(``block_M``, ``block_N`` powers of two — TileLang's reductions split a row over a power-of-two number of
threads, so hidden sizes such as 7168 are never a fragment extent; a chunk is at most N rounded up to a
power of two). Pass 1 accumulates per-row statistics in ``(block_M,)`` fragments: the sum of squares
(RMSNorm; the zero fill past N adds nothing and the mean divides by the true N), or for LayerNorm each
chunk's mean and sum of squared deviations (padding masked out, divided by the chunk's valid count),
merged into the running mean/M2 with Chan's pairwise update — as accurate as a two-pass variance while
reading the row once. Pass 2 reads the row again (mostly from L2), normalises and writes; columns and
rows past the edge are never written. RMSNorm and softmax skip pass 2 when one chunk covers the row
(``block_N=None`` or ≥ N): the row is read once and normalised in registers — the fast form on a GPU
for hidden sizes up to ~16K (e.g. 8192 bf16 columns over 512 threads: 16 values per thread, 16-byte loads).

Dtypes: inputs and outputs bf16 / fp16 / fp32 (weights in the input dtype); all math in fp32, one
rounding at the store. Sizes that ``block_M`` / ``block_N`` do not divide work through ``T.copy``'s zero
fill (padded rows compute finite junk that is never stored).

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
LOG2E = 1.4426950408889634  # log2(e): softmax evaluates e^t as 2^(t·log2 e)
_FLOATS = ("float32", "float16", "bfloat16")


@T.macro
def gelu_tanh(x):
    return 0.5 * x * (1.0 + T.tanh(GELU_C * (x + 0.044715 * x * x * x)))


@T.macro
def layernorm_stats(X, bx, mean, rstd, block_M, block_N, N, eps):
    """Row mean and ``1/sqrt(var + eps)`` of ``block_M`` rows of ``X`` into ``(block_M,)`` fragments.

    One pass over ``block_N``-column chunks: each chunk's mean and sum of squared deviations (columns
    past N masked out, so the zero fill counts for nothing) are merged into the running pair with Chan's
    update — numerically a two-pass variance, with one read of the row."""
    x = T.alloc_fragment((block_M, block_N), "float32")
    d = T.alloc_fragment((block_M, block_N), "float32")
    c_sum = T.alloc_fragment((block_M,), "float32")
    c_m2 = T.alloc_fragment((block_M,), "float32")
    m2 = T.alloc_fragment((block_M,), "float32")
    T.clear(mean)
    T.clear(m2)
    for c in T.serial(T.ceildiv(N, block_N)):
        T.copy(X[bx * block_M, c * block_N], x)
        T.reduce_sum(x, c_sum, dim=1)
        n_done = T.cast(c * block_N, "float32")  # columns merged so far
        n_c = T.cast(T.min(block_N, N - c * block_N), "float32")  # valid columns of this chunk
        for i, j in T.Parallel(block_M, block_N):
            d[i, j] = T.if_then_else(c * block_N + j < N, x[i, j] - c_sum[i] / n_c, 0.0)
            d[i, j] = d[i, j] * d[i, j]
        T.reduce_sum(d, c_m2, dim=1)
        for i in T.Parallel(block_M):
            delta = c_sum[i] / n_c - mean[i]
            mean[i] = mean[i] + delta * (n_c / (n_done + n_c))
            m2[i] = m2[i] + c_m2[i] + delta * delta * (n_done * n_c / (n_done + n_c))
    for i in T.Parallel(block_M):
        rstd[i] = T.rsqrt(m2[i] / N + eps)


@T.macro
def layernorm_apply(X, W, B, Y, bx, mean, rstd, block_M, block_N, N, with_gelu, bf16_bits=False):
    """Second pass: ``Y = (x - mean) · rstd · w + b`` (then GELU if ``with_gelu``), chunk by chunk.
    ``bf16_bits``: ``Y`` is a uint16 buffer receiving the bits of the bf16-rounded values."""
    x = T.alloc_fragment((block_M, block_N), "float32")
    w = T.alloc_fragment((block_N,), "float32")
    b = T.alloc_fragment((block_N,), "float32")
    if bf16_bits:
        y_bits = T.alloc_fragment((block_M, block_N), "uint16")
    for c in T.serial(T.ceildiv(N, block_N)):
        T.copy(X[bx * block_M, c * block_N], x)
        T.copy(W[c * block_N], w)
        T.copy(B[c * block_N], b)
        for i, j in T.Parallel(block_M, block_N):
            x[i, j] = (x[i, j] - mean[i]) * rstd[i] * w[j] + b[j]
        if with_gelu:
            for i, j in T.Parallel(block_M, block_N):
                x[i, j] = gelu_tanh(x[i, j])
        if bf16_bits:
            for i, j in T.Parallel(block_M, block_N):
                y_bits[i, j] = T.reinterpret("uint16", T.cast(x[i, j], "bfloat16"))
            T.copy(y_bits, Y[bx * block_M, c * block_N])
        else:
            T.copy(x, Y[bx * block_M, c * block_N])  # columns/rows past the edge are not written


@T.macro
def gelu_tile(X, Y, bx, by, block_M, block_N, bf16_bits=False):
    """GELU of one tile; ``bf16_bits``: ``X`` is a uint16 buffer holding bf16 bit patterns."""
    x = T.alloc_fragment((block_M, block_N), "float32")
    if bf16_bits:
        x_bits = T.alloc_fragment((block_M, block_N), "uint16")
        T.copy(X[by * block_M, bx * block_N], x_bits)
        for i, j in T.Parallel(block_M, block_N):
            x[i, j] = T.cast(T.reinterpret("bfloat16", x_bits[i, j]), "float32")
    else:
        T.copy(X[by * block_M, bx * block_N], x)
    for i, j in T.Parallel(block_M, block_N):
        x[i, j] = gelu_tanh(x[i, j])
    T.copy(x, Y[by * block_M, bx * block_N])


def _check_dtype(dtype):
    if _dt.canon(dtype) not in _FLOATS:
        raise ValueError(f"dtype must be one of {_FLOATS}, got {dtype!r}")


def _pow2_ceil(n):
    return 1 << max(int(n) - 1, 0).bit_length()


def _row_tiles(N, block_M, block_N):
    """Validated ``(block_M, chunk width)``: both powers of two (TileLang's reductions split a row over a
    power-of-two number of threads); the chunk is never wider than N rounded up to a power of two, and
    ``block_N=None`` means exactly that (one chunk per row)."""
    if block_N is None:
        block_N = _pow2_ceil(N)
    for name, v in (("block_M", block_M), ("block_N", block_N)):
        if v < 1 or v & (v - 1):
            raise ValueError(f"{name} must be a power of two, got {v}")
    return block_M, min(block_N, _pow2_ceil(N))


# ------------------------------------------------------------------------------------------ kernels
@tilelang.jit(out_idx=[-1])
def layer_norm(M, N, block_M=1, block_N=1024, eps=1e-5, dtype="bfloat16", threads=256):
    _check_dtype(dtype)
    block_M, block_N = _row_tiles(N, block_M, block_N)

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype),
             Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            mean = T.alloc_fragment((block_M,), "float32")
            rstd = T.alloc_fragment((block_M,), "float32")
            layernorm_stats(X, bx, mean, rstd, block_M, block_N, N, eps)
            layernorm_apply(X, W, B, Y, bx, mean, rstd, block_M, block_N, N, False)

    return main


@tilelang.jit(out_idx=[-1])
def rms_norm(M, N, block_M=1, block_N=1024, eps=1e-6, dtype="bfloat16", threads=256):
    """RMSNorm. When one ``block_N`` chunk covers the row (``block_N`` ≥ N, or ``None``: the row rounded up
    to a power of two) the row is read once and kept in registers; otherwise a sum-of-squares pass over
    the chunks and a second, normalising pass (which re-reads the row, mostly from L2)."""
    _check_dtype(dtype)
    block_M, block_N = _row_tiles(N, block_M, block_N)
    n_chunks = -(-N // block_N)
    if n_chunks == 1:
        @T.prim_func
        def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
            with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
                x = T.alloc_fragment((block_M, block_N), "float32")
                sq = T.alloc_fragment((block_M, block_N), "float32")
                w = T.alloc_fragment((block_N,), "float32")
                rstd = T.alloc_fragment((block_M,), "float32")
                T.copy(X[bx * block_M, 0], x)  # the zero fill past N adds nothing to the sum of squares
                for i, j in T.Parallel(block_M, block_N):
                    sq[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(sq, rstd, dim=1)
                for i in T.Parallel(block_M):
                    rstd[i] = T.rsqrt(rstd[i] / N + eps)
                T.copy(W[0], w)  # after the reduction: w is not live across it (fewer registers, more blocks)
                for i, j in T.Parallel(block_M, block_N):
                    x[i, j] = x[i, j] * rstd[i] * w[j]
                T.copy(x, Y[bx * block_M, 0])  # columns/rows past the edge are not written

        return main

    @T.prim_func
    def main_chunked(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, block_N), "float32")
            sq = T.alloc_fragment((block_M, block_N), "float32")
            w = T.alloc_fragment((block_N,), "float32")
            rstd = T.alloc_fragment((block_M,), "float32")
            T.clear(rstd)
            for c in T.serial(n_chunks):  # sum of squares; the zero fill past N adds nothing
                T.copy(X[bx * block_M, c * block_N], x)
                for i, j in T.Parallel(block_M, block_N):
                    sq[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(sq, rstd, dim=1, clear=False)
            for i in T.Parallel(block_M):
                rstd[i] = T.rsqrt(rstd[i] / N + eps)
            for c in T.serial(n_chunks):
                T.copy(X[bx * block_M, c * block_N], x)
                T.copy(W[c * block_N], w)
                for i, j in T.Parallel(block_M, block_N):
                    x[i, j] = x[i, j] * rstd[i] * w[j]
                T.copy(x, Y[bx * block_M, c * block_N])

    return main_chunked


@tilelang.jit(out_idx=[-1])
def gelu(M, N, block_M=32, block_N=256, dtype="bfloat16", threads=128):
    _check_dtype(dtype)

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            gelu_tile(X, Y, bx, by, block_M, block_N)

    return main


@tilelang.jit(out_idx=[-1])
def layer_norm_gelu(M, N, block_M=1, block_N=1024, eps=1e-5, dtype="bfloat16", threads=256):
    """Fused: ``gelu(layernorm(x))`` written once; ``h`` never leaves registers."""
    _check_dtype(dtype)
    block_M, block_N = _row_tiles(N, block_M, block_N)

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype),
             Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            mean = T.alloc_fragment((block_M,), "float32")
            rstd = T.alloc_fragment((block_M,), "float32")
            layernorm_stats(X, bx, mean, rstd, block_M, block_N, N, eps)
            layernorm_apply(X, W, B, Y, bx, mean, rstd, block_M, block_N, N, True)

    return main


@tilelang.jit(out_idx=[-1])
def layer_norm_gelu_unfused(M, N, block_M=1, block_N=1024, gelu_block_M=32, gelu_block_N=256, eps=1e-5,
                            dtype="bfloat16", threads=256):
    """Two launches: the LayerNorm kernel writes ``h`` (in ``dtype``) to DRAM, the GELU kernel reads it.

    A bf16 ``h`` is kept in a uint16 workspace as its bit pattern (rounded to bf16, then bit-cast):
    TileLang 0.1.15 cannot allocate a bf16 ``T.alloc_global`` (the host-side bf16 storage legaliser
    fails on it: "Cannot find var remap"). Same bytes, same values."""
    _check_dtype(dtype)
    block_M, block_N = _row_tiles(N, block_M, block_N)
    bits = _dt.canon(dtype) == "bfloat16"

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype),
             Y: T.Tensor((M, N), dtype)):
        H = T.alloc_global((M, N), "uint16" if bits else dtype)
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            mean = T.alloc_fragment((block_M,), "float32")
            rstd = T.alloc_fragment((block_M,), "float32")
            layernorm_stats(X, bx, mean, rstd, block_M, block_N, N, eps)
            layernorm_apply(X, W, B, H, bx, mean, rstd, block_M, block_N, N, False, bits)
        with T.Kernel(T.ceildiv(N, gelu_block_N), T.ceildiv(M, gelu_block_M), threads=threads) as (bx, by):
            gelu_tile(H, Y, bx, by, gelu_block_M, gelu_block_N, bits)

    return main


@tilelang.jit(out_idx=[-1])
def softmax(M, N, block_M=1, block_N=1024, dtype="bfloat16", threads=256):
    """Row softmax in fp32. When one ``block_N`` chunk covers the row (``block_N`` ≥ N, or ``None``: the
    row rounded up to a power of two) it is read once and normalised in registers; otherwise an online
    max/sum pass over the chunks and a second, normalising pass."""
    _check_dtype(dtype)
    NEG_INF = float("-inf")
    block_M, block_N = _row_tiles(N, block_M, block_N)
    n_chunks = -(-N // block_N)
    if n_chunks == 1:
        @T.prim_func
        def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
            with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
                x = T.alloc_fragment((block_M, block_N), "float32")
                row_max = T.alloc_fragment((block_M,), "float32")
                row_sum = T.alloc_fragment((block_M,), "float32")
                T.copy(X[bx * block_M, 0], x)
                for i, j in T.Parallel(block_M, block_N):  # padding columns do not take part
                    x[i, j] = T.if_then_else(j < N, x[i, j], NEG_INF)
                T.reduce_max(x, row_max, dim=1)
                for i in T.Parallel(block_M):
                    row_max[i] = row_max[i] * LOG2E
                for i, j in T.Parallel(block_M, block_N):  # e^(x - max) as 2^(x·log2 e - max·log2 e): one FMA + ex2
                    x[i, j] = T.exp2(x[i, j] * LOG2E - row_max[i])
                T.reduce_sum(x, row_sum, dim=1)
                for i in T.Parallel(block_M):
                    row_sum[i] = 1.0 / row_sum[i]
                for i, j in T.Parallel(block_M, block_N):  # one division per row, a multiply per element
                    x[i, j] = x[i, j] * row_sum[i]
                T.copy(x, Y[bx * block_M, 0])

        return main

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
            for i in T.Parallel(block_M):
                row_max[i] = row_max[i] * LOG2E
                row_sum[i] = 1.0 / row_sum[i]
            for c in T.serial(n_chunks):
                T.copy(X[bx * block_M, c * block_N], x)
                for i, j in T.Parallel(block_M, block_N):
                    x[i, j] = T.exp2(x[i, j] * LOG2E - row_max[i]) * row_sum[i]
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


def _build_ln(M, N, block_M, block_N, threads, dtype="bfloat16", eps=1e-5, **_):
    return layer_norm(M, N, block_M=block_M, block_N=block_N, eps=eps, dtype=dtype, threads=threads)


def _build_rms(M, N, block_M, block_N, threads, dtype="bfloat16", eps=1e-6, **_):
    return rms_norm(M, N, block_M=block_M, block_N=block_N, eps=eps, dtype=dtype, threads=threads)


def _build_gelu(M, N, block_M, block_N, threads, dtype="bfloat16", **_):
    return gelu(M, N, block_M=block_M, block_N=block_N, dtype=dtype, threads=threads)


def _build_ln_gelu(M, N, block_M, block_N, threads, dtype="bfloat16", eps=1e-5, **_):
    return layer_norm_gelu(M, N, block_M=block_M, block_N=block_N, eps=eps, dtype=dtype, threads=threads)


def _build_ln_gelu_unfused(M, N, block_M, block_N, gelu_block_M, gelu_block_N, threads, dtype="bfloat16", eps=1e-5,
                           **_):
    return layer_norm_gelu_unfused(M, N, block_M=block_M, block_N=block_N, gelu_block_M=gelu_block_M,
                                   gelu_block_N=gelu_block_N, eps=eps, dtype=dtype, threads=threads)


def _build_softmax(M, N, block_M, threads, block_N=1024, dtype="bfloat16", **_):
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
    {"label": "edges fp32, 3 chunks", "M": 5, "N": 130, "dtype": "float32", "block_M": 2, "block_N": 64},
)
_ROW_TUNABLES = {"block_M": [1, 2, 4, 8], "block_N": [256, 512, 1024, 2048, 4096], "threads": [128, 256, 512]}
_ROW_DEFAULTS = {"block_M": 1, "block_N": 1024, "threads": 256, "dtype": "bfloat16"}
_ELT_TUNABLES = {"block_M": [8, 16, 32, 64], "block_N": [128, 256, 512, 1024], "threads": [128, 256]}
_ELT_TEST = (
    {"label": "edges bf16", "M": 45, "N": 300},
    {"label": "edges fp16", "M": 33, "N": 70, "dtype": "float16", "block_M": 16, "block_N": 64},
    {"label": "edges fp32", "M": 20, "N": 130, "dtype": "float32", "block_M": 8, "block_N": 128},
)
_TOL = {"rtol": 1.6e-2, "atol": 1.6e-2}  # bf16 outputs; fp16/fp32 tests use tighter per-dtype limits

register(KernelSpec(
    name="layernorm", family="norms",
    description="LayerNorm over the hidden dim in power-of-two column chunks: fp32 mean/variance (chunk "
                "statistics merged with Chan's update), then a normalising pass with affine w, b",
    build=_build_ln, make_inputs=_inputs_ln, reference=ref_layernorm,
    flops=lambda M, N, **_: 8 * M * N, bytes=lambda M, N, dtype="bfloat16", **_: int((2 * M * N + 2 * N) * _isz(dtype)),
    shapes=_ROW_SHAPES, test_shapes=_ROW_TEST, tunables=_ROW_TUNABLES, defaults={**_ROW_DEFAULTS, "eps": 1e-5},
    tolerance=_TOL,
))

register(KernelSpec(
    name="rmsnorm", family="norms",
    description="RMSNorm over the hidden dim: fp32 sum of squares, rsqrt, weight; one pass when a power-of-two "
                "column chunk covers the row, else a statistics pass and a normalising pass over the chunks",
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
    description="fused LayerNorm + GELU(tanh): statistics pass, then one normalise+GELU pass writing y; "
                "h never leaves registers",
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
    description="row softmax, fp32 math; one power-of-two chunk covering the row (read once), or online "
                "max/sum over block_N chunks and a normalising pass",
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
        {"label": "edges bf16 row in one chunk", "M": 6, "N": 96, "block_M": 2, "block_N": None},
        {"label": "edges fp16 chunked", "M": 5, "N": 70, "block_M": 2, "block_N": 32, "dtype": "float16"},
    ),
    tunables={"block_M": [1, 2, 4, 8], "block_N": [None, 1024, 2048, 4096, 8192], "threads": [128, 256, 512]},
    defaults={"block_M": 1, "block_N": 1024, "threads": 256, "dtype": "bfloat16"},
    tolerance=_TOL,
))
