"""The fused tiled-GEMM K loop (tilesim/backends/interp/gemm_loop.py): which loops it takes, that it computes the
plain path's values (up to summation order), and that its results do not depend on chunking."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
import tilesim as tilelang
import tilesim.language as T
from tilesim import dtypes as dt
from tilesim.backends.interp import gemm_loop
from tilesim.errors import KernelRuntimeError
from tilesim.examples import matmul
from tilesim.testing.strategies import dim, random_array

from ..core_kernels import matmul_dynamic

PLAIN = tilesim.InterpOptions(fuse_gemm_loops=False)
CHUNKINGS = (tilesim.InterpOptions(threads=1), tilesim.InterpOptions(mode="serial"),
             tilesim.InterpOptions(threads=3, chunk_bytes=2**16))


def _plans(kernel, **grid):
    pf = kernel.prim_func
    launch = next(s for s in pf.body if s.__class__.__name__ == "Launch")
    return gemm_loop._plan(launch, grid.get("grid", (2, 2, 1)), set())


def _same_bits(outs):
    first = np.ascontiguousarray(outs[0]).view(np.uint8)
    for o in outs[1:]:
        assert np.array_equal(first, np.ascontiguousarray(o).view(np.uint8))


def test_the_canonical_loop_is_planned_as_a_grid_group():
    plans = list(_plans(matmul(256, 256, 256, 64, 64, 32, dtype="float32")).values())
    assert len(plans) == 1 and plans[0].group == "grid"
    assert plans[0].tile_a == (64, 32) and plans[0].tile_b == (32, 64)


@tilelang.jit(out_idx=[-1])
def gemm_variant(M, N, K, variant, bm=32, bn=32, bk=16):
    """The canonical GEMM with one change that must keep the loop on the plain path:
    ``epilogue_in_loop`` (a fourth statement in the loop) or ``tile_read_after`` (A_s observed later)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float32")
            B_s = T.alloc_shared((bk, bn), "float32")
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk)):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
                if variant == "epilogue_in_loop":
                    for i, j in T.Parallel(bm, bn):
                        C_l[i, j] = C_l[i, j] * 0.5
            if variant == "tile_read_after":
                for i, j in T.Parallel(bm, bn):
                    C_l[i, j] = C_l[i, j] + A_s[i, j % bk]
            T.copy(C_l, C[by * bm, bx * bn])

    return main


