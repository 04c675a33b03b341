"""Fidelity of tilesim's kernel library to TileKernels' own PyTorch reference functions.

    python benchmarks/tilekernels_fidelity.py --repo DIR [--out reports/measurements] [--quick]

``DIR`` is a local checkout (or ``git archive``) of deepseek-ai/TileKernels; nothing of it is copied or
committed. Its reference functions (``tile_kernels/torch/*.py``) are loaded from ``DIR`` on CPU torch
without TileLang: the ``tile_kernels`` packages are created empty (their ``__init__`` files import the
GPU kernels) and a placeholder ``tilelang`` module satisfies the module-level imports the reference
files share with the kernel files (decorators become identity functions). Nothing of that placeholder is
ever called by a reference function.

Every case runs one tilesim kernel (the interpreter) and the matching TileKernels reference on the same
inputs — random ones and edge ones (zeros, saturation, ±inf/NaN where the kernel defines them, exact
ties, ragged shapes tiles do not divide) — and compares:

* **bitwise** where the reference is deterministic and the kernel claims exactness: FP8 casts (Q and S),
  UE8M0 scales, dequantisation, transposition (bf16 NaN payloads included), routing indices (order
  included) and top-k selections;
* within **TileKernels' test tolerance** otherwise (routing weights ``rtol 1e-5, atol 1e-8`` as in
  ``torch.allclose``; Sinkhorn ``rtol 1.3e-6, atol 1e-5``, torch's fp32 ``assert_close`` default;
  SwiGLU+FP8 Q within one e4m3 step and S ``rtol 1e-5`` — tilesim's own contract for that kernel, whose
  fp32 ``exp`` may differ from torch's by an ulp).

The families of the kernels added in issue 17's second part (quant, swiglu_bwd, moe_groups,
moe_dispatch_sf, moe_mapping, mhc, engram) live in ``tilekernels_fidelity_more.py`` beside this script,
which loads it by path and binds its helpers to them; later parts' families live likewise in ``_rest.py``,
``_fused.py`` and ``_extra.py`` (E5M6 with scale layouts, Engram fused weight, per-block scale layouts, the fused mHC
pre block's TF32/split-K options), ``_af.py`` (per-channel casts with a gather, a transpose, after SwiGLU).

Output: a Markdown table on stdout and in ``tilekernels_fidelity_<UTC time>.md``, and the rows (plus the
TileKernels commit when ``DIR`` is a git checkout) in ``tilekernels_fidelity_<UTC time>.json``, under
``--out``. Exit status 1 if any case fails.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import json
import subprocess
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

from tilesim.optional import require  # noqa: E402

torch = require("torch", "the TileKernels fidelity check (CPU torch)")

from kernels.dsa import topk_selector  # noqa: E402
from kernels.fp8_cast import per_block_cast, per_block_dequant, per_token_cast, per_token_dequant  # noqa: E402
from kernels.moe import moe_route  # noqa: E402
from kernels.moe_dispatch import (  # noqa: E402
    expand_to_fused,
    fused_mapping,
    mask_indices_by_tp,
    normalize_weight,
    reduce_fused,
    routed_topk,
)
from kernels.sinkhorn import sinkhorn  # noqa: E402
from kernels.swiglu import swiglu_fp8  # noqa: E402
from kernels.transpose import batched_transpose  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)


# ------------------------------------------------------------------------------- loading the references
class _Placeholder:
    """Stands in for any ``tilelang`` attribute at import time; as a one-function call it is a decorator."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Placeholder()

    def __call__(self, *args, **kw):
        return args[0] if len(args) == 1 and callable(args[0]) and not kw else _Placeholder()

    def __getitem__(self, key):
        return _Placeholder()


def _placeholder_attr(attr):
    if attr.startswith("__"):  # __file__, __spec__, ...: as a module without them (inspect walks sys.modules)
        raise AttributeError(attr)
    return _Placeholder()


def _placeholder_module(name):
    m = types.ModuleType(name)
    m.__getattr__ = _placeholder_attr  # PEP 562 module attribute fallback
    m.__path__ = []
    return m


