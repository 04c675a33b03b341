"""Lossless FP4 → FP8 per-block cast (kernels/quant_lossless.py): bitwise against the NumPy reference on shapes
the tiles and blocks do not divide (every layout pair, TileKernels' block pairs and others); every storage byte
written; lossless — the cast-back of the output equals the cast-back of the input bit for bit (TileKernels' own
test), with the widest allowed exponent spread (2^11), zero codes and −0; the spread past 2^11 stops the kernel at its
device assert and the reference raises; the output scale is the block maximum / 2^6, saturated at exponent 0;
serial == batched; build errors; the CUDA backend's lowering of its guarded device assert."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels import quant_lossless as L
from kernels.quant_cast_back import ref_cast_back
from kernels.quant_requant import LAYOUTS, compare_bitwise, layout_sf, logical_sf
from tilesim.backends.cuda.runtime import CudaProgram

PAIRS = [((1, 32), (1, 128)), ((1, 32), (32, 32)), ((1, 32), (128, 128)), ((2, 8), (4, 16)), ((32, 32), (128, 128))]


def _run(M, N, xb, ob, il, ol, seed=0, spread=11, inputs=None, block_M=None, mode=None):
    q, s = inputs if inputs is not None else L.lossless_inputs(np.random.default_rng(seed), M, N, xb, il, spread)
    k = L.per_block_cast_lossless(M, N, xb, ob, il, ol, block_M)
    out = k.run(q, s, options=tilesim.InterpOptions(uninit="check", **({"mode": mode} if mode else {})))
    compare_bitwise(out, L.ref_lossless(q, s, xb, ob, il, ol))
    return q, s, out


@settings(max_examples=12, deadline=None)
@given(M=st.integers(1, 300), half_n=st.integers(1, 200), pair=st.sampled_from(PAIRS), il=st.sampled_from(LAYOUTS),
       ol=st.sampled_from(LAYOUTS), spread=st.integers(0, 11), seed=st.integers(0, 999))
def test_matches_reference_and_is_lossless(M, half_n, pair, il, ol, spread, seed):
    xb, ob = pair
    N = 2 * half_n
    q, s, (y, so) = _run(M, N, xb, ob, il, ol, seed, spread)
    before = ref_cast_back(q, s, "e2m1", xb, il, "float32")
    after = ref_cast_back(y, so, "e4m3", ob, ol, "float32")
    assert before.tobytes() == after.tobytes()


@pytest.mark.parametrize("block_M", [None, 64, 256])
def test_row_tiles(block_M):
    _run(300, 200, (1, 32), (32, 32), "tma_ue8m0", "tma_ue8m0", block_M=block_M)


def test_output_scale_is_block_max_over_64_saturated():
    M, N = 4, 256
    e = np.array([[127, 120, 127 - 40, 3], [130, 121, 127 - 45, 2], [127, 127, 127 - 40, 1], [127, 127, 127 - 40, 0]])
    s = (e.astype(np.int32) << 23).view(np.float32)  # exponent 0: the scale is +0 (all products 0)
    q = np.full((M, N // 2), 0x3B, np.uint8).view(np.int8)  # element 2j: code 0xB = −1.5, element 2j+1: 0x3 = 1.5
    _, _, (y, so) = _run(M, N, (1, 64), (4, 64), "rows", "rows", inputs=(q, s))
    assert (so.view(np.int32) >> 23).tolist() == [[124, 121, 81, 0]]
    yf = y.astype(np.float32)
    assert yf[0, 0] == -1.5 * 2.0 ** 3 and yf[1, 1] == 1.5 * 2.0 ** 6 and yf[0, 64] == -1.5 * 2.0 ** -1
    # the saturated block (largest exponent 3 < 6): values scaled by 2^e, scale stored as +0 (TileKernels' rule;
    # lossless only when E − 6 ≥ 0, which any scale ≥ 2^-121 gives)
    assert yf[0, 192] == -1.5 * 2.0 ** 3 and yf[3, 193] == 1.5 and so[0, 3] == 0.0


def test_zeros_and_negative_zero():
    M, N = 33, 64
    q = np.zeros((M, N // 2), np.uint8)
    q[1] = 0x88  # −0 −0
    q, s = q.view(np.int8), layout_sf(np.full((M, 2), 2.0 ** -5, np.float32), "rows")
    _, _, (y, _) = _run(M, N, (1, 32), (32, 32), "rows", "rows", inputs=(q, s))
    yf = y.astype(np.float32)
    assert not yf.any() and np.signbit(yf[1]).all() and not np.signbit(yf[0]).any()


def test_spread_past_2_11_stops_the_kernel():
    M, N = 64, 256
    s = np.full((M, N // 32), 1.0, np.float32)
    s[5, 2] = 2.0 ** -12  # 12 binades below the block's largest scale (11 is the limit)
    q = np.full((M, N // 2), 0x11, np.uint8).view(np.int8)
    with pytest.raises(ValueError, match="more than 2"):
        L.ref_lossless(q, s, (1, 32), (32, 128), "rows", "rows")
    with pytest.raises(tilesim.KernelError, match="device_assert"):
        L.per_block_cast_lossless(M, N, (1, 32), (32, 128), "rows", "rows")(q, s)
    s[5, 2] = 2.0 ** -11  # exactly 2^11: still lossless
    _run(M, N, (1, 32), (32, 128), "rows", "rows", inputs=(q, s))


def test_serial_equals_batched():
    a = _run(70, 200, (1, 32), (32, 32), "tma", "tma_ue8m0", mode="serial")[2]
    b = _run(70, 200, (1, 32), (32, 32), "tma", "tma_ue8m0")[2]
    compare_bitwise(a, b)


def test_layouts_hold_the_same_scales():
    q, s = L.lossless_inputs(np.random.default_rng(7), 130, 300, (1, 32), "rows")
    outs = {ol: L.per_block_cast_lossless(130, 300, (1, 32), (128, 128), "rows", ol)(q, s) for ol in LAYOUTS}
    for ol, (y, so) in outs.items():
        assert y.tobytes() == outs["rows"][0].tobytes()
        assert np.array_equal(logical_sf(so, 2, 3, ol), outs["rows"][1])


@pytest.mark.parametrize("kw,msg", [({"in_layout": "cols"}, "in_layout"), ({"x_block": (1, 24)}, "powers of two"),
                                    ({"out_block": (1, 96)}, "powers of two"), ({"N": 63}, "even N"),
                                    ({"x_block": (2, 32), "out_block": (3, 128)}, "multiple of x_block"),
                                    ({"x_block": (2, 32), "out_block": (2, 64), "block_M": 5}, "block_M")])
def test_build_errors(kw, msg):
    args = {"M": 8, "N": 64, **kw}
    with pytest.raises(ValueError, match=msg):
        L.per_block_cast_lossless(**args)


def test_a_zero_block_among_normal_ones_traps():
    """An all-zero FP4 block quantised by the casts here (and TileKernels') gets the floor scale 2^-126: beside a
    block of scale ~1 it breaks the 2^11 spread, so the cast stops (TileKernels' device assert fires as well)."""
    M, N = 32, 128
    s = np.ones((M, 4), np.float32)
    s[0, 0] = 2.0 ** -126
    q = np.zeros((M, N // 2), np.int8)
    with pytest.raises(tilesim.KernelError, match="more than 2"):
        L.per_block_cast_lossless(M, N, (1, 32), (32, 128), "rows", "rows")(q, s)


def test_cuda_lowering_of_a_guarded_device_assert_is_valid_python():
    """The CUDA backend lowers ``T.device_assert`` to a no-op; alone in an ``if`` body it must still be a statement
    (it was a bare comment: an IndentationError when the kernel was compiled for sm_90)."""
    k = L.per_block_cast_lossless(64, 256, (1, 32), (32, 128), "rows", "rows")
    for kk in CudaProgram(k.prim_func, sim=False).kernels:
        compile(kk.source, kk.name, "exec")
        assert "pass  # T.device_assert(" in kk.source
