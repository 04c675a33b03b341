"""The CPU target's fused tiled-GEMM K loop (tilesim/backends/cpu/codegen_gemm_loop.py): the runtime computes
the group products before the blocks run, the blocks add their tiles. Its results are the interpreter's
fused path bit for bit (the same products, added the same way), on shapes the tiles do not divide, and it
falls back to the loop as written whenever the interpreter would."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
import tilesim as tilelang
import tilesim.language as T
from tilesim.backends.cpu import available
from tilesim.backends.interp import gemm_loop
from tilesim.kernel import JITKernel
from tilesim.testing.strategies import dim, random_array

from ..core_kernels import matmul_dynamic
from ..interp.test_gemm_loop import batched_gemm_b_per_row, gemm_variant

pytestmark = pytest.mark.skipif(not available(), reason="numba and scipy are not installed")


def on(kernel, target):
    return JITKernel(kernel.prim_func, out_idx=kernel.out_idx, target=target)


def same_bits(x, y):
    x, y = np.ascontiguousarray(x), np.ascontiguousarray(y)
    assert x.shape == y.shape and np.array_equal(x.view(np.uint8), y.view(np.uint8))


@tilelang.jit(out_idx=[-1])
def batched_gemm(Bt, M, N, K, bm=32, bn=16, bk=16, clear_in_loop=False):
    """One GEMM per bz; with ``clear_in_loop`` the accumulator is cleared at the first step instead of
    before the loop (``if k == 0: T.fill(C, 0)``)."""
    @T.prim_func
    def main(A: T.Tensor((Bt, M, K), "float32"), B: T.Tensor((Bt, K, N), "float32"),
             C: T.Tensor((Bt, M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), Bt) as (bx, by, bz):
            A_s = T.alloc_shared((bm, bk), "float32")
            B_s = T.alloc_shared((bk, bn), "float32")
            C_l = T.alloc_fragment((bm, bn), "float32")
            if not clear_in_loop:
                T.fill(C_l, 1.5)  # the loop adds to what C holds
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[bz, by * bm, k * bk], A_s)
                T.copy(B[bz, k * bk, bx * bn], B_s)
                if clear_in_loop:
                    if k == 0:
                        T.fill(C_l, 0)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[bz, by * bm, bx * bn])

    return main


@settings(max_examples=10, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(["float32", "float16", "bfloat16"]),
       trans_a=st.booleans(), trans_b=st.booleans())
def test_fused_loop_equals_the_interpreter_bitwise(data, dtype, trans_a, trans_b):
    bm, bn, bk = 32, 16, 16
    M, N, K = data.draw(dim(bm)), data.draw(dim(bn)), data.draw(dim(bk))  # tiles do not divide
    k = matmul_dynamic(bm, bn, bk, trans_A=trans_a, trans_B=trans_b, dtype=dtype)
    rng = np.random.default_rng(M * 1000 + N * 10 + K)
    a = random_array(rng, (K, M) if trans_a else (M, K), dtype)
    b = random_array(rng, (N, K) if trans_b else (K, N), dtype)
    cpu = on(k, "cpu")
    assert "FP0" in cpu.program.source and cpu.program.fallback is None
    same_bits(cpu(a, b), on(k, "interp")(a, b))


@pytest.mark.parametrize("clear_in_loop", [False, True])
def test_batched_grid_groups_and_first_step_clear(clear_in_loop):
    rng = np.random.default_rng(7)
    a = random_array(rng, (3, 70, 40), "float32")
    b = random_array(rng, (3, 40, 50), "float32")
    k = batched_gemm(3, 70, 50, 40, clear_in_loop=clear_in_loop)
    got = on(k, "cpu")(a, b)
    same_bits(got, on(k, "interp")(a, b))
    want = a.astype(np.float64) @ b + (0 if clear_in_loop else 1.5)
    assert np.allclose(got, want, rtol=1e-5, atol=1e-4)


def test_row_groups_equal_the_interpreter():
    rng = np.random.default_rng(8)
    M, N, K = 100, 70, 48
    a = random_array(rng, (M, K), "float32")
    b = random_array(rng, (-(-M // 32), K, N), "float32")
    k = batched_gemm_b_per_row(M, N, K)
    same_bits(on(k, "cpu")(a, b), on(k, "interp")(a, b))


def test_the_loop_as_written_runs_when_the_products_are_not_computed(monkeypatch):
    """Options that ask for the plain path, and launches over the size limit, run the generated loop."""
    rng = np.random.default_rng(9)
    a, b = random_array(rng, (90, 60), "float32"), random_array(rng, (60, 40), "float32")
    k = matmul_dynamic(32, 16, 16, dtype="float32")
    cpu = on(k, "cpu")
    fused = cpu(a, b)
    got = []
    real = gemm_loop.launch_products
    monkeypatch.setattr(gemm_loop, "launch_products", lambda plan, ctx: got.append(real(plan, ctx)) or got[-1])
    plain = cpu.run(a, b, options=tilesim.InterpOptions(fuse_gemm_loops=False))
    monkeypatch.setattr(gemm_loop, "LAUNCH_BYTES", 1024)
    small = cpu(a, b)
    assert len(got) == 2 and got[0] is None and got[1] is None  # declined: the option, then the size limit
    exact = a.astype(np.float64) @ b
    for c in (fused, plain, small):
        assert np.allclose(c, exact, rtol=1e-5, atol=1e-4)
    same_bits(plain, small)  # both the per-tile loop


def test_loops_outside_the_pattern_are_not_fused():
    for variant in ("epilogue_in_loop", "tile_read_after"):
        cpu = on(gemm_variant(64, 64, 64, variant), "cpu")
        assert "FP0" not in cpu.program.source
    rng = np.random.default_rng(10)
    a, b = random_array(rng, (64, 64), "float32"), random_array(rng, (64, 64), "float32")
    k = gemm_variant(64, 64, 64, "epilogue_in_loop")
    assert np.allclose(on(k, "cpu")(a, b), on(k, "interp")(a, b), rtol=1e-6, atol=1e-6)


def test_concurrent_calls_from_two_threads_keep_their_own_products():
    """The products live in a per-thread array: two threads calling one kernel do not see each other's."""
    import concurrent.futures

    rng = np.random.default_rng(11)
    k = on(matmul_dynamic(32, 32, 16, dtype="float32"), "cpu")
    pairs = [(random_array(rng, (96, 48), "float32"), random_array(rng, (48, 64), "float32")) for _ in range(2)]
    k(*pairs[0])
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        outs = [list(ex.map(lambda p: k(*p), pairs)) for _ in range(5)]
    for got in outs:
        for (a, b), c in zip(pairs, got):
            assert np.allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)


def test_the_pool_choice_changes_no_value(monkeypatch):
    """A launch times its first warm calls on the pool and on one thread, then keeps the faster; every call's
    result is the same bits (blocks are independent)."""
    from tilesim.backends.cpu import runtime

    monkeypatch.setattr(runtime, "_workers", lambda: 2)
    rng = np.random.default_rng(12)
    k = on(gemm_variant(96, 64, 48, "epilogue_in_loop"), "cpu")  # not fused: its blocks may use the pool
    a, b = random_array(rng, (96, 48), "float32"), random_array(rng, (48, 64), "float32")
    outs = [k(a, b) for _ in range(2 * runtime.TRIALS + 3)]
    for o in outs[1:]:
        same_bits(o, outs[0])
    trials = k.program.launches[0].trials
    assert len(trials[True]) == runtime.TRIALS and len(trials[False]) == runtime.TRIALS