def load_reference(repo: Path) -> dict:
    """The reference modules of TileKernels at ``repo``: name -> module (topk, moe, mhc, cast, swiglu)."""
    pkg_root = repo / "tile_kernels"
    if not (pkg_root / "torch" / "topk.py").exists():
        raise SystemExit(f"{repo} is not a TileKernels checkout (no tile_kernels/torch/topk.py)")
    for name in ("tilelang", "tilelang.language", "tilelang.contrib", "tilelang.contrib.nvcc", "tilelang.utils",
                 "tilelang.utils.target"):
        sys.modules.setdefault(name, _placeholder_module(name))
    for sub in ("", ".torch", ".moe", ".quant", ".mhc", ".testing"):
        name = "tile_kernels" + sub
        m = types.ModuleType(name)
        m.__path__ = [str(pkg_root / sub.lstrip(".").replace(".", "/"))] if sub else [str(pkg_root)]
        sys.modules[name] = m
    return {n: importlib.import_module(f"tile_kernels.torch.{n}")
            for n in ("topk", "moe", "mhc", "cast", "cast_e5m6", "swiglu", "expand_to_fused", "reduce_fused",
                      "engram")}


# ------------------------------------------------------------------------------------------ comparing
def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def _to_np(t):
    if t.dtype == torch.bfloat16:
        return t.contiguous().view(torch.int16).numpy().view(np.uint16).view(BF16)
    if t.dtype == torch.float8_e4m3fn:
        return t.contiguous().view(torch.uint8).numpy().view(E4M3)
    return t.contiguous().numpy()


def _to_torch(a):
    a = np.ascontiguousarray(a)
    if a.dtype == BF16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    if a.dtype == E4M3:
        return torch.from_numpy(a.view(np.uint8).copy()).view(torch.float8_e4m3fn)
    return torch.from_numpy(a.copy())


def bitwise(name, ours, ref):
    ours, ref = np.asarray(ours), np.asarray(ref)
    if ours.shape != ref.shape:
        return {"output": name, "mode": "bitwise", "total": int(ref.size), "mismatches": -1,
                "note": f"shape {ours.shape} vs {ref.shape}"}
    if ours.dtype.kind in "iu" or ref.dtype.kind in "iu":
        bad = int((ours.astype(np.int64) != ref.astype(np.int64)).sum())
    else:
        bad = int((_bits(ours.astype(ref.dtype)) != _bits(ref)).sum())
    return {"output": name, "mode": "bitwise", "total": int(ref.size), "mismatches": bad}


def close(name, ours, ref, rtol, atol):
    ours, ref = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    with np.errstate(invalid="ignore"):
        good = np.isclose(ours, ref, rtol=rtol, atol=atol, equal_nan=True)
        err = np.abs(ours - ref)
    finite = np.isfinite(err)
    return {"output": name, "mode": f"rtol {rtol:g} atol {atol:g}", "total": int(ref.size),
            "mismatches": int((~good).sum()), "max_abs_err": float(err[finite].max()) if finite.any() else 0.0}


# ------------------------------------------------------------------------------------------ families
def moe_cases(R, rng, n):
    cfgs = {"dsv3": dict(num_experts=256, topk=8, n_groups=8, topk_groups=4),
            "plain64": dict(num_experts=64, topk=6, n_groups=1, topk_groups=1),
            "mixtral": dict(num_experts=8, topk=2, n_groups=1, topk_groups=1)}
    cases = [  # label, cfg, scoring, factor, logits, bias
        ("random, sigmoid, random bias", "dsv3", "sigmoid", 2.5, rng.standard_normal((n, 256)) * 2, rng.standard_normal(256) * 0.1),
        ("random, softmax, random bias, grouped", "dsv3", "softmax", 1.0, rng.standard_normal((n, 256)) * 2, rng.standard_normal(256) * 0.1),
        ("random, softmax, zero bias, grouped", "dsv3", "softmax", 1.0, rng.standard_normal((n, 256)) * 2, np.zeros(256)),
        ("random, sqrtsoftplus, random bias", "dsv3", "sqrtsoftplus", 2.5, rng.standard_normal((n, 256)) * 2, rng.standard_normal(256) * 0.1),
        ("ties (logits on a 1/4 grid), sigmoid", "dsv3", "sigmoid", 2.5, rng.integers(-8, 9, (n, 256)) / 4, rng.integers(-2, 3, 256) / 32),
        ("ties, softmax, plain top-6 of 64", "plain64", "softmax", 1.0, rng.integers(-8, 9, (n, 64)) / 4, rng.integers(-2, 3, 64) / 32),
        ("all zeros", "dsv3", "sigmoid", 2.5, np.zeros((n, 256)), np.zeros(256)),
        ("saturation: logits <= -89 (all scores 0)", "dsv3", "sigmoid", 2.5, -100 - rng.random((n, 256)) * 50, rng.integers(-2, 3, 256) / 32),
        ("saturation: logits +-1e4, sigmoid", "dsv3", "sigmoid", 2.5, np.sign(rng.standard_normal((n, 256))) * 1e4, rng.standard_normal(256) * 0.1),
        ("ragged: 13 tokens, Mixtral top-2 softmax", "mixtral", "softmax", 1.0, rng.standard_normal((13, 8)), np.zeros(8)),
    ]
    rows = []
    for label, cfg, scoring, factor, logits, bias in cases:
        c = cfgs[cfg]
        logits, bias = logits.astype(np.float32), bias.astype(np.float32)
        idx, w = moe_route(logits.shape[0], scoring=scoring, routed_scaling_factor=factor, block_T=8, **c)(logits, bias)
        ridx, rw = R["topk"].top2_sum_gate(
            torch.from_numpy(logits), torch.from_numpy(bias), c["topk"], c["topk_groups"], c["n_groups"], False, 0,
            factor, 0, 1, 0, 1, scoring)
        rows.append(("moe_topk_route", label, [bitwise("Idx (order included)", idx, ridx.numpy()),
                                                close("W", w, rw.numpy(), 1e-5, 1e-8)]))
    return rows


