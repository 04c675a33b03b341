"""Case families of ``benchmarks/tilekernels_fidelity.py`` for issue 17's brief AD: E5M6 casts and requantisation
with TileKernels' scale layouts (``e5m6``), the Engram fused weight and the fused-weight gate forward
(``engram_fw``), and whichever later families ``FAMILIES`` lists.

Each family is ``fn(h, R, rng, n) -> [(kernel, case, outputs)]`` like the script's own families, with ``h`` the
namespace of the script's helpers (``bitwise``, ``close``, ``_to_np``, ``_to_torch``, ``BF16``, ``E4M3``, ``torch``);
the script loads this file by path, as it loads ``tilekernels_fidelity_rest.py``. Nothing here runs on import.
"""

import importlib

import numpy as np

from kernels.engram_fused import engram_fused_weight, engram_gate_fused, gate_fused_inputs
from kernels.mhc_fused import big_fuse_inputs, mhc_pre_big_fuse
from kernels.quant_block_sf import per_block_cast_sf
from kernels.quant_requant import per_token_recast

_FLAGS = {"rows": (False, False), "tma": (True, False), "tma_ue8m0": (True, True)}


def _sf_storage(h, sf, layout):
    """A TileKernels scale tensor's memory as our storage array (as in ``tilekernels_fidelity_rest.py``)."""
    if layout == "rows":
        return h._to_np(sf)
    A = (sf.shape[0] + 3) // 4 * 4
    mem = h.torch.as_strided(sf, (sf.shape[1], A), (A, 1)).contiguous()
    return h._to_np(mem) if layout == "tma" else mem.numpy().view(np.uint8)


def _np_q(h, q):
    return q.numpy() if q.dtype == h.torch.int8 else h._to_np(q)


# E5M6 edge values of TileKernels' generate_e5m6_inputs: min subnormal, max subnormal, min normal (last column 65024)
_E5M6_SPECIAL = (2.0 ** -20, 2.0 ** -14 * 63 / 64, 2.0 ** -14)


def e5m6_cases(h, R, rng, n):
    """``per_token_recast(fmt='e5m6')`` against TileKernels' ``cast_to_e5m6`` (its ``per_token_cast(x, 'e5m6')``
    reference): bf16/fp32 inputs, groups of the whole row (TileKernels' kernel) and smaller ones (its reference),
    rows / TMA fp32 / packed-UE8M0 scales, ``round_sf`` on and off, TileKernels' E5M6 edge inputs and an all-zero
    row; and requantisation into E5M6 (e4m3 / e2m1 blocks quantised by TileKernels' ``cast``) against its
    ``cast_back(..., 'fp32')`` followed by ``cast_to_e5m6``. Codes (as TileKernels' uint8 bytes) and scale storage
    bitwise."""
    E, C = R["cast_e5m6"], R["cast"]
    rows = []

    def check(kernel, label, M, N, xin, ref_in, gs, lay, rsf, in_fmt, x_block=None, sin=None):
        tma, packed = _FLAGS[lay]
        rq, rs = E.cast_to_e5m6(ref_in, gs, use_tma_aligned_col_major_sf=tma, round_sf=rsf, use_packed_ue8m0=packed)
        args = (xin,) if sin is None else (xin, sin)
        oq, os_ = per_token_recast(M, N, in_fmt, "e5m6", gs, x_block, rsf, lay if sin is not None else "rows", lay,
                                   block_M=4 if gs > 1024 else 16)(*args)
        rows.append((kernel, label, [h.bitwise("Q (bytes)", oq.view(np.uint8), rq.numpy()),
                                     h.bitwise("S (" + lay + " storage)", os_, _sf_storage(h, rs, lay))]))

    plain = [(n, 512, "bfloat16", 512, "rows", True), (n, 512, "float32", 512, "tma_ue8m0", True),
             (37, 200, "bfloat16", 200, "tma_ue8m0", True), (37, 200, "float32", 40, "tma", False),
             (13, 7168, "bfloat16", 7168, "tma_ue8m0", True), (n, 2048, "bfloat16", 128, "rows", False)]
    for M, N, dt, gs, lay, rsf in plain:
        x = (rng.standard_normal((M, N)) * 2).astype(np.float32)
        x[1, :] = 0.0
        x[2, : min(N, 40)] *= 1e4
        xin = x.astype(h.BF16) if dt == "bfloat16" else x
        check("quant_requant_e5m6", f"{M}x{N} {dt} -> e5m6 1x{gs}, sf {lay}, round_sf {rsf}", M, N, xin,
              h._to_torch(xin), gs, lay, rsf, dt)
    for v in _E5M6_SPECIAL:
        for dt in ("bfloat16", "float32"):
            x = np.full((37, 200), v, np.float32)
            x[:, -1] = 65024.0
            xin = x.astype(h.BF16) if dt == "bfloat16" else x
            check("quant_requant_e5m6", f"edge: 37x200 {dt} all {v:.4g}, last column 65024, sf tma_ue8m0", 37, 200,
                  xin, h._to_torch(xin), 200, "tma_ue8m0", True, dt)
    requant = [(n, 512, "e4m3", (128, 128), 512, "tma_ue8m0"), (n, 512, "e2m1", (32, 32), 128, "rows"),
               (37, 200, "e4m3", (32, 32), 200, "tma"), (13, 7168, "e2m1", (128, 128), 7168, "tma_ue8m0")]
    for M, N, in_fmt, xb, gs, lay in requant:
        tma, packed = _FLAGS[lay]
        x = h.torch.from_numpy((rng.standard_normal((M, N)) * 2).astype(np.float32)).bfloat16()
        qin, sin = C.cast(x, in_fmt, xb, round_sf=True, use_tma_aligned_col_major_sf=tma, use_packed_ue8m0=packed)
        deq = C.cast_back((qin, sin), "fp32", xb)
        check("quant_requant_e5m6", f"requant {M}x{N} {in_fmt} {xb[0]}x{xb[1]} -> e5m6 1x{gs}, sf {lay}", M, N,
              _np_q(h, qin), deq, gs, lay, True, in_fmt, xb, _sf_storage(h, sin, lay))
    return rows


