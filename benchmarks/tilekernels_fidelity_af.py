"""Case families of ``benchmarks/tilekernels_fidelity.py`` for the per-channel casts of brief AF (issue 17): the cast
fused with a row gather and e4m3 dequantisation (``channel_fused``), the cast with a transpose
(``channel_transpose``) and SwiGLU → per-channel cast → transpose (``swiglu_channel``); kernels in
``kernels/quant_channel_fused.py`` and ``kernels/swiglu_channel.py``.

Each family is ``fn(h, R, rng, n) -> [(kernel, case, outputs)]`` like the script's own families, with ``h`` the
namespace of the script's helpers (``bitwise``, ``close``, ``_to_np``, ``_to_torch``, ``BF16``, ``E4M3``, ``torch``);
the script loads this file by path, as it loads ``tilekernels_fidelity_rest.py``. Nothing here runs on import.
The references are TileKernels' own: ``torch/per_channel_cast_fused.py`` (loaded here from the reference package
the script set up; it calls ``tile_kernels.torch.cast``, which the placeholder packages lack, so ``tile_kernels.torch`` and
``tile_kernels.torch.cast`` are bound to the reference package and ``cast.cast`` while the family runs) and ``cast``/``swiglu_forward`` as in TileKernels' tests. All comparisons
are bitwise (TileKernels' tests use ``assert_equal``).
"""

import importlib
import sys

import numpy as np

from kernels.quant_channel_fused import per_channel_cast_fused, per_channel_cast_transpose
from kernels.swiglu_channel import swiglu_per_channel_cast


def pos_to_token(rng, n, experts, topk, align, drop=0.0):
    """A MoE expansion map as TileKernels' ``get_fused_mapping`` makes it: each expert's (token) rows in token
    order, every expert segment padded with −1 to a multiple of ``align``; ``drop`` of the token slots unused."""
    p = []
    idx = np.stack([rng.choice(experts, topk, replace=False) for _ in range(n)])
    idx[rng.random(idx.shape) < drop] = -1
    for e in range(experts):
        toks = np.nonzero((idx == e).any(axis=1))[0]
        pad = (-len(toks)) % align
        p += list(toks) + [-1] * pad
    return np.asarray(p, np.int32)