@tilelang.jit(out_idx=[-1])
def batched_gemm_b_per_row(M, N, K, bm=32, bn=32, bk=16):
    """B's tile depends on by (a per-row-of-blocks weight): only row groups are valid."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((T.ceildiv(M, bm), K, N), "float32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float32")
            B_s = T.alloc_shared((bk, bn), "float32")
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            for k in T.serial(T.ceildiv(K, bk)):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[by, k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])

    return main


def test_loops_that_do_not_match_run_plainly():
    assert not _plans(gemm_variant(64, 64, 64, "epilogue_in_loop"))
    assert not _plans(gemm_variant(64, 64, 64, "tile_read_after"))
    a, b = _operands(np.random.default_rng(6), 64, 64, 64, "float32")
    c = gemm_variant(64, 64, 64, "epilogue_in_loop")(a, b)
    want = np.zeros((64, 64))
    for k0 in range(0, 64, 16):  # C = (C + A_k @ B_k) / 2 per step
        want = (want + a[:, k0:k0 + 16].astype(np.float64) @ b[k0:k0 + 16]) * 0.5
    assert np.allclose(c, want, rtol=1e-5, atol=1e-5)
    plans = list(_plans(batched_gemm_b_per_row(64, 64, 64)).values())
    assert len(plans) == 1 and plans[0].group == "row"


def test_a_group_too_large_for_one_product_falls_back_to_rows(monkeypatch):
    monkeypatch.setattr(gemm_loop, "GROUP_BYTES", 64 * 64 * 4 * 2)  # two blocks' accumulators
    plans = list(gemm_loop._plan(next(s for s in matmul(256, 256, 64, 64, 64, 32, dtype="float32").prim_func.body
                                      if s.__class__.__name__ == "Launch"), (2, 4, 1), set()).values())
    assert plans[0].group == "row"


def _operands(rng, M, N, K, dtype, trans_a=False, trans_b=False):
    a = random_array(rng, (K, M) if trans_a else (M, K), dtype)
    b = random_array(rng, (N, K) if trans_b else (K, N), dtype)
    return a, b


def _reference(a, b, trans_a, trans_b):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return (a64.T if trans_a else a64) @ (b64.T if trans_b else b64)


@settings(max_examples=12, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(["float32", "float16", "bfloat16", "float8_e4m3fn"]),
       trans_a=st.booleans(), trans_b=st.booleans())
def test_fused_equals_plain_and_does_not_depend_on_chunking(data, dtype, trans_a, trans_b):
    bm, bn, bk = 32, 16, 16
    M, N, K = data.draw(dim(bm)), data.draw(dim(bn)), data.draw(dim(bk))  # tiles do not divide
    k = matmul_dynamic(bm, bn, bk, trans_A=trans_a, trans_B=trans_b, dtype=dtype)
    a, b = _operands(np.random.default_rng(M * 1000 + N * 10 + K), M, N, K, dtype, trans_a, trans_b)
    fused = [k.run(a, b, options=o) for o in CHUNKINGS]
    _same_bits(fused)
    plain = k.run(a, b, options=PLAIN)
    ref = _reference(a, b, trans_a, trans_b)
    scale = np.sqrt(K) * max(1.0, float(np.abs(ref).max()))
    assert np.allclose(fused[0], plain, rtol=1e-5, atol=1e-5 * scale)
    assert np.allclose(fused[0], ref, rtol=1e-4, atol=1e-4 * scale)


@settings(max_examples=6, deadline=None)
@given(data=st.data())
def test_row_groups_match_the_plain_path(data):
    bm, bn, bk = 32, 32, 16
    M, N, K = data.draw(dim(bm, 4)), data.draw(dim(bn, 4)), data.draw(dim(bk))
    rng = np.random.default_rng(M + N + K)
    a = random_array(rng, (M, K), "float32")
    b = random_array(rng, (-(-M // bm), K, N), "float32")
    k = batched_gemm_b_per_row(M, N, K, bm, bn, bk)
    fused = [k.run(a, b, options=o) for o in CHUNKINGS]
    _same_bits(fused)
    ref = np.concatenate([a[i * bm:(i + 1) * bm].astype(np.float64) @ b[i] for i in range(-(-M // bm))])
    assert np.allclose(fused[0], k.run(a, b, options=PLAIN), rtol=1e-5, atol=1e-4)
    assert np.allclose(fused[0], ref, rtol=1e-4, atol=1e-4)


def test_tf32_rounding_applies_to_the_fused_operands():
    rng = np.random.default_rng(3)
    a, b = _operands(rng, 70, 50, 40, "float32")
    k = matmul_dynamic(32, 16, 16, dtype="float32")
    tf = k.run(a, b, options=tilesim.InterpOptions(tf32=True))
    tf_plain = k.run(a, b, options=tilesim.InterpOptions(tf32=True, fuse_gemm_loops=False))
    assert np.allclose(tf, tf_plain, rtol=1e-6, atol=1e-5)
    exact = dt.to_tf32(a).astype(np.float64) @ dt.to_tf32(b).astype(np.float64)
    assert np.allclose(tf, exact, rtol=1e-5, atol=1e-4)
    assert not np.allclose(tf, a.astype(np.float64) @ b, rtol=1e-6, atol=0)


def test_oob_error_mode_takes_the_plain_path_and_reports():
    rng = np.random.default_rng(4)
    a, b = _operands(rng, 40, 16, 16, "float32")
    k = matmul_dynamic(32, 16, 16, dtype="float32")
    with pytest.raises(KernelRuntimeError, match="out-of-bounds read of global buffer A"):
        k.run(a, b, options=tilesim.InterpOptions(oob="error"))


def test_c_tiles_start_from_their_values_before_the_loop():
    """The accumulator is not cleared by the fused loop: C = C0 + A @ B (here C0 = 0 by T.clear)."""
    rng = np.random.default_rng(5)
    a, b = _operands(rng, 64, 64, 64, "float32")
    c = matmul(64, 64, 64, 32, 32, 16, dtype="float32")(a, b)
    assert np.allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)
