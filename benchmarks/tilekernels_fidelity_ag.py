"""Case families of ``benchmarks/tilekernels_fidelity.py`` for issue 17's brief AG: the cast-backs of e4m3, packed
FP4 and packed E5M6 (``cast_back``), the lossless FP4 → FP8 per-block cast (``lossless``) and the mHC backward
kernels' accumulation into ``mhc_post``'s gradient buffer (``mhc_acc``).

Each family is ``fn(h, R, rng, n) -> [(kernel, case, outputs)]`` like the script's own families, with ``h`` the
namespace of the script's helpers (``bitwise``, ``close``, ``_to_np``, ``_to_torch``, ``BF16``, ``E4M3``, ``torch``);
the script loads this file by path, as it loads ``tilekernels_fidelity_extra.py``. Nothing here runs on import.
"""

import numpy as np

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


FAMILIES = {"cast_back": cast_back_cases, "lossless": lossless_cases}
