"""The fp8 tensor-core gemm (``mma.sync.m16n8k32`` e4m3/e5m2), proven on the CPU at the warp level.

The hardware model (``tilesim/backends/cuda/mma_sim.py``: ``mma_m16n8k32``, the byte form of ``ldmatrix``,
``round_f32``) is checked against hand-built fragments and exact arithmetic; then a whole block's fp8 gemm
is emulated with the lowering's own index math (``mma_layout.a_ldsm_coord``/``b_ldsm_coord`` with the k
coordinate doubled for K-contiguous operands, ``a_frag8_coord``/``b_frag8_coord`` byte gathers for M-/N-contiguous
ones, as ``tile_mma`` emits them) on byte images with padded rows, and compared with ``A @ B.T``.
"""

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesim.backends.cuda import mma_layout as ML
from tilesim.backends.cuda.mma_sim import _b16_view, _pack, _unpack8, ldmatrix_x4, mma_m16n8k32, round_f32

_NP = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}


# ------------------------------------------------------------------------- the model
def _nearest_f32(q: Fraction) -> float:
    """Round-to-nearest-even fp32 of the exact value ``q`` by brute force over its fp32 neighbours."""
    x = np.float32(float(q))  # within an ulp or two of the answer
    cands = {x, np.nextafter(x, np.float32(np.inf)), np.nextafter(x, np.float32(-np.inf))}
    cands = [c for c in cands if np.isfinite(c)]
    best = min(cands, key=lambda c: (abs(Fraction(float(c)) - q), int(np.array(c).view(np.uint32)) & 1))
    return float(best)


@settings(max_examples=300, deadline=None)
@given(num=st.integers(-(2**80), 2**80), exp=st.integers(-220, 60))
def test_round_f32_is_round_to_nearest_even(num, exp):
    q = Fraction(num) * Fraction(2) ** exp
    got = round_f32(num, exp)
    if abs(q) >= Fraction(2) ** 128:
        assert math.isinf(got)
        return
    want = _nearest_f32(q)
    if math.isinf(want) or abs(want) > 3.4028234663852886e38:
        return  # rounds past the largest finite value: covered below
    assert float(got) == want, (num, exp)


def test_round_f32_ties_subnormals_and_overflow():
    assert round_f32(2**24 + 1, 0) == np.float32(2**24)  # tie, even below
    assert round_f32(2**24 + 3, 0) == np.float32(2**24 + 4)  # tie, even above
    assert round_f32(1, -150) == 0.0 and round_f32(3, -150) == np.float32(2.0**-148)  # subnormal ties
    assert round_f32(1, -149) == np.float32(2.0**-149)
    assert round_f32(2**24 - 1, 104) == np.finfo(np.float32).max  # the largest finite value
    assert math.isinf(round_f32(2**25 - 1, 103))  # half-way between it and 2**128: rounds (to even) past it
    assert round_f32(-5, 0) == -5.0 and round_f32(0, 7) == 0.0


