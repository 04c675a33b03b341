"""Case families of ``benchmarks/tilekernels_fidelity.py`` for issue 17's brief AG: the cast-backs of e4m3, packed
FP4 and packed E5M6 (``cast_back``), the lossless FP4 → FP8 per-block cast (``lossless``) and the mHC backward
kernels' accumulation into ``mhc_post``'s gradient buffer (``mhc_acc``).

Each family is ``fn(h, R, rng, n) -> [(kernel, case, outputs)]`` like the script's own families, with ``h`` the
namespace of the script's helpers (``bitwise``, ``close``, ``_to_np``, ``_to_torch``, ``BF16``, ``E4M3``, ``torch``);
the script loads this file by path, as it loads ``tilekernels_fidelity_extra.py``. Nothing here runs on import.
"""

import numpy as np

from kernels.mhc_bwd import mhc_post_bwd, mhc_pre_apply_mix_bwd
from kernels.mhc_bwd_norm import mhc_pre_norm_fn_bwd
from kernels.quant_cast_back import cast_back
from kernels.quant_lossless import per_block_cast_lossless

_FLAGS = {"rows": (False, False), "tma": (True, False), "tma_ue8m0": (True, True)}


def _sf_storage(h, sf, layout):
    """A TileKernels scale tensor's memory as our storage array (as in ``tilekernels_fidelity_extra.py``)."""
    if layout == "rows":
        return h._to_np(sf)
    A = (sf.shape[0] + 3) // 4 * 4
    mem = h.torch.as_strided(sf, (sf.shape[1], A), (A, 1)).contiguous()
    return h._to_np(mem) if layout == "tma" else mem.numpy().view(np.uint8)


def _np_q(h, q):
    return q.numpy() if q.dtype in (h.torch.int8, h.torch.uint8) else h._to_np(q)


def bitwise_nan(h, name, ours, ref):
    """Bitwise, a NaN matching any NaN (bf16 NaN bits: torch 0x7FC0, this simulator the payload, the GPU 0x7FFF)."""
    o, r = np.asarray(ours), np.asarray(ref)
    row = h.bitwise(name, o, r)
    if row["mismatches"] > 0:
        on, rn = np.isnan(o.astype(np.float32)), np.isnan(r.astype(np.float32))
        bits = lambda a: a.view(f"u{a.itemsize}")  # noqa: E731
        row["mismatches"] = int(((on != rn) | (~on & (bits(o.astype(r.dtype)) != bits(r)))).sum())
    row["mode"] = "bitwise (NaN = NaN)"
    return row


def _quantised(h, C, E, rng, M, N, fmt, xb, lay, edge):
    """(our Q, our S storage, TileKernels' (q, sf)) of a random tensor cast by TileKernels' own references."""
    tma, packed = _FLAGS[lay]
    x = (rng.standard_normal((M, N)) * 2).astype(np.float32)
    if edge:
        x[0] = 0.0
        x[1, : min(N, 16)] = -0.0
        x[-1, : min(N, 40)] *= 1e4
    xt = h.torch.from_numpy(x).bfloat16()
    if fmt == "e5m6":
        q, sf = E.cast_to_e5m6(xt, xb[1], use_tma_aligned_col_major_sf=tma, round_sf=True, use_packed_ue8m0=packed)
        ours_q = q.numpy().view(np.uint32)
    else:
        q, sf = C.cast(xt, fmt, xb, round_sf=True, use_tma_aligned_col_major_sf=tma, use_packed_ue8m0=packed)
        ours_q = _np_q(h, q)
    return ours_q, _sf_storage(h, sf, lay), (q, sf)


