"""The child process of the JAX Pallas column of ``tilesim bench`` (:mod:`tilesim.bench_pallas` runs
``python -m tilesim.bench_pallas_child WHICH IN.npz OUT.npz REPS``).

Contract: Pallas kernels written here for the bench's two rows — a tiled fp32 GEMM (grid over (M, N, K)
tiles, the K axis accumulating into the output block) and a causal flash-attention forward on (B, S, H, D)
arrays (one program per (b·h, query tile), an online-softmax loop over the key tiles up to the diagonal) —
run with ``interpret=True`` (Pallas's CPU interpreter: the kernel is traced once and compiled by XLA), fp32
with ``precision=HIGHEST`` dots. Writes ``first`` (seconds of the first call, tracing and compilation
included), ``warm`` (median of REPS calls after one warm-up, each waited for with ``block_until_ready``) and
``result``. Shapes must be multiples of the tiles (the bench's are). Importing this module defines the kernels
only where jax is installed; run it as that child.

Layer: app (see :mod:`tilesim.hw`).
"""

import statistics
import sys
import time

import numpy as np

from . import optional

jax = optional.module("jax")
jnp = optional.module("jax.numpy")
pl = optional.module("jax.experimental.pallas")

_HI = None if jax is None else jax.lax.Precision.HIGHEST


def gemm(a, b, bm=64, bn=64, bk=32):
    M, K = a.shape
    N = b.shape[1]

    def kernel(a_ref, b_ref, o_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)

        o_ref[...] += jnp.dot(a_ref[...], b_ref[...], precision=_HI, preferred_element_type=jnp.float32)

    call = pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((M, N), jnp.float32), grid=(M // bm, N // bn, K // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)), pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)), interpret=True)
    return jax.jit(call)


def attention(q, k, v, bm=64, bn=64):
    B, S, H, D = q.shape
    scale = 1.0 / float(np.sqrt(D))

    def kernel(q_ref, k_ref, v_ref, o_ref):
        i = pl.program_id(1)
        qt = q_ref[...]
        rows = i * bm + jnp.arange(bm)[:, None]

        def step(j, carry):
            m, l, acc = carry
            kt = k_ref[pl.ds(j * bn, bn), :]
            vt = v_ref[pl.ds(j * bn, bn), :]
            s = jnp.dot(qt, kt.T, precision=_HI) * scale
            s = jnp.where(rows >= j * bn + jnp.arange(bn)[None, :], s, -jnp.inf)
            m_new = jnp.maximum(m, s.max(axis=1))
            p = jnp.exp(s - m_new[:, None])
            alpha = jnp.exp(m - m_new)
            return m_new, l * alpha + p.sum(axis=1), acc * alpha[:, None] + jnp.dot(p, vt, precision=_HI)

        init = (jnp.full((bm,), -jnp.inf, jnp.float32), jnp.zeros((bm,), jnp.float32), jnp.zeros((bm, D), jnp.float32))
        _, l, acc = jax.lax.fori_loop(0, (i * bm + bm + bn - 1) // bn, step, init)  # key tiles up to the diagonal
        o_ref[...] = acc / l[:, None]

    tile = pl.BlockSpec((None, bm, None, D), lambda bh, i: (bh // H, i, bh % H, 0))
    whole = pl.BlockSpec((None, S, None, D), lambda bh, i: (bh // H, 0, bh % H, 0))
    call = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(q.shape, jnp.float32), grid=(B * H, S // bm),
                          in_specs=[tile, whole, whole], out_specs=tile, interpret=True)
    return jax.jit(call)


def main(argv):
    which, src, dst, reps = argv[0], argv[1], argv[2], int(argv[3])
    with np.load(src) as z:
        inputs = [jnp.asarray(z[f"arr_{i}"].astype(np.float32)) for i in range(len(z.files))]
    fn = (gemm if which == "gemm" else attention)(*inputs)
    t0 = time.perf_counter()
    result = fn(*inputs).block_until_ready()
    first = time.perf_counter() - t0
    fn(*inputs).block_until_ready()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(*inputs).block_until_ready()
        times.append(time.perf_counter() - t0)
    np.savez(dst, first=first, warm=statistics.median(times), result=np.asarray(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
