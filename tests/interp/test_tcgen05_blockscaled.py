"""The SM100 block-scaled path at tile level: ``T.tcgen05_sf_warp_transpose`` (the chunk permutation),
``T.tcgen05_cp_warpx4`` (shared memory to tensor memory, one and two blocks), ``T.tcgen05_gemm_blockscaled``
(1-CTA and 2-CTA, fp8 and fp4 via ``T.float4_e2m1_unpacked``) against NumPy, the ``PairIssue`` node's
issuing-block values, the printer, the cost analysis, and the refusals (located ``KernelError``: misuse, the
CUDA lowering, the CPU target)."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim as tilelang
import tilesim.language as T
from tilesim.backends.interp import InterpOptions
from tilesim.errors import KernelError, KernelTypeError
from tilesim.ir import nodes as N
from tilesim.ir.printer import format_ir
from tilesim.ir.traverse import walk_stmts

SERIAL = InterpOptions(mode="serial")


def _transposed(words):
    """NumPy meaning of the warp transpose: per 128-word chunk, word 32 q + l moves to 4 l + q."""
    out = words.copy()
    for c in range(0, len(words), 128):
        for q in range(4):
            for lane in range(32):
                out[c + 4 * lane + q] = words[c + 32 * q + lane]
    return out


def _cp(words, lanes, cols, off):
    """NumPy meaning of tcgen05.cp.32x128b.warpx4 per chunk: TM[r, off + 4 i + c] = S[128 i + 4 (r % 32) + c]."""
    tm = np.zeros((lanes, cols), np.uint32)
    for i in range(len(words) // 128):
        for r in range(min(lanes, 128)):
            for c in range(4):
                tm[r, off + 4 * i + c] = words[128 * i + 4 * (r % 32) + c]
    return tm


# ---------------------------------------------------------------------------------- the two moves
@tilelang.jit(out_idx=[-1])
def sf_moves(chunks, lanes, cols, off, stages=2, transpose=True):
    n = 128 * chunks

    @T.prim_func
    def main(S: T.Tensor((n,), "uint32"), Out: T.Tensor((lanes, cols), "uint32")):
        with T.Kernel(3, threads=128) as bx:
            s = T.alloc_shared((stages, n), "uint32")
            tm = T.alloc_tmem([lanes, cols], "uint32")
            f = T.alloc_fragment((lanes, cols), "uint32")
            T.fill(f, 0)
            T.copy(f, tm)
            T.copy(S, s[stages - 1, :])
            if transpose:
                T.tcgen05_sf_warp_transpose(s[stages - 1, :])
            T.tcgen05_cp_warpx4(s[stages - 1, :], tm, off)
            T.copy(tm, f)
            if bx == 1:
                T.copy(f, Out)

    return main


@settings(max_examples=10, deadline=None)
@given(chunks=st.integers(1, 3), lanes=st.sampled_from([32, 64, 128, 160]), extra=st.integers(0, 5),
       transpose=st.booleans(), seed=st.integers(0, 99))
def test_transpose_and_copy_to_tensor_memory_match_numpy(chunks, lanes, extra, transpose, seed):
    off = extra // 2
    cols = 4 * chunks + extra
    words = np.random.default_rng(seed).integers(0, 2**32, 128 * chunks, dtype=np.uint64).astype(np.uint32)
    got = sf_moves(chunks, lanes, cols, off, transpose=transpose)(words)
    want = _cp(_transposed(words) if transpose else words, lanes, cols, off)
    np.testing.assert_array_equal(got, want)


def test_transpose_then_copy_puts_row_m_at_lane_m_mod_32_column_m_div_32():
    """The layout the block-scaled MMA reads: one word per row, row m at lane m % 32, column (m % 128) // 32."""
    words = np.arange(256, dtype=np.uint32) + 1000
    tm = sf_moves(2, 128, 8, 0)(words)
    for m in range(256):
        assert tm[m % 32, (m // 128) * 4 + (m % 128) // 32] == 1000 + m
        assert tm[m % 32 + 64, (m // 128) * 4 + (m % 128) // 32] == 1000 + m  # every warp's lanes


# --------------------------------------------------------------------------------- 1-CTA gemm
def _ue8m0(rng, rows, groups):
    return rng.integers(125, 130, (rows, groups)).astype(np.uint8)  # 2^-2 .. 2^2: the products stay exact


def _group_major(sf_u8):
    """(rows, groups) bytes -> the programs' flat group-major words: word g of row r at g * rows + r."""
    rows, groups = sf_u8.shape
    pad = np.full((rows, -(-groups // 4) * 4), 127, np.uint8)
    pad[:, :groups] = sf_u8
    words = np.ascontiguousarray(pad).view(np.uint32)  # byte j of word w: group 4 w + j
    return np.ascontiguousarray(words.T).reshape(-1)


def _want(A, B, sa, sb, gran, trans_b):
    a = A.astype(np.float64) * np.repeat(np.exp2(sa.astype(np.float64) - 127), gran, 1)[:, :A.shape[1]]
    bf = (B if trans_b else B.T).astype(np.float64)
    b = bf * np.repeat(np.exp2(sb.astype(np.float64) - 127), gran, 1)[:, :bf.shape[1]]
    return a @ b.T


@tilelang.jit
def bs_1cta(A, B, SFA, SFB, gran, trans_b, a_smem_dtype, bm=128, bn=64, bk=128):
    M, N, K = T.const("M, N, K")
    period = gran * 4 // bk
    groups = T.ceildiv(T.ceildiv(K, gran), 4)
    a_dtype = T.float8_e4m3fn if a_smem_dtype == "float8_e4m3fn" else T.float4_e2m1fn
    A: T.Tensor[[M, K], a_dtype]
    B: T.Tensor[[N, K] if trans_b else [K, N], T.float8_e4m3fn]
    SFA: T.Tensor[[groups * M], T.uint32]
    SFB: T.Tensor[[groups * N], T.uint32]
    C = T.empty((M, N), "float32")
    with T.Kernel(T.ceildiv(M, bm), T.ceildiv(N, bn), threads=128) as (bx, by):
        a_s = T.alloc_shared((bm, bk), a_smem_dtype)
        b_s = T.alloc_shared((bn, bk) if trans_b else (bk, bn), "float8_e4m3fn")
        sfa_s = T.alloc_shared((128,), "uint32")
        sfb_s = T.alloc_shared((128,), "uint32")
        c_t = T.alloc_tmem([bm, bn], "float32")
        sfa_t = T.alloc_tmem([128, 4], "uint32")
        sfb_t = T.alloc_tmem([128, 4], "uint32")
        c_l = T.alloc_fragment((bm, bn), "float32")
        done = T.alloc_barrier(1)
        for k in T.serial(T.ceildiv(K, bk)):
            T.copy(A[bx * bm, k * bk], a_s)
            if trans_b:
                T.copy(B[by * bn, k * bk], b_s)
            else:
                T.copy(B[k * bk, by * bn], b_s)
            if k % period == 0:
                T.copy(SFA[(k // period) * M + bx * bm:(k // period) * M + bx * bm + bm], sfa_s)
                T.copy(SFB[(k // period) * N + by * bn:(k // period) * N + by * bn + bn], sfb_s[0:bn])
                T.tcgen05_sf_warp_transpose(sfa_s)
                T.tcgen05_sf_warp_transpose(sfb_s)
                T.tcgen05_cp_warpx4(sfa_s, sfa_t)
                T.tcgen05_cp_warpx4(sfb_s, sfb_t)
            T.tcgen05_gemm_blockscaled(a_s, b_s, c_t, sfa_t, sfb_t, transpose_B=trans_b, mbar=done,
                                       clear_accum=k == 0, k_start=k * bk, sf_a_granularity_k=gran,
                                       sf_b_granularity_k=gran)
            T.mbarrier_wait_parity(done, k % 2)
        T.copy(c_t, c_l)
        T.copy(c_l, C[bx * bm, by * bn])
    return C


def _case(rng, M, N, K, gran, trans_b, a_dtype):
    npa = ml_dtypes.float4_e2m1fn if a_dtype != "float8_e4m3fn" else ml_dtypes.float8_e4m3fn
    A = rng.integers(-3, 4, (M, K)).astype(np.float32).astype(npa)
    B = rng.integers(-3, 4, (N, K) if trans_b else (K, N)).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    groups = -(-K // gran)
    sa, sb = _ue8m0(rng, M, groups), _ue8m0(rng, N, groups)
    return A, B, sa, sb


@settings(max_examples=8, deadline=None)
@given(M=st.integers(1, 300), N=st.integers(1, 150), kt=st.integers(1, 5), gran=st.sampled_from([32, 128]),
       trans_b=st.booleans(), a_dtype=st.sampled_from(["float8_e4m3fn", "float4_e2m1_unpacked"]))
def test_1cta_blockscaled_gemm_is_the_scaled_product(M, N, kt, gran, trans_b, a_dtype):
    K = 128 * kt  # (the scale groups must not straddle the K tiles the loop copies)
    rng = np.random.default_rng(M * 1000 + N * 10 + kt)
    A, B, sa, sb = _case(rng, M, N, K, gran, trans_b, a_dtype)
    C = bs_1cta(A, B, _group_major(sa), _group_major(sb), gran, trans_b, a_dtype)
    np.testing.assert_array_equal(np.asarray(C), _want(A, B, sa, sb, gran, trans_b))  # exact: small powers of 2


def test_1cta_blockscaled_gemm_serial_equals_batched_and_scales_matter():
    rng = np.random.default_rng(7)
    A, B, sa, sb = _case(rng, 200, 100, 512, 128, True, "float8_e4m3fn")
    args = (A, B, _group_major(sa), _group_major(sb), 128, True, "float8_e4m3fn")
    k, ins = bs_1cta.specialize(*args)
    batched = np.asarray(k(*ins))
    np.testing.assert_array_equal(batched, np.asarray(k.run(*ins, options=SERIAL)))
    ones = np.full_like(sa, 127)
    plain = np.asarray(bs_1cta(A, B, _group_major(ones), _group_major(np.full_like(sb, 127)), 128, True,
                               "float8_e4m3fn"))
    np.testing.assert_array_equal(plain, A.astype(np.float64) @ B.astype(np.float64).T)
    assert not np.array_equal(plain, batched)


# --------------------------------------------------------------------------------- 2-CTA gemm
@tilelang.jit
def bs_2cta(A, B, SFA, SFB, trans_b, bm=128, bn=128, bk=128, gran=128):
    M, N, K = T.const("M, N, K")
    half = bn // 2
    period = gran * 4 // bk
    groups = T.ceildiv(T.ceildiv(K, gran), 4)
    A: T.Tensor[[M, K], T.float8_e4m3fn]
    B: T.Tensor[[N, K] if trans_b else [K, N], T.float8_e4m3fn]
    SFA: T.Tensor[[groups * M], T.uint32]
    SFB: T.Tensor[[groups * N], T.uint32]
    C = T.empty((M, N), "float32")
    with T.ClusterKernel(T.ceildiv(M, bm), T.ceildiv(N, bn), threads=128, cluster_dims=2) as (bx, by):
        cta = T.block_rank_in_cluster()
        a_s = T.alloc_shared((bm, bk), "float8_e4m3fn")
        b_s = T.alloc_shared((half, bk) if trans_b else (bk, half), "float8_e4m3fn")
        sfa_s = T.alloc_shared((128,), "uint32")
        sfb_s = T.alloc_shared((128,), "uint32")
        c_t = T.alloc_tmem([bm, bn], "float32")
        sfa_t = T.alloc_tmem([128, 4], "uint32")
        sfb_t = T.alloc_tmem([128, 4], "uint32")
        c_l = T.alloc_fragment((bm, bn), "float32")
        done = T.alloc_cluster_barrier([1])
        n0 = by * bn + cta * half
        for k in T.serial(T.ceildiv(K, bk)):
            T.copy(A[bx * bm, k * bk], a_s)
            if trans_b:
                T.copy(B[n0, k * bk], b_s)
            else:
                T.copy(B[k * bk, n0], b_s)
            if k % period == 0:
                T.copy(SFA[(k // period) * M + bx * bm:(k // period) * M + bx * bm + bm], sfa_s)
                T.copy(SFB[(k // period) * N + by * bn:(k // period) * N + by * bn + bn], sfb_s[0:bn])
                T.tcgen05_sf_warp_transpose(sfa_s)
                T.tcgen05_sf_warp_transpose(sfb_s)
            if cta == 0:  # the leader issues the pair's copies and gemm
                if k % period == 0:
                    T.tcgen05_cp_warpx4(sfa_s, sfa_t, use_2cta=True)
                    T.tcgen05_cp_warpx4(sfb_s, sfb_t, use_2cta=True)
                T.tcgen05_gemm_blockscaled(a_s, b_s, c_t, sfa_t, sfb_t, transpose_B=trans_b, mbar=done[0],
                                           clear_accum=k == 0, k_start=k * bk, sf_a_granularity_k=gran,
                                           sf_b_granularity_k=gran, use_2cta=True)
            T.mbarrier_wait_parity(done[0], k % 2)
        T.copy(c_t, c_l)
        T.copy(c_l, C[bx * bm, by * bn])
    return C


@pytest.mark.parametrize("mode", ["batched", "serial"])
@pytest.mark.parametrize("trans_b", [False, True])
def test_2cta_blockscaled_gemm_uses_each_blocks_own_scales(trans_b, mode):
    M, N, K = 450, 200, 640  # 4 x 2 blocks (2 clusters along M); tiles do not divide; two scale words per row
    rng = np.random.default_rng(3)
    A, B, sa, sb = _case(rng, M, N, K, 128, trans_b, "float8_e4m3fn")
    k, ins = bs_2cta.specialize(A, B, _group_major(sa), _group_major(sb), trans_b)
    C = k(*ins) if mode == "batched" else k.run(*ins, options=SERIAL)
    np.testing.assert_array_equal(np.asarray(C), _want(A, B, sa, sb, 128, trans_b))


def test_2cta_path_prints_and_is_one_pair_issue_per_instruction():
    rng = np.random.default_rng(0)
    A, B, sa, sb = _case(rng, 256, 128, 128, 128, True, "float8_e4m3fn")
    k, _ = bs_2cta.specialize(A, B, _group_major(sa), _group_major(sb), True)
    pairs = [s for s in walk_stmts(k.prim_func.body) if isinstance(s, N.PairIssue)]
    assert len(pairs) == 3  # two scale copies and the gemm's scaling step
    gemms = [s for s in walk_stmts(k.prim_func.body) if isinstance(s, N.Gemm)]
    assert gemms and all(g.pair for g in gemms)
    text = format_ir(k.prim_func)
    assert "use_2cta=True: in both blocks of the pair" in text and "arrive_2cta=True" in text


# ----------------------------------------------------------------------------- other consumers
def test_cost_analysis_and_refusals_of_other_targets():
    rng = np.random.default_rng(0)
    A, B, sa, sb = _case(rng, 128, 64, 256, 128, True, "float8_e4m3fn")
    k, _ = bs_1cta.specialize(A, B, _group_major(sa), _group_major(sb), 128, True, "float8_e4m3fn")
    assert k.simulate(hw="h200_sxm_141gb").time_s > 0
    pytest.importorskip("numba")
    from tilesim.backends.cuda.lower import lower_program

    with pytest.raises(KernelTypeError, match=r"T.alloc_tmem \(\w+\) is Blackwell \(sm_100\) tensor memory"):
        lower_program(k.prim_func, sim=True)


def test_cpu_target_refuses_the_pair_issue_by_name():
    from tilesim.backends.cpu import codegen_rules
    from tilesim.backends.cpu.codegen_rules import Unsupported

    with pytest.raises(Unsupported, match="2-CTA"):
        codegen_rules.STMT_RULES.rules[N.PairIssue](None, N.PairIssue((), None))


# ------------------------------------------------------------------------------------ misuse
def _misuse(case):
    @tilelang.jit
    def f():
        @T.prim_func
        def main(A: T.Tensor((128, 128), "float8_e4m3fn")):
            with T.Kernel(2, threads=128):
                a_s = T.alloc_shared((128, 128), "float8_e4m3fn")
                s = T.alloc_shared((128,), "uint32")
                s16 = T.alloc_shared((128,), "uint16")
                s96 = T.alloc_shared((96,), "uint32")
                tm = T.alloc_tmem([128, 4], "uint32")
                tf = T.alloc_tmem([128, 4], "float32")
                c_t = T.alloc_tmem([128, 128], "float32")
                bar = T.alloc_barrier(1)
                if case == "cp-2cta-no-cluster":
                    T.tcgen05_cp_warpx4(s, tm, use_2cta=True)
                elif case == "cp-not-tmem":
                    T.tcgen05_cp_warpx4(s, a_s)
                elif case == "cp-float-tmem":
                    T.tcgen05_cp_warpx4(s, tf)
                elif case == "cp-offset":
                    T.tcgen05_cp_warpx4(s, tm, 2)
                elif case == "transpose-dtype":
                    T.tcgen05_sf_warp_transpose(s16)
                elif case == "transpose-chunk":
                    T.tcgen05_sf_warp_transpose(s96)
                elif case == "gemm-no-mbar":
                    T.tcgen05_gemm_blockscaled(a_s, a_s, c_t, tm, tm, transpose_B=True, k_start=0,
                                               sf_a_granularity_k=128, sf_b_granularity_k=128)
                elif case == "gemm-gran":
                    T.tcgen05_gemm_blockscaled(a_s, a_s, c_t, tm, tm, transpose_B=True, mbar=bar, k_start=0,
                                               sf_a_granularity_k=48, sf_b_granularity_k=128)
                elif case == "gemm-sf-float":
                    T.tcgen05_gemm_blockscaled(a_s, a_s, c_t, tf, tm, transpose_B=True, mbar=bar, k_start=0,
                                               sf_a_granularity_k=128, sf_b_granularity_k=128)
                elif case == "gemm-2cta-no-cluster":
                    T.tcgen05_gemm_blockscaled(a_s, a_s, c_t, tm, tm, transpose_B=True, mbar=bar, k_start=0,
                                               sf_a_granularity_k=128, sf_b_granularity_k=128, use_2cta=True)

        return main

    return f


@pytest.mark.parametrize("case,text", [
    ("cp-2cta-no-cluster", r"T.tcgen05_cp_warpx4\(use_2cta=True\) spreads the work over the two blocks"),
    ("cp-not-tmem", r"destination \(a_s\) must be a uint32 tensor-memory tile"),
    ("cp-float-tmem", r"destination \(tf\) must be a uint32 tensor-memory tile"),
    ("cp-offset", r"1 chunk\(s\) at column offset 2 need columns 2..2\+4 of tm \(4 columns\)"),
    ("transpose-dtype", r"T.tcgen05_sf_warp_transpose \(s16\) is uint16; packed scale factors are uint32"),
    ("transpose-chunk", r"has extents \(96,\); it must be whole 128-word chunks"),
    ("gemm-no-mbar", r"T.tcgen05_gemm_blockscaled needs mbar="),
    ("gemm-gran", r"sf_a_granularity_k must be a positive multiple of 32"),
    ("gemm-sf-float", r"SFA \(tf\) must be a uint32 tensor-memory tile"),
    ("gemm-2cta-no-cluster", r"T.tcgen05_gemm_blockscaled\(use_2cta=True\) spreads the work"),
])
def test_misuse_is_a_located_kernel_error(case, text):
    with pytest.raises(KernelError, match=text) as e:
        _misuse(case)()(np.zeros((128, 128), ml_dtypes.float8_e4m3fn))
    assert e.value.loc is not None and e.value.loc.file == __file__ and e.value.hint


def test_float4_e2m1_unpacked_computes_as_float4_e2m1fn():
    assert T.float4_e2m1_unpacked == "float4_e2m1_unpacked"
    assert T.float4_e2m1_unpacked.tilesim_dtype == "float4_e2m1fn"


def test_cpu_target_runs_the_2cta_path_on_the_interpreter():
    pytest.importorskip("numba")
    from tilesim.kernel import JITKernel

    rng = np.random.default_rng(5)
    A, B, sa, sb = _case(rng, 256, 128, 256, 128, True, "float8_e4m3fn")
    k, ins = bs_2cta.specialize(A, B, _group_major(sa), _group_major(sb), True)
    cpu = JITKernel(k.prim_func, out_idx=k.out_idx, target="cpu")
    np.testing.assert_array_equal(np.asarray(cpu(*ins)), _want(A, B, sa, sb, 128, True))


@tilelang.jit(out_idx=[-1])
def pair_cp_at_var_stage(blocks):
    @T.prim_func
    def main(S: T.Tensor((blocks, 2, 128), "uint32"), Out: T.Tensor((blocks, 128, 4), "uint32")):
        with T.ClusterKernel(blocks, threads=128, cluster_dims=2) as bx:
            s = T.alloc_shared((2, 128), "uint32")
            tm = T.alloc_tmem([128, 4], "uint32")
            f = T.alloc_fragment((128, 4), "uint32")
            st = T.alloc_var(T.int32, init=0)
            lead = T.alloc_var(T.int32, init=0)
            T.copy(S[bx, :, :], s)
            if T.block_rank_in_cluster() == 0:
                st = 1  # only the issuing block's copy of the stage is 1
                lead = bx
                T.tcgen05_cp_warpx4(s[st, :], tm, use_2cta=True)
            T.copy(tm, f)
            T.copy(f, Out[bx, :, :])

    return main


@pytest.mark.parametrize("mode", ["batched", "serial"])
def test_pair_issue_takes_the_issuing_blocks_values(mode):
    """The stage index lives in a variable only the issuing block sets: the peer copies from its own shared
    memory at the issuer's stage (the instruction names the same address in both blocks)."""
    S = np.arange(4 * 2 * 128, dtype=np.uint32).reshape(4, 2, 128)
    k = pair_cp_at_var_stage(4)
    out = k(S) if mode == "batched" else k.run(S, options=SERIAL)
    for b in range(4):
        np.testing.assert_array_equal(np.asarray(out)[b], _cp(S[b, 1], 128, 4, 0))