def sinkhorn_cases(R, rng, n):
    x = rng.standard_normal((n, 4, 4)).astype(np.float32)
    edge = rng.standard_normal((8, 4, 4)).astype(np.float32)
    edge[0] = 0.0
    edge[1, :, 0] = -np.inf
    edge[1, 0, 0] = 0.0
    edge[2] = 1e30 * np.sign(edge[2])
    edge[3, 1] = [-1e30, 1e30, 0.0, 1e30]
    edge[4] *= 50.0
    edge[5, 2, 3] = np.nan
    cases = [("random 4x4", x), ("edges: zeros, -inf column, +-1e30, x50 scale, NaN", edge),
             ("ragged: 13 matrices 3x5", rng.standard_normal((13, 3, 5)).astype(np.float32) * 3),
             ("8x8", rng.standard_normal((37, 8, 8)).astype(np.float32))]
    rows = []
    for label, a in cases:
        ours = sinkhorn(*a.shape, block_B=8)(a)
        ref = R["mhc"].sinkhorn_normalize_ref(torch.from_numpy(a)).numpy()
        rows.append(("sinkhorn", label, [close("P", ours, ref, 1.3e-6, 1e-5)]))
    return rows


def transpose_cases(R, rng, n):
    bits = rng.integers(0, 1 << 16, (3, 70, 100), dtype=np.uint16)
    bits.reshape(-1)[:6] = [0x7FC1, 0x7F81, 0xFFA1, 0x7FFF, 0x7F80, 0xFF80]
    cases = [("bf16 random bit patterns (NaN payloads, +-inf, subnormals), 3x70x100", bits.view(BF16)),
             ("bf16 normal values, 8x128x192", rng.standard_normal((8, 128, 192)).astype(np.float32).astype(BF16)),
             ("e4m3 all bit patterns, ragged 2x130x65",
              rng.integers(0, 256, (2, 130, 65), dtype=np.uint8).view(E4M3))]
    rows = []
    for label, a in cases:
        ours = batched_transpose(*a.shape, dtype=str(np.dtype(a.dtype)) if a.dtype == BF16 else "float8_e4m3fn")(a)
        ref = _to_np(_to_torch(a).transpose(1, 2).contiguous())
        rows.append(("batched_transpose", label, [bitwise("Y", ours, ref)]))
    return rows


def _act(rng, shape, scale=1.0):
    x = rng.standard_normal(shape) * scale
    x[:, rng.integers(0, shape[1], 3)] *= 100.0
    return x.astype(np.float32)