def _calc_diff(name, ours, ref, bound):
    """TileKernels' ``calc_diff`` (``1 − 2·<a, b> / (|a|² + |b|²)``) against its test bound."""
    a, b = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    d = float(1.0 - 2.0 * (a * b).sum() / max((a * a + b * b).sum(), 1e-300))
    return {"output": name, "mode": f"calc_diff < {bound:g} (TileKernels' test)", "total": 1,
            "mismatches": int(d >= bound), "max_abs_err": d}


def engram_fw_cases(h, R, rng, n):
    """``engram_fused_weight`` bitwise against ``wh.float() * we.float()`` (TileKernels' ``test_engram_fused_weight``)
    on random, zero, extreme (overflow to inf, fp32-subnormal products) and inf/NaN weights; ``engram_gate_fused``
    on that weight against TileKernels' ``engram_gate_ref(..., save_for_backward=True)`` (bf16 weights), all five
    outputs within TileKernels' test bound ``calc_diff < 2e-10`` plus Out within one bf16 ulp and the statistics
    within fp32 tolerances (``rtol 1e-5``; Dot ``1e-5`` of its largest value)."""
    E = R["engram"]
    rows = []
    big, tiny = 3.3e38, 2.0 ** -70
    for label, hc, H, fill in (("hc 4, hidden 7168", 4, 7168, None), ("ragged: hc 4, hidden 200", 4, 200, None),
                               ("hc 2, hidden 512, zeros / +-3.3e38 (inf) / 3 * 2^-140 (fp32 subnormal) / inf, NaN", 2,
                                512, "edge")):
        wh = (rng.standard_normal((hc, H))).astype(np.float32).astype(h.BF16)
        we = (rng.standard_normal((hc, H))).astype(np.float32).astype(h.BF16)
        if fill == "edge":
            a, b = wh.astype(np.float32), we.astype(np.float32)
            a[0, :64], b[0, 64:128] = 0.0, 0.0
            a[0, 128:192], b[0, 128:192] = big, -big
            a[1, :64], b[1, :64] = tiny, tiny * 3
            a[1, 64:70], b[1, 64:70] = np.inf, [0.0, 1.0, -2.0, np.inf, -np.inf, np.nan]
            wh, we = a.astype(h.BF16), b.astype(h.BF16)
        wf = engram_fused_weight(hc, H, block_H=256)(wh, we)
        ref = (h._to_torch(wh).float() * h._to_torch(we).float()).numpy()
        rows.append(("engram_fused_weight", label, [h.bitwise("Wf", wf, ref)]))
    for label, N, hc, H, zero in (("%d tok, hc 4, hidden 512" % n, n, 4, 512, False),
                                  ("ragged: 37 tok, hc 4, hidden 200", 37, 4, 200, False),
                                  ("13 tok, hc 2, hidden 7168", 13, 2, 7168, False),
                                  ("edge: 9 tok, hc 4, hidden 256, zero k and x rows (dot 0, gate 1/2)", 9, 4, 256, True)):
        x, k, v, _ = gate_fused_inputs(rng, N, hc, H)
        wh = rng.standard_normal((hc, H)).astype(np.float32).astype(h.BF16)
        we = rng.standard_normal((hc, H)).astype(np.float32).astype(h.BF16)
        if zero:
            k[0, 1], x[2, 3], k[4] = 0, 0, 0
        wf = engram_fused_weight(hc, H, block_H=256)(wh, we)
        outs = engram_gate_fused(N, hc, H)(x, k, v, wf)
        refs = [h._to_np(t) for t in E.engram_gate_ref(*(h._to_torch(a) for a in (x, k, v, wh, we)), 1e-6, 1e-20,
                                                        save_for_backward=True)]
        checks = []
        for name, o, r in zip(("Out", "Dot", "Gate", "RstdX", "RstdK"), outs, refs, strict=True):
            checks.append(_calc_diff(name, o, r, 2e-10))
            if name == "Out":
                checks.append(h.close("Out bf16 (1 ulp)", o, r, 2.0 ** -7, 1e-5))
                checks.append(dict(h.bitwise("Out", o, r), mode="bitwise (informative)"))
            elif name == "Dot":
                checks.append(h.close("Dot (fp32 sum order)", o, r, 1e-5, 1e-5 * float(np.abs(r).max())))
            else:
                checks.append(h.close(name, o, r, 1e-5, 0.0))
        rows.append(("engram_fused_weight + engram_gate_fused", label, checks))
    return rows


