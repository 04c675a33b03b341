"""Case families of ``benchmarks/tilekernels_fidelity.py`` for the kernels of issue 17's last part (brief U): the mHC
norm-weight gradient (``normw``), requantising casts (``requant``), TMA-aligned / packed-UE8M0 scale layouts
(``sf_layout``) and the Engram backward (``engram_bwd``) — whichever of them exist (see ``FAMILIES``).

Each family is ``fn(h, R, rng, n) -> [(kernel, case, outputs)]`` like the script's own families, with ``h`` the
namespace of the script's helpers (``bitwise``, ``close``, ``_to_np``, ``_to_torch``, ``BF16``, ``E4M3``, ``torch``);
the script loads this file by path, as it loads ``tilekernels_fidelity_more.py``. Nothing here runs on import.
"""

import numpy as np

from kernels.engram_bwd import engram_gate_bwd, engram_grad_w_reduce, gate_bwd_inputs, ref_gate_bwd
from kernels.mhc_bwd_norm import mhc_pre_norm_fn_bwd
from kernels.mhc_normw import mhc_fn_normw_bwd, normw_inputs
from kernels.quant_requant import per_token_recast


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
        rg, fg_merged = mhc_pre_norm_fn_bwd(N, K, M3, eps=1e-6, fuse_grad_acc=False)(g, res, fn * w)
        fng, wg = mhc_fn_normw_bwd(M3, K)(fn, w, fg_merged)
        shape4, shape2 = (n0, n1, m, H), (N, M3)
        rrg, rfng, rwg = _grads(h, lambda a, b, c, s4=shape4, s2=shape2: M.mhc_pre_norm_fn_ref(a.view(*s4), b, c, 1e-6).view(*s2),
                                [res, fn, w], g)
        rows.append(("mhc_fn_normw_bwd", "after pre_norm_fn_bwd, " + label, [
            h.close("ResG bf16 (1 ulp)", rg, rrg.reshape(N, K), 2**-7, 1e-4),
            h.close("FnG (TileKernels' test tol.)", fng, rfng, 1e-3, 3e-2), h.close("FnG (fp32 tol.)", fng, rfng, 1e-4, 1e-4),
            h.close("WG (fp32 tol.)", wg, rwg, 1e-4, 1e-5)]))
    return rows


_FLAGS = {"rows": (False, False), "tma": (True, False), "tma_ue8m0": (True, True)}


def _sf_storage(h, sf, layout):
    """The memory of a TileKernels scale tensor as our storage array: row-major as is, TMA-aligned column-major as
    its (G, align4(R)) memory, packed UE8M0 as the bytes of its (ceil(G/4), align4(R)) int32 memory."""
    if layout == "rows":
        return h._to_np(sf)
    A = (sf.shape[0] + 3) // 4 * 4  # the column stride (torch may report 1 for a single column)
    mem = h.torch.as_strided(sf, (sf.shape[1], A), (A, 1)).contiguous()
    return h._to_np(mem) if layout == "tma" else mem.numpy().view(np.uint8)


def _to_tk(h, q):
    return h._to_torch(q) if q.dtype != np.int8 else h.torch.from_numpy(q.copy())


