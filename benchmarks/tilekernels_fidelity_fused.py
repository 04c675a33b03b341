"""Case families of ``benchmarks/tilekernels_fidelity.py`` for mHC's fused blocks (issue 17, brief W): the fused pre
block ``mhc_pre_big_fuse`` (``mhc_fused``) against the chain TileKernels' own test uses as its reference
(``tests/mhc/test_pre_big_fuse.py``: ``big_fuse_reference`` = pre_norm_fn → pre_split_mixes → sinkhorn_normalize →
pre_apply_mix), evaluated here with TileKernels' ``*_ref`` functions of ``tile_kernels/torch/mhc.py`` on the CPU.

Each family is ``fn(h, R, rng, n) -> [(kernel, case, outputs)]`` like the script's own families, with ``h`` the
namespace of the script's helpers (``bitwise``, ``close``, ``_to_np``, ``_to_torch``, ``BF16``, ``torch``); the
script loads this file by path, as it loads ``tilekernels_fidelity_more.py``. Nothing here runs on import.
"""

from kernels.mhc_fused import big_fuse_inputs, mhc_pre_big_fuse


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


FAMILIES = {"mhc_fused": mhc_fused_cases}