def block_sf_cases(h, R, rng, n):
    """``per_block_cast_sf`` against TileKernels' ``cast(x, fmt, block_size, round_sf, use_tma_aligned_col_major_sf,
    use_packed_ue8m0)`` (the reference of its ``test_per_block_cast``: its flag sets (rows, round_sf) and (TMA,
    round_sf, packed), blocks 128x128 / 32x32, bf16/fp32, e4m3/e2m1) plus TMA fp32 and plain scales; ragged shapes,
    zero blocks, outliers (saturation), ±0. Values and the scale storage (padding included) bitwise."""
    C = R["cast"]
    rows = []
    cases = [(n, 7168, "bfloat16", "e4m3", (128, 128), "tma_ue8m0", True), (n, 512, "float32", "e2m1", (32, 32), "tma_ue8m0", True),
             (n, 512, "bfloat16", "e2m1", (128, 128), "rows", True), (n, 2048, "float32", "e4m3", (32, 32), "rows", True),
             (37, 200, "bfloat16", "e4m3", (32, 32), "tma_ue8m0", True), (129, 200, "float32", "e2m1", (128, 32), "tma", True),
             (37, 520, "bfloat16", "e4m3", (32, 128), "tma", False), (13, 7168, "float32", "e2m1", (32, 32), "rows", False)]
    for M, N, dt, fmt, blk, lay, rsf in cases:
        tma, packed = _FLAGS[lay]
        x = (rng.standard_normal((M, N)) * 2).astype(np.float32)
        x[: min(M, blk[0]), : blk[1]] = 0.0  # a zero block
        x[-1, : min(N, 40)] *= 1e4
        x[-1, -1] = -0.0
        xin = x.astype(h.BF16) if dt == "bfloat16" else x
        rq, rs = C.cast(h._to_torch(xin), fmt, blk, round_sf=rsf, use_tma_aligned_col_major_sf=tma, use_packed_ue8m0=packed)
        oq, os_ = per_block_cast_sf(M, N, fmt, blk, rsf, lay, dt)(xin)
        rows.append(("quant_cast_per_block_sf_layout", f"{M}x{N} {dt} -> {fmt} {blk[0]}x{blk[1]}, sf {lay}, round_sf {rsf}",
                     [h.bitwise("Q", oq, _np_q(h, rq)), h.bitwise("S (" + lay + " storage)", os_, _sf_storage(h, rs, lay))]))
    return rows


