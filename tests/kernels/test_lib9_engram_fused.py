"""Engram fused weight and fused-weight gate forward (kernels/engram_fused.py): the weight bit for bit (zeros,
overflow, fp32-subnormal products, inf/NaN included), the gate's five outputs against the float64 reference on
ragged token counts and hidden sizes, the saved statistics consistent with the gate they produce, the chain equal
to ``engram_gate`` on the split weights within one bf16 ulp, a zero dot giving gate 1/2, serial == batched."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels import engram_fused as E
from kernels.engram import engram_gate, gate_inputs
from tilesim import dtypes as dt
from tilesim.testing.compare import compare_arrays


def _bits(a):
    return np.ascontiguousarray(a, np.float32).view(np.uint32)


@settings(max_examples=8, deadline=None)
@given(hc=st.integers(1, 4), H=st.integers(1, 300), block_H=st.sampled_from([32, 128, 1024]), edge=st.booleans(),
       seed=st.integers(0, 99))
def test_fused_weight_bitwise(hc, H, block_H, edge, seed):
    wh, we = E.weight_inputs(np.random.default_rng(seed), hc, H)
    if edge:
        a, b = wh.astype(np.float32), we.astype(np.float32)
        a[:, ::5], b[:, 1::7] = 0.0, 3.3e38
        a[:, 1::7] = -3.3e38  # overflow to -inf
        a[:, 2::9], b[:, 2::9] = 2.0 ** -70, 3 * 2.0 ** -70  # fp32 subnormal product
        a[:, 3::11], b[:, 3::11] = np.inf, np.nan
        wh, we = dt.convert(a, "bfloat16"), dt.convert(b, "bfloat16")
    out = E.engram_fused_weight(hc, H, block_H=block_H)(wh, we)
    assert np.array_equal(_bits(out), _bits(E.ref_fused_weight(wh, we)))


def test_fused_weight_is_the_exact_product():
    wh, we = E.weight_inputs(np.random.default_rng(3), 4, 333)
    out = E.engram_fused_weight(4, 333, block_H=128)(wh, we).astype(np.float64)
    assert np.array_equal(out, wh.astype(np.float64) * we.astype(np.float64))  # 8 x 8 significant bits fit fp32


@settings(max_examples=6, deadline=None)
@given(N=st.integers(1, 20), hc=st.sampled_from([1, 2, 4]), H=st.integers(1, 300), block_R=st.sampled_from([4, 8]),
       block_H=st.sampled_from([64, 256]), seed=st.integers(0, 99))
def test_gate_matches_float64(N, hc, H, block_R, block_H, seed):
    ins = E.gate_fused_inputs(np.random.default_rng(seed), N, hc, H)
    outs = E.engram_gate_fused(N, hc, H, block_R=block_R, block_H=block_H)(*ins)
    E.compare_gate(list(outs), list(E.ref_gate_fused(*ins)))


def test_statistics_produce_the_gate_and_the_output():
    N, hc, H = 11, 4, 200
    x, k, v, wf = E.gate_fused_inputs(np.random.default_rng(5), N, hc, H)
    out, dot, gate, rx, rk = E.engram_gate_fused(N, hc, H, block_H=64)(x, k, v, wf)
    z = dot.astype(np.float64) * rx * rk * H ** -0.5
    want = 1 / (1 + np.exp(-np.sign(z) * np.sqrt(np.maximum(np.abs(z), 1e-6))))
    np.testing.assert_allclose(gate, want, rtol=1e-6)
    again = dt.convert(x.astype(np.float32) + gate[..., None].astype(np.float32) * v.astype(np.float32)[:, None, :],
                       "bfloat16")
    assert np.array_equal(out.view(np.uint16), again.view(np.uint16))


def test_chain_equals_split_weight_gate():
    N, hc, H = 7, 2, 300
    x, k, v, wh, we = gate_inputs(np.random.default_rng(6), N, hc, H)
    wf = E.engram_fused_weight(hc, H, block_H=128)(wh, we)
    fused = E.engram_gate_fused(N, hc, H, block_H=128)(x, k, v, wf)[0]
    split = engram_gate(N, hc, H, block_H=128)(x, k, v, wh, we)
    assert compare_arrays(fused, split, rtol=2.0 ** -7, atol=1e-5, name="Out") is None


def test_zero_dot_gives_half_and_zero_dot():
    N, hc, H = 3, 2, 64
    x, k, v, wf = E.gate_fused_inputs(np.random.default_rng(0), N, hc, H)
    k[1, 0] = 0
    out, dot, gate, _, rk = E.engram_gate_fused(N, hc, H)(x, k, v, wf)
    assert dot[1, 0] == 0 and gate[1, 0] == 0.5 and rk[1, 0] == np.float32(1e10)


def test_compare_catches_a_wrong_statistic():
    ins = E.gate_fused_inputs(np.random.default_rng(1), 5, 2, 64)
    outs = list(E.engram_gate_fused(5, 2, 64)(*ins))
    outs[3] = outs[3] * np.float32(1.001)
    with pytest.raises(AssertionError, match="RstdX"):
        E.compare_gate(outs, list(E.ref_gate_fused(*ins)))


def test_serial_equals_batched():
    ins = E.gate_fused_inputs(np.random.default_rng(2), 9, 4, 100)
    kern = E.engram_gate_fused(9, 4, 100, block_R=8, block_H=64)
    for a, b in zip(kern(*ins), kern.run(*ins, options=tilesim.InterpOptions(mode="serial")), strict=True):
        assert np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))
