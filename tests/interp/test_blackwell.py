"""Blackwell programs at tile level: tensor memory, tcgen05 gemms and their mbarrier arrivals, the SM120
block-scaled gemm, fp4 tensors to and from torch, the refusals (2-CTA operations outside clusters, misused scale moves, the CUDA
lowering) and the cost analysis of tensor memory. Also the fix of ``T.gemm(clear_accum=<kernel expr>)``."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tilesim as tilelang
import tilesim.language as T
from tilesim.backends.interp import InterpOptions
from tilesim.binding import numpy_to_torch, pack_fp4, unpack_fp4
from tilesim.errors import KernelError, KernelRuntimeError, KernelTypeError
from tilesim.ir import nodes as N
from tilesim.ir.printer import format_ir
from tilesim.ir.traverse import walk_stmts

FP4 = ml_dtypes.float4_e2m1fn


# ------------------------------------------------------------------------- tcgen05 gemm into tmem
@tilelang.jit(out_idx=[-1])
def tc_gemm(M, N, K, bm=32, bn=32, bk=32, in_dtype="float16", acc="float32", count=1, commit="mbar"):
    @T.prim_func
    def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((N, K), in_dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            a_s = T.alloc_shared((bm, bk), in_dtype)
            b_s = T.alloc_shared((bn, bk), in_dtype)
            c_t = T.alloc_tmem([bm, bn], acc)
            c_l = T.alloc_fragment((bm, bn), acc)
            mbar = T.alloc_barrier(count)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], a_s)
                T.copy(B[bx * bn, k * bk], b_s)
                if commit == "mbar":
                    T.tcgen05_gemm(a_s, b_s, c_t, transpose_B=True, mbar=mbar, clear_accum=k == 0)
                else:
                    T.tcgen05_gemm(a_s, b_s, c_t, transpose_B=True, mbar=None, clear_accum=k == 0)
                    T.tcgen05_mma_arrive(mbar)
                T.mbarrier_wait_parity(mbar, k % 2)
            T.copy(c_t, c_l)
            T.copy(c_l, C[by * bm, bx * bn])

    return main


@pytest.mark.parametrize("mode", ["batched", "serial"])
@pytest.mark.parametrize("commit", ["mbar", "arrive"])
def test_tcgen05_gemm_into_tensor_memory_matches_numpy(mode, commit):
    M, N, K = 70, 50, 100  # tiles do not divide
    rng = np.random.default_rng(0)
    A = rng.standard_normal((M, K)).astype(np.float16)
    B = rng.standard_normal((N, K)).astype(np.float16)
    k = tc_gemm(M, N, K, commit=commit)
    C = k(A, B) if mode == "batched" else k.run(A, B, options=InterpOptions(mode="serial"))
    np.testing.assert_allclose(C, A.astype(np.float32) @ B.astype(np.float32).T, rtol=1e-4, atol=1e-4)


@given(m=st.integers(1, 80), n=st.integers(1, 80), k=st.integers(1, 130))
def test_tcgen05_gemm_shapes(m, n, k):
    rng = np.random.default_rng(m * 10007 + n * 101 + k)
    A = rng.integers(-3, 4, (m, k)).astype(ml_dtypes.float8_e4m3fn)
    B = rng.integers(-3, 4, (n, k)).astype(A.dtype)
    C = tc_gemm(m, n, k, in_dtype="float8_e4m3fn")(A, B)
    np.testing.assert_array_equal(C, A.astype(np.float32) @ B.astype(np.float32).T)  # small ints: exact


def test_commit_is_one_arrival_per_block_so_a_larger_count_never_completes():
    A = np.ones((32, 32), np.float16)
    with pytest.raises(KernelRuntimeError, match=r"mbar\[0\] waited for parity 0 .* \(1 of 2 arrivals"):
        tc_gemm(32, 32, 32, count=2)(A, A)


def test_commit_in_per_thread_code_arrives_once_per_block():
    @tilelang.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float32")):
            with T.Kernel(3, threads=128):
                tx = T.get_thread_binding()
                mbar = T.alloc_barrier(1)
                if tx < 32:  # a warp commits: one arrival, not 32
                    T.tcgen05_mma_arrive(mbar)
                T.mbarrier_wait_parity(mbar, 0)  # phase 0 completed by the one commit
                T.mbarrier_wait_parity(mbar, 1)  # phase 1 has no arrival: an error in program order
                T.copy(A, B)

        return main

    # after one completion the current phase is 1: waiting on parity 1 does not return in program order
    with pytest.raises(KernelRuntimeError, match=r"for parity 1 .* \(0 of 1 arrivals in phase 1\)"):
        k()(np.arange(4, dtype=np.float32))


def test_ir_printer_and_lint_of_tensor_memory():
    k = tc_gemm(64, 64, 64)
    text = format_ir(k.prim_func)
    assert "c_t = T.alloc_tmem((32, 32), float32)" in text
    assert "T.tcgen05_mma_arrive(mbar[0])" in text
    assert "if (k == 0):" in text and "T.fill(c_t[0:32, 0:32], 0)" in text
    assert not [f for f in k.lint() if f.rule == "gemm-scope"]
    allocs = [s.buffer for s in walk_stmts(k.prim_func.body) if isinstance(s, N.Alloc)]
    assert [b.scope for b in allocs if b.name == "c_t"] == ["tmem"]


def test_cost_analysis_keeps_tensor_memory_out_of_registers():
    hw = pytest.importorskip("hwmodels").load("h200_sxm_141gb")
    from tilesim.analysis import analyze

    (prog,) = analyze(tc_gemm(256, 256, 256).prim_func, hw)
    assert "c_t" not in prog.local_bytes and "c_t" not in prog.fragment_bytes and "c_t" not in prog.shared_bytes
    assert prog.fragment_bytes["c_l"] == 32 * 32 * 4
    r = tc_gemm(256, 256, 256).simulate(hw="h200_sxm_141gb")
    assert r.time_s > 0


def test_cuda_lowering_refuses_tensor_memory():
    pytest.importorskip("numba")
    from tilesim.backends.cuda.lower import lower_program

    with pytest.raises(KernelTypeError, match=r"T.alloc_tmem \(c_t\) is Blackwell \(sm_100\) tensor memory"):
        lower_program(tc_gemm(64, 64, 64).prim_func, sim=True)


def _plans(kernel, grid):
    from tilesim.backends.interp import gemm_loop

    launch = next(s for s in kernel.prim_func.body if isinstance(s, N.Launch))
    return list(gemm_loop._plan(launch, grid, set()).values())


@given(m=st.integers(1, 90), n=st.integers(1, 90), k=st.integers(1, 130), commit=st.sampled_from(["mbar", "arrive"]))
def test_the_tcgen05_k_loop_runs_fused_and_equals_the_plain_path(m, n, k, commit):
    kern = tc_gemm(m, n, k, in_dtype="float32", commit=commit)
    (plan,) = _plans(kern, (-(-n // 32), -(-m // 32), 1))
    assert plan.clear and [b.op for b in plan.barriers] == ["commit", "wait"]
    rng = np.random.default_rng(m + 100 * n + 10000 * k)
    A = rng.integers(-8, 9, (m, k)).astype(np.float32)
    B = rng.integers(-8, 9, (n, k)).astype(np.float32)
    fused = kern(A, B)
    plain = kern.run(A, B, options=InterpOptions(fuse_gemm_loops=False))
    np.testing.assert_array_equal(fused, plain)  # small integers: exact in any summation order
    np.testing.assert_array_equal(fused, A @ B.T)


def test_the_fused_loop_replays_its_barriers():
    """A count one commit per step cannot reach fails at the first wait, fused or not."""
    A = np.ones((64, 64), np.float16)
    for opts in (InterpOptions(), InterpOptions(fuse_gemm_loops=False)):
        with pytest.raises(KernelRuntimeError, match=r"mbar\[0\] waited for parity 0"):
            tc_gemm(64, 64, 64, count=2).run(A, A, options=opts)


# ------------------------------------------------------------------ T.gemm(clear_accum=<kernel expr>)
@tilelang.jit(out_idx=[-1])
def gemm_clear_at(M, N, K, first, bk=16):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            a_s = T.alloc_shared((M, bk), "float32")
            b_s = T.alloc_shared((bk, N), "float32")
            acc = T.alloc_fragment((M, N), "float32")
            T.fill(acc, 1000.0)
            for k in T.serial(T.ceildiv(K, bk)):
                T.copy(A[0, k * bk], a_s)
                T.copy(B[k * bk, 0], b_s)
                T.gemm(a_s, b_s, acc, clear_accum=k == first)
            T.copy(acc, C)

    return main


@given(first=st.integers(0, 3), m=st.integers(1, 20), n=st.integers(1, 20))
def test_gemm_clear_accum_expression_clears_only_where_it_holds(first, m, n):
    K, bk = 64, 16
    rng = np.random.default_rng(first + 7 * m + 31 * n)
    A = rng.integers(-4, 5, (m, K)).astype(np.float32)
    B = rng.integers(-4, 5, (K, n)).astype(np.float32)
    C = gemm_clear_at(m, n, K, first)(A, B)
    want = A[:, first * bk:] @ B[first * bk:, :]
    np.testing.assert_array_equal(C, want)


# ------------------------------------------------------------------------------ block-scaled gemm
def _scales(rng, rows, groups, gran):
    if gran == 16:  # UE4M3 bytes: 0.5, 1, 1.5, 2, 4
        return rng.choice(np.array([0x30, 0x38, 0x3C, 0x40, 0x48], np.uint8), (rows, groups))
    return rng.integers(118, 136, (rows, groups)).astype(np.uint8)  # UE8M0 2^-9 .. 2^8


def _decode(s, gran):
    return s.view(ml_dtypes.float8_e4m3fn).astype(np.float32) if gran == 16 else np.exp2(s.astype(np.float32) - 127)


def _kmajor(words, rows=32):
    """Semantic words (R, W) of one tile -> TileLang's SM120 K-major chunk order (as the example's host code)."""
    R, W = words.shape
    flat = np.empty(R * W, words.dtype)
    for m in range(R):
        for w in range(W):
            flat[w * R + (m % 32) * (R // 32) + m // 32] = words[m, w]
    return flat.reshape(R, W)


@tilelang.jit(out_idx=[-1])
def bs_gemm(M, N, K, gran, sf_dtype, layout, in_dtype="float4_e2m1fn", bm=32, bn=32, bk=128):
    per_word = 4 * gran if sf_dtype == "uint32" else gran
    W, KW = bk // per_word, K // per_word

    @T.prim_func
    def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((N, K), in_dtype), SFA: T.Tensor((M, KW), sf_dtype),
             SFB: T.Tensor((N, KW), sf_dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            a_s = T.alloc_shared((bm, bk), in_dtype)
            b_s = T.alloc_shared((bn, bk), in_dtype)
            sa = T.alloc_shared((bm, W), sf_dtype)
            sb = T.alloc_shared((bn, W), sf_dtype)
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for ko in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, ko * bk], a_s)
                T.copy(B[bx * bn, ko * bk], b_s)
                T.copy(SFA[by * bm, ko * W], sa)
                T.copy(SFB[bx * bn, ko * W], sb)
                T.mma_gemm_blockscaled(a_s, b_s, acc, sa, sb, transpose_B=True, k_start=0, sf_a_granularity_k=gran,
                                       sf_b_granularity_k=gran, sf_layout=layout)
            T.copy(acc, C[by * bm, bx * bn])

    return main


@pytest.mark.parametrize("gran,sf_dtype,layout,in_dtype", [
    (16, "uint32", "rowmajor", "float4_e2m1fn"), (32, "uint32", "rowmajor", "float4_e2m1fn"),
    (32, "uint8", "rowmajor", "float8_e4m3fn"), (16, "uint32", "blockscaled_chunk_kmajor", "float4_e2m1fn"),
    (32, "uint32", "blockscaled_chunk_kmajor", "float8_e5m2")])
def test_blockscaled_gemm_matches_the_scaled_product(gran, sf_dtype, layout, in_dtype):
    M, K, bm, bk = 64, 256, 32, 128
    N = 40 if layout == "rowmajor" else 64  # row-major: tiles do not divide; K-major chunks are whole row tiles
    rng = np.random.default_rng(gran)
    npdt = getattr(ml_dtypes, in_dtype)
    A = rng.integers(-6, 7, (M, K)).astype(np.float32).astype(npdt)
    B = rng.integers(-6, 7, (N, K)).astype(np.float32).astype(npdt)
    sa, sb = _scales(rng, M, K // gran, gran), _scales(rng, N, K // gran, gran)
    want = (A.astype(np.float32) * np.repeat(_decode(sa, gran), gran, 1)) @ \
           (B.astype(np.float32) * np.repeat(_decode(sb, gran), gran, 1)).T

    def store(s, rows):
        if sf_dtype == "uint8":
            return s
        words = np.ascontiguousarray(s).view(np.uint32)  # byte j of word w: group 4 w + j
        if layout == "rowmajor":
            return words
        W = bk // (4 * gran)  # per (row tile, K tile): the tile's words in K-major chunk order
        out = words.copy()
        for r0 in range(0, rows, bm):
            for k0 in range(0, words.shape[1], W):
                out[r0:r0 + bm, k0:k0 + W] = _kmajor(words[r0:r0 + bm, k0:k0 + W])
        return out

    SA, SB = store(sa, M), store(sb, N)
    C = bs_gemm(M, N, K, gran, sf_dtype, layout, in_dtype)(A, B, SA, SB)
    np.testing.assert_allclose(C, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())


def test_blockscaled_kmajor_order_is_used():
    """The same scales stored row-major and K-major give different products unless decoded per layout."""
    M = N = 32
    K, gran = 128, 16
    rng = np.random.default_rng(1)
    A = rng.integers(-6, 7, (M, K)).astype(np.float32).astype(FP4)
    B = rng.integers(-6, 7, (N, K)).astype(np.float32).astype(FP4)
    sa, sb = _scales(rng, M, K // gran, gran), _scales(rng, N, K // gran, gran)
    wa, wb = np.ascontiguousarray(sa).view(np.uint32), np.ascontiguousarray(sb).view(np.uint32)
    row = bs_gemm(M, N, K, gran, "uint32", "rowmajor")(A, B, wa, wb)
    kmaj = bs_gemm(M, N, K, gran, "uint32", "blockscaled_chunk_kmajor")(A, B, _kmajor(wa), _kmajor(wb))
    np.testing.assert_array_equal(row, kmaj)
    assert not np.array_equal(row, bs_gemm(M, N, K, gran, "uint32", "blockscaled_chunk_kmajor")(A, B, wa, wb))


@pytest.mark.parametrize("kw,text", [
    (dict(gran=24), "sf_a_granularity_k must be 16 \\(UE4M3 scales\\) or 32"),
    (dict(sf_rows=16), "SFA \\(sa\\) is \\(16, 2\\); it needs 32 rows"),
    (dict(layout="tiled"), "unknown sf_layout 'tiled'"),
    (dict(in_dtype="float16"), "A \\(a_s\\) is float16; block-scaled gemms take fp4/fp8"),
])
def test_blockscaled_misuse_is_a_located_error(kw, text):
    gran, layout, in_dtype, sf_rows = kw.get("gran", 16), kw.get("layout", "rowmajor"), kw.get("in_dtype", "float4_e2m1fn"), \
        kw.get("sf_rows", 32)

    @tilelang.jit(out_idx=[-1])
    def bad():
        @T.prim_func
        def main(A: T.Tensor((32, 128), in_dtype), C: T.Tensor((32, 32), "float32")):
            with T.Kernel(1, threads=128):
                a_s = T.alloc_shared((32, 128), in_dtype)
                sa = T.alloc_shared((sf_rows, 2), "uint32")
                acc = T.alloc_fragment((32, 32), "float32")
                T.copy(A, a_s)
                T.mma_gemm_blockscaled(a_s, a_s, acc, sa, sa, transpose_B=True, k_start=0, sf_a_granularity_k=gran,
                                       sf_b_granularity_k=gran, sf_layout=layout)
                T.copy(acc, C)

        return main

    with pytest.raises(KernelTypeError, match=text) as e:
        bad()
    assert e.value.loc is not None and e.value.loc.line > 0


# ----------------------------------------------------------------------------------- refusals
def _refused(case):
    @tilelang.jit
    def f():
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(4, threads=128):
                a = T.alloc_shared((32, 32), "float16")
                c = T.alloc_tmem([32, 32], "float32")
                m = T.alloc_barrier(1)
                if case == "sf-transpose":
                    T.tcgen05_sf_warp_transpose(a)
                elif case == "2cta":
                    T.tcgen05_gemm(a, a, c, mbar=m, use_2cta=True)
                elif case == "arrive-2cta":
                    T.tcgen05_mma_arrive(m, arrive_2cta=True)
                elif case == "mbar-not-a-barrier":
                    T.tcgen05_gemm(a, a, c, mbar=a)
                elif case == "c-global":
                    T.tcgen05_gemm(a, a, A, mbar=m)

        return main

    return f


@pytest.mark.parametrize("case,cls,text", [
    ("sf-transpose", KernelTypeError, r"T.tcgen05_sf_warp_transpose \(a\) is float16; packed scale factors are "
                                      "uint32 words"),
    ("2cta", KernelTypeError, "use_2cta=True\\) spreads the work over the two blocks of a cluster, but this "
                              "launch has no clusters"),
    ("arrive-2cta", KernelTypeError, "arrive_2cta=True"),
    ("mbar-not-a-barrier", KernelTypeError, "takes a barrier made by T.alloc_barrier"),
    ("c-global", KernelTypeError, "is a global tensor"),
])
def test_blackwell_refusals_name_the_construct(case, cls, text):
    with pytest.raises(KernelError, match=text) as e:
        _refused(case)()(np.zeros(64, np.float32))
    assert type(e.value) is cls, e.value
    assert e.value.loc is not None and e.value.hint


# ------------------------------------------------------------------------------------ fp4 binding
@given(rows=st.integers(1, 5), half=st.integers(1, 9))
def test_fp4_pack_unpack_round_trip(rows, half):
    rng = np.random.default_rng(rows * 13 + half)
    codes = rng.integers(0, 16, (rows, 2 * half)).astype(np.uint8)
    vals = codes.view(FP4)
    packed = pack_fp4(vals)
    assert packed.shape == (rows, half)
    np.testing.assert_array_equal(packed, codes[:, 0::2] | (codes[:, 1::2] << 4))
    np.testing.assert_array_equal(unpack_fp4(packed).view(np.uint8), codes)


def test_fp4_tensors_to_and_from_torch():
    torch = pytest.importorskip("torch")
    if not hasattr(torch, "float4_e2m1fn_x2"):
        pytest.skip("torch without float4_e2m1fn_x2")

    @tilelang.jit(out_idx=[-1])
    def negate(M, N):
        @T.prim_func
        def main(X: T.Tensor((M, N), "float4_e2m1fn"), Y: T.Tensor((M, N), "float4_e2m1fn")):
            with T.Kernel(1, threads=128):
                for i, j in T.Parallel(M, N):
                    Y[i, j] = -X[i, j]

        return main

    vals = np.array([[0.5, -6, 1.5, 3], [4, 0, -1, 2]], np.float32).astype(FP4)
    packed = torch.from_numpy(pack_fp4(vals))
    for arg in (packed.view(torch.float4_e2m1fn_x2), packed.view(torch.int8)):
        out = negate(2, 4)(arg)
        assert out.dtype == torch.float4_e2m1fn_x2 and tuple(out.shape) == (2, 2)
        np.testing.assert_array_equal(unpack_fp4(out.view(torch.uint8).numpy()).astype(np.float32),
                                      -vals.astype(np.float32))
    with pytest.raises(KernelRuntimeError, match="cannot be returned to torch"):
        numpy_to_torch(np.zeros((2, 3), FP4))