def cast_back_cases(h, R, rng, n):
    """``cast_back`` against TileKernels' ``cast_back(x, fmt, block)`` (e4m3 / e2m1) and ``cast_back_from_e5m6``
    on tensors its own ``cast`` / ``cast_to_e5m6`` quantised, every scale layout, per-token and 2-D blocks, bf16 and
    fp32 outputs, ragged shapes, zero rows, −0 and ×1e4 outliers; plus every e4m3 byte (NaN included) and every
    E5M6 code (±inf, NaN, subnormals) with unit scales. Bitwise (a NaN matching any NaN)."""
    C, E = R["cast"], R["cast_e5m6"]
    rows = []
    cases = [(n, 7168, "e2m1", (1, 32), "tma_ue8m0", "bfloat16"), (n, 512, "e2m1", (32, 32), "rows", "float32"),
             (37, 200, "e2m1", (1, 32), "tma", "bfloat16"), (n, 2048, "e4m3", (1, 128), "tma_ue8m0", "bfloat16"),
             (129, 200, "e4m3", (128, 128), "tma", "float32"), (n, 7168, "e5m6", (1, 128), "rows", "bfloat16"),
             (37, 200, "e5m6", (1, 40), "tma_ue8m0", "float32"), (13, 7168, "e5m6", (1, 7168), "tma_ue8m0", "bfloat16")]
    for M, N, fmt, xb, lay, od in cases:
        q, s, tk = _quantised(h, C, E, rng, M, N, fmt, xb, lay, True)
        tfmt = "bf16" if od == "bfloat16" else "fp32"
        ref = E.cast_back_from_e5m6(tk, tfmt, xb) if fmt == "e5m6" else C.cast_back(tk, tfmt, xb)
        y = cast_back(M, N, fmt, xb, lay, od, 16, 128 if N % 128 == 0 else 40)(q, s)
        rows.append(("quant_cast_back", f"{M}x{N} {fmt} {xb[0]}x{xb[1]} sf {lay} -> {od}",
                     [bitwise_nan(h, "Y", y, h._to_np(ref))]))
    # every e4m3 byte (0x7F / 0xFF NaN) and every E5M6 code (exponent 31: ±inf, NaN), unit scales
    e4 = np.tile(np.arange(256, dtype=np.uint8), (3, 2)).view(h.E4M3)
    sf = h.torch.ones((3, 4), dtype=h.torch.float32)
    for od, tfmt in (("bfloat16", "bf16"), ("float32", "fp32")):
        ref = C.cast_back((h._to_torch(e4), sf), tfmt, (1, 128))
        y = cast_back(3, 512, "e4m3", (1, 128), "rows", od, 4, 128)(e4, sf.numpy())
        rows.append(("quant_cast_back", f"edge: every e4m3 byte, NaN included -> {od}", [bitwise_nan(h, "Y", y, h._to_np(ref))]))
    codes = np.arange(4096, dtype=np.uint64).reshape(1, 4096)
    c = codes.reshape(1, -1, 8)
    words = np.stack([(c[..., 0] << 20) | (c[..., 1] << 8) | (c[..., 2] >> 4),
                      (c[..., 2] << 28) | (c[..., 3] << 16) | (c[..., 4] << 4) | (c[..., 5] >> 8),
                      (c[..., 5] << 24) | (c[..., 6] << 12) | c[..., 7]], -1) & np.uint64(0xFFFFFFFF)
    words = words.astype(np.uint32).reshape(1, -1)
    for od, tfmt in (("bfloat16", "bf16"), ("float32", "fp32")):
        ref = E.cast_back_from_e5m6((h.torch.from_numpy(words.view(np.uint8).copy()), h.torch.ones((1, 32))), tfmt,
                                    (1, 128))
        y = cast_back(1, 4096, "e5m6", (1, 128), "rows", od, 1, 256)(words, np.ones((1, 32), np.float32))
        rows.append(("quant_cast_back", f"edge: all 4096 E5M6 codes (subnormals, +-inf, NaN) -> {od}",
                     [bitwise_nan(h, "Y", y, h._to_np(ref))]))
    return rows


def _tk_sf(h, stored, R, layout):
    """Our scale storage as the tensor TileKernels' kernels return (rows; TMA column-major view; packed int32)."""
    t = h.torch.from_numpy(np.ascontiguousarray(stored))
    if layout == "rows":
        return t
    if layout == "tma_ue8m0":
        t = t.view(h.torch.int32)
    return t.T[:R]