def _act(rng, shape, scale=1.0):
    x = rng.standard_normal(shape).astype(np.float32) * scale
    x[:, rng.choice(shape[1], size=max(1, shape[1] // 64), replace=False)] *= 100.0
    x[1] = 0.0
    x[:, 2] = 0.0
    return x


def channel_fused_cases(h, R, rng, n):
    """``per_channel_cast_fused`` against TileKernels' ``per_channel_cast_fused`` reference: TileKernels' test
    configurations (num_per_tokens 128, with and without its fused cast-back of e4m3 1x128 tokens from its own
    ``cast``, ``round_sf`` on and off, gathered by a MoE expansion map with −1 padding or not), plus ragged shapes."""
    ref_mod = importlib.import_module("tile_kernels.torch.per_channel_cast_fused")
    top, pkg = sys.modules["tile_kernels"], sys.modules["tile_kernels.torch"]
    saved = top.__dict__.get("torch"), pkg.__dict__.get("cast")
    top.torch, pkg.cast = pkg, R["cast"].cast
    rows = []
    try:
        cases = []
        for hidden in (576, 7168):
            for fused_back in (False, True):
                for rsf in (False, True):
                    cases.append((n, hidden, None, fused_back, rsf, f"{n} tok, hidden {hidden}"))
                    cases.append((n, hidden, (16, 6, 128, 0.0), fused_back, rsf,
                                  f"{n} tok top-6 of 16 (align 128), hidden {hidden}"))
        cases += [(37, 200, (8, 3, 16, 0.3), True, True, "ragged: 37 tok top-3 of 8 (align 16), hidden 200"),
                  (150, 200, None, False, False, "ragged: 150 tok, hidden 200"),
                  (29, 300, (4, 2, 8, 0.5), False, True, "ragged: 29 tok top-2 of 4 (align 8), hidden 300")]
        for M, N, gcfg, fused_back, rsf, label in cases:
            x = h.torch.from_numpy(_act(rng, (M, N))).bfloat16()
            p = pos_to_token(rng, M, *gcfg) if gcfg else None
            if fused_back:
                xin = R["cast"].cast(x, "e4m3", (1, 128), round_sf=rsf)
                args = [h._to_np(xin[0]), xin[1].numpy()]
            else:
                xin, args = x, [h._to_np(x)]
            if p is not None:
                args.append(p)
            M_out = len(p) if p is not None else M
            k = per_channel_cast_fused(M, N, M_out=M_out, gather=p is not None, in_group=128 if fused_back else None,
                                       in_dtype="float8_e4m3fn" if fused_back else "bfloat16", use_ue8m0=rsf)
            q, s = k(*args)
            rq, rs = ref_mod.per_channel_cast_fused(xin, 128, 128 if fused_back else None, rsf,
                                                    None if p is None else h.torch.from_numpy(p))
            what = ("e4m3 1x128 input" if fused_back else "bf16 input") + (", round_sf" if rsf else "")
            rows.append(("quant_cast_per_channel_fused", f"{label}, {what}, {M_out} rows out",
                         [h.bitwise("Q", q, h._to_np(rq)), h.bitwise("S", s, rs.numpy())]))
    finally:
        for mod, name, old in ((top, "torch", saved[0]), (pkg, "cast", saved[1])):
            if old is None:
                delattr(mod, name)
            else:
                setattr(mod, name, old)
    return rows


def channel_transpose_cases(h, R, rng, n):
    """``per_channel_cast_transpose`` against ``cast(x, 'e4m3', (b, 1), round_sf)`` transposed, TileKernels' test of
    ``per_channel_cast_and_transpose`` (bf16, b 32 and 128, round_sf on and off), plus ragged shapes and edges."""
    rows = []
    cases = [(n, N, b, rsf) for N in (576, 7168) for b in (32, 128) for rsf in (True, False)]
    cases += [(150, 200, 128, False), (45, 70, 32, True)]
    for M, N, b, rsf in cases:
        xf = _act(rng, (M, N))
        xf[3, :5] = [3e38, -3e38, -0.0, 1e-30, 448.0]  # saturation-size, signed zero, bf16-subnormal
        x = h.torch.from_numpy(xf).bfloat16()
        q, s = per_channel_cast_transpose(M, N, block_rows=b, use_ue8m0=rsf)(h._to_np(x))
        rq, rs = R["cast"].cast(x, "e4m3", (b, 1), round_sf=rsf)
        rows.append(("quant_cast_per_channel_transpose", f"{M}x{N} bf16, {b}x1, round_sf {rsf}",
                     [h.bitwise("Q (N, M)", q, h._to_np(rq.T.contiguous())), h.bitwise("S", s, rs.numpy())]))
    return rows


def swiglu_channel_cases(h, R, rng, n):
    """``swiglu_per_channel_cast`` against TileKernels' test reference of
    ``swiglu_forward_and_per_channel_cast_and_transpose``: ``swiglu_forward(x, clamp).bfloat16()`` then
    ``cast(.., (b, 1), round_sf)``, transposed or not (b 32/128, clamp None/10/0.5, round_sf on and off)."""
    rows = []
    cases = [(n, 512, b, tr, rsf, c) for b in (32, 128) for tr in (True, False) for rsf in (True, False)
             for c in (None, 10.0, 0.5)]
    cases += [(n, 2048, 128, True, False, None), (150, 200, 128, True, True, 10.0), (45, 70, 32, False, False, 0.5)]
    for M, H, b, tr, rsf, c in cases:
        xf = rng.standard_normal((M, 2 * H)).astype(np.float32) * 2
        xf[:, rng.choice(H, max(1, H // 64), replace=False)] *= 20.0
        xf[1] = 0.0
        xf[2, :H] = -1000.0  # exp overflows: silu gives −0
        x = h.torch.from_numpy(xf).bfloat16()
        q, s = swiglu_per_channel_cast(M, H, block_rows=b, clamp_limit=c, transpose=tr, use_ue8m0=rsf)(h._to_np(x))
        act = R["swiglu"].swiglu_forward(x, swiglu_clamp_value=c).bfloat16()
        rq, rs = R["cast"].cast(act, "e4m3", (b, 1), round_sf=rsf)
        rq = rq.T.contiguous() if tr else rq
        rows.append(("swiglu_per_channel_cast_transpose",
                     f"{M} tok x hidden {H}, {b}x1, {'transposed' if tr else 'straight'}, round_sf {rsf}, clamp {c}",
                     [h.bitwise("Q", q, h._to_np(rq)), h.bitwise("S", s, rs.numpy())]))
    return rows


FAMILIES = {"channel_fused": channel_fused_cases, "channel_transpose": channel_transpose_cases,
            "swiglu_channel": swiglu_channel_cases}
