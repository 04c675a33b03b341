"""Case families of ``benchmarks/tilekernels_fidelity.py`` for mHC's fused blocks (issue 17, brief W): the fused pre
block ``mhc_pre_big_fuse`` (``mhc_fused``) against the chain TileKernels' own test uses as its reference
(``tests/mhc/test_pre_big_fuse.py``: ``big_fuse_reference`` = pre_norm_fn → pre_split_mixes → sinkhorn_normalize →
pre_apply_mix), and the multilayer recompute ``mhc_multilayer_recompute`` (``mhc_recompute``) against the layer chain
of its test (``_mhc_multilayer_recompute_ref``: pre_apply_mix then post per layer), both evaluated here with
TileKernels' ``*_ref`` functions of ``tile_kernels/torch/mhc.py`` on the CPU.

Each family is ``fn(h, R, rng, n) -> [(kernel, case, outputs)]`` like the script's own families, with ``h`` the
namespace of the script's helpers (``bitwise``, ``close``, ``_to_np``, ``_to_torch``, ``BF16``, ``torch``); the
script loads this file by path, as it loads ``tilekernels_fidelity_more.py``. Nothing here runs on import.
"""

import numpy as np

from kernels.mhc_fused import big_fuse_inputs, mhc_pre_big_fuse
from kernels.mhc_recompute import mhc_multilayer_recompute, recompute_inputs


def _ref_chain(h, M, res, fn, sc, base, n0, n1, m, H, post_mult, repeat):
    t = h.torch
    mixes = M.mhc_pre_norm_fn_ref(h._to_torch(res).view(n0, n1, m, H), t.from_numpy(fn), None, 1e-6)
    pre, post, comb = M.mhc_pre_split_mixes_ref(mixes, t.from_numpy(sc), t.from_numpy(base), m, post_mult, 1e-6)
    comb = M.sinkhorn_normalize_ref(comb, repeat=repeat, eps=1e-6)
    out = M.mhc_pre_apply_mix_ref(h._to_torch(res).view(n0, n1, m, H), pre)
    N = n0 * n1
    return post.numpy().reshape(N, m), comb.numpy().reshape(N, m, m), h._to_np(out).reshape(N, H)


def mhc_fused_cases(h, R, rng, n):
    """``mhc_pre_big_fuse`` on TileKernels' test distribution (hidden 1280, its smallest test width, m = 4) and a
    ragged m = 2 case; Post/Comb fp32 within TileKernels' test tolerance of the norm-fn GEMM (1e-3) and fp32
    tolerance, Out within one bf16 ulp, bitwise counts informative."""
    M = R["mhc"]
    rows = []
    for label, n0, n1, m, H, post_mult, repeat in (
            ("%d tok, x4, hidden 1280 (TileKernels' test data)" % n, 1, n, 4, 1280, 1.0, 10),
            ("ragged: 37 tok (1x37), x2, hidden 200, post_mult 2, repeat 5", 1, 37, 2, 200, 2.0, 5)):
        N = n0 * n1
        res, fn, sc, base = big_fuse_inputs(rng, N, m, H)
        post, comb, out = mhc_pre_big_fuse(N, m, H, post_mult=post_mult, repeat=repeat)(res, fn, sc, base)
        rpost, rcomb, rout = _ref_chain(h, M, res, fn, sc, base, n0, n1, m, H, post_mult, repeat)
        rows.append(("mhc_pre_big_fuse", label, [
            h.close("Post (fp32 tol.)", post, rpost, 1e-4, 1e-5), h.close("Comb (fp32 tol.)", comb, rcomb, 1e-4, 1e-5),
            h.close("Out bf16 (1 ulp)", out, rout, 2**-7, 1e-6),
            dict(h.bitwise("Post", post, rpost), mode="bitwise (informative)"),
            dict(h.bitwise("Comb", comb, rcomb), mode="bitwise (informative)"),
            dict(h.bitwise("Out", out, rout), mode="bitwise (informative)")]))
    return rows


