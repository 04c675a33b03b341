"""The tensor-core gemm's warp-level index math, proven on the CPU.

The lowering's choices live in ``tilesim/backends/cuda/mma_layout.py`` (accumulator layout, the row
address each lane gives ``ldmatrix``, the accumulator slots of each mma's C fragment); the code generator
calls the same functions with code strings. Here they are called with ints, and the *hardware* is the
PTX ISA model of ``tilesim/backends/cuda/mma_sim.py`` (``ldmatrix.sync.aligned.m8n8.x4[.trans].b16``,
``mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}``; checked against hand-built fragments below). A whole block's gemm is emulated (every warp,
every k16 step) on a flat shared-memory image with padded rows and an offset base, the accumulator is
read back through the :class:`Layout` index formula, and compared with ``A @ B``.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesim.backends.cuda import mma_layout as ML
from tilesim.backends.cuda.layout import Layout
from tilesim.backends.cuda.mma_sim import ldmatrix_x4, mma_m16n8k16


# ------------------------------------------------------------------------- the block's gemm
def _image(X, pad, base):
    """Flat shared image of 2-D ``X`` with rows padded by ``pad`` elements, starting at element ``base``."""
    rows, cols = X.shape
    stride = cols + pad
    mem = np.full(base + rows * stride + 16, np.nan)
    for i in range(rows):
        mem[base + i * stride: base + i * stride + cols] = X[i]
    return mem, stride


def emulate(M, N, K, nthreads, trans_a, trans_b, pad_a=8, pad_b=8, base_a=0, base_b=0, seed=0, grid=None):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K)).astype(np.float16).astype(np.float64)
    B = rng.standard_normal((K, N)).astype(np.float16).astype(np.float64)
    memA, sa = _image(A.T if trans_a else A, pad_a, base_a)
    memB, sb = _image(B if trans_b is False else B.T, pad_b, base_b)
    # (m, k) strides of A; (n, k) strides of B in their images
    a_rs, a_ks = (1, sa) if trans_a else (sa, 1)
    b_cs, b_ks = (sb, 1) if trans_b else (1, sb)
    nw = nthreads // 32
    grid = grid or (nw, 1)
    lay = ML.mma_layout(M, N, nthreads, grid)
    assert ML.grid_of(lay) == grid and ML.is_mma_layout(lay)
    MT, NT = ML.tiles(M, N, grid)
    S1 = lay.slots[1]
    acc = np.zeros((nthreads, lay.nslots))
    for warp in range(nw):
        wm, wn = warp % grid[0], warp // grid[0]  # the warp's place in the grid (mma_layout's docstring)
        for kk in range(0, K, 16):
            fa = []
            for mi in range(MT):
                addrs = []
                for lane in range(32):
                    m, k = ML.a_ldsm_coord(lane, wm, mi, grid[0], trans_a)
                    addrs.append(base_a + m * a_rs + (kk + k) * a_ks)
                fa.append(ldmatrix_x4(memA, addrs, trans=trans_a))
            fb = []
            for q2 in range(NT // 2):
                addrs = []
                for lane in range(32):
                    n, k = ML.b_ldsm_coord(lane, q2, not trans_b, wn, grid[1])
                    addrs.append(base_b + n * b_cs + (kk + k) * b_ks)
                regs = ldmatrix_x4(memB, addrs, trans=not trans_b)
                fb.append([[r[0], r[1]] for r in regs])
                fb.append([[r[2], r[3]] for r in regs])
            for mi in range(MT):
                for q in range(NT):
                    slots = ML.c_slots(mi, q, S1)
                    c = [[acc[warp * 32 + lane, s] for s in slots] for lane in range(32)]
                    d = mma_m16n8k16(fa[mi], fb[q], c)
                    for lane in range(32):
                        for i, s in enumerate(slots):
                            acc[warp * 32 + lane, s] = d[lane][i]
    return _read_back(lay, acc), A @ B


def _read_back(lay: Layout, acc):
    """The tile from per-thread slots through the Layout contract (index of slot s along dim d:
    ``(s // V) * P * V + t * V + s % V`` with ``t`` the thread's group: ``(tid // stride) % P``, or for a
    split dimension ``(tid // stride) % lo + lo * ((tid // hstride) % (P // lo))``)."""
    out = np.full(lay.shape, np.nan)
    S0, S1 = lay.slots
    for tid in range(lay.nthreads):
        for s0 in range(S0):
            for s1 in range(S1):
                idx = []
                for d, s in ((0, s0), (1, s1)):
                    P, V = lay.tcount[d], lay.vec[d]
                    t = (tid // lay.tstride[d]) % P
                    if lay.is_split(d):
                        lo, hs = lay.split[d]
                        t = (tid // lay.tstride[d]) % lo + lo * ((tid // hs) % (P // lo))
                    assert t == lay.group_of(d, tid)
                    idx.append((s // V) * P * V + t * V + s % V)
                assert np.isnan(out[idx[0], idx[1]]), "two threads own one element"
                out[idx[0], idx[1]] = acc[tid, s0 * S1 + s1]
    return out


def test_hardware_model_against_hand_built_fragments():
    # ldmatrix: lane 5 (g=1, t=1) gets row 1, columns 2..3 of each matrix; .trans the transposed pair
    mem = np.arange(4 * 64, dtype=np.float64)
    addrs = [8 * L for L in range(32)]  # matrix j row r at element 64*j + 8*r
    regs = ldmatrix_x4(mem, addrs, trans=False)
    assert regs[5][2] == (64 * 2 + 8 * 1 + 2, 64 * 2 + 8 * 1 + 3)
    regs = ldmatrix_x4(mem, addrs, trans=True)
    assert regs[5][2] == (64 * 2 + 8 * 2 + 1, 64 * 2 + 8 * 3 + 1)
    # mma with A = I (16x16), B[k, n] = 100k + n, C = 0: D = B's first 16 rows; lane 6 (g=1, t=2) element 3
    # is D[9, 5]
    A, B = np.eye(16), np.add.outer(100 * np.arange(16), np.arange(8)).astype(float)
    a = [[(A[L // 4 + 8 * (i % 2), 2 * (L % 4) + 8 * (i // 2)], A[L // 4 + 8 * (i % 2), 2 * (L % 4) + 8 * (i // 2) + 1])
          for i in range(4)] for L in range(32)]
    b = [[(B[2 * (L % 4) + 8 * i, L // 4], B[2 * (L % 4) + 8 * i + 1, L // 4]) for i in range(2)] for L in range(32)]
    d = mma_m16n8k16(a, b, [[0.0] * 4 for _ in range(32)])
    assert d[6][3] == 905.0 and d[0][0] == 0.0 and d[31][3] == 1507.0


def test_layout_is_the_mma_c_fragment():
    lay = ML.mma_layout(64, 32, 128)
    assert lay.slots == (2, 8) and lay.used_threads == 128 and not lay.replicated
    assert ML.is_mma_layout(lay)


def test_one_warp_one_tile_all_transposes():
    for ta in (False, True):
        for tb in (False, True):
            got, ref = emulate(16, 16, 16, 32, ta, tb)
            np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(nw=st.sampled_from([1, 2, 4]), mt=st.integers(1, 2), n16=st.integers(1, 3), k16=st.integers(1, 3),
       ta=st.booleans(), tb=st.booleans(), pad=st.sampled_from([0, 8, 16]), base=st.sampled_from([0, 8, 64]),
       seed=st.integers(0, 2**16))
def test_block_gemm_matches_a_at_b(nw, mt, n16, k16, ta, tb, pad, base, seed):
    M, N, K = 16 * nw * mt, 16 * n16, 16 * k16
    got, ref = emulate(M, N, K, 32 * nw, ta, tb, pad_a=pad, pad_b=pad, base_a=base, base_b=base, seed=seed)
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-9)


def test_shape_rules():
    assert ML.mma_shape_ok(128, 128, 32, 128, "bfloat16", "bfloat16", "float32") is None
    assert "multiple" in ML.mma_shape_ok(48, 128, 32, 128, "float16", "float16", "float32")
    assert "multiple" in ML.mma_shape_ok(64, 24, 32, 128, "float16", "float16", "float32")
    assert "operands" in ML.mma_shape_ok(64, 32, 32, 128, "float32", "float32", "float32")
    assert "accumulator" in ML.mma_shape_ok(64, 32, 32, 128, "float16", "float16", "float16")


def test_code_and_ints_give_the_same_expression():
    lane, warp = ML.Code("_lane"), ML.Code("_warp")
    m, k = ML.a_ldsm_coord(lane, warp, 1, 4, False)
    for ln in (0, 9, 31):
        for w in range(4):
            env = {"_lane": ln, "_warp": w}
            assert (eval(str(m), env), eval(str(k), env)) == ML.a_ldsm_coord(ln, w, 1, 4, False)  # noqa: S307


# ------------------------------------------------------------------------- warp grids (GemmWarpPolicy)
def test_square_grid_is_2x2_for_128x128_and_follows_tilelang():
    from tilesim.warp_partition import warp_partition

    assert ML.warp_grid(128, 128, 128) == (2, 2)
    assert ML.warp_grid(128, 128, 128, "FullRow") == (4, 1)
    assert ML.warp_grid(128, 128, 128, "FullCol") == (1, 4)
    assert ML.warp_grid(128, 256, 256) == warp_partition(128, 256, 8, "Square")
    # TileLang's grid gives a warp 8 columns (one n8 tile): ldmatrix.x4 pairs need 16, so all along M
    assert warp_partition(64, 32, 4, "FullCol") == (1, 4) and ML.warp_grid(64, 32, 128, "FullCol") == (4, 1)
    lay = ML.mma_layout(128, 128, 128, (2, 2))
    assert lay.split == ((16, 0), (4, 64)) and lay.is_split(1) and not lay.is_split(0)
    assert lay.slots == (8, 16) and lay.used_threads == 128 and not lay.replicated
    # FullRow is the layout of the earlier runs, unchanged
    assert ML.mma_layout(128, 128, 128, (4, 1)) == Layout((128, 128), (32, 4), (4, 1), 128, (1, 2))


def test_force_policy_overrides_every_gemm(monkeypatch):
    monkeypatch.setattr(ML, "FORCE_POLICY", "FullRow")
    assert ML.warp_grid(128, 128, 128) == (4, 1)
    monkeypatch.setattr(ML, "FORCE_POLICY", None)
    assert ML.warp_grid(128, 128, 128) == (2, 2)


@pytest.mark.parametrize("M, N, nthreads, grid", [
    (32, 32, 128, (2, 2)), (128, 128, 128, (2, 2)), (64, 64, 128, (1, 4)), (64, 128, 256, (2, 4)),
    (128, 64, 256, (4, 2)), (32, 64, 64, (1, 2)),
])
def test_block_gemm_on_warp_grids(M, N, nthreads, grid):
    for ta, tb in ((False, False), (True, True), (False, True)):
        got, ref = emulate(M, N, 32, nthreads, ta, tb, pad_a=8, pad_b=0, base_a=8, base_b=64, seed=M + N, grid=grid)
        assert not np.isnan(got).any()
        np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-9)


@settings(max_examples=20, deadline=None)
@given(wm=st.sampled_from([1, 2, 4]), wn=st.sampled_from([1, 2, 4]), mt=st.integers(1, 2), n16=st.integers(1, 2),
       ta=st.booleans(), tb=st.booleans(), seed=st.integers(0, 2**16))
def test_any_grid_matches_a_at_b(wm, wn, mt, n16, ta, tb, seed):
    M, N = 16 * wm * mt, 16 * wn * n16
    got, ref = emulate(M, N, 16, 32 * wm * wn, ta, tb, seed=seed, grid=(wm, wn))
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-9)


def test_b_code_and_ints_agree_on_a_grid():
    lane, wn = ML.Code("_lane"), ML.Code("_wn")
    n, k = ML.b_ldsm_coord(lane, 1, True, wn, 2)
    for ln in (0, 13, 31):
        for w in range(2):
            env = {"_lane": ln, "_wn": w}
            assert (eval(str(n), env), eval(str(k), env)) == ML.b_ldsm_coord(ln, 1, True, w, 2)  # noqa: S307


def test_split_layout_normal_form_and_groups():
    # adjacent factors are one factor; a lone high factor is an ordinary stride; equal layouts compare equal
    assert Layout((64,), (8,), (1,), 128, None, ((4, 4),)) == Layout((64,), (8,), (1,), 128)
    assert Layout((64,), (8,), (1,), 128, None, ((1, 16),)) == Layout((64,), (8,), (16,), 128)
    lay = Layout((64, 64), (16, 8), (4, 1), 128, (1, 2), ((16, 0), (4, 64)))
    assert lay.pieces(1) == [(4, 1), (2, 64)] and lay.pieces(0) == [(16, 4)]
    assert [lay.group_of(1, t) for t in (0, 3, 4, 64, 67, 127)] == [0, 3, 0, 4, 7, 7]
    assert lay.restrict([1]).is_split(0) and lay.drop(1, False).split == ((16, 0),)
    assert lay.permuted_from((1, 0), (64, 64)).pieces(0) == [(4, 1), (2, 64)]
    assert "64:8x8@(4@1+2@64)v2" in lay.describe()
    # every (row group, column group) pair is one thread: no replicas, each element owned once
    owners = {(lay.group_of(0, t), lay.group_of(1, t)) for t in range(128)}
    assert len(owners) == 128
