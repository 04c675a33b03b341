"""The issue-15 validation set: >= 40 real-TileLang configurations over >= 8 kernel kinds on the H200.

Contract
--------
* :data:`CONFIGS` (fixed here, before any measurement): row norms, softmax, elementwise (GELU and a 1-D
  add, up to 2^24 fp16 elements), fp8 casts, batched transposes at several tiles and thread counts,
  skinny/decode GEMMs, split-K, decode attention (paged, MLA), 256-thread 128x256 GEMMs, and the
  configurations the simulator used to refuse (flash attention 128x64 d128 at 128 threads, an RMSNorm
  holding a 4x4096 fp32 row block at 128 threads). Each has an ``id``, a ``kind``, a ``source``
  (``registry``: a ``kernels/`` spec at its first report shape plus ``params``; ``extra``/``core``: the
  sources of ``benchmarks/tilelang_h200.py``) and ``params``. All are held out: nothing here was fitted.
* On the device (TileLang's wheels installed as shared/GPU.md "Real TileLang on the H200")::

      PYTHONPATH=/tmp/site:. python3 benchmarks/tilelang_h200_validation.py --out $OUT/validation.json

  builds every config with real TileLang (``import tilelang``; registry kernel modules are re-imported
  from their source text with the import switched), checks the registry kernels on their first test
  shape with the same tunables, times each with ``tilelang.profiler.do_bench`` (median, 20/80 %
  quantiles, L2 flushed) and records the registers per thread and static shared memory of the compiled
  kernel (``cuobjdump -res-usage``) and which instructions its source uses. A config that fails is
  recorded with its error; the JSON is rewritten after every config.
* ``--dry-run`` (no GPU, no TileLang): builds every config with tilesim under the name ``tilelang`` (the
  same kernel construction path), simulates it with the ``tensorcore`` profile and writes the same JSON
  layout with ``"dry_run": true``, the simulated time and the model's registers per thread
  (``predicted_s``, ``predicted_registers``) and no measurements. Writing the predictions before the
  measurements makes the next GPU session's comparison a clean held-out check.
* ``--quiet``: per configuration only its id, ``timed``/``not timed``, the small-shape check's outcome and an error's
  exception type, then one count line — for timing a sealed set whose numbers must stay unseen (the JSON holds them).
* ``--list`` prints the configs and the kind count. ``--shard K/N`` keeps every N-th configuration from the
  K-th (after ``--only``): N ``--compile-only`` processes side by side, one shard each, fill TileLang's cache.
* ``--compare MEAS.json --predictions PRED.json [--registers REGS.json ...]`` (no GPU): the pre-registered
  held-out comparison. Joins measured records (``median_ms``; a registry record's ``mismatch`` must be
  null, i.e. checked) with the predictions by ``id`` and prints per kind and overall the median and p90
  of ``|predicted / measured - 1|``; configs without a measurement (refused by TileLang) are listed, not
  counted. Registers: real (``registers`` of any given measurement file) beside the predicted count.
  ``--json`` writes the rows and summaries.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


# the sealed sets of 2026-12-02 live in their own module, which also holds the config constructors
_SETS = _module(ROOT / "benchmarks" / "tilelang_h200_fresh_configs.py", "bench_tilelang_h200_fresh")
_reg, _extra = _SETS._reg, _SETS._extra
_EIGHTH = _module(ROOT / "benchmarks" / "tilelang_h200_eighth_configs.py", "bench_tilelang_h200_eighth")


CONFIGS = [
    # row norms
    _reg("v_rmsnorm_4kx7k_bm1_n1024_t256", "row_norm", "rmsnorm", M=4096, N=7168, block_M=1, block_N=1024, threads=256),
    _reg("v_rmsnorm_16kx4k_bm2_n4096_t128", "row_norm", "rmsnorm", M=16384, N=4096, block_M=2, block_N=4096,
         threads=128),
    _reg("v_rmsnorm_1kx8k_bm1_n2048_t256", "row_norm", "rmsnorm", M=1024, N=8192, block_M=1, block_N=2048, threads=256),
    _reg("v_layernorm_8kx4k_bm1_n1024_t256", "row_norm", "layernorm", M=8192, N=4096, block_M=1, block_N=1024,
         threads=256),
    _reg("v_layernorm_2kx7k_bm4_n512_t128", "row_norm", "layernorm", M=2048, N=7168, block_M=4, block_N=512,
         threads=128),
    _extra("v_core_rmsnorm_fp32_16kx4k_bm4_t128", "row_norm", "rms_norm", "core", M=16384, N=4096, block_M=4),
    _extra("v_core_rmsnorm_fp32_4kx1k_bm8_t128", "row_norm", "rms_norm", "core", M=4096, N=1024, block_M=8),
    # softmax (small ones too: launch and tail)
    _reg("v_softmax_4kx4k_bm1_n4096_t256", "softmax", "softmax", M=4096, N=4096, block_M=1, block_N=4096, threads=256),
    _reg("v_softmax_1kx2k_bm1_n2048_t256", "softmax", "softmax", M=1024, N=2048, block_M=1, block_N=2048, threads=256),
    _extra("v_core_softmax_2kx1k_bm8_t128", "softmax", "softmax", "core", M=2048, N=1024, block_M=8, threads=128),
    _extra("v_core_softmax_8kx1k_bm4_t128", "softmax", "softmax", "core", M=8192, N=1024, block_M=4, threads=128),
    # elementwise
    _reg("v_gelu_2p24_bm32_n256_t128", "elementwise", "gelu", M=4096, N=4096, block_M=32, block_N=256, threads=128,
         dtype="float16"),
    _reg("v_gelu_1kx8k_bm16_n512_t256", "elementwise", "gelu", M=1024, N=8192, block_M=16, block_N=512, threads=256),
    _reg("v_gelu_8kx16k_bm64_n128_t128", "elementwise", "gelu", M=8192, N=16384, block_M=64, block_N=128, threads=128),
    _extra("v_vec_add_1M_fp16_b1024_t128", "elementwise", "vec_add", N=1 << 20, block=1024, threads=128,
           dtype="float16"),
    _extra("v_vec_add_2p24_fp16_b2048_t256", "elementwise", "vec_add", N=1 << 24, block=2048, threads=256,
           dtype="float16"),
    # casts
    _reg("v_fp8_cast_tok_1kx7k_bm16_t128", "cast", "fp8_cast_per_token", M=1024, N=7168, block_M=16, threads=128),
    _reg("v_fp8_cast_tok_16kx7k_bm32_t256", "cast", "fp8_cast_per_token", M=16384, N=7168, block_M=32, threads=256),
    _reg("v_fp8_cast_blk_4kx7k_t256", "cast", "fp8_cast_per_block", M=4096, N=7168, threads=256),
    _reg("v_fp8_dequant_tok_8kx7k_bm32_t128", "cast", "fp8_dequant_per_token", M=8192, N=7168, block_M=32,
         threads=128),
    # transposes at several tiles
    _reg("v_transpose_8x7kx2k_32x32_t64", "transpose", "batched_transpose", B=8, M=7168, N=2048, block_M=32,
         block_N=32, threads=64),
    _reg("v_transpose_8x7kx2k_64x64_t128", "transpose", "batched_transpose", B=8, M=7168, N=2048, block_M=64,
         block_N=64, threads=128),
    _reg("v_transpose_8x7kx2k_128x64_t256", "transpose", "batched_transpose", B=8, M=7168, N=2048, block_M=128,
         block_N=64, threads=256),
    _reg("v_transpose_64x4kx128_fp16_64x128_t128", "transpose", "batched_transpose", B=64, M=4096, N=128, block_M=64,
         block_N=128, threads=128, dtype="float16"),
    _reg("v_transpose_1x16kx7k_fp8_128x128_t256", "transpose", "batched_transpose", B=1, M=16384, N=7168, block_M=128,
         block_N=128, threads=256, dtype="float8_e4m3fn"),
    # skinny / decode GEMMs
    _extra("v_gemm_16x4096x4096_64x128x64_s3_t128", "skinny_gemm", "gemm", M=16, N=4096, K=4096, block_M=64,
           block_N=128, block_K=64, num_stages=3, threads=128),
    _extra("v_gemm_64x7168x2048_64x64x64_s4_t128", "skinny_gemm", "gemm", M=64, N=7168, K=2048, block_M=64,
           block_N=64, block_K=64, num_stages=4, threads=128),
    _extra("v_gemm_128x8192x8192_128x128x64_s3_t128", "skinny_gemm", "gemm", M=128, N=8192, K=8192, block_M=128,
           block_N=128, block_K=64, num_stages=3, threads=128),
    _reg("v_gemm_nt_32x14336x4096_64x128x64_s3_t128", "skinny_gemm", "gemm_nt", M=32, N=14336, K=4096, block_M=64,
         block_N=128, block_K=64, num_stages=3, threads=128),
    # split-K
    _reg("v_splitk_64x7168x16384_s4", "split_k", "gemm_splitk", M=64, N=7168, K=16384, split_k=4),
    _reg("v_splitk_32x4096x14336_s8", "split_k", "gemm_splitk", M=32, N=4096, K=14336, split_k=8, block_M=64,
         block_N=64),
    _reg("v_splitk_128x2048x16384_s2", "split_k", "gemm_splitk", M=128, N=2048, K=16384, split_k=2),
    # decode attention
    _reg("v_paged_decode_gqa16_b16_8k", "decode_attention", "paged_decode", batch=16, heads=64, groups=16, dim=128,
         max_len=8192, block_size=16, dtype="bfloat16", num_splits=4),
    _reg("v_paged_decode_gqa16_b16_8k_split8_n64", "decode_attention", "paged_decode", batch=16, heads=64, groups=16,
         dim=128, max_len=8192, block_size=16, dtype="bfloat16", num_splits=8, block_N=64),
    _reg("v_mla_decode_b32_h128_8k", "decode_attention", "mla_decode", batch=32, heads=128, seq_kv=8192, num_splits=2,
         dtype="bfloat16"),
    # 256-thread 128x256 GEMMs
    _extra("v_gemm_8k_128x256x64_s3_t256", "gemm_256t", "gemm", M=8192, N=8192, K=8192, block_M=128, block_N=256,
           block_K=64, num_stages=3, threads=256),
    _extra("v_gemm_4kx7kx2k_bf16_128x256x64_s3_t256", "gemm_256t", "gemm", M=4096, N=7168, K=2048, block_M=128,
           block_N=256, block_K=64, num_stages=3, threads=256, dtype="bfloat16", out_dtype="bfloat16"),
    _extra("v_gemm_2kx14kx7k_128x256x32_s4_t256_sw8", "gemm_256t", "gemm", M=2048, N=14336, K=7168, block_M=128,
           block_N=256, block_K=32, num_stages=4, threads=256, swizzle=8),
    # configurations the simulator refused before issue 15 (register estimate over 255)
    _extra("v_fa_b1h32s4096d128_full_128x64_s2_t128", "flash_attention", "flash_attention", "core", batch=1, heads=32,
           seq_len=4096, dim=128, is_causal=False, block_M=128, block_N=64, num_stages=2, threads=128),
    _extra("v_fa_b1h32s8192d128_causal_128x64_s2_t128", "flash_attention", "flash_attention", "core", batch=1,
           heads=32, seq_len=8192, dim=128, is_causal=True, block_M=128, block_N=64, num_stages=2, threads=128),
    _reg("v_gemm_256x128_t128_spill", "gemm_spill", "gemm", M=4096, N=4096, K=4096, block_M=256, block_N=128,
         block_K=64, num_stages=3, threads=128),
]


def _helpers():
    th = _module(ROOT / "benchmarks" / "tilelang_h200.py", "bench_tilelang_h200")
    rt = _module(ROOT / "benchmarks" / "registry_tilelang_h200.py", "bench_registry_tilelang_h200")
    return th, rt


def registry_params(cfg: dict) -> tuple:
    """(spec from the live registry, full params) of a registry config: first report shape + ``params``."""
    import kernels.registry as reg
    spec = reg.get(cfg["kernel"])
    shape = {k: v for k, v in spec.shapes[0].items() if k != "label"}
    shape.update(cfg["params"])
    return spec, spec.params(shape)


def build(cfg: dict, backend: str, th, specs=None):
    """(kernel, simulator keywords) of ``cfg`` built with ``backend`` ("tilelang" or "tilesim")."""
    if cfg["source"] == "registry":
        spec, params = registry_params(cfg)
        use = (specs or {}).get(cfg["kernel"], spec)
        hints = spec.data_hints(**params) if spec.data_hints else {}
        return use.build(**params), hints, params
    c = {"module": cfg["source"], "factory": cfg["factory"], "params": dict(cfg["params"])}
    return th.build(c, backend), th.sim_shapes(c), dict(cfg["params"])


def predict(cfg: dict, th, profile="tensorcore") -> dict:
    from tilesim.sim import simulate
    kern, hints, _ = build(cfg, "tilesim", th)
    t0 = time.perf_counter()
    rep = simulate(kern.prim_func, "h200_sxm_141gb", profile, name=cfg["id"], **hints)
    return {"predicted_s": rep.time_s, "predicted_bound": rep.bound,
            "predicted_registers": max((x.get("registers_at_launch") or x["registers_per_thread"] or 0) for x in rep.launches) or None,
            "predicted_register_demand": max((x.get("registers_demand") or 0) for x in rep.launches) or None,
            "predicted_notes": [n for n in rep.notes if "register" in n], "sim_wall_s": time.perf_counter() - t0}


def _check(spec, params, rt, torch, rng):
    """Mismatch text (or None) of a registry kernel on its first test shape with ``params``' tunables."""
    from tilesim.testing.compare import compare_arrays
    tp = spec.params(spec.test_shapes[0], **{k: v for k, v in params.items() if k in spec.tunables})
    ins = spec.make_inputs(rng, **tp)
    outs = spec.build(**tp)(*[rt.to_torch(x, torch) for x in ins])
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    refs = spec.reference(*ins, **tp)
    refs = refs if isinstance(refs, (list, tuple)) else [refs]
    if spec.compare is not None:
        spec.compare([rt.to_numpy(o) for o in outs], list(refs), tp)
        return None
    tol = spec.tolerance
    bad = [compare_arrays(rt.to_numpy(o), r, rtol=tol.get("rtol"), atol=tol.get("atol"), exact=tol.get("exact", False))
           for o, r in zip(outs, refs)]
    bad = [x for x in bad if x]
    return bad[0][:300] if bad else None


