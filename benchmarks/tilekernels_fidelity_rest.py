"""Case families of ``benchmarks/tilekernels_fidelity.py`` for the kernels of issue 17's last part (brief U): the mHC
norm-weight gradient (``normw``), requantising casts (``requant``), TMA-aligned / packed-UE8M0 scale layouts
(``sf_layout``) and the Engram backward (``engram_bwd``) — whichever of them exist (see ``FAMILIES``).

Each family is ``fn(h, R, rng, n) -> [(kernel, case, outputs)]`` like the script's own families, with ``h`` the
namespace of the script's helpers (``bitwise``, ``close``, ``_to_np``, ``_to_torch``, ``BF16``, ``E4M3``, ``torch``);
the script loads this file by path, as it loads ``tilekernels_fidelity_more.py``. Nothing here runs on import.
"""

import numpy as np

from kernels.mhc_bwd_norm import mhc_pre_norm_fn_bwd
from kernels.mhc_normw import mhc_fn_normw_bwd, normw_inputs


def _grads(h, fn, inputs, out_grad):
    ts = [h._to_torch(a).requires_grad_() for a in inputs]
    h.torch.autograd.backward([fn(*ts)], [h._to_torch(out_grad)])
    return [h._to_np(t.grad) for t in ts]


def normw_cases(h, R, rng, n):
    """``mhc_fn_normw_bwd`` against autograd through TileKernels' ``mhc_pre_norm_fn_ref`` with a norm weight: the
    elementwise merge alone (random ``G``), and chained after ``mhc_pre_norm_fn_bwd`` (the whole gradient of fn and
    of the weight, as TileKernels' ``test_norm_fn`` with ``generate_normw``)."""
    M = R["mhc"]
    rows = []
    for label, M3, K in (("fn 24 x 2048 (x4, hidden 512)", 24, 2048), ("ragged: fn 8 x 400 (x2, hidden 200)", 8, 400)):
        fn, w, g = normw_inputs(rng, M3, K)
        fng, wg = mhc_fn_normw_bwd(M3, K)(fn, w, g)
        rfng, rwg = _grads(h, lambda a, b: a * b, [fn, w], g)
        rows.append(("mhc_fn_normw_bwd", "merge alone, " + label, [
            h.bitwise("FnG", fng, rfng), h.close("WG (fp32 sum of %d rows)" % M3, wg, rwg, 1e-5, 1e-9),
            dict(h.bitwise("WG", wg, rwg), mode="bitwise (informative)")]))
    for label, n0, n1, m, H in (("%d tok (2x%d), x4, hidden 512" % (n, n // 2), 2, n // 2, 4, 512),
                                ("ragged: 37 tok, x2, hidden 200", 1, 37, 2, 200)):
        N, M3, K = n0 * n1, m * (2 + m), m * H
        res = (rng.standard_normal((N, K)) * 2).astype(np.float32).astype(h.BF16)
        fn, w, _ = normw_inputs(rng, M3, K)
        g = rng.standard_normal((N, M3)).astype(np.float32)
        rg, fg_merged = mhc_pre_norm_fn_bwd(N, K, M3, eps=1e-6)(g, res, fn * w)
        fng, wg = mhc_fn_normw_bwd(M3, K)(fn, w, fg_merged)
        rrg, rfng, rwg = _grads(h, lambda a, b, c: M.mhc_pre_norm_fn_ref(a.view(n0, n1, m, H), b, c, 1e-6).view(N, M3),
                                [res, fn, w], g)
        rows.append(("mhc_fn_normw_bwd", "after pre_norm_fn_bwd, " + label, [
            h.close("ResG bf16 (1 ulp)", rg, rrg.reshape(N, K), 2**-7, 1e-4),
            h.close("FnG (TileKernels' test tol.)", fng, rfng, 1e-3, 3e-2), h.close("FnG (fp32 tol.)", fng, rfng, 1e-4, 1e-4),
            h.close("WG (fp32 tol.)", wg, rwg, 1e-4, 1e-5)]))
    return rows


FAMILIES = {"normw": normw_cases}
