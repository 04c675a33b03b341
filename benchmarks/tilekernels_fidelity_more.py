"""Case families of ``benchmarks/tilekernels_fidelity.py`` for the kernels of issue 17's second part: per-channel,
FP4 and E5M6 casts (``quant``), SwiGLU backward (``swiglu_bwd``), the routed SwiGLU forward
(``swiglu_routed``), the MoE group kernels (``moe_groups``), dispatch
and combine with scales (``moe_dispatch_sf``), the fused-layout kernel (``moe_mapping``), the mHC forward kernels
(``mhc``), Engram (``engram``) and the mHC/Sinkhorn backward kernels (``mhc_bwd``: torch autograd through
TileKernels' ``*_ref`` functions, as TileKernels' own backward tests do).

Each family is ``fn(h, R, rng, n) -> [(kernel, case, outputs)]`` like the script's own families, with ``h`` a
namespace of the script's comparison and conversion helpers (``bitwise``, ``close``, ``_to_np``,
``_to_torch``, ``_act``, the ``BF16``/``E4M3`` dtypes and ``torch``); the script loads this file by path and binds ``h``
(``FAMILIES``). Nothing here runs on import.
"""

import numpy as np

from kernels.engram import engram_gate, engram_hash, gate_inputs, hash_inputs
from kernels.mhc import (
    mhc_expand,
    mhc_head_compute_mix,
    mhc_post,
    mhc_pre_apply_mix,
    mhc_pre_norm_fn,
    mhc_pre_split_mixes,
)
from kernels.mhc_bwd import mhc_expand_bwd, mhc_post_bwd, mhc_pre_apply_mix_bwd, sinkhorn_bwd
from kernels.mhc_bwd_mix import mhc_head_compute_mix_bwd, mhc_pre_split_mixes_bwd
from kernels.mhc_bwd_norm import mhc_pre_norm_fn_bwd
from kernels.moe_dispatch import expand_to_fused, fused_mapping, routed_topk
from kernels.moe_dispatch_sf import expand_to_fused_sf, reduce_fused_sf
from kernels.moe_gate import top2_sum_gate, topk_gate
from kernels.moe_groups import aux_fi, group_count, topk_group_idx, unique_group_indices
from kernels.moe_mapping import get_fused_mapping
from kernels.quant_cast import per_channel_cast, per_token_cast_e5m6, per_token_cast_fp4
from kernels.quant_cast_sf import per_token_cast_sf_only, per_token_cast_with_sf
from kernels.swiglu_bwd import routed_inputs, swiglu_backward
from kernels.swiglu_moe import swiglu_fp8_routed


def quant_cases(h, R, rng, n):
    """Per-channel e4m3, packed FP4 (e2m1) and packed E5M6 casts, fp32 and UE8M0 scales, bitwise."""
    sat = h._act(rng, (n, 256))
    sat[:, 3] = 0.0  # a zero column (per-channel) and zero groups
    sat[1] = 0.0
    sat[2, :64] = 3e38
    sat[5, 100:140] = 1e-30
    sat[6, :32] = np.linspace(-7.0, 7.0, 32) * 2.0 ** -3
    ties = [6.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.0, 0.2500001, 0.7499999, 5.0000005, 1e-3, 3.0, 4.0, 0.5]
    sat[7, :32] = ties + [-t for t in ties]  # amax 6: the multiplier is 1 and these are e2m1 ties and near-ties
    inputs = [("random bf16 %dx512" % n, h._act(rng, (n, 512)).astype(h.BF16)),
              ("edges fp32: zero column/row, 3e38, tiny group", sat),
              ("ragged bf16 37x200", h._act(rng, (37, 200)).astype(h.BF16))]
    rows = []
    for label, x in inputs:
        M, N = x.shape
        xt = h._to_torch(x)
        in_dtype = "bfloat16" if x.dtype == h.BF16 else "float32"
        for ue8m0 in (False, True):
            tag = " ue8m0" if ue8m0 else ""
            q, s = per_channel_cast(M, N, in_dtype=in_dtype, use_ue8m0=ue8m0)(x)
            rq, rs = R["cast"].cast(xt, "e4m3", (128, 1), round_sf=ue8m0)
            rows.append(("fp8_cast_per_channel" + tag, label, [h.bitwise("Q", q, h._to_np(rq)), h.bitwise("S", s, rs.numpy())]))
            for g in (32, 128):
                q, s = per_token_cast_fp4(M, N, group_size=g, in_dtype=in_dtype, use_ue8m0=ue8m0)(x)
                rq, rs = R["cast"].cast(xt, "e2m1", (1, g), round_sf=ue8m0)
                rows.append((f"fp4_cast_per_token (1x{g})" + tag, label,
                             [h.bitwise("Q (packed e2m1)", q, rq.numpy()), h.bitwise("S", s, rs.numpy())]))
            g = 128 if N % 128 == 0 else 40  # TileKernels' E5M6 cast needs whole groups (200 = 5 x 40)
            q, s = per_token_cast_e5m6(M, N, group_size=g, in_dtype=in_dtype, use_ue8m0=ue8m0)(x)
            rq, rs = R["cast_e5m6"].cast_to_e5m6(xt, g, round_sf=ue8m0)
            rows.append((f"e5m6_cast_per_token (1x{g})" + tag, label,
                         [h.bitwise("Q bytes", q.view(np.uint8), rq.numpy()), h.bitwise("S", s, rs.numpy())]))
    return rows


