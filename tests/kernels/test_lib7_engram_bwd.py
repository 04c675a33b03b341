"""Engram gate backward and weight-gradient reduce (kernels/engram_bwd.py): the kernels against the float64 gradient
on token counts and hidden sizes the tiles do not divide; the hand-written float64 gradient against central finite
differences of the float64 forward; clamped rows (zero dot) get no gate gradient; the reduce bitwise against its fp32
meaning; serial == batched; block-size checks."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels import engram_bwd as K


@settings(max_examples=8, deadline=None)
@given(N=st.integers(1, 40), hc=st.sampled_from([1, 2, 4]), H=st.integers(1, 300), block_T=st.sampled_from([1, 4, 16]),
       block_H=st.sampled_from([64, 128]), block_R=st.sampled_from([2, 8]), seed=st.integers(0, 999))
def test_gate_bwd_matches_float64(N, hc, H, block_T, block_H, block_R, seed):
    ins = K.gate_bwd_inputs(np.random.default_rng(seed), N, hc, H)
    outs = K.engram_gate_bwd(N, hc, H, block_R=block_R, block_H=block_H, block_T=block_T)(*ins)
    assert outs[3].shape == (-(-N // block_T), hc, H)
    K._gate_tol(outs, K.ref_gate_bwd(*ins, block_T=block_T))


def _fwd64(x, k, v, wh, we, clamp=1e-6, eps=1e-20):
    H = x.shape[-1]
    rx = 1.0 / np.sqrt((x * x).mean(-1) + eps)
    rk = 1.0 / np.sqrt((k * k).mean(-1) + eps)
    z = (x * wh * k * we).sum(-1) * rx * rk * H ** -0.5
    g = 1.0 / (1.0 + np.exp(-np.sign(z) * np.sqrt(np.maximum(np.abs(z), clamp))))
    return x + g[..., None] * v[:, None, :]


def test_reference_against_finite_differences():
    rng = np.random.default_rng(2)
    N, hc, H = 2, 2, 5
    go, x, k, v, wh, we = (a.astype(np.float64) for a in K.gate_bwd_inputs(rng, N, hc, H))
    gx, gk, gv, gwp = (np.asarray(a, np.float64) for a in K.ref_gate_bwd(go, x, k, v, wh, we, block_T=1))
    args = [x, k, v, wh, we]
    want = [gx, gk, gv, gwp.sum(0) * we, gwp.sum(0) * wh]
    for a, w in zip(range(5), want, strict=True):
        fd = np.zeros_like(args[a])
        for idx in np.ndindex(*args[a].shape):
            p = [b.copy() for b in args]
            m = [b.copy() for b in args]
            p[a][idx] += 1e-6
            m[a][idx] -= 1e-6
            fd[idx] = ((_fwd64(*p) - _fwd64(*m)) * go).sum() / 2e-6
        assert np.abs(fd - w).max() <= 2.0 ** -7 * np.abs(w).max() + 1e-5  # bf16-rounded gradients vs exact FD


def test_zero_dot_rows_have_no_gate_gradient():
    rng = np.random.default_rng(3)
    N, hc, H = 3, 2, 40
    go, x, k, v, wh, we = K.gate_bwd_inputs(rng, N, hc, H)
    k[1] = 0  # token 1: k = 0, so sd = 0 and |z| < clamp: dr = 0, GK = 0, GX = GO
    gx, gk, gv, gwp = K.engram_gate_bwd(N, hc, H, block_H=64, block_T=4)(go, x, k, v, wh, we)
    assert np.array_equal(gx[1].view(np.uint16), go[1].view(np.uint16))
    assert not np.any(gk[1].astype(np.float32)) and np.isfinite(gwp).all()


def test_reduce_bitwise_and_serial_equals_batched():
    rng = np.random.default_rng(4)
    ins = K.reduce_inputs(rng, 5, 3, 130)
    k = K.engram_grad_w_reduce(5, 3, 130, block_H=64)
    for a, b, c in zip(k(*ins), K.ref_grad_w_reduce(*ins), k.run(*ins, options=tilesim.InterpOptions(mode="serial")),
                       strict=True):
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32)) and np.array_equal(a.view(np.uint32), c.view(np.uint32))
    gins = K.gate_bwd_inputs(rng, 9, 2, 70)
    kg = K.engram_gate_bwd(9, 2, 70, block_H=64, block_T=4, block_R=4)
    for a, b in zip(kg(*gins), kg.run(*gins, options=tilesim.InterpOptions(mode="serial")), strict=True):
        assert np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))


def test_block_sizes_must_be_powers_of_two():
    with pytest.raises(ValueError, match="block_T"):
        K.engram_gate_bwd(4, 2, 64, block_T=6)
    with pytest.raises(ValueError, match="block_H"):
        K.engram_grad_w_reduce(2, 2, 64, block_H=96)
