"""Case families of ``benchmarks/tilekernels_fidelity.py`` for issue 17's brief AD: E5M6 casts and requantisation
with TileKernels' scale layouts (``e5m6``), the Engram fused weight and the fused-weight gate forward
(``engram_fw``), and whichever later families ``FAMILIES`` lists.

Each family is ``fn(h, R, rng, n) -> [(kernel, case, outputs)]`` like the script's own families, with ``h`` the
namespace of the script's helpers (``bitwise``, ``close``, ``_to_np``, ``_to_torch``, ``BF16``, ``E4M3``, ``torch``);
the script loads this file by path, as it loads ``tilekernels_fidelity_rest.py``. Nothing here runs on import.
"""

import numpy as np

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


FAMILIES = {"e5m6": e5m6_cases}