def cast_cases(R, rng, n):
    sat = _act(rng, (n, 384))
    sat[1] = 0.0
    sat[2, :128] = 3e38
    sat[3, 5] = -3e38
    sat[4, 200:300] = 1e-30
    inputs = [("random bf16 %dx512" % n, _act(rng, (n, 512)).astype(BF16)),
              ("edges fp32: zero row, 3e38, tiny group", sat),
              ("ragged bf16 37x200", _act(rng, (37, 200)).astype(BF16))]
    rows = []
    for label, x in inputs:
        M, N = x.shape
        xt = _to_torch(x)
        in_dtype = "bfloat16" if x.dtype == BF16 else "float32"
        for ue8m0 in (False, True):
            tag = " ue8m0" if ue8m0 else ""
            q, s = per_token_cast(M, N, in_dtype=in_dtype, use_ue8m0=ue8m0)(x)
            rq, rs = R["cast"].cast(xt, "e4m3", (1, 128), round_sf=ue8m0)
            rows.append(("fp8_cast_per_token" + tag, label, [bitwise("Q", q, _to_np(rq)), bitwise("S", s, rs.numpy())]))
            y = per_token_dequant(M, N)(q, s)
            ry = R["cast"].cast_back((_to_torch(q), torch.from_numpy(s)), "bf16", (1, 128))
            rows.append(("fp8_dequant_per_token" + tag, label, [bitwise("Y bf16", y, _to_np(ry))]))
            q, s = per_block_cast(M, N, in_dtype=in_dtype, use_ue8m0=ue8m0)(x)
            rq, rs = R["cast"].cast(xt, "e4m3", (128, 128), round_sf=ue8m0)
            rows.append(("fp8_cast_per_block" + tag, label, [bitwise("Q", q, _to_np(rq)), bitwise("S", s, rs.numpy())]))
            y = per_block_dequant(M, N)(q, s)
            ry = R["cast"].cast_back((_to_torch(q), torch.from_numpy(s)), "bf16", (128, 128))
            rows.append(("fp8_dequant_per_block" + tag, label, [bitwise("Y bf16", y, _to_np(ry))]))
    return rows


def swiglu_cases(R, rng, n):
    rows = []
    for label, x, clamp in (("random bf16 %dx(2x384)" % n, _act(rng, (n, 768)).astype(BF16), None),
                            ("ragged bf16 29x(2x200), clamp 7", (_act(rng, (29, 400)) * 3).astype(BF16), 7.0)):
        M, H = x.shape[0], x.shape[1] // 2
        q, s = swiglu_fp8(M, H, clamp_limit=clamp)(x)
        h = R["swiglu"].swiglu_forward(_to_torch(x), swiglu_clamp_value=clamp)
        rq, rs = R["cast"].cast(h, "e4m3", (1, 128))
        rq = _to_np(rq)
        rows.append(("swiglu_fp8", label, [close("Q (one e4m3 step)", q.astype(np.float32), rq.astype(np.float32), 0.125, 2**-9),
                                           close("S", s, rs.numpy(), 1e-5, 0.0),
                                           dict(bitwise("Q", q, rq), mode="bitwise (informative)")]))
    return rows