def requant_cases(h, R, rng, n):
    """``per_token_recast`` against TileKernels' ``cast``: inputs quantised by TileKernels' own ``cast`` (e4m3 or e2m1,
    blocks 128x128 / 32x32, power-of-two scales, in each scale layout) re-cast per token (groups 32/128, e4m3/e2m1),
    the configurations of TileKernels' ``test_per_token_cast``; plus unquantised bf16/fp32 inputs with the TMA-aligned
    and packed-UE8M0 scale layouts. Values and scale storage bitwise."""
    C = R["cast"]
    rows = []
    cases = [(n, 512, "e4m3", "e4m3", 128, (128, 128), "rows"), (n, 512, "e4m3", "e2m1", 32, (32, 32), "rows"),
             (n, 512, "e2m1", "e4m3", 128, (32, 32), "tma_ue8m0"), (n, 512, "e2m1", "e2m1", 32, (128, 128), "tma_ue8m0"),
             (37, 200, "e4m3", "e4m3", 32, (128, 128), "tma_ue8m0"), (37, 200, "e2m1", "e2m1", 128, (32, 32), "rows"),
             (13, 7168, "e4m3", "e2m1", 128, (128, 128), "tma"), (37, 200, "e4m3", "e4m3", 32, (32, 32), "tma")]
    for M, N, in_fmt, fmt, gs, xb, lay in cases:
        tma, packed = _FLAGS[lay]
        x = h.torch.from_numpy((rng.standard_normal((M, N)) * 2).astype(np.float32)).bfloat16()
        qin, sin = C.cast(x, in_fmt, xb, round_sf=True, use_tma_aligned_col_major_sf=tma, use_packed_ue8m0=packed)
        q, s = C.cast((qin, sin), fmt, (1, gs), x_block_size=xb, round_sf=True, use_tma_aligned_col_major_sf=tma,
                      use_packed_ue8m0=packed)
        qin_np = qin.numpy() if qin.dtype == h.torch.int8 else h._to_np(qin)
        oq, os_ = per_token_recast(M, N, in_fmt, fmt, gs, xb, True, lay, lay)(qin_np, _sf_storage(h, sin, lay))
        rq = q.numpy() if q.dtype == h.torch.int8 else h._to_np(q)
        rows.append(("quant_requant_per_token", f"{M}x{N} {in_fmt} {xb[0]}x{xb[1]} -> {fmt} 1x{gs}, sf {lay}",
                     [h.bitwise("Q", oq, rq), h.bitwise("S (" + lay + " storage)", os_, _sf_storage(h, s, lay))]))
    for M, N, dt, fmt, gs, lay, rsf in ((n, 7168, "bfloat16", "e4m3", 128, "tma_ue8m0", True),
                                        (37, 200, "float32", "e2m1", 32, "tma_ue8m0", True),
                                        (n, 2048, "bfloat16", "e4m3", 128, "tma", False),
                                        (13, 200, "float32", "e4m3", 64, "tma", True)):
        tma, packed = _FLAGS[lay]
        x = (rng.standard_normal((M, N)) * 2).astype(np.float32)
        x[1, :64] = 0.0
        x[2, :40] *= 1e4
        xin = x.astype(h.BF16) if dt == "bfloat16" else x
        q, s = C.cast(h._to_torch(xin), fmt, (1, gs), round_sf=rsf, use_tma_aligned_col_major_sf=tma, use_packed_ue8m0=packed)
        oq, os_ = per_token_recast(M, N, dt, fmt, gs, None, rsf, "rows", lay)(xin)
        rq = q.numpy() if q.dtype == h.torch.int8 else h._to_np(q)
        rows.append(("quant_cast_per_token_sf_layout", f"{M}x{N} {dt} -> {fmt} 1x{gs}, sf {lay}, round_sf {rsf}",
                     [h.bitwise("Q", oq, rq), h.bitwise("S (" + lay + " storage)", os_, _sf_storage(h, s, lay))]))
    return rows


def _calc_diff(name, ours, ref):
    """TileKernels' ``calc_diff`` (``1 − 2·<a, b> / (|a|² + |b|²)``) with its test bound 1e-8."""
    a, b = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    d = float(1.0 - 2.0 * (a * b).sum() / max((a * a + b * b).sum(), 1e-300))
    return {"output": name, "mode": "calc_diff < 1e-8 (TileKernels' test; informative)", "total": 1,
            "mismatches": int(d >= 1e-8), "max_abs_err": d}


def _vs_exact(name, ours, ref, exact):
    """Informative: ``mismatches`` 1 when our largest error against the float64 gradient exceeds the reference's."""
    e_o = float(np.abs(np.asarray(ours, np.float64) - exact).max())
    e_r = float(np.abs(np.asarray(ref, np.float64) - exact).max())
    return {"output": f"{name}: max error vs float64 ours {e_o:.3g}, TileKernels' ref {e_r:.3g}",
            "mode": "ours <= ref (informative)", "total": 1, "mismatches": int(e_o > e_r), "max_abs_err": e_o}


