"""Chunk-level threads, deferred on-chip allocation and the buffer pool of the interpreter.

Threaded runs must be bitwise equal to sequential runs and to ``mode="serial"``; errors and the
progress callback must look as in a sequential run; a never-written on-chip buffer still reads NaN.
"""

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
import tilesim as tilelang
import tilesim.language as T
from tilesim import dtypes as dt
from tilesim.backends.interp import chunks, pool
from tilesim.backends.interp.options import INT_SENTINEL
from tilesim.backends.interp.state import Storage
from tilesim.errors import KernelRuntimeError, KernelTypeError
from tilesim.ir import nodes as N
from tilesim.testing.strategies import dim, random_array

from .test_semantics import read_past_edge

SERIAL = tilesim.InterpOptions(mode="serial")
ONE = tilesim.InterpOptions(threads=1)
TWO = tilesim.InterpOptions(threads=2)
THREE = tilesim.InterpOptions(threads=3, chunk_bytes=2**20)


def _bits(x):
    x = np.ascontiguousarray(x)
    return x.view(np.uint8)


def assert_all_equal(kernel, inputs, options=(ONE, TWO, THREE, SERIAL)):
    outs = [kernel.run(*inputs, options=o) for o in options]
    outs = [o if isinstance(o, list) else [o] for o in outs]
    for other, o in zip(outs[1:], options[1:]):
        for a, b in zip(outs[0], other):
            assert np.array_equal(_bits(a), _bits(b)), f"threads=1 vs {o}"
    return outs[0]


def _launches(kernel):
    return [s for s in kernel.prim_func.body if isinstance(s, N.Launch)]


# --------------------------------------------------------------------------------------------- options
@pytest.mark.parametrize("bad", [-1, 1.5, True, "2", None])
def test_threads_option_is_validated(bad):
    with pytest.raises(KernelTypeError, match="threads"):
        tilesim.InterpOptions(threads=bad)


def test_threads_option_accepts_auto_off_and_counts():
    for n in (0, 1, 2, 16):
        assert tilesim.InterpOptions(threads=n).threads == n
    assert tilesim.InterpOptions().threads == 0
    assert 1 <= chunks.resolve_threads(0) <= chunks.MAX_AUTO_THREADS
    assert chunks.resolve_threads(5) == 5


# --------------------------------------------------------------------------------------------- planning
def test_plan_serial_atomics_races_and_small_grids(monkeypatch):
    from kernels.gemm import matmul_splitk
    from tilesim.examples import matmul
    monkeypatch.setattr(chunks, "usable_cpus", lambda: 2)
    launch = _launches(matmul(128, 128, 64, 64, 64, 32, dtype="float32"))[0]
    atomic = _launches(matmul_splitk(64, 64, 64, split_k=2, dtype="float16", block_M=32, block_N=32,
                                     block_K=16))[-1]
    big = 64 * 2**20
    assert chunks.plan(launch, 100, 1000, SERIAL) == (1, 1)
    assert chunks.plan(launch, 100, 1000, TWO) == (50, 2)
    assert chunks.plan(launch, 7, 1000, THREE) == (3, 3)
    assert chunks.plan(launch, 1, 1000, TWO) == (1, 1)
    assert chunks.plan(atomic, 100, 1000, TWO)[1] == 1
    assert chunks.plan(launch, 100, 1000, tilesim.InterpOptions(threads=2, races=True))[1] == 1
    # auto: small launches stay on one thread, big ones use the CPUs
    assert chunks.plan(launch, 64, 100_000, tilesim.InterpOptions())[1] == 1
    chunk, workers = chunks.plan(launch, 1000, 100_000, tilesim.InterpOptions(chunk_bytes=big))
    assert workers == 2 and chunk * 100_000 >= chunks.MIN_THREADED_CHUNK_BYTES
    assert chunks.plan(atomic, 1000, 100_000, tilesim.InterpOptions(chunk_bytes=big))[1] == 1


@settings(max_examples=50)
@given(total=st.integers(1, 5000), per_block=st.integers(1, 2**22), threads=st.integers(0, 8),
       chunk_bytes=st.integers(1, 2**28))
