"""The fused gradient accumulation of mHC's ``pre_apply_mix`` / ``pre_norm_fn`` backward into the buffer
``mhc_post``'s backward fills (TileKernels' ``grad_from_mhc_post``, ``fuse_grad_acc=True``, its default):
kernels/mhc_bwd.py and kernels/mhc_bwd_norm.py. ``pre_apply_mix``: bitwise against the fp32 arithmetic
``round(XG0 + fp32(Mix·OG))`` on shapes the tiles do not divide; ``pre_norm_fn``: against float64 within one output
ulp plus fp32 error; both: a zero buffer gives the written gradient, the buffer's NaN/inf stay in their element,
MixG/FnG unchanged by the option, one rounding (closer than the caller's add of two rounded terms); chained after
``mhc_post_bwd`` as TileKernels' autograd does; default on; serial == batched."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels import mhc_bwd as K
from kernels import mhc_bwd_norm as KN
from tilesim import dtypes as dt

BF16 = dt.np_dtype("bfloat16")


def _mix_data(seed, N, m, H, dtype="bfloat16"):
    rng = np.random.default_rng(seed)
    c = lambda a: dt.convert(a.astype(np.float32), dtype)  # noqa: E731
    return (c(rng.standard_normal((N, H))), c(rng.standard_normal((N, m, H))), rng.random((N, m)).astype(np.float32),
            c(rng.standard_normal((N, m, H)) * 2))


@settings(max_examples=10, deadline=None)
@given(N=st.integers(1, 40), H=st.integers(1, 300), m=st.sampled_from([1, 2, 4]), block_N=st.sampled_from([1, 4, 8]),
       block_H=st.sampled_from([64, 256]), dtype=st.sampled_from(["bfloat16", "float32"]), seed=st.integers(0, 999))
def test_apply_mix_accumulates_bitwise(N, H, m, block_N, block_H, dtype, seed):
    og, x, mix, xg0 = _mix_data(seed, N, m, H, dtype)
    xg, mg = K.mhc_pre_apply_mix_bwd(N, m, H, block_N, block_H, dtype)(og, x, mix, xg0)
    rxg, rmg = K.ref_pre_apply_mix_bwd(og, x, mix, xg0)
    assert xg.dtype == rxg.dtype and xg.tobytes() == rxg.tobytes()
    _, mg1 = K.mhc_pre_apply_mix_bwd(N, m, H, block_N, block_H, dtype, fuse_grad_acc=False)(og, x, mix)
    assert mg.tobytes() == mg1.tobytes()  # the mix gradient does not depend on the option


def test_apply_mix_zero_buffer_is_the_written_gradient_and_one_rounding():
    N, m, H = 37, 4, 200
    og, x, mix, xg0 = _mix_data(1, N, m, H)
    k = K.mhc_pre_apply_mix_bwd(N, m, H)
    xg_w, _ = K.mhc_pre_apply_mix_bwd(N, m, H, fuse_grad_acc=False)(og, x, mix)
    xg_z, _ = k(og, x, mix, np.zeros_like(xg0))
    assert np.array_equal(xg_z.astype(np.float32), xg_w.astype(np.float32))
    xg, _ = k(og, x, mix, xg0)
    exact = xg0.astype(np.float64) + mix[:, :, None].astype(np.float64) * og[:, None, :].astype(np.float64)
    two = (xg0.astype(np.float32) + xg_w.astype(np.float32)).astype(BF16).astype(np.float64)  # caller adds
    err1, err2 = np.abs(xg.astype(np.float64) - exact), np.abs(two - exact)
    assert np.all(err1 <= 2.0 ** -8 * np.abs(exact) + 1e-30) and err1.sum() < err2.sum()


def test_apply_mix_buffer_specials_stay_in_their_element():
    N, m, H = 5, 2, 70
    og, x, mix, xg0 = _mix_data(2, N, m, H, "float32")
    xg0[1, 0, 3], xg0[2, 1, 5], xg0[3, 0, 0] = np.nan, np.inf, -np.inf
    xg, mg = K.mhc_pre_apply_mix_bwd(N, m, H, dtype="float32")(og, x, mix, xg0)
    bad = ~np.isfinite(xg)
    assert bad.sum() == 3 and np.isnan(xg[1, 0, 3]) and xg[2, 1, 5] == np.inf and xg[3, 0, 0] == -np.inf
    assert np.isfinite(mg).all()


def _norm_data(seed, N, m, H, dtype):
    rng = np.random.default_rng(seed)
    M3 = m * (2 + m)
    return (rng.standard_normal((N, M3)).astype(np.float32),
            dt.convert((rng.standard_normal((N, m * H)) * 3).astype(np.float32), dtype),
            (rng.standard_normal((M3, m * H)) * 0.05).astype(np.float32),
            dt.convert(rng.standard_normal((N, m * H)).astype(np.float32), dtype))


@settings(max_examples=6, deadline=None)
@given(N=st.integers(1, 45), H=st.integers(1, 150), m=st.sampled_from([1, 2, 4]),
       dtype=st.sampled_from(["bfloat16", "float32"]), block_K=st.sampled_from([32, 128]), seed=st.integers(0, 999))
def test_norm_fn_accumulates(N, H, m, dtype, block_K, seed):
    g, res, fn, rg0 = _norm_data(seed, N, m, H, dtype)
    M3 = m * (2 + m)
    rg, fg = KN.mhc_pre_norm_fn_bwd(N, m * H, M3, block_N=16, block_K=block_K, dtype=dtype)(g, res, fn, rg0)
    rrg, _ = KN.ref_pre_norm_fn_bwd(g, res, fn, rg0)
    x64 = res.astype(np.float64)
    scale = (np.abs(g) @ np.abs(fn)) / np.sqrt((x64 ** 2).mean(axis=1, keepdims=True) + 1e-6)
    ulp = 2.0 ** -8 if dtype == "bfloat16" else 2.0 ** -23
    ref = rrg.astype(np.float64)
    # the reference is the float64 sum rounded once: one output ulp each way plus fp32 error of the GEMM terms
    assert np.all(np.abs(rg.astype(np.float64) - ref) <= 2 * ulp * np.abs(ref) + 1e-5 * scale + 1e-6)
    _, fg1 = KN.mhc_pre_norm_fn_bwd(N, m * H, M3, block_N=16, block_K=block_K, dtype=dtype, fuse_grad_acc=False)(
        g, res, fn)
    assert fg.tobytes() == fg1.tobytes()


def test_norm_fn_zero_buffer_is_the_written_gradient_bitwise():
    N, m, H = 37, 2, 200
    g, res, fn, rg0 = _norm_data(3, N, m, H, "bfloat16")
    M3 = m * (2 + m)
    rg_w, _ = KN.mhc_pre_norm_fn_bwd(N, m * H, M3, fuse_grad_acc=False)(g, res, fn)
    rg_z, _ = KN.mhc_pre_norm_fn_bwd(N, m * H, M3)(g, res, fn, np.zeros_like(rg0))
    assert np.array_equal(rg_z.astype(np.float32), rg_w.astype(np.float32))
    rg0[4, 7] = np.nan
    rg, fg = KN.mhc_pre_norm_fn_bwd(N, m * H, M3)(g, res, fn, rg0)
    assert np.isnan(rg.astype(np.float32)).sum() == 1 and np.isnan(rg[4, 7].astype(np.float32)) and np.isfinite(fg).all()


def test_chained_after_post_bwd_as_tilekernels_autograd():
    """mhc_post's backward gives the residual gradient (the buffer); pre_apply_mix's backward adds into it."""
    N, m, H = 9, 4, 130
    rng = np.random.default_rng(4)
    c = lambda a: a.astype(np.float32).astype(BF16)  # noqa: E731
    og_post, xl, res = c(rng.standard_normal((N, m, H))), c(rng.standard_normal((N, H))), c(rng.standard_normal((N, m, H)))
    post, comb = rng.standard_normal((N, m)).astype(np.float32), rng.standard_normal((N, m, m)).astype(np.float32)
    _, res_g, _, _ = K.mhc_post_bwd(N, m, H)(og_post, xl, res, post, comb)
    og, mix = c(rng.standard_normal((N, H))), rng.random((N, m)).astype(np.float32)
    xg, _ = K.mhc_pre_apply_mix_bwd(N, m, H)(og, res, mix, res_g)
    want = (res_g.astype(np.float32) + (mix[:, :, None] * og[:, None, :].astype(np.float32))).astype(BF16)
    assert xg.tobytes() == want.tobytes()


def test_default_is_tilekernels_fuse_grad_acc():
    k = K.mhc_pre_apply_mix_bwd(4, 2, 64)
    assert [p.name for p in k.prim_func.params] == ["OG", "X", "Mix", "XG0", "XG", "MixG"]
    k = KN.mhc_pre_norm_fn_bwd(4, 64, 8)
    assert [p.name for p in k.prim_func.params] == ["G", "Res", "Fn", "ResG0", "ResG", "FnG"]


@pytest.mark.parametrize("which", ["mix", "norm"])
def test_serial_equals_batched(which):
    if which == "mix":
        ins = _mix_data(5, 13, 4, 200)
        k = K.mhc_pre_apply_mix_bwd(13, 4, 200)
    else:
        ins = _norm_data(5, 13, 2, 70, "bfloat16")
        k = KN.mhc_pre_norm_fn_bwd(13, 140, 8, block_N=8, block_K=32)
    for a, b in zip(k(*ins), k.run(*ins, options=tilesim.InterpOptions(mode="serial")), strict=True):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