def _frag_a(A):
    """Per-lane A registers of m16n8k32 (4 x 4 values) from a 16 x 32 matrix (the PTX ISA layout)."""
    return [[tuple(A[L // 4 + 8 * (i % 2), 4 * (L % 4) + 16 * (i // 2) + h] for h in range(4)) for i in range(4)]
            for L in range(32)]


def _frag_b(B):
    """Per-lane B registers (2 x 4 values) from a 32 x 8 matrix."""
    return [[tuple(B[4 * (L % 4) + 16 * i + h, L // 4] for h in range(4)) for i in range(2)] for L in range(32)]


def test_mma_m16n8k32_against_hand_built_fragments():
    # A = [I16 | 0], B[k, n] = 100k + n (k < 16), C = 0.5: D = B's first 16 rows + 0.5
    A = np.zeros((16, 32))
    A[:, :16] = np.eye(16)
    B = np.add.outer(100 * np.arange(32), np.arange(8)).astype(float)
    d = mma_m16n8k32(_frag_a(A), _frag_b(B), [[0.5] * 4 for _ in range(32)])
    # lane 6 (g=1, t=2): element 3 is D[9, 5]; lane 31 element 3 is D[15, 7]
    assert d[6][3] == 905.5 and d[0][0] == 0.5 and d[31][3] == 1507.5
    # the second K half (A[:, 16:]) lands in registers 2/3 of A and 1 of B
    A2 = np.zeros((16, 32))
    A2[:, 16:] = np.eye(16)
    d = mma_m16n8k32(_frag_a(A2), _frag_b(B), [[0.0] * 4 for _ in range(32)])
    assert d[6][3] == 2505.0


@pytest.mark.parametrize("ka, kb", [("e4m3", "e4m3"), ("e5m2", "e5m2"), ("e4m3", "e5m2"), ("e5m2", "e4m3")])
def test_mma_is_the_exact_sum_rounded_once(ka, kb):
    rng = np.random.default_rng(7)
    A = (rng.standard_normal((16, 32)) * 2.0 ** rng.integers(-8, 8, (16, 32))).astype(_NP[ka]).astype(np.float64)
    B = (rng.standard_normal((32, 8)) * 2.0 ** rng.integers(-8, 8, (32, 8))).astype(_NP[kb]).astype(np.float64)
    C = (rng.standard_normal((16, 8)) * 1e3).astype(np.float32)
    c = [[float(C[L // 4 + 8 * (i // 2), 2 * (L % 4) + i % 2]) for i in range(4)] for L in range(32)]
    d = mma_m16n8k32(_frag_a(A), _frag_b(B), c)
    for L in (0, 13, 31):
        for i in range(4):
            r, col = L // 4 + 8 * (i // 2), 2 * (L % 4) + i % 2
            exact = sum(Fraction(A[r, k]) * Fraction(B[k, col]) for k in range(32)) + Fraction(float(C[r, col]))
            assert float(d[L][i]) == _nearest_f32(exact)


def test_mma_propagates_nan_and_inf():
    A = np.ones((16, 32))
    B = np.ones((32, 8))
    A[3, 5] = np.nan
    B[7, 2] = np.inf
    d = mma_m16n8k32(_frag_a(A), _frag_b(B), [[0.0] * 4 for _ in range(32)])
    D = np.array([[d[(r % 8) * 4 + c // 2][(r // 8) * 2 + c % 2] for c in range(8)] for r in range(16)])
    assert np.isnan(D[3]).all() and np.isinf(D[np.arange(16) != 3, 2]).all()
    assert (D[0, [0, 1, 3]] == 32.0).all()


def test_byte_ldmatrix_and_register_packing():
    mem = np.arange(4 * 128, dtype=np.int64).astype(np.uint8)  # byte b holds b % 256
    addrs = [16 * L for L in range(32)]  # matrix j row r: 16 bytes at 128*j + 16*r
    bits, a16 = _b16_view(mem, addrs)
    regs = ldmatrix_x4(bits, a16, trans=False)
    # lane 5 (g=1, t=1), matrix 2: bytes 4t..4t+3 of row g = 256 + 16 + 4 .. 7, lowest byte first
    vals = _unpack8(_pack(*regs[5][2]), "e4m3")
    want = np.array([(256 + 16 + 4 + h) % 256 for h in range(4)], np.uint8).view(ml_dtypes.float8_e4m3fn)
    assert vals == tuple(float(v) for v in want)
    with pytest.raises(ValueError, match="16-byte aligned"):
        _b16_view(mem, [8] + addrs[1:])


# ------------------------------------------------------------------------- the block's gemm
def _image(X, pad: int, base: int):
    """Byte image of the fp8 matrix ``X`` (rows padded by ``pad`` bytes, starting at byte ``base``)."""
    rows, cols = X.shape
    stride = cols + pad
    mem = np.full(base + rows * stride + 32, 0x7F, dtype=np.uint8)  # NaN (e4m3fn) / NaN (e5m2) filler
    bits = X.view(np.uint8)
    for i in range(rows):
        mem[base + i * stride: base + i * stride + cols] = bits[i]
    return mem, stride


def _gather(mem, at, offsets, kind):
    """The byte-load path: four bytes ``mem[at + o]`` packed lowest first, read back as fp8 values."""
    word = sum(int(mem[at + o]) << (8 * h) for h, o in enumerate(offsets))
    return _unpack8(word, kind)


def emulate_fp8(M, N, K, grid, ka="e4m3", kb="e4m3", pad=16, base=0, seed=0, ta=False, tb=True):
    """Block gemm ``op(A) @ op(B)`` (``A (M, K)`` or with ``ta`` ``(K, M)``; ``B (N, K)`` with ``tb`` else
    ``(K, N)``) the way ``tile_mma`` lowers it — ``ldmatrix`` for K-contiguous operands, byte gathers
    otherwise — on the hardware model; returns (result, float64 ``A @ B.T``)."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K)).astype(_NP[ka])
    B = rng.standard_normal((N, K)).astype(_NP[kb])
    memA, sa = _image(np.ascontiguousarray(A.T) if ta else A, pad, base)
    memB, sb = _image(B if tb else np.ascontiguousarray(B.T), pad, base + 32)
    a_rs, a_ks = (1, sa) if ta else (sa, 1)  # byte strides of m and k in A's image
    b_cs, b_ks = (sb, 1) if tb else (1, sb)
    nthreads = 32 * grid[0] * grid[1]
    lay = ML.mma_layout(M, N, nthreads, grid)
    MT, NT = ML.tiles(M, N, grid)
    S1 = lay.slots[1]
    epb = ML.elems_per_b16("float8_e4m3fn")
    acc = np.zeros((nthreads, lay.nslots), dtype=np.float32)
    for warp in range(grid[0] * grid[1]):
        wm, wn = warp % grid[0], warp // grid[0]
        for kk in range(0, K, ML.mma_k("float8_e4m3fn")):
            fa = []
            for mi in range(MT):
                if ta:
                    fa.append([[_gather(memA, base + kk * a_ks, [m * a_rs + k * a_ks for m, k in
                                                                  (ML.a_frag8_coord(lane, wm, mi, grid[0], i, h)
                                                                   for h in range(4))], ka) for i in range(4)]
                               for lane in range(32)])
                    continue
                addrs = []
                for lane in range(32):
                    m, k = ML.a_ldsm_coord(lane, wm, mi, grid[0], False)
                    addrs.append(base + m * a_rs + (kk + k * epb) * a_ks)
                bits, a16 = _b16_view(memA, addrs)
                fa.append([[_unpack8(_pack(*r), ka) for r in regs] for regs in ldmatrix_x4(bits, a16, False)])
            fb = []
            if not tb:
                for q in range(NT):
                    fb.append([[_gather(memB, base + 32 + kk * b_ks, [n * b_cs + k * b_ks for n, k in
                                                                      (ML.b_frag8_coord(lane, q, wn, grid[1], i, h)
                                                                       for h in range(4))], kb) for i in range(2)]
                               for lane in range(32)])
            for q2 in range(NT // 2 if tb else 0):
                addrs = []
                for lane in range(32):
                    n, k = ML.b_ldsm_coord(lane, q2, False, wn, grid[1])
                    addrs.append(base + 32 + n * b_cs + (kk + k * epb) * b_ks)
                bits, a16 = _b16_view(memB, addrs)
                regs = [[_unpack8(_pack(*r), kb) for r in lane_regs] for lane_regs in ldmatrix_x4(bits, a16, False)]
                fb.append([r[0:2] for r in regs])
                fb.append([r[2:4] for r in regs])
            for mi in range(MT):
                for q in range(NT):
                    slots = ML.c_slots(mi, q, S1)
                    c = [[acc[warp * 32 + lane, s] for s in slots] for lane in range(32)]
                    d = mma_m16n8k32(fa[mi], fb[q], c)
                    for lane in range(32):
                        for i, s in enumerate(slots):
                            acc[warp * 32 + lane, s] = d[lane][i]
    from tests.backends.test_mma_emulation import _read_back

    return _read_back(lay, acc), A.astype(np.float64) @ B.astype(np.float64).T


@pytest.mark.parametrize("ta, tb", [(False, True), (False, False), (True, True), (True, False)])
def test_one_warp_one_tile(ta, tb):
    got, ref = emulate_fp8(16, 16, 32, (1, 1), ta=ta, tb=tb)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)


@settings(max_examples=20, deadline=None)
@given(wm=st.sampled_from([1, 2]), wn=st.sampled_from([1, 2]), mt=st.integers(1, 2), n16=st.integers(1, 2),
       k32=st.integers(1, 3), kinds=st.sampled_from([("e4m3", "e4m3"), ("e5m2", "e5m2"), ("e4m3", "e5m2")]),
       pad=st.sampled_from([0, 16, 48]), base=st.sampled_from([0, 16, 64]), ta=st.booleans(), tb=st.booleans(),
       seed=st.integers(0, 2**16))
def test_block_fp8_gemm_matches_a_at_bt(wm, wn, mt, n16, k32, kinds, pad, base, ta, tb, seed):
    M, N, K = 16 * wm * mt, 16 * wn * n16, 32 * k32
    got, ref = emulate_fp8(M, N, K, (wm, wn), *kinds, pad=pad, base=base, seed=seed, ta=ta, tb=tb)
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_fp8_shape_and_layout_rules():
    ok = ML.mma_shape_ok
    assert ok(128, 128, 64, 128, "float8_e4m3fn", "float8_e4m3fn", "float32") is None
    assert ok(128, 128, 64, 128, "float8_e4m3fn", "float8_e5m2", "float32") is None  # mixed: PTX allows it
    assert "x32" in ok(128, 128, 48, 128, "float8_e4m3fn", "float8_e4m3fn", "float32")  # K % 32
    assert "operands" in ok(128, 128, 64, 128, "float8_e4m3fn", "bfloat16", "float32")
    assert "accumulator" in ok(128, 128, 64, 128, "float8_e4m3fn", "float8_e4m3fn", "bfloat16")
    assert ML.fp8_byte_loads("float8_e4m3fn", False, True) == (False, False)  # both K-contiguous: ldmatrix
    assert ML.fp8_byte_loads("float8_e5m2", False, False) == (False, True)  # B stored (K, N)
    assert ML.fp8_byte_loads("float8_e4m3fn", True, True) == (True, False)  # A stored (K, M)
    assert ML.fp8_byte_loads("bfloat16", True, False) == (False, False)  # 16-bit: ldmatrix.trans
    assert ML.mma_intrinsic("float8_e5m2", "float8_e4m3fn") == "_mma_e5m2_e4m3"
    assert ML.mma_intrinsic("bfloat16", "bfloat16") == "_mma_bf16" and ML.mma_k("float8_e5m2") == 32