def test_plan_covers_the_grid_within_the_memory_bound(total, per_block, threads, chunk_bytes):
    from tilesim.examples import matmul
    launch = _launches(matmul(64, 64, 32, 64, 64, 32, dtype="float32"))[0]
    opts = tilesim.InterpOptions(threads=threads, chunk_bytes=chunk_bytes)
    chunk, workers = chunks.plan(launch, total, per_block, opts)
    assert 1 <= chunk <= total and 1 <= workers <= max(1, chunks.resolve_threads(threads))
    if chunk > 1:  # at most `workers` chunks in flight, together within chunk_bytes
        assert workers * chunk * per_block <= chunk_bytes
    if threads >= 2 and total >= 2:
        assert workers >= 2 and -(-total // chunk) >= min(threads, total)


# --------------------------------------------------------------------------------------------- bitwise equality
@settings(max_examples=6)
@given(st.sampled_from([16, 32]), st.sampled_from([16, 32]), st.sampled_from([16]),
       st.sampled_from(["float32", "float16", "bfloat16"]), st.data())
def test_gemm_threads_equal_sequential_and_serial(bm, bn, bk, dtype, data):
    from tilesim.examples import matmul
    M, Nn, K = data.draw(dim(bm, 3)), data.draw(dim(bn, 3)), data.draw(dim(bk, 3))
    rng = np.random.default_rng(M * 1000 + Nn * 10 + K)
    a, b = random_array(rng, (M, K), dtype), random_array(rng, (K, Nn), dtype)
    c = assert_all_equal(matmul(M, Nn, K, bm, bn, bk, dtype=dtype), (a, b))[0]
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.allclose(c, ref, rtol=1e-2, atol=1e-2 * np.sqrt(K))


@settings(max_examples=4)
@given(st.integers(1, 3), dim(16, 3), st.sampled_from([True, False]), st.sampled_from(["float32", "float16"]))
def test_flash_attention_threads_equal_sequential_and_serial(heads, seq, causal, dtype):
    from tilesim.examples import flash_attention
    rng = np.random.default_rng(seq)
    q, k, v = (random_array(rng, (1, seq, heads, 32), dtype) for _ in range(3))
    kern = flash_attention(1, heads, seq, 32, is_causal=causal, block_M=16, block_N=16, dtype=dtype)
    o = assert_all_equal(kern, (q, k, v))[0]
    assert np.isfinite(o.astype(np.float32)).all()


def test_splitk_with_atomics_falls_back_to_one_thread_and_stays_equal():
    from kernels.gemm import matmul_splitk, ref_gemm
    k = matmul_splitk(50, 40, 70, split_k=3, dtype="float16", block_M=32, block_N=32, block_K=16, num_stages=2)
    assert any(chunks._has_atomic(s.body) for s in _launches(k))
    rng = np.random.default_rng(1)
    ins = [random_array(rng, (50, 70), "float16"), random_array(rng, (70, 40), "float16", scale=0.1)]
    out = assert_all_equal(k, ins)[0]
    assert np.allclose(out.astype(np.float32), ref_gemm(*ins), rtol=1e-2, atol=1e-2)


@settings(max_examples=4)
@given(st.integers(1, 40), st.integers(1, 300), st.sampled_from([1, 2, 4]))
def test_rmsnorm_threads_equal_sequential_and_serial(M, Nn, block_M):
    from kernels.norms import rms_norm
    rng = np.random.default_rng(M * 301 + Nn)
    x, w = random_array(rng, (M, Nn), "bfloat16"), random_array(rng, (Nn,), "bfloat16")
    for block_N in (None, 64):
        assert_all_equal(rms_norm(M, Nn, block_M=block_M, block_N=block_N, dtype="bfloat16"), (x, w))


def test_big_launch_uses_threads_by_default_and_matches():
    """A grid big enough for auto threads (forced small threshold) gives the sequential bits."""
    from tilesim.examples import matmul
    rng = np.random.default_rng(3)
    a, b = random_array(rng, (200, 96), "float32"), random_array(rng, (96, 150), "float32")
    k = matmul(200, 150, 96, 32, 32, 32, dtype="float32")
    seq = k.run(a, b, options=ONE)
    old = chunks.MIN_THREADED_CHUNK_BYTES
    chunks.MIN_THREADED_CHUNK_BYTES = 1
    try:
        seen = []
        auto = k.run(a, b, options=tilesim.InterpOptions(), progress=lambda *p: seen.append(p))
    finally:
        chunks.MIN_THREADED_CHUNK_BYTES = old
    assert np.array_equal(_bits(seq), _bits(auto))
    if chunks.usable_cpus() >= 2:
        assert len(seen) >= 2


# --------------------------------------------------------------------------------------------- errors, progress
@tilelang.jit(out_idx=[-1])
def fails_in_blocks(G, spin):
    """Block 0 computes for a while, then reads F0 out of range; every other block at once reads F1."""

    @T.prim_func
    def main(Idx: T.Tensor((G,), "int32"), B: T.Tensor((G,), "float32")):
        with T.Kernel(G) as bx:
            F0 = T.alloc_fragment((4,), "float32")
            F1 = T.alloc_fragment((4,), "float32")
            acc = T.alloc_var("float32", 0.0)
            T.fill(F0, 1.0)
            T.fill(F1, 2.0)
            if bx == 0:
                for k in T.serial(spin):
                    acc = acc + F0[k % 4]
                B[bx] = F0[Idx[bx]] + acc
            else:
                B[bx] = F1[Idx[bx]]

    return main


def test_earliest_chunk_error_wins_even_if_a_later_chunk_fails_first():
    G = 4
    idx = np.full(G, 9, np.int32)  # every block reads out of range
    for opts in (ONE, TWO, tilesim.InterpOptions(threads=4)):
        with pytest.raises(KernelRuntimeError, match="fragment buffer F0"):
            fails_in_blocks(G, 3000).run(idx, options=opts)


def test_error_in_a_later_chunk_reports_progress_of_the_earlier_ones():
    G = 6
    idx = np.zeros(G, np.int32)
    idx[4] = 9  # only block 4 fails
    for opts in (ONE, tilesim.InterpOptions(threads=3), tilesim.InterpOptions(threads=6)):
        seen = []
        with pytest.raises(KernelRuntimeError, match="fragment buffer F1"):
            fails_in_blocks(G, 5).run(idx, options=opts, progress=lambda *p, seen=seen: seen.append(p[1]))
        assert seen == sorted(seen) and all(done <= 4 for done in seen)


def test_progress_is_called_in_launch_order_on_the_calling_thread():
    from tilesim.examples import matmul
    rng = np.random.default_rng(0)
    a, b = random_array(rng, (96, 40), "float32"), random_array(rng, (40, 112), "float32")
    k = matmul(96, 112, 40, 16, 16, 16, dtype="float32")  # 7 x 6 = 42 blocks
    caller = threading.get_ident()
    for opts in (ONE, tilesim.InterpOptions(threads=3), tilesim.InterpOptions(threads=4, chunk_bytes=2**18)):
        calls = []
        k.run(a, b, options=opts,
              progress=lambda i, d, t, calls=calls: calls.append((i, d, t, threading.get_ident())))
        done = [c[1] for c in calls]
        assert done == sorted(done) and len(set(done)) == len(done) and done[-1] == 42
        assert {c[0] for c in calls} == {0} and {c[2] for c in calls} == {42}
        assert {c[3] for c in calls} == {caller}
        if opts.threads > 1:
            assert len(calls) >= opts.threads


def test_run_chunks_order_errors_and_errstate_on_workers():
    import time

    def fn(start):
        time.sleep(0.02 if start == 1 else 0.005)  # chunk 1 is slow: later chunks fail first
        if start in (1, 3, 5):
            raise ValueError(start)
        return (start, threading.get_ident(), np.geterr()["over"])

    for workers in (1, 2, 4):
        done = []
        with np.errstate(over="raise"), pytest.raises(ValueError) as info:
            chunks.run_chunks(range(8), fn, done.append, workers)
        assert info.value.args == (1,) and [d[0] for d in done] == [0]
        assert done[0][2] == "raise"

    def ok(start):
        time.sleep(0.01)
        return (start, threading.get_ident(), np.geterr()["over"])

    done = []
    with np.errstate(over="raise"):
        chunks.run_chunks(range(6), ok, done.append, 3)
    assert [d[0] for d in done] == list(range(6)) and {d[2] for d in done} == {"raise"}
    assert len({d[1] for d in done}) >= 2  # the pool's threads took some of the chunks


def test_caller_errstate_reaches_the_worker_threads():
    from tilesim.examples import matmul
    a = np.full((64, 32), 1e30, np.float32)
    b = np.full((32, 64), 1e30, np.float32)
    k = matmul(64, 64, 32, 16, 16, 16, dtype="float32")
    with np.errstate(over="ignore", invalid="ignore"):
        assert np.isinf(k.run(a, b, options=TWO)).all()
    for opts in (ONE, TWO):
        with np.errstate(over="raise"), pytest.raises((KernelRuntimeError, FloatingPointError)):
            k.run(a, b, options=opts)


# --------------------------------------------------------------------------------------------- deferred allocation
@tilelang.jit(out_idx=[-1])
def reads_unwritten(N, dtype):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((3, N), dtype)):
        with T.Kernel(1) as bx:
            never = T.alloc_fragment((N,), dtype)
            half = T.alloc_fragment((N,), dtype)
            full = T.alloc_fragment((N,), dtype)
            T.fill(half[0:1], A[0])  # a partial fill keeps the rest uninitialised
            T.copy(A, full)  # a whole-buffer copy: adopted without the NaN fill
            T.copy(never, B[0, 0])
            T.copy(half, B[1, 0])
            T.copy(full, B[2, 0])

    return main


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32", "int8", "uint8"])
def test_never_written_onchip_memory_still_reads_the_uninit_value(dtype):
    a = (np.arange(5) + 1).astype(dt.np_dtype(dtype))
    for opts in (ONE, SERIAL, tilesim.InterpOptions(uninit="zero")):
        b = reads_unwritten(5, dtype).run(a, options=opts)
        if opts.uninit == "zero":
            expect = 0
        elif dt.is_float(dtype):
            expect = np.nan
        else:
            info = np.iinfo(dt.np_dtype(dtype))
            expect = max(info.min, min(info.max, INT_SENTINEL)) if info.min < 0 else info.max
        for row in (b[0], b[1][1:]):
            got = row.astype(np.float64)
            assert (np.isnan(got).all() if expect is np.nan else (got == expect).all()), (opts, row)
        assert np.array_equal(b[1][:1], a[:1]) and np.array_equal(b[2], a)