SET_NAMES = ("main", "fresh", "third", "fourth", "fifth", "sixth", "seventh", "eighth")


def config_set(name: str) -> list:
    """``main``: the 2026-12-01 set above; ``fresh``/``third``/``fourth``/``fifth``/``sixth``/``seventh``: the sealed 2026-12-02
    sets (tilelang_h200_fresh_configs.py ``FRESH``/``THIRD``/``FOURTH``/``FIFTH``/``SIXTH``/``SEVENTH``); ``eighth``:
    tilelang_h200_eighth_configs.py ``EIGHTH``."""
    if name == "main":
        return CONFIGS
    return {"fresh": _SETS.FRESH, "third": _SETS.THIRD, "fourth": _SETS.FOURTH, "fifth": _SETS.FIFTH,
            "sixth": _SETS.SIXTH, "seventh": _SETS.SEVENTH, "eighth": _EIGHTH.EIGHTH}[name]


def shard(cfgs: list, spec: str | None) -> list:
    """The configurations of shard ``"K/N"`` (every N-th, starting at the K-th; K in 0..N-1), or all of them."""
    if not spec:
        return cfgs
    k, n = (int(x) for x in spec.split("/"))
    if not 0 <= k < n:
        raise ValueError(f"--shard {spec}: want K/N with 0 <= K < N")
    return cfgs[k::n]


