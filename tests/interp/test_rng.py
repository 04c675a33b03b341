"""``T.rng_init`` / ``T.rng_rand`` / ``T.rng_rand_float``: bit-exact Philox4x32-10 streams (Random123's
known-answer vectors; cuRAND's ``curand_init(seed, seq, off)`` + ``curand()`` positions), per thread in
program order and per element of a one-thread ``T.Parallel``; refusals located."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim as tilelang
import tilesim.language as T
from tilesim.backends.cuda.check import cuda_twin
from tilesim.errors import KernelError
from tilesim.philox import draw, philox4x32_10


@pytest.mark.parametrize("ctr_key, want", [
    ((0, 0, 0, 0, 0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 6, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344, 0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
])
def test_philox_known_answers(ctr_key, want):
    got = philox4x32_10(*[np.uint64(v) for v in ctr_key])
    assert tuple(int(x) for x in got) == want


def test_draw_positions_follow_the_counter():
    seed, seq = 0x1234_5678_9ABC, 7
    words = philox4x32_10(np.uint64(5), np.uint64(0), np.uint64(seq), np.uint64(0),
                          np.uint64(seed & 0xFFFFFFFF), np.uint64(seed >> 32))
    np.testing.assert_array_equal(draw(seed, seq, np.arange(20, 24)), np.array(words, dtype=np.uint32))


def per_thread(nthreads, ndraws, seed, off):
    @T.prim_func
    def main(A: T.Tensor((2, nthreads, ndraws), "uint32"), F: T.Tensor((2, nthreads), "float32")):
        with T.Kernel(2, threads=nthreads) as bx:
            tx = T.get_thread_binding()
            T.rng_init(seed, None, off)
            for k in T.serial(ndraws):
                A[bx, tx, k] = T.rng_rand()
            F[bx, tx] = T.rng_rand_float()
    return main


@settings(max_examples=10, deadline=None)
@given(nthreads=st.integers(1, 9), ndraws=st.integers(1, 7), seed=st.integers(0, 2**40), off=st.integers(0, 50))
def test_per_thread_draws_in_program_order(nthreads, ndraws, seed, off):
    a, f = np.zeros((2, nthreads, ndraws), np.uint32), np.zeros((2, nthreads), np.float32)
    tilelang.compile(per_thread(nthreads, ndraws, seed, off))(a, f)
    b, t, k = np.meshgrid(np.arange(2), np.arange(nthreads), np.arange(ndraws), indexing="ij")
    seq = t + b * nthreads  # TileLang's default subsequence: tx + bx * threads_x
    np.testing.assert_array_equal(a, draw(seed, seq, off + k))
    u = draw(seed, seq[..., 0], off + ndraws).astype(np.float32) * np.float32(2.0 ** -32) + np.float32(2.0 ** -33)
    np.testing.assert_array_equal(f, u)
    assert (f > 0).all() and (f <= 1).all()


def parallel_fill(M, per_block, seed):
    @T.prim_func
    def main(A: T.Tensor((M,), "uint32"), B: T.Tensor((M,), "uint32")):
        with T.Kernel(T.ceildiv(M, per_block), threads=1) as bx:
            T.rng_init(seed, 0, bx * per_block)
            for j in T.Parallel(per_block):
                if bx * per_block + j < M:
                    A[bx * per_block + j] = T.rng_rand()
            if bx * per_block < M:  # the stream moved past the loop's elements
                B[bx * per_block] = T.rng_rand()
    return main


@pytest.mark.parametrize("M, per_block", [(100, 32), (7, 8), (64, 64)])
def test_parallel_elements_draw_in_row_major_order(M, per_block):
    a, b = np.zeros(M, np.uint32), np.zeros(M, np.uint32)
    tilelang.compile(parallel_fill(M, per_block, 42))(a, b)
    np.testing.assert_array_equal(a, draw(42, 0, np.arange(M)))
    starts = np.arange(0, M, per_block)
    np.testing.assert_array_equal(b[starts], draw(42, 0, starts + per_block))


def _bad(mode):
    @T.prim_func
    def main(A: T.Tensor((8,), "uint32"), F: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=8 if mode == "threads" else 1) as bx:
            if mode != "before":
                T.rng_init(1, 0, 0, generator="curandStateXORWOW_t" if mode == "generator" else
                           "curandStatePhilox4_32_10_t")
            if mode in ("threads", "twice"):
                for i in T.Parallel(8):
                    A[i] = T.rng_rand() + (T.rng_rand() if mode == "twice" else 0)
            elif mode == "normal":
                F[0] = T.rng_rand_float(dist="normal")
            else:
                A[0] = T.rng_rand()
    return main


@pytest.mark.parametrize("mode, msg", [("before", "before T.rng_init"), ("threads", "block of 8 threads"),
                                       ("twice", "second"), ("normal", "normal"), ("generator", "XORWOW")])
def test_rng_errors_are_located(mode, msg):
    with pytest.raises(KernelError, match=msg) as ei:
        tilelang.compile(_bad(mode))
    assert ei.value.loc is not None and ei.value.loc.line > 0


def test_cuda_backend_refuses_the_draws():
    pytest.importorskip("numba_cuda")
    with pytest.raises(KernelError, match="not supported by the CUDA backend") as ei:
        cuda_twin(tilelang.compile(per_thread(4, 2, 1, 0))).get_kernel_source()
    assert ei.value.loc is not None
