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


def emulate(M, N, K, nthreads, trans_a, trans_b, pad_a=8, pad_b=8, base_a=0, base_b=0, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K)).astype(np.float16).astype(np.float64)
    B = rng.standard_normal((K, N)).astype(np.float16).astype(np.float64)
    memA, sa = _image(A.T if trans_a else A, pad_a, base_a)
    memB, sb = _image(B if trans_b is False else B.T, pad_b, base_b)
    # (m, k) strides of A; (n, k) strides of B in their images
    a_rs, a_ks = (1, sa) if trans_a else (sa, 1)
    b_cs, b_ks = (sb, 1) if trans_b else (1, sb)
    nw = nthreads // 32
    lay = ML.mma_layout(M, N, nthreads)
    MT, NT = ML.tiles(M, N, nthreads)
    S1 = lay.slots[1]
    acc = np.zeros((nthreads, lay.nslots))
    for warp in range(nw):
        for kk in range(0, K, 16):
            fa = []
            for mi in range(MT):
                addrs = []
                for lane in range(32):
                    m, k = ML.a_ldsm_coord(lane, warp, mi, nw, trans_a)
                    addrs.append(base_a + m * a_rs + (kk + k) * a_ks)
                fa.append(ldmatrix_x4(memA, addrs, trans=trans_a))
            fb = []
            for q2 in range(NT // 2):
                addrs = []
                for lane in range(32):
                    n, k = ML.b_ldsm_coord(lane, q2, not trans_b)
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
    ``(s // V) * P * V + t * V + s % V`` with ``t = (tid // stride) % P``)."""
    out = np.full(lay.shape, np.nan)
    S0, S1 = lay.slots
    for tid in range(lay.nthreads):
        for s0 in range(S0):
            for s1 in range(S1):
                idx = []
                for d, s in ((0, s0), (1, s1)):
                    P, V, stv = lay.tcount[d], lay.vec[d], lay.tstride[d]
                    t = (tid // stv) % P
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