def topk_cases(R, rng, n):
    rows = []
    for label, logits, k in (("random 2048 keys, top-256", rng.standard_normal((n // 8, 2048)), 256),
                             ("ties (1/8 grid), ragged 1000 keys, top-100", rng.integers(-16, 17, (9, 1000)) / 8, 100)):
        logits = logits.astype(np.float32)
        ours = topk_selector(*logits.shape, k)(logits)
        ref = R["topk"].stable_topk(torch.from_numpy(logits), k).numpy()
        rows.append(("dsa_topk (selection)", label, [bitwise("sorted indices", np.sort(ours, axis=1), np.sort(ref, axis=1))]))
    return rows


def dispatch_cases(R, rng, n):
    rows = []
    for label, T_, H, E, k, align, drop in (("DeepSeek-V3-like: %d tok, hidden 512, top-8 of 256" % n, n, 512, 256, 8, 128, 0.1),
                                            ("ragged: 13 tok, hidden 200, top-3 of 16, align 8, half unused", 13, 200, 16, 3, 8, 0.5)):
        idx = routed_topk(rng, T_, E, k, drop=drop)
        t2p, p2t, p2e = fused_mapping(idx, E, align)
        x = (rng.standard_normal((T_, H)) * 3).astype(np.float32).astype(BF16)
        x[0, :5] = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], np.float32).astype(BF16)
        y = expand_to_fused(T_, H, p2t.shape[0])(x, p2t)
        ry = R["expand_to_fused"].expand_to_fused(_to_torch(x), torch.from_numpy(t2p).long(), torch.from_numpy(p2e))
        rows.append(("moe_expand_to_fused", label, [bitwise("Out", y, _to_np(ry))]))
        w = rng.random((T_, k)).astype(np.float32)
        y[np.isnan(np.asarray(y, np.float32)) | np.isinf(np.asarray(y, np.float32))] = 0
        out = reduce_fused(p2t.shape[0], H, T_, k)(y, w, t2p)
        try:
            rout = _to_np(R["reduce_fused"].reduce_fused(_to_torch(y), torch.from_numpy(w), torch.from_numpy(t2p).long()))
            rows.append(("moe_reduce_fused", label, [close("Out (bf16, 1 ulp)", out, rout, 2**-7, 0.0),
                                                     dict(bitwise("Out", out, rout), mode="bitwise (informative)")]))
        except Exception as e:  # noqa: BLE001 - torch.compile of the reference's fma needs a C++ toolchain
            rows.append(("moe_reduce_fused", label, [{"output": "Out", "mode": "reference failed", "total": 0,
                                                      "mismatches": -1, "note": repr(e)[:200]}]))
        wn = rng.random((T_, k)).astype(np.float32)
        wn[0] = 0.0
        wn[1, ::2] = 1e-30
        den, nw = normalize_weight(T_, k)(wn)
        rden, rnw = R["moe"].normalize_weight(torch.from_numpy(wn))
        rows.append(("moe_normalize_weight", label, [bitwise("Den", den, rden.numpy()), bitwise("Out", nw, rnw.numpy())]))
        for ep, tp, tpr in ((E // 8, 2, 1), (E // 4, 4, 3)):
            m = mask_indices_by_tp(T_, k, E, ep, tpr, tp)(idx)
            rm = R["moe"].mask_indices_by_tp(torch.from_numpy(idx).long(), E, ep, tpr, tp)
            rows.append(("moe_mask_indices_by_tp", f"{label}, EP {ep} TP {tp} rank {tpr}", [bitwise("Idx", m, rm.numpy())]))
    return rows


FAMILIES = {"moe": moe_cases, "moe_dispatch": dispatch_cases, "sinkhorn": sinkhorn_cases, "transpose": transpose_cases,
            "fp8_cast": cast_cases, "swiglu": swiglu_cases, "topk": topk_cases}


def _more_families():
    """The families of benchmarks/tilekernels_fidelity_more.py and _rest.py, bound to this module's helpers."""
    h = types.SimpleNamespace(bitwise=bitwise, close=close, _to_np=_to_np, _to_torch=_to_torch, _act=_act, BF16=BF16,
                              E4M3=E4M3, torch=torch)
    fams = {}
    for name in ("tilekernels_fidelity_more", "tilekernels_fidelity_rest", "tilekernels_fidelity_fused",
                 "tilekernels_fidelity_extra", "tilekernels_fidelity_af", "tilekernels_fidelity_ag"):
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(name + ".py"))
        more = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(more)
        fams.update({fam: functools.partial(fn, h) for fam, fn in more.FAMILIES.items()})
    return fams


FAMILIES.update(_more_families())


def _commit(repo):
    try:
        return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", required=True, type=Path, help="local copy of deepseek-ai/TileKernels")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "measurements")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="fewer tokens per case (64 instead of 512)")
    ap.add_argument("--families", default=",".join(FAMILIES), help="comma-separated subset of " + ",".join(FAMILIES))
    args = ap.parse_args(argv)
    R = load_reference(args.repo.resolve())
    n = 64 if args.quick else 512
    torch.manual_seed(args.seed)
    results = []
    for fam in args.families.split(","):
        t0 = time.perf_counter()
        for kernel, case, outs in FAMILIES[fam](R, np.random.default_rng(args.seed), n):
            ok = all(o["mismatches"] == 0 for o in outs if "informative" not in o["mode"])
            results.append({"family": fam, "kernel": kernel, "case": case, "ok": ok, "outputs": outs})
        print(f"# {fam}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    lines = ["| kernel | case | output | comparison | mismatches / total | max abs err | ok |", "|---|---|---|---|---|---|---|"]
    for r in results:
        for o in r["outputs"]:
            err = f"{o['max_abs_err']:.3g}" if "max_abs_err" in o else ""
            lines.append(f"| {r['kernel']} | {r['case']} | {o['output']} | {o['mode']} | {o['mismatches']} / {o['total']} "
                         f"| {err} | {'yes' if r['ok'] else '**no**'} |")
    n_ok = sum(r["ok"] for r in results)
    lines.append(f"\n{n_ok} of {len(results)} cases agree with TileKernels' references.")
    print("\n".join(lines))
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = args.out / f"tilekernels_fidelity_{stamp}.json"
    path.write_text(json.dumps({"tilekernels_commit": _commit(args.repo), "seed": args.seed, "tokens": n,
                                "torch": torch.__version__, "cases": results, "agree": n_ok, "total": len(results)},
                               indent=1))
    header = (f"# tilesim vs TileKernels' reference functions\n\nTileKernels commit {_commit(args.repo)}, torch "
              f"{torch.__version__}, seed {args.seed}, {n} tokens per random case. Command: `python "
              f"benchmarks/tilekernels_fidelity.py --repo DIR{' --quick' if args.quick else ''}`.\n\n")
    path.with_suffix(".md").write_text(header + "\n".join(lines) + "\n")
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} and .md", file=sys.stderr)
    return 0 if n_ok == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