def lossless_cases(h, R, rng, n):
    """``per_block_cast_lossless`` as TileKernels' ``test_per_block_cast_lossless``: FP4 inputs made by its ``cast(x,
    'e2m1', (1, 32), round_sf=True, ...)`` from values whose magnitudes span at most 2^9 (its ``clamp_abs_ratio``),
    its four input/output scale flag sets, output blocks 1x128, 32x32, 128x128; the check is its own: its
    ``cast_back`` of our e4m3 output (our scale storage handed over as the tensor its kernel returns) equals its
    ``cast_back`` of the FP4 input, bit for bit. Plus ragged shapes and a block at the smallest magnitude."""
    C = R["cast"]
    rows = []
    flag_sets = (("rows", "rows"), ("rows", "tma_ue8m0"), ("tma_ue8m0", "rows"), ("tma_ue8m0", "tma_ue8m0"))
    shapes = [(n, 7168, (1, 128)), (n, 2048, (32, 32)), (n, 4096, (128, 128)), (37, 200, (32, 32)),
              (130, 100, (128, 128)), (13, 7168, (1, 128))]
    for k, (M, N, ob) in enumerate(shapes):
        for il, ol in (flag_sets if k < 3 else flag_sets[1:3]):
            x = h.torch.from_numpy((rng.standard_normal((M, N)) * 2).astype(np.float32))
            floor = x.abs().max() / 2 ** 9
            x = h.torch.sign(x) * h.torch.maximum(x.abs(), floor)
            if k == 4:
                x[:3, :32] = floor  # a block at the smallest magnitude (a zero block would trap: its scale is 2^-126)
            tma, packed = _FLAGS[il]
            q, sf = C.cast(x, "e2m1", (1, 32), round_sf=True, use_tma_aligned_col_major_sf=tma, use_packed_ue8m0=packed)
            y, so = per_block_cast_lossless(M, N, (1, 32), ob, il, ol)(q.numpy(), _sf_storage(h, sf, il))
            before = C.cast_back((q, sf), "fp32", (1, 32))
            after = C.cast_back((h._to_torch(y), _tk_sf(h, so, -(-M // ob[0]), ol)), "fp32", ob)
            rows.append(("quant_cast_lossless", f"{M}x{N} e2m1 1x32 sf {il} -> e4m3 {ob[0]}x{ob[1]} sf {ol}",
                         [h.bitwise("cast_back(Y, S) vs cast_back(x_fp4)", h._to_np(after), h._to_np(before))]))
    return rows


def _within_terms(name, ours, ref, terms):
    """``|ours − ref| ≤ 5·2^-8 · Σ|terms| + 1e-5``: five half-ulp roundings (each ≤ 2^-8 of a magnitude ≤ Σ|terms|):
    ours rounds two partial sums; the reference rounds each of its three bf16 terms (≤ 2^-8·Σ together) and
    autograd's bf16 accumulation of the leaf's gradient adds twice."""
    o, r = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    err = np.abs(o - r)
    bad = ~(err <= 5 * 2.0 ** -8 * np.asarray(terms, np.float64) + 1e-5)
    ratio = float(((err - 1e-5) / np.maximum(np.asarray(terms, np.float64), 1e-30)).max())
    return {"output": name, "mode": "5 * 2^-8 of sum |terms| (bf16 roundings)", "total": int(r.size),
            "mismatches": int(bad.sum()), "max_abs_err": float(err.max()), "note": f"max err/sum|terms| {ratio:.3g}"}


def mhc_acc_cases(h, R, rng, n):
    """The fused gradient accumulation (``fuse_grad_acc=True``, TileKernels' default) as TileKernels' autograd runs
    it: ``mhc_post_bwd`` writes the residual gradient (the ``grad_from_mhc_post`` buffer), ``mhc_pre_norm_fn_bwd``
    and ``mhc_pre_apply_mix_bwd`` add theirs into it; against torch autograd through TileKernels' ``mhc_post_ref``,
    ``mhc_pre_norm_fn_ref`` and ``mhc_pre_apply_mix_ref`` sharing the residual (the leaf's gradient is the sum of the
    three). The residual gradient within the bf16 roundings of a sum of three terms (``5·2^-8 · Σ|term|``, see
    ``_within_terms``; the terms' magnitudes from our written gradients) — a relative bound on the sum fails where the terms cancel, which is
    reported, with the distance to the unfused form (each gradient written, then added by the caller); FnG within
    TileKernels' test tolerance, MixG fp32 tolerance. Then each kernel alone on a random bf16 buffer against
    ``bf16(buffer + g)`` with ``g`` the fp32 gradient autograd gives through TileKernels' reference (TileKernels'
    kernels' arithmetic): ``mhc_pre_apply_mix_bwd`` bitwise, ``mhc_pre_norm_fn_bwd`` within one bf16 ulp (its GEMM
    sums in another order)."""
    M = R["mhc"]
    t = h.torch
    rows = []
    for label, n0, n1, m, H in (("%d tok, x4, hidden 1280" % n, 1, n, 4, 1280), ("2 x 64 tok, x4, hidden 7168", 2, 64, 4, 7168),
                                ("ragged: 37 tok, x2, hidden 200", 1, 37, 2, 200)):
        N, M3 = n0 * n1, m * (2 + m)
        bf = lambda *sh: rng.standard_normal(sh).astype(np.float32).astype(h.BF16)  # noqa: E731
        res, xl, og3, og2 = bf(N, m, H), bf(N, H), bf(N, m, H), bf(N, H)
        post, comb = rng.standard_normal((N, m)).astype(np.float32), rng.standard_normal((N, m, m)).astype(np.float32)
        mix = rng.random((N, m)).astype(np.float32)
        g = rng.standard_normal((N, M3)).astype(np.float32)
        fn = (rng.standard_normal((M3, m * H)) * 0.05).astype(np.float32)
        # ours: post backward fills the buffer, the two pre backward kernels accumulate into it
        _, buf, _, _ = mhc_post_bwd(N, m, H)(og3, xl, res, post, comb)
        acc1, fng = mhc_pre_norm_fn_bwd(N, m * H, M3, eps=1e-6)(g, res.reshape(N, m * H), fn, buf.reshape(N, m * H))
        xg, mixg = mhc_pre_apply_mix_bwd(N, m, H)(og2, res, mix, acc1.reshape(N, m, H))
        # unfused: each written, the caller adds (bf16 adds, as autograd's accumulation of a bf16 leaf)
        w1, _ = mhc_pre_norm_fn_bwd(N, m * H, M3, eps=1e-6, fuse_grad_acc=False)(g, res.reshape(N, m * H), fn)
        w2, _ = mhc_pre_apply_mix_bwd(N, m, H, fuse_grad_acc=False)(og2, res, mix)
        unfused = ((buf.astype(np.float32) + w1.reshape(N, m, H).astype(np.float32)).astype(h.BF16).astype(np.float32)
                   + w2.astype(np.float32)).astype(h.BF16)
        r = h._to_torch(res).view(n0, n1, m, H).requires_grad_()
        fnt = t.from_numpy(fn).requires_grad_()
        mixt = t.from_numpy(mix).view(n0, n1, m, 1).requires_grad_()
        o_post = M.mhc_post_ref(h._to_torch(xl).view(n0, n1, H), r, t.from_numpy(post).view(n0, n1, m, 1),
                                t.from_numpy(comb).view(n0, n1, m, m))
        o_norm = M.mhc_pre_norm_fn_ref(r, fnt, None, 1e-6)
        o_pre = M.mhc_pre_apply_mix_ref(r, mixt)
        t.autograd.backward([o_post, o_norm, o_pre], [h._to_torch(og3).view(n0, n1, m, H),
                                                      t.from_numpy(g).view(n0, n1, M3), h._to_torch(og2).view(n0, n1, H)])
        ref = h._to_np(r.grad).reshape(N, m, H)
        terms = (np.abs(buf.astype(np.float32)) + np.abs(w1.reshape(N, m, H).astype(np.float32))
                 + np.abs(w2.astype(np.float32)))
        rows.append(("mhc_post_bwd -> mhc_pre_norm_fn_bwd -> mhc_pre_apply_mix_bwd (fuse_grad_acc)", label, [
            _within_terms("ResG total", xg, ref, terms),
            dict(h.close("ResG total", xg, ref, 1.6e-2, 1e-5), mode="rtol 1.6e-2 of the sum (informative: cancellation)"),
            dict(_within_terms("unfused (caller adds) vs fused", unfused, xg, terms), mode="informative"),
            h.close("FnG (TileKernels' test tol.)", fng, h._to_np(fnt.grad), 1e-3, 3e-2),
            h.close("MixG (fp32)", mixg, h._to_np(mixt.grad).reshape(N, m), 1e-4, 1e-5)]))
        # each kernel alone on a random bf16 buffer: TileKernels' kernel arithmetic, bf16(buffer + fp32 gradient),
        # with the fp32 gradient from autograd through its reference on an fp32 residual
        b = bf(N, m, H)
        rf = t.from_numpy(res.astype(np.float32)).view(n0, n1, m, H).requires_grad_()
        t.autograd.backward([M.mhc_pre_apply_mix_ref(rf, t.from_numpy(mix).view(n0, n1, m, 1))],
                            [h._to_torch(og2).view(n0, n1, H)])
        want = h._to_np((h._to_torch(b).float() + rf.grad.view(N, m, H)).bfloat16())
        got, _ = mhc_pre_apply_mix_bwd(N, m, H)(og2, res, mix, b)
        rf2 = t.from_numpy(res.astype(np.float32)).view(n0, n1, m, H).requires_grad_()
        t.autograd.backward([M.mhc_pre_norm_fn_ref(rf2, t.from_numpy(fn), None, 1e-6)], [t.from_numpy(g).view(n0, n1, M3)])
        want2 = h._to_np((h._to_torch(b).float() + rf2.grad.view(N, m, H)).bfloat16()).reshape(N, m * H)
        got2, _ = mhc_pre_norm_fn_bwd(N, m * H, M3, eps=1e-6)(g, res.reshape(N, m * H), fn, b.reshape(N, m * H))
        rows.append(("mhc_pre_apply_mix_bwd (fuse_grad_acc)", label + ", random bf16 buffer",
                     [h.bitwise("XG = bf16(buffer + fp32 grad)", got, want)]))
        rows.append(("mhc_pre_norm_fn_bwd (fuse_grad_acc)", label + ", random bf16 buffer", [
            h.close("ResG = bf16(buffer + fp32 grad) (1 ulp)", got2, want2, 2**-7, 1e-5),
            dict(h.bitwise("ResG", got2, want2), mode="bitwise (informative)")]))
    return rows


FAMILIES = {"cast_back": cast_back_cases, "lossless": lossless_cases, "mhc_acc": mhc_acc_cases}