def engram_bwd_cases(h, R, rng, n):
    """``engram_gate_bwd`` + ``engram_grad_w_reduce`` against autograd through TileKernels' ``engram_gate_ref``
    (fp32 weights, as TileKernels' ``test_engram_gate_bwd``), bf16 inputs ``N(0, 1)``; the reduce alone against
    TileKernels' ``grad_w_reduce_ref`` formula on random partials and main_grad buffers."""
    E = R["engram"]
    rows = []
    for label, N, hc, H in (("%d tok, hc 4, hidden 512" % n, n, 4, 512), ("ragged: 37 tok, hc 4, hidden 200", 37, 4, 200),
                            ("13 tok, hc 2, hidden 7168", 13, 2, 7168)):
        go, x, k, v, wh, we = gate_bwd_inputs(rng, N, hc, H)
        gx, gk, gv, gwp = engram_gate_bwd(N, hc, H, block_T=16)(go, x, k, v, wh, we)
        z = np.zeros((hc, H), np.float32)
        gwh, gwe = engram_grad_w_reduce(gwp.shape[0], hc, H)(gwp, wh, we, z, z)
        ts = [h._to_torch(a).requires_grad_() for a in (x, k, v)]
        tw = [h._to_torch(a).float().requires_grad_() for a in (wh, we)]
        out = E.engram_gate_ref(*ts, *tw, 1e-6, 1e-20)
        out.backward(h._to_torch(go))
        refs = [h._to_np(t.grad) for t in ts + tw]
        exact = ref_gate_bwd(go, x, k, v, wh, we, block_T=1)
        ex = [np.asarray(a, np.float64) for a in exact[:3]]
        gw64 = exact[3].astype(np.float64).sum(0)
        ex += [gw64 * we.astype(np.float32), gw64 * wh.astype(np.float32)]
        outs = [("GX", gx), ("GK", gk), ("GV", gv), ("GWH", gwh), ("GWE", gwe)]
        checks = []
        for (name, o), r, e in zip(outs, refs, ex, strict=True):
            checks += [_calc_diff(name, o, r), _vs_exact(name, o, r, e)]
            if name in ("GX", "GK", "GV"):
                checks.append(h.close(name + " bf16 (1 ulp)", o, r, 2**-7, 1e-3 * float(np.abs(r.astype(np.float32)).max())))
                checks.append(dict(h.bitwise(name, o, r), mode="bitwise (informative)"))
            else:
                checks.append(h.close(name + " (fp32)", o, r, 1e-3, 1e-4 * float(np.abs(r).max())))
        rows.append(("engram_gate_bwd + engram_grad_w_reduce", label, checks))
    P, hc, H = 24, 4, 1024
    gwp = rng.standard_normal((P, hc, H)).astype(np.float32)
    wh, we = (rng.standard_normal((hc, H)).astype(np.float32).astype(h.BF16) for _ in range(2))
    g0, e0 = (rng.standard_normal((hc, H)).astype(np.float32) for _ in range(2))
    gwh, gwe = engram_grad_w_reduce(P, hc, H)(gwp, wh, we, g0, e0)
    gw = h.torch.from_numpy(gwp).sum(0)
    rwh = h.torch.from_numpy(g0) + gw * h._to_torch(we).float()
    rwe = h.torch.from_numpy(e0) + gw * h._to_torch(wh).float()
    rows.append(("engram_grad_w_reduce", "24 partials, hc 4, hidden 1024, into main_grad", [
        h.close("GWH", gwh, rwh.numpy(), 1e-5, 1e-5), dict(h.bitwise("GWH", gwh, rwh.numpy()), mode="bitwise (informative)"),
        h.close("GWE", gwe, rwe.numpy(), 1e-5, 1e-5), dict(h.bitwise("GWE", gwe, rwe.numpy()), mode="bitwise (informative)")]))
    return rows


FAMILIES = {"normw": normw_cases, "requant": requant_cases, "engram_bwd": engram_bwd_cases}