def swiglu_bwd_cases(h, R, rng, n):
    """SwiGLU backward + per-token cast of the gradient, against ``swiglu_backward`` then ``cast``."""
    rows = []
    for label, T_, H, k, E, align, c, clamp, ue8m0 in (
            ("%d tok top-8 of 32, H 256, 1x128" % (n // 4), n // 4, 256, 8, 32, 32, 128, None, False),
            ("%d tok top-4 of 16, H 192, 1x32, clamp 0.5, ue8m0" % (n // 8), n // 8, 192, 4, 16, 16, 32, 0.5, True),
            ("ragged: 13 tok top-3 of 8, H 96, 1x32, clamp 10", 13, 96, 3, 8, 8, 32, 10.0, False)):
        xq, xs, g, w, slot, t2p = routed_inputs(rng, T_, H, k, E, align, c)
        outs = swiglu_backward(xq.shape[0], H, T_, k, num_per_channels=c, clamp_limit=clamp,
                               use_ue8m0=ue8m0)(xq, xs, g, w, slot, t2p)
        try:
            rout, rgx, rwg = R["swiglu"].swiglu_backward(
                (h._to_torch(xq), h.torch.from_numpy(xs)), h._to_torch(g), h.torch.from_numpy(w),
                h.torch.from_numpy(slot).long(), h.torch.from_numpy(t2p).long(), c, swiglu_clamp_value=clamp)
        except Exception as e:  # noqa: BLE001 - h.torch.compile of the reference's fma needs a C++ toolchain
            rows.append(("swiglu_bwd_fp8", label, [{"output": "all", "mode": "reference failed", "total": 0,
                                                    "mismatches": -1, "note": repr(e)[:200]}]))
            continue
        rq, rs = R["cast"].cast(rgx, "e4m3", (1, c), round_sf=ue8m0)
        ro, rx = h._to_np(rout.to(h.torch.bfloat16)), h._to_np(rgx.to(h.torch.bfloat16))
        rows.append(("swiglu_bwd_fp8", label, [
            h.close("Out bf16 (1 ulp)", outs[0], ro, 2**-7, 1e-6), dict(h.bitwise("Out", outs[0], ro), mode="bitwise (informative)"),
            h.close("Gq (one e4m3 step)", outs[1].astype(np.float32), h._to_np(rq).astype(np.float32), 0.125, 2**-9),
            dict(h.bitwise("Gq", outs[1], h._to_np(rq)), mode="bitwise (informative)"),
            h.close("Gs", outs[2], rs.numpy(), 1e-5, 0.0),
            h.close("Gx bf16 (1 ulp)", outs[3], rx, 2**-7, 1e-6), dict(h.bitwise("Gx", outs[3], rx), mode="bitwise (informative)"),
            h.close("Wgrad", outs[4], rwg.numpy(), 1e-4, 1e-4)]))
    return rows


def moe_groups_cases(h, R, rng, n):
    """Group top-k, group counts, aux-loss frequencies and per-row de-duplication (bitwise)."""
    rows = []
    for label, T_, G, Eg, k, s in (("random, 256 experts in 8 groups, top-2 sum, top-4", n, 8, 32, 4, 2),
                                   ("ties (1/4 grid), 72 in 12 groups, top-1 sum, top-2", n, 12, 6, 2, 1),
                                   ("ragged: 13 tok, 72 in 4 groups, -inf token, top-4 of 4", 13, 4, 18, 4, 2)):
        sc = (rng.standard_normal((T_, G, Eg)) if s == 2 and Eg == 32 else rng.integers(-8, 9, (T_, G, Eg)) / 4)
        sc = sc.astype(np.float32)
        sc[1] = -np.inf
        ours = topk_group_idx(T_, G, Eg, k, s)(sc)
        ref = R["topk"].topk_sum_and_topk_group_idx(h.torch.from_numpy(sc), s, k).numpy()
        rows.append(("moe_topk_group_idx", label, [h.bitwise("Idx (order included)", ours, ref)]))
    for label, T_, k, E in (("DeepSeek-V3: %d tok top-8 of 256, 10%% unused" % n, n, 8, 256),
                            ("ragged: 13 tok top-6 of 72, half unused", 13, 6, 72)):
        idx = routed_topk(rng, T_, E, k, drop=0.1 if T_ > 13 else 0.5)
        ti = h.torch.from_numpy(idx).long()
        rows.append(("moe_group_count", label, [h.bitwise("Counts", group_count(T_, k, E)(idx),
                                                        R["moe"].group_count(ti, E).numpy())]))
        for a in (1, k):
            rows.append(("moe_aux_fi", f"{label}, aux top-{a}", [h.bitwise("Fi", aux_fi(T_, k, E, a)(idx),
                                                                         R["moe"].aux_fi(ti, E, a).numpy())]))
        g = (idx % 5).astype(np.int32)  # few distinct ids: many duplicates (and -1 stays -1)
        g[idx < 0] = -1
        ref = h.torch.from_numpy(g).long()
        R["moe"].inplace_unique_group_indices(ref, 5)
        rows.append(("moe_unique_group_indices", label, [h.bitwise("Idx", unique_group_indices(T_, k)(g), ref.numpy())]))
    return rows


def dispatch_sf_cases(h, R, rng, n):
    """Dispatch of e4m3 rows with their scales (bitwise); combine with row scales / weights / global scale."""
    rows = []
    for label, T_, H, E, k, align, c in (("DeepSeek-V3-like: %d tok, hidden 512, top-8 of 256, 1x128" % n, n, 512, 256, 8, 128, 128),
                                         ("ragged: 13 tok, hidden 200, top-3 of 16, align 8, 1x32", 13, 200, 16, 3, 8, 32)):
        t2p, p2t, p2e = fused_mapping(routed_topk(rng, T_, E, k, drop=0.1 if T_ > 13 else 0.5), E, align)
        P = p2t.shape[0]
        x = np.clip(rng.standard_normal((T_, H)) * 3, -448, 448).astype(np.float32).astype(h.E4M3)
        sf = np.exp2(rng.integers(-6, 3, (T_, -(-H // c)))).astype(np.float32)
        y, ysf = expand_to_fused_sf(T_, H, sf.shape[1], P)(x, sf, p2t)
        ry, rysf = R["expand_to_fused"].expand_to_fused_with_sf((h._to_torch(x), h.torch.from_numpy(sf)), c,
                                                               h.torch.from_numpy(t2p).long(), h.torch.from_numpy(p2e))
        rows.append(("moe_expand_to_fused_sf", label, [h.bitwise("Out (e4m3)", y, h._to_np(ry)), h.bitwise("OutSf", ysf, rysf.numpy())]))
        xr = np.clip(rng.standard_normal((P, H)) * 3, -448, 448).astype(np.float32).astype(h.E4M3)
        xsf = (np.exp2(rng.integers(-4, 1, P)) * rng.random(P)).astype(np.float32)
        w = rng.random((T_, k)).astype(np.float32)
        g = np.array([0.375], np.float32)
        xb = (rng.standard_normal((P, H)) * 3).astype(np.float32).astype(h.BF16)
        for tag, xin, use_w, use_sf, use_g, out in (
                ("e4m3 in, weights + row scales, e4m3 out", xr, True, True, False, "float8_e4m3fn"),
                ("e4m3 in, row scales + global scale, e4m3 out", xr, False, True, True, "float8_e4m3fn"),
                ("bf16 in, weights + global scale, bf16 out", xb, True, False, True, "bfloat16")):
            dt = "bfloat16" if xin.dtype == h.BF16 else "float8_e4m3fn"
            ours = reduce_fused_sf(P, H, T_, k, use_w, use_sf, use_g, dtype=dt, out_dtype=out)(xin, w, xsf, g, t2p)
            try:
                ref = R["reduce_fused"].reduce_fused((h._to_torch(xin), h.torch.from_numpy(xsf)) if use_sf else h._to_torch(xin),
                                                     h.torch.from_numpy(w) if use_w else None, h.torch.from_numpy(t2p).long(),
                                                     "", h.torch.from_numpy(g) if use_g else None)
            except Exception as e:  # noqa: BLE001 - h.torch.compile of the reference's fma needs a C++ toolchain
                rows.append(("moe_reduce_fused_sf", f"{label}, {tag}", [{"output": "Out", "mode": "reference failed",
                                                                         "total": 0, "mismatches": -1, "note": repr(e)[:200]}]))
                continue
            ref = h._to_np(ref)
            rt, at = (2**-7, 0.0) if out == "bfloat16" else (0.125, 2**-9)
            rows.append(("moe_reduce_fused_sf", f"{label}, {tag}", [
                h.close("Out (1 ulp)", np.asarray(ours, np.float32), np.asarray(ref, np.float32), rt, at),
                dict(h.bitwise("Out", ours, ref), mode="bitwise (informative)")]))
    return rows


def mapping_cases(h, R, rng, n):
    """The fused-layout kernel has no PyTorch reference in TileKernels (its test checks invariants): here
    TileKernels' ``expand_to_fused`` reference is run on the kernel's own maps and compared with
    ``expand_to_fused`` on the NumPy-built layout (bitwise), and the maps are compared with NumPy's."""
    rows = []
    for label, T_, E, k, align, drop in (("DeepSeek-V3: %d tok top-8 of 256, align 128" % n, n, 256, 8, 128, 0.1),
                                         ("ragged: 13 tok top-6 of 72, align 32, half unused", 13, 72, 6, 32, 0.5)):
        idx = routed_topk(rng, T_, E, k, drop=drop)
        p2e, p2t, p2tt, t2p, start, end, size = get_fused_mapping(T_, k, E, align)(idx)
        rt2p, rp2t, rp2e = fused_mapping(idx, E, align)
        x = (rng.standard_normal((T_, 64)) * 3).astype(np.float32).astype(h.BF16)
        ry = R["expand_to_fused"].expand_to_fused(h._to_torch(x), h.torch.from_numpy(t2p).long(), h.torch.from_numpy(p2e))
        y = expand_to_fused(T_, 64, rp2t.shape[0], block_H=64)(x, rp2t)
        rows.append(("moe_fused_mapping", label, [
            h.bitwise("TokenTopkToPos vs NumPy", t2p, rt2p), h.bitwise("PosToToken vs NumPy", p2t, rp2t),
            h.bitwise("expand_to_fused reference on the kernel's maps", y, h._to_np(ry))]))
    return rows


def mhc_cases(h, R, rng, n):
    """mHC forward kernels (tokens flattened: TileKernels' (n0, n1) leading axes are one axis here)."""
    M = R["mhc"]
    rows = []
    for label, n0, n1, m, H in (("%d tok (2x%d), x4, hidden 512" % (n, n // 2), 2, n // 2, 4, 512),
                                ("ragged: 37 tok, x2, hidden 200", 1, 37, 2, 200)):
        N, M3 = n0 * n1, m * (2 + m)
        x = (rng.standard_normal((N, H)) * 2).astype(np.float32).astype(h.BF16)
        ours = mhc_expand(N, H, m)(x)
        ref = h._to_np(M.expand_to_mhc_ref(h._to_torch(x).view(n0, n1, H), m)).reshape(N, m, H)
        rows.append(("mhc_expand", label, [h.bitwise("Out", ours, ref)]))
        mix, sc, base = (rng.standard_normal(s).astype(np.float32) for s in ((N, m), (1,), (m,)))
        ours = mhc_head_compute_mix(N, m, eps=1e-6)(mix, sc, base)
        ref = M.mhc_head_compute_mix_ref(h.torch.from_numpy(mix).view(n0, n1, m), h.torch.from_numpy(sc), h.torch.from_numpy(base), 1e-6)
        rows.append(("mhc_head_compute_mix", label, [h.close("Out", ours, ref.numpy().reshape(N, m), 1e-4, 1e-5),
                                                     dict(h.bitwise("Out", ours, ref.numpy().reshape(N, m)), mode="bitwise (informative)")]))
        mixes, sc3, base3 = (rng.standard_normal(s).astype(np.float32) for s in ((N, M3), (3,), (M3,)))
        pre, post, comb = mhc_pre_split_mixes(N, m, post_mult=2.0, eps=1e-6)(mixes, sc3, base3)
        rpre, rpost, rcomb = M.mhc_pre_split_mixes_ref(h.torch.from_numpy(mixes).view(n0, n1, M3), h.torch.from_numpy(sc3),
                                                       h.torch.from_numpy(base3), m, 2.0, 1e-6)
        rows.append(("mhc_pre_split_mixes", label, [h.close("Pre", pre, rpre.numpy().reshape(N, m), 1e-4, 1e-5),
                                                    h.close("Post", post, rpost.numpy().reshape(N, m), 1e-4, 1e-5),
                                                    h.bitwise("Comb", comb, rcomb.numpy().reshape(N, m, m))]))
        xs = (rng.standard_normal((N, m, H))).astype(np.float32).astype(h.BF16)
        w = np.exp(rng.standard_normal((N, m))).astype(np.float32)
        w /= w.sum(axis=1, keepdims=True)
        ours = mhc_pre_apply_mix(N, m, H)(xs, w)
        ref = h._to_np(M.mhc_pre_apply_mix_ref(h._to_torch(xs).view(n0, n1, m, H), h.torch.from_numpy(w).view(n0, n1, m, 1))).reshape(N, H)
        rows.append(("mhc_pre_apply_mix", label, [h.close("Out bf16 (1 ulp)", ours, ref, 2**-7, 1e-6),
                                                  dict(h.bitwise("Out", ours, ref), mode="bitwise (informative)")]))
        pm, cm = rng.standard_normal((N, m)).astype(np.float32), rng.standard_normal((N, m, m)).astype(np.float32)
        ours = mhc_post(N, m, H)(x, xs, pm, cm)
        ref = h._to_np(M.mhc_post_ref(h._to_torch(x).view(n0, n1, H), h._to_torch(xs).view(n0, n1, m, H),
                                    h.torch.from_numpy(pm).view(n0, n1, m, 1), h.torch.from_numpy(cm).view(n0, n1, m, m))).reshape(N, m, H)
        rows.append(("mhc_post", label, [h.close("Out bf16 (1 ulp)", ours, ref, 2**-7, 1e-5),
                                         dict(h.bitwise("Out", ours, ref), mode="bitwise (informative)")]))
        fn = (rng.standard_normal((M3, m * H)) * 0.05).astype(np.float32)
        nw = (rng.standard_normal(m * H) * 0.1 + 1).astype(np.float32)
        ours = mhc_pre_norm_fn(N, m * H, M3, eps=1e-6)(xs.reshape(N, m * H), fn * nw)
        ref = M.mhc_pre_norm_fn_ref(h._to_torch(xs).view(n0, n1, m, H), h.torch.from_numpy(fn).view(M3, m * H),
                                    h.torch.from_numpy(nw), 1e-6).numpy().reshape(N, M3)
        rows.append(("mhc_pre_norm_fn", label, [h.close("Mixes (TileKernels' test tol.)", ours, ref, 1e-3, 1e-3),
                                                h.close("Mixes (fp32 tol.)", ours, ref, 1e-4, 1e-5)]))
    return rows


def engram_cases(h, R, rng, n):
    """Engram hash (bitwise) and gate forward (one bf16 ulp), TileKernels' test distributions."""
    rows = []
    for label, N, ng, L, J in (("%d tok, 3-grams, 2 layers, 8 tables" % n, n, 3, 2, 8), ("ragged: 13 tok, 4-grams, 3 layers, 5 tables", 13, 4, 3, 5)):
        ids, mul, vocab, off = hash_inputs(rng, N, ng, L, J)
        ours = engram_hash(N, ng, L, J)(ids, mul, vocab, off)
        ref = R["engram"].engram_hash_ref(*(h.torch.from_numpy(a) for a in (ids, mul, vocab, off))).numpy()
        rows.append(("engram_hash", label, [h.bitwise("Out", ours, ref)]))
    for label, N, hc, H in (("%d tok, hc 4, hidden 512" % (n // 4), n // 4, 4, 512), ("ragged: 13 tok, hc 2, hidden 200", 13, 2, 200)):
        x, k, v, wh, we = gate_inputs(rng, N, hc, H)
        ours = engram_gate(N, hc, H, clamp_value=1e-6, eps=1e-20)(x, k, v, wh, we)
        ref = h._to_np(R["engram"].engram_gate_ref(*(h._to_torch(a) for a in (x, k, v, wh, we)), 1e-6, 1e-20))
        rows.append(("engram_gate", label, [h.close("Out bf16 (1 ulp)", ours, ref, 2**-7, 1e-5),
                                            dict(h.bitwise("Out", ours, ref), mode="bitwise (informative)")]))
    return rows



def swiglu_routed_cases(h, R, rng, n):
    """SwiGLU forward with routing weights and clamp counters + per-token cast (TileKernels' options)."""
    rows = []
    for label, T_, H, k, E, align, g, clamp, ue8m0 in (
            ("%d tok top-8 of 32, H 256, 1x128, clamp 7" % (n // 4), n // 4, 256, 8, 32, 32, 128, 7.0, False),
            ("ragged: 13 tok top-3 of 8, H 200, 1x128, ue8m0, no clamp", 13, 200, 3, 8, 8, 128, None, True)):
        _, _, _, w, slot, _ = routed_inputs(rng, T_, H, k, E, align, g)
        P = slot.shape[0]
        x = (rng.standard_normal((P, 2 * H)) * 3).astype(np.float32)
        x[:, rng.integers(0, 2 * H, 3)] *= 10
        x[slot < 0] = 0
        x = x.astype(h.BF16)
        q, s, cnt = swiglu_fp8_routed(P, H, T_, k, g, clamp_limit=clamp, use_ue8m0=ue8m0)(x, w, slot)
        rc = h.torch.zeros(3, dtype=h.torch.int64)
        out = R["swiglu"].swiglu_forward(h._to_torch(x), h.torch.from_numpy(slot).long(), h.torch.from_numpy(w),
                                         swiglu_clamp_value=clamp, clamped_count=rc if clamp is not None else None)
        rq, rs = R["cast"].cast(out, "e4m3", (1, g), round_sf=ue8m0)
        rq = h._to_np(rq)
        rows.append(("swiglu_fp8_routed", label, [
            h.close("Q (one e4m3 step)", q.astype(np.float32), rq.astype(np.float32), 0.125, 2**-9),
            dict(h.bitwise("Q", q, rq), mode="bitwise (informative)"), h.close("S", s, rs.numpy(), 1e-5, 0.0),
            h.bitwise("clamp counts", cnt, rc.numpy())]))
    return rows


def _grads(h, fn, inputs, out_grad):
    """TileKernels' reference ``fn`` differentiated by torch autograd: the inputs' gradients for ``out_grad``."""
    ts = [h._to_torch(a).requires_grad_() for a in inputs]
    outs, ogs = fn(*ts), out_grad
    if not isinstance(outs, tuple):
        outs, ogs = (outs,), (out_grad,)
    h.torch.autograd.backward(list(outs), [h._to_torch(g) for g in ogs])
    return [h._to_np(t.grad) for t in ts]


def _mhc_stream_bwd_rows(h, M, rng, label, n0, n1, m, H):
    rows = []
    N = n0 * n1
    bf = lambda *s: (rng.standard_normal(s)).astype(np.float32).astype(h.BF16)  # noqa: E731
    og3, og2, x, res = bf(N, m, H), bf(N, H), bf(N, H), bf(N, m, H)
    ours = mhc_expand_bwd(N, m, H)(og3)
    (ref,) = _grads(h, lambda t: M.expand_to_mhc_ref(t.view(n0, n1, H), m).view(N, m, H), [x], og3)
    rows.append(("mhc_expand_bwd", label, [h.close("XG bf16 (1 ulp)", ours, ref, 2**-7, 1e-5),
                                           dict(h.bitwise("XG", ours, ref), mode="bitwise (informative)")]))
    w = np.exp(rng.standard_normal((N, m))).astype(np.float32)
    w /= w.sum(axis=1, keepdims=True)
    xg, mg = mhc_pre_apply_mix_bwd(N, m, H, fuse_grad_acc=False)(og2, res, w)
    rxg, rmg = _grads(h, lambda a, b: M.mhc_pre_apply_mix_ref(a.view(n0, n1, m, H), b.view(n0, n1, m, 1)).view(N, H),
                      [res, w], og2)
    rows.append(("mhc_pre_apply_mix_bwd", label, [
        h.close("XG bf16 (1 ulp)", xg, rxg, 2**-7, 1e-5), dict(h.bitwise("XG", xg, rxg), mode="bitwise (informative)"),
        h.close("MixG (fp32)", mg, rmg.reshape(N, m), 1e-4, 1e-5)]))
    pm, cm = rng.standard_normal((N, m)).astype(np.float32), rng.standard_normal((N, m, m)).astype(np.float32)
    outs = mhc_post_bwd(N, m, H)(og3, x, res, pm, cm)
    refs = _grads(h, lambda a, b, c, d: M.mhc_post_ref(a.view(n0, n1, H), b.view(n0, n1, m, H), c.view(n0, n1, m, 1),
                                                       d.view(n0, n1, m, m)).view(N, m, H), [x, res, pm, cm], og3)
    refs = [refs[0], refs[1], refs[2].reshape(N, m), refs[3].reshape(N, m, m)]
    rows.append(("mhc_post_bwd", label, [
        h.close("XG bf16 (1 ulp)", outs[0], refs[0], 2**-7, 1e-5), dict(h.bitwise("XG", outs[0], refs[0]), mode="bitwise (informative)"),
        h.close("ResG bf16 (1 ulp)", outs[1], refs[1], 2**-7, 1e-5),
        dict(h.bitwise("ResG", outs[1], refs[1]), mode="bitwise (informative)"),
        h.close("PostG (fp32)", outs[2], refs[2], 1e-4, 1e-5), h.close("CombG (fp32)", outs[3], refs[3], 1e-4, 1e-5)]))
    return rows


def _mhc_mix_bwd_rows(h, M, rng, label, n0, n1, m):
    N, M3 = n0 * n1, m * (2 + m)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    g, mix, sc, base = f(N, m), f(N, m), f(1), f(m)
    ours = mhc_head_compute_mix_bwd(N, m)(g, mix, sc, base)
    refs = _grads(h, lambda a, b, c: M.mhc_head_compute_mix_ref(a.view(n0, n1, m), b, c, 1e-6).view(N, m), [mix, sc, base], g)
    rows = [("mhc_head_compute_mix_bwd", label, [
        h.close("MixG", ours[0], refs[0], 1e-4, 1e-5), dict(h.bitwise("MixG", ours[0], refs[0]), mode="bitwise (informative)"),
        h.close("ScaleG", ours[1], refs[1], 1e-4, 1e-5), h.close("BaseG", ours[2], refs[2], 1e-4, 1e-5)])]
    gp, gq, gc, mixes, sc3, base3 = f(N, m), f(N, m), f(N, m, m), f(N, M3), f(3), f(M3)
    ours = mhc_pre_split_mixes_bwd(N, m, 2.0)(gp, gq, gc, mixes, sc3, base3)
    refs = _grads(h, lambda a, b, c: M.mhc_pre_split_mixes_ref(a.view(n0, n1, M3), b, c, m, 2.0, 1e-6),
                  [mixes, sc3, base3], (gp.reshape(n0, n1, m, 1), gq.reshape(n0, n1, m, 1), gc.reshape(n0, n1, m, m)))
    rows.append(("mhc_pre_split_mixes_bwd", label, [
        h.close("MixesG", ours[0], refs[0].reshape(N, M3), 1e-4, 1e-5),
        dict(h.bitwise("MixesG", ours[0], refs[0].reshape(N, M3)), mode="bitwise (informative)"),
        h.close("ScaleG", ours[1], refs[1], 1e-4, 1e-5), h.close("BaseG", ours[2], refs[2], 1e-4, 1e-5)]))
    return rows


def _mhc_norm_bwd_rows(h, M, rng, label, n0, n1, m, H):
    N, M3 = n0 * n1, m * (2 + m)
    g = rng.standard_normal((N, M3)).astype(np.float32)
    res = (rng.standard_normal((N, m * H)) * 2).astype(np.float32).astype(h.BF16)
    fn = (rng.standard_normal((M3, m * H)) * 0.05).astype(np.float32)
    rg, fg = mhc_pre_norm_fn_bwd(N, m * H, M3, eps=1e-6, fuse_grad_acc=False)(g, res, fn)
    rrg, rfg = _grads(h, lambda a, b: M.mhc_pre_norm_fn_ref(a.view(n0, n1, m, H), b, None, 1e-6).view(N, M3), [res, fn], g)
    rrg = rrg.reshape(N, m * H)
    return [("mhc_pre_norm_fn_bwd", label, [
        h.close("ResG bf16 (1 ulp)", rg, rrg, 2**-7, 1e-4), dict(h.bitwise("ResG", rg, rrg), mode="bitwise (informative)"),
        h.close("FnG (TileKernels' test tol.)", fg, rfg, 1e-3, 3e-2), h.close("FnG (fp32 tol.)", fg, rfg, 1e-4, 1e-4)])]


def mhc_bwd_cases(h, R, rng, n):
    """Sinkhorn and mHC stream backward kernels against autograd through TileKernels' ``*_ref`` functions (what
    TileKernels' own tests compare its backward kernels with); tokens flattened as in ``mhc_cases``."""
    M = R["mhc"]
    rows = []
    edge = rng.standard_normal((8, 4, 4)).astype(np.float32)
    edge[0] = 0.0
    edge[1, :, 0] = -np.inf
    edge[2] *= 50.0
    edge[3] = 1e30 * np.sign(edge[3])
    edge[5, 2, 3] = np.nan
    for label, x in (("random 4x4, %d matrices" % n, rng.standard_normal((n, 4, 4)).astype(np.float32)),
                     ("edges: zeros, -inf column, x50 scale, +-1e30, NaN", edge),
                     ("ragged: 13 matrices 3x3, x3 scale", (rng.standard_normal((13, 3, 3)) * 3).astype(np.float32)),
                     ("37 matrices 8x8", rng.standard_normal((37, 8, 8)).astype(np.float32))):
        g = rng.standard_normal(x.shape).astype(np.float32)
        ours = sinkhorn_bwd(x.shape[0], x.shape[1], block_B=8)(g, x)
        (ref,) = _grads(h, M.sinkhorn_normalize_ref, [x], g)
        rows.append(("sinkhorn_bwd", label, [h.close("GX (assert_close fp32)", ours, ref, 1.3e-6, 1e-5),
                                             dict(h.bitwise("GX", ours, ref), mode="bitwise (informative)")]))
    for label, n0, n1, m, H in (("%d tok (2x%d), x4, hidden 512" % (n, n // 2), 2, n // 2, 4, 512),
                                ("ragged: 37 tok, x2, hidden 200", 1, 37, 2, 200)):
        rows += _mhc_stream_bwd_rows(h, M, rng, label, n0, n1, m, H)
        rows += _mhc_mix_bwd_rows(h, M, rng, label, n0, n1, m)
        rows += _mhc_norm_bwd_rows(h, M, rng, label, n0, n1, m, H)
    return rows


FAMILIES = {"quant": quant_cases, "mhc_bwd": mhc_bwd_cases, "swiglu_bwd": swiglu_bwd_cases, "moe_groups": moe_groups_cases,
            "moe_dispatch_sf": dispatch_sf_cases, "moe_mapping": mapping_cases, "mhc": mhc_cases,
            "engram": engram_cases, "swiglu_routed": swiglu_routed_cases}


# ------------------------------------------------------------------ helper S: MoE gates (kernels/moe_gate.py)
def gate_cases(h, R, rng, n):
    """``topk_gate`` against ``stable_topk`` (bitwise, order included) and ``top2_sum_gate`` with its options
    (token mask, fixed routing, shared experts as routed slots, logical -> physical map, EP/TP masking)
    against TileKernels' reference: Idx and Unmapped bitwise, W ``rtol 1e-5`` (bitwise reported)."""
    torch = h.torch
    rows = []
    tie = rng.integers(-8, 9, (n, 256)).astype(np.float32) / 4
    tie[3] = -np.inf
    tie[4, ::2] = -np.inf
    for label, x, k in (("random 72 experts top-6", rng.standard_normal((n, 72)), 6),
                        ("random 256 experts top-8", rng.standard_normal((n, 256)), 8),
                        ("ties (1/4 grid), -inf rows, 256 top-8", tie, 8),
                        ("ragged: 13 tok, 36 experts top-6", rng.standard_normal((13, 36)), 6)):
        x = np.asarray(x, np.float32)
        ours = topk_gate(*x.shape, k, block_T=8)(x)
        ref = R["topk"].stable_topk(torch.from_numpy(x), k).numpy()
        rows.append(("moe_topk_gate", label, [h.bitwise("Idx (order included)", ours, ref)]))

    def run(label, T_, E, k, G, TG, S, scoring, ep, tp, tpr, pad, fix, mapped, tie_grid=False):
        logits = (rng.integers(-8, 9, (T_, E)) / 4 if tie_grid else rng.standard_normal((T_, E)) * 2).astype(np.float32)
        bias = (rng.integers(-2, 3, E) / 32 if tie_grid else rng.standard_normal(E) * 0.1).astype(np.float32)
        mask = np.ones(T_, np.int32)
        if pad:
            mask[-pad:] = 0
        fixm = (rng.random(T_) < 0.3).astype(np.int32)
        fidx = rng.integers(0, E, (T_, k)).astype(np.int32)
        D = 33 if mapped else 1
        if mapped:
            tph = rng.integers(0, E + D - 1, (E + S, D)).astype(np.int32)
            cnt = rng.integers(1, D + 1, E + S).astype(np.int32)
        else:
            tph, cnt = np.arange(E + S, dtype=np.int32)[:, None], np.ones(E + S, np.int32)
        kern = top2_sum_gate(T_, num_experts=E, topk=k, n_groups=max(G, 1), topk_groups=max(TG, 1), scoring=scoring,
                             routed_scaling_factor=1.5, num_shared_experts=S, num_duplicates=D, use_mask=bool(pad),
                             fix_routing=fix, map_physical=mapped, ep_rank=0, num_ep_ranks=ep, tp_rank=tpr,
                             num_tp_ranks=tp, block_T=8)
        idx, w, um = kern(logits, bias, mask, fixm, fidx, tph, cnt)
        un = torch.from_numpy(fidx).long() if fix else torch.zeros((T_, k), dtype=torch.int64)
        ridx, rw = R["topk"].top2_sum_gate(
            torch.from_numpy(logits), torch.from_numpy(bias), k, TG, G, S > 0, S, 1.5, 0, ep, tpr, tp, scoring,
            mask=torch.from_numpy(mask != 0) if pad else None,
            fix_routing_mask=torch.from_numpy(fixm != 0) if fix else None,
            to_physical_map=torch.from_numpy(tph) if mapped else None,
            logical_count=torch.from_numpy(cnt) if mapped else None, unmapped_topk_idx=un)
        rows.append(("moe_top2_sum_gate", label, [
            h.bitwise("Idx (order included)", idx, ridx.numpy()), h.bitwise("Unmapped", um, un.numpy()),
            h.close("W", w, rw.numpy(), 1e-5, 1e-8), dict(h.bitwise("W", w, rw.numpy()), mode="bitwise (informative)")]))

    for scoring in ("sigmoid", "sqrtsoftplus", "softmax"):
        run(f"DeepSeek-V3 8/4 groups, 2 shared, 32 extra, EP 4 TP 2 rank 1, mask, fixed, {scoring}",
            n, 256, 8, 8, 4, 2, scoring, 4, 2, 1, 10, True, True)
    run("8/8 groups (plain), 2 shared, mapped, EP 4 TP 2 rank 0, sigmoid", n, 256, 8, 8, 8, 2, "sigmoid", 4, 2, 0,
        0, False, True)
    run("72 experts top-6, no groups, 1 shared, mapped, mask, fixed, softmax", n, 72, 6, 0, 0, 1, "softmax", 4, 2, 0,
        10, True, True)
    run("ties (1/4 grid), 256 top-8 8/4, no map, EP 4 TP 2 rank 1, fixed", n, 256, 8, 8, 4, 0, "sigmoid", 4, 2, 1,
        0, True, False, tie_grid=True)
    run("ragged: 13 tok, 36 experts top-6 in 2 groups/1, mask, sqrtsoftplus", 13, 36, 6, 2, 1, 0, "sqrtsoftplus",
        1, 1, 0, 3, False, False)
    return rows


def cast_sf_cases(h, R, rng, n):
    """``per_token_cast_with_sf_only`` (against ``cast(...)[1]``) and ``per_token_cast_with_precomputed_sf``
    (against ``cast(..., sf=S)``) for e4m3 and packed e2m1, fp32 and UE8M0 scales, bitwise."""
    sat = h._act(rng, (n, 256))
    sat[1] = 0.0
    sat[2, :64] = 3e38
    sat[5, 100:140] = 1e-30
    inputs = [("random bf16 %dx512" % n, h._act(rng, (n, 512)).astype(h.BF16)),
              ("edges fp32: zero row, 3e38, tiny group", sat),
              ("ragged bf16 37x200", h._act(rng, (37, 200)).astype(h.BF16))]
    rows = []
    for label, x in inputs:
        M, N = x.shape
        xt = h._to_torch(x)
        in_dtype = "bfloat16" if x.dtype == h.BF16 else "float32"
        for fmt, g in (("e4m3", 128), ("e2m1", 32)):
            for ue8m0 in (False, True):
                tag = f" {fmt} 1x{g}" + (" ue8m0" if ue8m0 else "")
                s = per_token_cast_sf_only(M, N, fmt=fmt, group_size=g, in_dtype=in_dtype, use_ue8m0=ue8m0)(x)
                _, rs = R["cast"].cast(xt, fmt, (1, g), round_sf=ue8m0)
                rows.append(("quant_cast_per_token_sf_only" + tag, label, [h.bitwise("S", s, rs.numpy())]))
            # precomputed scales: the cast's own, and the same scaled by 1/4 ... 2 (values saturate)
            s0 = per_token_cast_sf_only(M, N, fmt=fmt, group_size=g, in_dtype=in_dtype)(x)
            s1 = (s0 * rng.choice(np.float32([0.25, 0.5, 0.7, 1.0, 2.0]), s0.shape)).astype(np.float32)
            for sl, sf in (("own scales", s0), ("scales x 1/4..2", s1)):
                q = per_token_cast_with_sf(M, N, fmt=fmt, group_size=g, in_dtype=in_dtype)(x, sf)
                rq = R["cast"].cast(xt, fmt, (1, g), sf=h.torch.from_numpy(sf))
                rq = h._to_np(rq) if fmt == "e4m3" else rq.numpy()
                rows.append((f"quant_cast_per_token_with_sf {fmt} 1x{g}", f"{label}, {sl}",
                             [h.bitwise("Q", q, rq)]))
    return rows


FAMILIES["gate"] = gate_cases
FAMILIES["cast_sf"] = cast_sf_cases