def _per_layer_scaled(ours, ref):
    """Both divided by the layer's max |ref| (layer axis first): ``close(..., rtol, atol)`` then means
    ``|ours − ref| ≤ atol·max|ref[layer]| + rtol·|ref|`` — an fp32 rounding allowance for results that cancel."""
    s = np.abs(ref.astype(np.float64)).reshape(ref.shape[0], -1).max(axis=1).reshape((-1,) + (1,) * (ref.ndim - 1))
    s = np.where(s > 0, s, 1.0)
    return ours.astype(np.float64) / s, ref.astype(np.float64) / s


def mhc_recompute_cases(h, R, rng, n):
    """``mhc_multilayer_recompute`` on TileKernels' test data (everything N(0, 1); 10 layers / 9 posts and 3 / 3 as
    in its correctness cases). Checked: every layer against TileKernels' ``mhc_pre_apply_mix_ref`` / ``mhc_post_ref``
    applied to our previous residual — one bf16 ulp, plus 1e-6 of the layer's largest value for sums that cancel
    (the reference sums in its own order). Informative: the whole chain of references from Res0, where a one-ulp
    difference in an early residual is carried (and, with N(0, 1) comb matrices, amplified) by later layers."""
    M = R["mhc"]
    t = h.torch

    def apply_ref(res, pre_l):
        return h._to_np(M.mhc_pre_apply_mix_ref(res, t.from_numpy(pre_l).view(1, N, m, 1))).reshape(N, H)

    def post_ref(res, lay):
        return M.mhc_post_ref(h._to_torch(out[lay]).view(1, N, H), res, t.from_numpy(post[lay]).view(1, N, m, 1),
                              t.from_numpy(comb[lay]).view(1, N, m, m))

    rows = []
    for label, N, m, H, L, Lp in (("%d tok, x4, hidden 512, 10 layers / 9 posts" % n, n, 4, 512, 10, 9),
                                  ("ragged: 37 tok, x2, hidden 200, 3 layers / 3 posts", 37, 2, 200, 3, 3)):
        res0, pre, out, post, comb = recompute_inputs(rng, N, m, H, L, Lp)
        lin, resid = mhc_multilayer_recompute(N, m, H, L, Lp)(res0, pre, out, post, comb)
        ours_prev = [res0] + list(resid)  # the residual each layer starts from, ours
        step_lin = np.stack([apply_ref(h._to_torch(ours_prev[lay]).view(1, N, m, H), pre[lay]) for lay in range(L)])
        step_res = np.stack([h._to_np(post_ref(h._to_torch(ours_prev[lay]).view(1, N, m, H), lay)).reshape(N, m, H)
                             for lay in range(Lp)])
        res = h._to_torch(res0).view(1, N, m, H)
        chain_lin, chain_res = [], []
        for lay in range(L):
            chain_lin.append(apply_ref(res, pre[lay]))
            if lay < Lp:
                res = post_ref(res, lay)
                chain_res.append(h._to_np(res).reshape(N, m, H))
        chain_lin, chain_res = np.stack(chain_lin), np.stack(chain_res)
        rows.append(("mhc_multilayer_recompute", label, [
            h.close("LayerIn per layer, bf16 (1 ulp)", *_per_layer_scaled(lin, step_lin), 2**-7, 1e-6),
            h.close("Resid per layer, bf16 (1 ulp)", *_per_layer_scaled(resid, step_res), 2**-7, 1e-6),
            dict(h.bitwise("LayerIn per layer", lin, step_lin), mode="bitwise (informative)"),
            dict(h.bitwise("Resid per layer", resid, step_res), mode="bitwise (informative)"),
            dict(h.close("LayerIn whole chain", *_per_layer_scaled(lin, chain_lin), 2**-7, 1e-6),
                 mode="whole chain rtol 2^-7 (informative)"),
            dict(h.close("Resid whole chain", *_per_layer_scaled(resid, chain_res), 2**-7, 1e-6),
                 mode="whole chain rtol 2^-7 (informative)")]))
    return rows


FAMILIES = {"mhc_fused": mhc_fused_cases, "mhc_recompute": mhc_recompute_cases}