def test_pool_reuse_does_not_leak_values_into_the_next_kernel():
    """The first kernel leaves finite values in pooled arrays; the second must still see NaN."""
    a = np.arange(1, 6, dtype=np.float32)
    reads_unwritten(5, "float32")(a)
    for _ in range(3):
        b = reads_unwritten(5, "float32")(a)
        assert np.isnan(b[0]).all() and np.isnan(b[1][1:]).all()


def test_storage_defers_and_reallocates():
    s = Storage({1: np.zeros(3)})
    s.defer(2, (2, 3), "float32", "nan")
    assert 2 not in s and list(s.values())[0].shape == (3,) and s.is_deferred(2)
    assert s.dtype_of(2) == np.float32 and s.is_deferred(2)  # seeing the dtype makes nothing
    assert np.isnan(s[2]).all() and not s.is_deferred(2)
    s[2][...] = 7
    s.defer(2, (2, 3), "float32", "nan")  # an Alloc run again gets fresh memory
    assert np.isnan(s[2]).all()
    s.defer(3, (4,), "int32", "nan")
    s[3] = np.ones(4, np.int32)  # installed over a deferred allocation
    assert not s.is_deferred(3) and (s[3] == 1).all()
    with pytest.raises(KeyError):
        s[99]


def test_pool_only_takes_arrays_nothing_else_refers_to():
    pool.clear()
    probe = np.empty(0)
    viewed = np.empty((128, 128))
    view = viewed[1:]
    pool.give_back(viewed, probe)
    shared = np.empty((128, 128))
    alias = shared
    pool.give_back(shared, probe)
    not_owner = np.empty((256, 128))[:128]
    pool.give_back(not_owner, probe)
    small = np.empty((8, 8))
    pool.give_back(small, probe)
    assert pool.empty((128, 128), np.float64) is not viewed and pool._held == 0
    mine = np.empty((128, 128))
    ident = id(mine)
    pool.give_back(mine, probe)
    del mine
    assert pool._held == 128 * 128 * 8
    assert id(pool.empty((128, 128), np.float64)) == ident and pool._held == 0
    assert view.base is viewed and alias is shared
    pool.clear()




def test_oob_error_holds_for_one_block_chunks():
    """Threads split small grids into one-block chunks, where block indices are plain ints."""
    for extra in (dict(mode="serial"), dict(threads=1), dict(threads=2), dict(threads=1, chunk_bytes=1)):
        k = tilesim.compile(read_past_edge(10, 8).prim_func, out_idx=[-1],
                            options=tilesim.InterpOptions(oob="error", **extra))
        with pytest.raises(KernelRuntimeError, match="out-of-bounds read of global buffer A"):
            k(np.ones(10, np.float32))
    ok = tilesim.compile(read_past_edge(16, 8).prim_func, out_idx=[-1],
                         options=tilesim.InterpOptions(oob="error", threads=2))
    assert np.array_equal(ok(np.arange(16, dtype=np.float32)), np.arange(16, dtype=np.float32))