def _chain(h, M, res, fn_t, sc, base, N, m, H):
    """TileKernels' test reference for the fused pre block (``big_fuse_reference``) from its CPU ``*_ref`` functions,
    with ``fn`` given as a torch tensor."""
    t = h.torch
    r = h._to_torch(res).view(1, N, m, H)
    mixes = M.mhc_pre_norm_fn_ref(r, fn_t, None, 1e-6)
    pre, post, comb = M.mhc_pre_split_mixes_ref(mixes, t.from_numpy(sc), t.from_numpy(base), m, 1.0, 1e-6)
    comb = M.sinkhorn_normalize_ref(comb, repeat=10, eps=1e-6)
    return post.numpy().reshape(N, m), comb.numpy().reshape(N, m, m), h._to_np(M.mhc_pre_apply_mix_ref(r, pre)).reshape(N, H)


def mhc_fused_opts_cases(h, R, rng, n):
    """``mhc_pre_big_fuse`` with TileKernels' options: ``tf32`` (its ``round_to_tf32`` of ``fn`` — loaded from its
    ``tile_kernels/mhc/norm_fn_kernel.py`` — then the TF32 MMA's truncation of the 13 low mantissa bits) and split-K
    (``n_splits`` partial GEMMs written to global memory, summed in the second launch), on TileKernels' test data
    (hidden 1280, x4) and a ragged case, against its test's reference chain on the TF32-rounded ``fn``. Post/Comb
    fp32 tolerance, Out one bf16 ulp; the distance to the chain on the unrounded ``fn`` is reported."""
    M = R["mhc"]
    nf = importlib.import_module("tile_kernels.mhc.norm_fn_kernel")
    rows = []
    for label, N, m, H, n_splits, block_K, boost in (
            ("%d tok, x4, hidden 1280, split-K 8" % n, n, 4, 1280, 8, 128, False),
            ("%d tok, x4, hidden 4096, split-K 16" % n, n, 4, 4096, 16, 128, False),
            ("%d tok, x4, hidden 1280, split-K 4, fn x300 and scale x10 (mixes of order 1: TF32 visible)" % n, n, 4,
             1280, 4, 128, True),
            ("ragged: 37 tok, x2, hidden 200, split-K 5", 37, 2, 200, 5, 80, False)):
        res, fn, sc, base = big_fuse_inputs(rng, N, m, H)
        if boost:
            fn, sc = (fn * 300.0).astype(np.float32), (sc * 10.0).astype(np.float32)
        post, comb, out = mhc_pre_big_fuse(N, m, H, block_K=block_K, tf32=True, n_splits=n_splits)(res, fn, sc, base)
        fn_tf32 = (nf.round_to_tf32(h.torch.from_numpy(fn.copy())).view(h.torch.int32) & -8192).view(h.torch.float32)
        rpost, rcomb, rout = _chain(h, M, res, fn_tf32, sc, base, N, m, H)
        upost, ucomb, _ = _chain(h, M, res, h.torch.from_numpy(fn), sc, base, N, m, H)
        rows.append(("mhc_pre_big_fuse (tf32, split-K)", label, [
            h.close("Post (fp32 tol.)", post, rpost, 1e-4, 1e-5), h.close("Comb (fp32 tol.)", comb, rcomb, 1e-4, 1e-5),
            h.close("Out bf16 (1 ulp)", out, rout, 2**-7, 1e-6),
            dict(h.bitwise("Out", out, rout), mode="bitwise (informative)"),
            dict(h.close("Post vs unrounded fn", post, upost, 1e-4, 1e-5), mode="TF32 effect (informative)"),
            dict(h.close("Comb vs unrounded fn", comb, ucomb, 1e-4, 1e-5), mode="TF32 effect (informative)")]))
    return rows


FAMILIES = {"e5m6": e5m6_cases, "engram_fw": engram_fw_cases, "block_sf": block_sf_cases,
            "mhc_fused_opts": mhc_fused_opts_cases}
