"""mHC backward kernels (kernels/mhc_bwd.py, mhc_bwd_mix.py, mhc_bwd_norm.py) against float64 references on batch
sizes, token counts and hidden sizes the tiles do not divide; the Sinkhorn gradient against central finite
differences of the float64 forward and the exact identity of its softmax (each row of the input gradient sums to
0); the stream kernels' adjoint identities (``<OG, forward(inputs)> = Σ gradient·input`` for the bilinear
forwards) and bitwise stream sums; the mix and norm_fn references against central finite differences."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels import mhc_bwd as K
from kernels import mhc_bwd_mix as KM
from kernels import mhc_bwd_norm as KN
from kernels.sinkhorn import ref_sinkhorn
from tilesim import dtypes as dt
from tilesim.testing.compare import compare_arrays

BF16 = dt.np_dtype("bfloat16")


def _ok(out, ref, rtol, atol, name="out"):
    msg = compare_arrays(out, ref, rtol=rtol, atol=atol, name=name)
    assert msg is None, msg


def _sk_data(seed, B, n, scale=2.0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((B, n, n)).astype(np.float32),
            (rng.standard_normal((B, n, n)) * scale).astype(np.float32))


@settings(max_examples=8, deadline=None)
@given(B=st.integers(1, 50), n=st.sampled_from([1, 2, 3, 4, 5, 8]), repeat=st.integers(1, 5),
       block_B=st.sampled_from([1, 4, 8, 32]), seed=st.integers(0, 999))
def test_sinkhorn_bwd_matches_reference(B, n, repeat, block_B, seed):
    g, x = _sk_data(seed, B, n)
    out = K.sinkhorn_bwd(B, n, repeat=repeat, block_B=block_B)(g, x)
    ref = K.ref_sinkhorn_bwd(g, x, repeat=repeat)
    _ok(out, ref, 1e-4, 1e-5)
    # softmax is invariant to a per-row shift: every row of the input gradient sums to 0
    assert np.abs(out.astype(np.float64).sum(axis=-1)).max() <= 1e-5 * max(1.0, np.abs(out).max())


@pytest.mark.parametrize("n,repeat", [(4, 10), (3, 2), (5, 1)])
def test_sinkhorn_bwd_finite_differences(n, repeat):
    g, x = _sk_data(7, 3, n)
    out = K.sinkhorn_bwd(3, n, repeat=repeat, block_B=2)(g, x)
    x64, h = x.astype(np.float64), 1e-6
    fd = np.zeros_like(x64)
    for idx in np.ndindex(*x.shape):
        xp, xm = x64.copy(), x64.copy()
        xp[idx] += h
        xm[idx] -= h
        fd[idx] = ((ref_sinkhorn(xp, repeat) - ref_sinkhorn(xm, repeat)) * g).sum() / (2 * h)
    assert np.abs(K.ref_sinkhorn_bwd(g, x, repeat=repeat) - fd).max() <= 1e-8
    _ok(out, fd, 1e-4, 1e-5)


def test_sinkhorn_bwd_edges():
    with pytest.raises(ValueError, match="repeat"):
        K.sinkhorn_bwd(4, 4, repeat=0)
    g, x = _sk_data(3, 6, 4, scale=30.0)  # near one-hot softmax rows: eps dominates, gradients stay finite
    out = K.sinkhorn_bwd(6, 4, block_B=4)(g, x)
    assert np.isfinite(out).all()
    _ok(out, K.ref_sinkhorn_bwd(g, x), 1e-4, 1e-5)
    x[2, 1, 3] = np.nan  # a NaN poisons its own matrix only
    out = K.sinkhorn_bwd(6, 4, block_B=4)(g, x)
    assert np.isnan(out[2]).all() and np.isfinite(np.delete(out, 2, axis=0)).all()
    k = K.sinkhorn_bwd(5, 3, repeat=3, block_B=2)
    g, x = _sk_data(4, 5, 3)
    assert np.array_equal(k(g, x), k.run(g, x, options=tilesim.InterpOptions(mode="serial")))


def _bf(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32).astype(BF16)


@settings(max_examples=6, deadline=None)
@given(N=st.integers(1, 30), H=st.integers(1, 300), m=st.sampled_from([1, 2, 3, 4]), block_H=st.sampled_from([64, 256]),
       block_N=st.sampled_from([1, 2, 8]), seed=st.integers(0, 999))
def test_stream_bwd_match_references(N, H, m, block_H, block_N, seed):
    rng = np.random.default_rng(seed)
    og3, og2, x, res = _bf(rng, N, m, H), _bf(rng, N, H), _bf(rng, N, H), _bf(rng, N, m, H)
    mix, post = rng.random((N, m)).astype(np.float32), rng.standard_normal((N, m)).astype(np.float32)
    comb = rng.standard_normal((N, m, m)).astype(np.float32)
    _ok(K.mhc_expand_bwd(N, m, H, block_N, block_H)(og3), K.ref_expand_bwd(og3), 2.0 ** -7, 1e-5)  # one bf16 ulp
    xg, mg = K.mhc_pre_apply_mix_bwd(N, m, H, block_N, block_H, fuse_grad_acc=False)(og2, res, mix)
    rxg, rmg = K.ref_pre_apply_mix_bwd(og2, res, mix)
    _ok(xg, rxg, 2.0 ** -7, 1e-5, "XG")
    _ok(mg, rmg, 1e-5, 1e-5, "MixG")
    outs = K.mhc_post_bwd(N, m, H, block_N, block_H)(og3, x, res, post, comb)
    for o, r, tol, name in zip(outs, K.ref_post_bwd(og3, x, res, post, comb), (2.0 ** -7, 2.0 ** -7, 1e-5, 1e-5),
                               ("XG", "ResG", "PostG", "CombG"), strict=True):
        _ok(o, r, tol, 1e-5, name)


def test_stream_bwd_adjoint_identities():
    rng = np.random.default_rng(11)
    N, m, H = 13, 4, 333
    og3, og2, x, res = _bf(rng, N, m, H), _bf(rng, N, H), _bf(rng, N, H), _bf(rng, N, m, H)
    mix, post = rng.random((N, m)).astype(np.float32), rng.standard_normal((N, m)).astype(np.float32)
    comb = rng.standard_normal((N, m, m)).astype(np.float32)
    f64 = [a.astype(np.float64) for a in (og3, og2, x, res, mix, post, comb)]
    o3, o2, x64, r64, mx, p64, c64 = f64
    # <OG, x*post + comb^T res> = sum PostG*Post + sum CombG*Comb (the forward is linear in post and comb)
    _, _, pg, cg = K.mhc_post_bwd(N, m, H, block_H=128)(og3, x, res, post, comb)
    lhs = (o3 * (x64[:, None, :] * p64[:, :, None] + np.einsum("nrc,nrh->nch", c64, r64))).sum()
    rhs = (pg * p64).sum() + (cg * c64).sum()
    assert abs(lhs - rhs) <= 1e-5 * (np.abs(o3) * np.abs(x64[:, None, :]) * np.abs(p64[:, :, None])).sum() * 2 + 1e-3
    # <OG, sum_r x_r mix_r> = sum MixG*Mix
    _, mg = K.mhc_pre_apply_mix_bwd(N, m, H, block_H=128, fuse_grad_acc=False)(og2, res, mix)
    lhs = (o2 * (r64 * mx[:, :, None]).sum(axis=1)).sum()
    assert abs(lhs - (mg * mx).sum()) <= 1e-5 * (np.abs(o2[:, None, :]) * np.abs(r64) * mx[:, :, None]).sum() + 1e-4
    # expand: m equal stream gradients sum to m*v exactly (m a power of two), bit for bit
    v = _bf(rng, N, H)
    xg = K.mhc_expand_bwd(N, m, H, block_H=128)(np.repeat(v[:, None, :], m, axis=1))
    assert np.array_equal(xg.view(np.uint16), (v.astype(np.float32) * m).astype(BF16).view(np.uint16))
    # post with identity comb and zero post: the residual gradient is OG itself
    _, rg, _, _ = K.mhc_post_bwd(N, m, H, block_H=128)(og3, x, res, np.zeros_like(post),
                                                      np.tile(np.eye(m, dtype=np.float32), (N, 1, 1)))
    assert np.array_equal(rg.view(np.uint16), og3.view(np.uint16))


def test_stream_bwd_serial_equals_batched():
    rng = np.random.default_rng(5)
    N, m, H = 5, 2, 70
    args = (_bf(rng, N, m, H), _bf(rng, N, H), _bf(rng, N, m, H), rng.random((N, m)).astype(np.float32),
            rng.random((N, m, m)).astype(np.float32))
    k = K.mhc_post_bwd(N, m, H, block_N=2, block_H=64)
    for a, b in zip(k(*args), k.run(*args, options=tilesim.InterpOptions(mode="serial")), strict=True):
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8))


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def _split_fwd64(x, sc, base, m, pm=2.0):
    part = np.repeat([0, 1, 2], [m, m, m * m])
    v = x * sc[part] + base
    return np.concatenate([_sig(v[:, :m]) + 1e-6, _sig(v[:, m:2 * m]) * pm, v[:, 2 * m:]], axis=1)


@settings(max_examples=6, deadline=None)
@given(N=st.integers(1, 150), m=st.sampled_from([1, 2, 3, 4]), block_N=st.sampled_from([16, 32, 64]),
       seed=st.integers(0, 999))
def test_mix_bwd_match_references(N, m, block_N, seed):
    rng = np.random.default_rng(seed)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    args = (f(N, m), f(N, m), f(1), f(m))
    for o, r, name in zip(KM.mhc_head_compute_mix_bwd(N, m, block_N)(*args), KM.ref_head_compute_mix_bwd(*args),
                          ("MixG", "ScaleG", "BaseG"), strict=True):
        _ok(o, r, 1e-4, 1e-5, name)
    args = (f(N, m), f(N, m), f(N, m, m), f(N, m * (2 + m)), f(3), f(m * (2 + m)))
    for o, r, name in zip(KM.mhc_pre_split_mixes_bwd(N, m, 2.0, block_N)(*args), KM.ref_pre_split_mixes_bwd(*args, m=m),
                          ("MixesG", "ScaleG", "BaseG"), strict=True):
        _ok(o, r, 1e-4, 1e-5, name)


def test_mix_bwd_finite_differences():
    """The references against central differences of float64 forwards; the kernels against the references."""
    rng = np.random.default_rng(3)
    N, m, h = 6, 2, 1e-6
    M3 = m * (2 + m)
    gp, gq, gc = rng.standard_normal((N, m)), rng.standard_normal((N, m)), rng.standard_normal((N, m, m))
    x, sc, base = rng.standard_normal((N, M3)), rng.standard_normal(3).astype(np.float32).astype(np.float64), \
        rng.standard_normal(M3)
    gcat = np.concatenate([gp, gq, gc.reshape(N, m * m)], axis=1)
    loss = lambda x_, s_, b_: (_split_fwd64(x_, s_, b_, m) * gcat).sum()  # noqa: E731
    ref = KM.ref_pre_split_mixes_bwd(gp, gq, gc, x, sc, base, m=m)

    def fd(arr, which):
        out = np.zeros_like(arr)
        for idx in np.ndindex(*arr.shape):
            a, b = arr.copy(), arr.copy()
            a[idx] += h
            b[idx] -= h
            args_p = [a if k == which else v for k, v in enumerate((x, sc, base))]
            args_m = [b if k == which else v for k, v in enumerate((x, sc, base))]
            out[idx] = (loss(*args_p) - loss(*args_m)) / (2 * h)
        return out

    for k, arr in enumerate((x, sc, base)):
        assert np.abs(ref[k] - fd(arr, k)).max() <= 1e-5 * max(1.0, np.abs(ref[k]).max())
    f32 = [a.astype(np.float32) for a in (gp, gq, gc, x, sc, base)]
    for o, r in zip(KM.mhc_pre_split_mixes_bwd(N, m, 2.0, 4)(*f32), KM.ref_pre_split_mixes_bwd(*f32, m=m), strict=True):
        _ok(o, r, 1e-4, 1e-5)
    # head mix: the same sigmoid gradient on the pre part alone
    g1, x1, s1, b1 = (rng.standard_normal(s).astype(np.float32) for s in ((N, m), (N, m), (1,), (m,)))
    mg, sg, bg = KM.mhc_head_compute_mix_bwd(N, m, 4)(g1, x1, s1, b1)
    hl = lambda xx, ss: (g1 * _sig(xx * ss + b1.astype(np.float64))).sum()  # noqa: E731
    x64, s64 = x1.astype(np.float64), float(s1[0])
    assert abs(sg[0] - (hl(x64, s64 + h) - hl(x64, s64 - h)) / (2 * h)) <= 1e-4 * max(1.0, abs(sg[0]))
    e = np.zeros_like(x64)
    e[2, 1] = h
    assert abs(mg[2, 1] - (hl(x64 + e, s64) - hl(x64 - e, s64)) / (2 * h)) <= 1e-5


def _norm_fwd64(x, fn, eps=1e-6):
    return (x @ fn.T) / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps)


@settings(max_examples=5, deadline=None)
@given(N=st.integers(1, 45), H=st.integers(1, 150), m=st.sampled_from([1, 2, 4]), dtype=st.sampled_from(["bfloat16", "float32"]),
       block_K=st.sampled_from([32, 128]), seed=st.integers(0, 999))
def test_norm_fn_bwd_matches_reference(N, H, m, dtype, block_K, seed):
    rng = np.random.default_rng(seed)
    M3 = m * (2 + m)
    g = rng.standard_normal((N, M3)).astype(np.float32)
    res = dt.convert((rng.standard_normal((N, m * H)) * 3).astype(np.float32), dtype)
    fn = (rng.standard_normal((M3, m * H)) * 0.05).astype(np.float32)
    rg, fg = KN.mhc_pre_norm_fn_bwd(N, m * H, M3, block_N=16, block_K=block_K, dtype=dtype,
                                  fuse_grad_acc=False)(g, res, fn)
    rrg, rfg = KN.ref_pre_norm_fn_bwd(g, res, fn)
    # ResG: one output ulp plus fp32 error relative to |G|·|Fn| / rms (the terms of the sum)
    x64 = res.astype(np.float64)
    scale = (np.abs(g) @ np.abs(fn)) / np.sqrt((x64 ** 2).mean(axis=1, keepdims=True) + 1e-6)
    ulp = 2.0 ** -7 if dtype == "bfloat16" else 1e-6
    assert np.all(np.abs(rg.astype(np.float64) - rrg.astype(np.float64)) <= ulp * np.abs(rrg.astype(np.float64)) + 1e-5 * scale + 1e-6)
    fscale = (np.abs(g) / np.sqrt((x64 ** 2).mean(axis=1, keepdims=True) + 1e-6)).T @ np.abs(x64)
    assert np.all(np.abs(fg - rfg) <= 1e-5 * fscale + 1e-6)


def test_norm_fn_bwd_finite_differences():
    rng = np.random.default_rng(9)
    N, m, H = 4, 2, 12
    M3, K = m * (2 + m), m * H
    g = rng.standard_normal((N, M3))
    x, fn = rng.standard_normal((N, K)), rng.standard_normal((M3, K)) * 0.1
    rrg, rfg = KN.ref_pre_norm_fn_bwd(g, x, fn)
    h = 1e-6
    for arr, ref, which in ((x, rrg, 0), (fn, rfg, 1)):
        fd = np.zeros_like(arr)
        for idx in np.ndindex(*arr.shape):
            a, b = arr.copy(), arr.copy()
            a[idx] += h
            b[idx] -= h
            fp = _norm_fwd64(a, fn) if which == 0 else _norm_fwd64(x, a)
            fm = _norm_fwd64(b, fn) if which == 0 else _norm_fwd64(x, b)
            fd[idx] = ((fp - fm) * g).sum() / (2 * h)
        assert np.abs(ref - fd).max() <= 1e-5 * max(1.0, np.abs(fd).max())
    rg, fg = KN.mhc_pre_norm_fn_bwd(N, K, M3, block_N=2, block_K=16, dtype="float32", fuse_grad_acc=False)(
        g.astype(np.float32), x.astype(np.float32), fn.astype(np.float32))
    _ok(rg, rrg, 1e-4, 1e-5, "ResG")
    _ok(fg, rfg, 1e-4, 1e-5, "FnG")
    with pytest.raises(ValueError, match="M3 <= 32"):
        KN.mhc_pre_norm_fn_bwd(8, 64, 35)