def run(out_path: str, dry: bool, only=None, cset: str = "main", compile_only: bool = False,
        part: str | None = None, profile_set=(), quiet: bool = False) -> dict:
    """Build (and unless ``dry`` time) the configurations of set ``cset`` (or the ``only`` ids). ``compile_only``:
    build each kernel and run its small-shape check, no timing — several such processes side by side fill
    TileLang's disk cache of compiled kernels so that one timing process afterwards compiles almost nothing.
    ``quiet``: the per-configuration lines carry no number (:func:`progress_line`)."""
    th, rt = _helpers()
    cfgs = shard([c for c in config_set(cset) if not only or c["id"] in only], part)
    doc = {"kind": "tilelang_h200_validation", "dry_run": dry,
           "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "timing": "tilelang.profiler.do_bench median (ms), L2 flushed; 20/80% quantiles",
           "kinds": sorted({c["kind"] for c in cfgs}), "results": []}
    profile = "tensorcore"
    if profile_set:  # a pre-registered variant of the model: tensorcore with these fields overridden
        import dataclasses

        from tilesim.analysis import get_profile
        base = get_profile("tensorcore")
        kv = dict(x.split("=", 1) for x in profile_set)
        bad = sorted(k for k in kv if not hasattr(base, k))
        if bad:
            raise SystemExit(f"--profile-set: the tensorcore profile has no field {bad}")
        profile = dataclasses.replace(base, **{k: (v.lower() in ("1", "true", "yes")) if isinstance(getattr(base, k), bool)
                                               else type(getattr(base, k))(v) for k, v in kv.items()})
        doc["profile_overrides"] = kv
    torch = specs = None
    if not dry:
        import torch
        from tilelang.profiler import do_bench
        doc["device"] = torch.cuda.get_device_name(0)
        doc["versions"] = th._versions(torch)
        from kernels.registry import all_specs
        modules = sorted({s.build.__module__.split(".")[-1] for s in all_specs()
                          if s.name in {c.get("kernel") for c in cfgs}})
        specs = rt.shimmed_specs(modules)
        th.load_modules("tilelang")
    rng = np.random.default_rng(0)
    for cfg in cfgs:
        rec = dict(cfg)
        t0 = time.time()
        try:
            if dry:
                rec.update(predict(cfg, th, profile))
                kern, hints, params = build(cfg, "tilesim", th)
                rec["full_params"] = {k: v for k, v in params.items() if isinstance(v, (int, float, str, bool))}
            else:
                kern, hints, params = build(cfg, "tilelang", th, specs)
                rec["compile_s"] = time.time() - t0
                if compile_only:
                    if cfg["source"] == "registry":
                        rec["mismatch"] = _check(specs[cfg["kernel"]], params, rt, torch, rng)
                    raise _Compiled
                if cfg["source"] == "registry":
                    spec = specs[cfg["kernel"]]
                    ins = [rt.to_torch(x, torch) for x in spec.make_inputs(rng, **params)]
                else:
                    c = {"factory": cfg["factory"], "params": cfg["params"], "id": cfg["id"]}
                    ins, _ = th._inputs_and_ref(c, torch)
                kern(*ins)
                torch.cuda.synchronize()
                q = do_bench(lambda k=kern, a=ins: k(*a), warmup=10, rep=60, quantiles=[0.5, 0.2, 0.8])
                rec["median_ms"], rec["q20_ms"], rec["q80_ms"] = (float(x) for x in q)
                rec["source_flags"] = th._source_flags(kern)
                if os.environ.get("TILESIM_DUMP_SOURCE"):  # the generated CUDA, for reading the compiler's choices
                    Path(os.environ["TILESIM_DUMP_SOURCE"], f"{cfg['id']}.cu").write_text(kern.get_kernel_source())
                rec["registers"] = rec["source_flags"].get("registers")
                ins = None
                torch.cuda.empty_cache()
                if cfg["source"] == "registry":
                    # after the timing: TileLang may refuse the small test shape (e.g. M < 16 in a gemm)
                    # while compiling the full-size configuration, which is what is being timed
                    try:
                        rec["mismatch"] = _check(spec, params, rt, torch, rng)
                    except Exception as exc:  # noqa: BLE001
                        rec["check_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        except _Compiled:
            pass
        except Exception as exc:  # noqa: BLE001
            rec["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
            rec["traceback"] = traceback.format_exc(limit=3)[-800:]
        rec["wall_s"] = time.time() - t0
        doc["results"].append(rec)
        print(progress_line(rec, quiet), flush=True)
        Path(out_path).write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return doc


def _check_word(rec: dict) -> str:
    if "mismatch" not in rec and "check_error" not in rec:
        return "not checked"
    if rec.get("check_error"):
        return "check failed"
    return "wrong" if rec.get("mismatch") else "correct"


def progress_line(rec: dict, quiet: bool = False) -> str:
    """The line printed after each configuration. ``quiet`` (a sealed set's timing run, whose numbers must stay unseen
    until the final model's predictions are committed): only the id, whether it was timed, whether its small-shape
    check passed, and an error's exception type; no time, prediction, ratio or register count."""
    if not quiet:
        return json.dumps({k: rec.get(k) for k in ("id", "median_ms", "predicted_s", "registers",
                                                   "predicted_registers", "error")})
    timed = "timed" if rec.get("median_ms") is not None else "not timed"
    err = f" error {rec['error'].split(':', 1)[0]}" if rec.get("error") else ""
    return f"{rec['id']} {timed} {_check_word(rec)}{err}"


def quiet_summary(results: list) -> str:
    """The final count line of a ``--quiet`` run (counts only)."""
    words = [_check_word(r) for r in results]
    return (f"{sum(r.get('median_ms') is not None for r in results)} of {len(results)} timed; "
            f"{words.count('correct')} correct, {words.count('wrong')} wrong, {words.count('check failed')} check failed, "
            f"{words.count('not checked')} not checked; {sum(bool(r.get('error')) for r in results)} errors")


class _Compiled(Exception):
    """``compile_only``: the configuration is built (and checked); nothing is timed."""


def _err_stats(errs) -> dict:
    e = np.asarray(errs, dtype=float)
    return {"points": int(e.size), "median_error": float(np.median(e)) if e.size else None,
            "p90_error": float(np.percentile(e, 90)) if e.size else None,
            "worst_error": float(np.max(e)) if e.size else None}


def compare(meas_paths, pred_paths) -> dict:
    """Pre-registered comparison: rows (id, kind, measured, predicted, ratio, registers) and summaries.

    ``meas_paths``: measurement files (the first one with a timed record of an id gives its time; any
    gives its registers). ``pred_paths``: ``--dry-run`` outputs written before the measurements.
    A registry record whose ``mismatch`` is not null (checked and wrong) is left out and listed.
    """
    pred = {}
    for p in pred_paths:
        for r in json.loads(Path(p).read_text())["results"]:
            pred.setdefault(r["id"], r)
    timed, regs, untimed, wrong = {}, {}, [], []
    for p in meas_paths:
        for r in json.loads(Path(p).read_text())["results"]:
            if r.get("registers") is not None:
                regs.setdefault(r["id"], r["registers"])
            if r.get("median_ms") is None:
                untimed.append(r["id"])
            elif r.get("mismatch"):
                wrong.append(r["id"])
            else:
                timed.setdefault(r["id"], r)
    rows = []
    for i, r in timed.items():
        q = pred.get(i)
        if q is None or q.get("predicted_s") is None:
            continue
        meas = r["median_ms"] * 1e-3
        ratio = q["predicted_s"] / meas
        rows.append({"id": i, "kind": r.get("kind") or q.get("kind"), "measured_s": meas,
                     "predicted_s": q["predicted_s"], "ratio": ratio, "error": abs(ratio - 1.0),
                     "registers": regs.get(i), "predicted_registers": q.get("predicted_registers")})
    kinds = sorted({r["kind"] for r in rows})
    per_kind = {k: _err_stats([r["error"] for r in rows if r["kind"] == k]) for k in kinds}
    reg_rows = [r for r in rows if r["registers"] is not None and r["predicted_registers"] is not None]
    return {"rows": rows, "overall": _err_stats([r["error"] for r in rows]), "per_kind": per_kind,
            "not_timed": sorted(set(untimed) - set(timed)), "wrong": sorted(set(wrong) - set(timed)),
            "registers_median_abs_diff": float(np.median([abs(r["predicted_registers"] - r["registers"])
                                                          for r in reg_rows])) if reg_rows else None}


def print_compare(res: dict) -> None:
    print(f"{'id':46s} {'kind':18s} {'meas us':>9s} {'pred us':>9s} {'ratio':>6s} {'regs':>5s} {'model':>5s}")
    for r in res["rows"]:
        print(f"{r['id']:46s} {r['kind']:18s} {r['measured_s'] * 1e6:9.1f} {r['predicted_s'] * 1e6:9.1f} "
              f"{r['ratio']:6.2f} {r['registers'] if r['registers'] is not None else '-':>5} "
              f"{r['predicted_registers'] if r['predicted_registers'] is not None else '-':>5}")
    for k, s in res["per_kind"].items():
        print(f"  {k:18s} {s['points']:3d} points  median {s['median_error'] * 100:5.1f}%  "
              f"p90 {s['p90_error'] * 100:5.1f}%  worst {s['worst_error'] * 100:5.1f}%")
    o = res["overall"]
    print(f"overall: {o['points']} points, {len(res['per_kind'])} kinds, median {o['median_error'] * 100:.1f}%, "
          f"p90 {o['p90_error'] * 100:.1f}%, worst {o['worst_error'] * 100:.1f}%")
    if res["registers_median_abs_diff"] is not None:
        n = sum(1 for r in res["rows"] if r["registers"] is not None and r["predicted_registers"] is not None)
        print(f"registers: {n} configs with a real count, median |model - real| = "
              f"{res['registers_median_abs_diff']:.0f}")
    print(f"not timed (left out): {res['not_timed']}; wrong results (left out): {res['wrong']}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "tilelang_h200_validation.json"))
    ap.add_argument("--dry-run", action="store_true", help="no GPU: build with tilesim, simulate, write JSON")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--compile-only", action="store_true", help="build and check, no timing (fills TileLang's cache)")
    ap.add_argument("--set", default="main", choices=SET_NAMES,
                    help="which configuration set")
    ap.add_argument("--shard", metavar="K/N", help="only every N-th configuration from the K-th (parallel passes)")
    ap.add_argument("--compare", nargs="+", metavar="MEAS.json", help="measurement files (no GPU)")
    ap.add_argument("--predictions", nargs="+", metavar="PRED.json", help="--dry-run outputs for --compare")
    ap.add_argument("--json", help="with --compare: write rows and summaries here")
    ap.add_argument("--profile-set", nargs="*", default=[], metavar="FIELD=VALUE",
                    help="with --dry-run: predict with the tensorcore profile's fields overridden (a variant)")
    ap.add_argument("--quiet", action="store_true",
                    help="per configuration only the id and whether it was timed / correct, then a count line "
                         "(a sealed set's timing run: no times, predictions or ratios in the output)")
    a = ap.parse_args(argv)
    if a.compare:
        if not a.predictions:
            ap.error("--compare needs --predictions")
        res = compare(a.compare, a.predictions)
        print_compare(res)
        if a.json:
            Path(a.json).write_text(json.dumps(res, indent=1) + "\n")
        return 0
    if a.list:
        cfgs = config_set(a.set)
        for c in cfgs:
            print(f"{c['id']:48s} {c['kind']:18s} {c['source']}")
        print(f"{len(cfgs)} configurations, {len({c['kind'] for c in cfgs})} kinds")
        return 0
    if a.dry_run:
        import tilesim
        sys.modules.setdefault("tilelang", tilesim)
        sys.modules.setdefault("tilelang.language", tilesim.language)
    if a.profile_set and not a.dry_run:
        ap.error("--profile-set is for --dry-run predictions")
    doc = run(a.out, a.dry_run, a.only, a.set, a.compile_only, a.shard, a.profile_set, a.quiet)
    bad = [r["id"] for r in doc["results"] if r.get("error")]
    if a.quiet:
        print(quiet_summary(doc["results"]))
    print(f"wrote {a.out}: {len(doc['results'])} configs, {len(doc['kinds'])} kinds, errors: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
