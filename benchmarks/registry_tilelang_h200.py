"""Real TileLang on the H200 for the kernel library's report points: the measured ◇ of the roofline.

For each selected registered kernel, the kernel module's source is loaded with its imports switched to
real TileLang (``import tilelang``), built with the **same parameters the report used for the H200**
(its first report shape and the configuration the report's tuner chose, read from
``reports/summary.json``), timed at the report shape with ``tilelang.profiler.do_bench``, and then
checked against the NumPy reference on a small test shape (after the timing, so that a refused or failing
small shape — ``check_error`` in the record — does not cost the full-size timing). Results go to ``$OUT/registry_tilelang_h200.json``
in the record format ``tilesim report`` attaches to its points (``kernel``, ``device``, ``params``,
``median_ms``).

Run on the device machine after installing TileLang's wheels (see shared/GPU.md), from the repo root:
``PYTHONPATH=/tmp/site:. python benchmarks/registry_tilelang_h200.py``.
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ["gemm", "gemm_nt", "gemm_epilogue", "gemm_splitk", "fp8_gemm", "rmsnorm", "layernorm", "layernorm_gelu",
           "layernorm_gelu_unfused", "gelu", "softmax", "fp8_cast_per_token", "fp8_dequant_per_token",
           "swiglu_fp8", "batched_transpose", "flash_attention_fwd", "moe_topk_route", "dsa_indexer"]


def shimmed_specs(modules):
    """Registry specs rebuilt from the kernel modules' source with ``import tilelang``."""
    import kernels.registry as reg
    specs = {}
    orig = reg.register

    def collect(spec):
        specs[spec.name] = spec
        return spec

    reg.register = collect
    tmp = Path(tempfile.mkdtemp(prefix="tl_kernels_"))
    try:
        for m in modules:
            text = (ROOT / "kernels" / f"{m}.py").read_text()
            text = text.replace("import tilesim as tilelang\n", "import tilelang\n")
            text = text.replace("import tilesim.language as T\n", "import tilelang.language as T\n")
            path = tmp / f"tl_{m}.py"
            path.write_text(text)
            spec = importlib.util.spec_from_file_location(f"kernels.tl_{m}", path)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = mod
            try:
                spec.loader.exec_module(mod)
            except Exception as exc:  # noqa: BLE001
                print(f"module {m}: {type(exc).__name__}: {exc}", flush=True)
    finally:
        reg.register = orig
    return specs


def to_torch(x, torch):
    import ml_dtypes
    if not isinstance(x, np.ndarray):
        return x
    if x.dtype == ml_dtypes.bfloat16:
        return _dev(torch.from_numpy(x.view(np.int16).copy()).view(torch.bfloat16))
    if x.dtype == ml_dtypes.float8_e4m3fn:
        return _dev(torch.from_numpy(x.view(np.uint8).copy()).view(torch.float8_e4m3fn))
    return _dev(torch.from_numpy(np.ascontiguousarray(x)))


DRY = os.environ.get("TILESIM_DRYRUN") == "1"  # check this script on a CPU machine with tilesim as "tilelang"


def _dev(t):
    return t if DRY else t.cuda()


def to_numpy(t):
    import ml_dtypes
    import torch
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    if t.dtype == torch.float8_e4m3fn:
        return t.view(torch.uint8).numpy().view(ml_dtypes.float8_e4m3fn)
    return t.numpy()


def check(spec, rng, torch, compare_arrays):
    """The kernel at the registry's first test shape against its NumPy reference: the first problem, or None.
    Raises whatever building or running the kernel raises (the caller records it as ``check_error``)."""
    tp = spec.params(spec.test_shapes[0])
    ins = spec.make_inputs(rng, **tp)
    outs = spec.build(**tp)(*[to_torch(x, torch) for x in ins])
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    refs = spec.reference(*ins, **tp)
    refs = refs if isinstance(refs, (list, tuple)) else [refs]
    if spec.compare is not None:
        try:
            spec.compare([to_numpy(o) for o in outs], list(refs), tp)
        except AssertionError as exc:
            return str(exc)
        return None
    tol = spec.tolerance
    problems = [compare_arrays(to_numpy(o), r, rtol=tol.get("rtol"), atol=tol.get("atol"),
                               exact=tol.get("exact", False)) for o, r in zip(outs, refs)]
    return next((x for x in problems if x), None)


def main():
    import torch
    if DRY:
        import tilesim
        sys.modules["tilelang"] = tilesim
        sys.modules["tilelang.language"] = tilesim.language
        tilesim.__version__ = tilesim.__version__ + "-dryrun"

        def do_bench(fn, warmup=0, rep=0):
            t0 = time.perf_counter()
            fn()
            return (time.perf_counter() - t0) * 1e3

        torch.cuda.get_device_name = lambda i: "cpu (dry run)"
        torch.cuda.synchronize = lambda: None
        torch.cuda.empty_cache = lambda: None
    else:
        from tilelang.profiler import do_bench

    from tilesim.testing.compare import compare_arrays

    out_dir = os.environ.get("OUT", ".")
    summary = json.loads((ROOT / "reports" / "summary.json").read_text())
    report_params = {}
    for p in summary["points"]:
        if p["device"] == "h200_sxm_141gb" and p["kernel"] not in report_params:
            report_params[p["kernel"]] = p["params"]
    from kernels.registry import all_specs
    names = os.environ.get("KERNELS", ",".join(KERNELS)).split(",")
    modules = sorted({s.build.__module__.split(".")[-1] for s in all_specs() if s.name in names})
    specs = shimmed_specs(modules)
    doc = {"kind": "registry_tilelang_h200", "date": datetime.date.today().isoformat(),
           "device_name": torch.cuda.get_device_name(0), "device": "h200_sxm_141gb",
           "versions": {"torch": torch.__version__, "tilelang": __import__("tilelang").__version__,
                        "numpy": np.__version__, "python": sys.version.split()[0]},
           "timing": "tilelang.profiler.do_bench median (ms); then correctness on the registry's first test "
                     "shape (check_error: that check failed to build or run; the timing stands)",
           "results": []}
    rng = np.random.default_rng(0)
    for name in names:
        rec = {"kernel": name, "device": "h200_sxm_141gb"}
        t0 = time.time()
        try:
            spec = specs[name]
            # timing at the report's shape and configuration first: TileLang may refuse the small test shape
            # (e.g. M < 16 in a gemm) while compiling the full-size configuration, which is what is timed
            if DRY:
                params = {k: v for k, v in spec.params(spec.test_shapes[0]).items()
                          if isinstance(v, (int, float, str, bool))}
            else:
                params = dict(report_params[name])
            rec["params"] = params
            kern = spec.build(**spec.params({}, **params))
            big = [to_torch(x, torch) for x in spec.make_inputs(rng, **spec.params({}, **params))]
            kern(*big)
            torch.cuda.synchronize()
            rec["median_ms"] = float(do_bench(lambda k=kern, a=big: k(*a), warmup=10, rep=50))
            rec["flops"] = float(spec.flops(**spec.params({}, **params)))
            rec["min_bytes"] = float(spec.bytes(**spec.params({}, **params)))
            big = None
            torch.cuda.empty_cache()
            # then correctness on a small shape the tiles do not divide; a failure there is recorded
            # (check_error) without losing the timing
            try:
                problem = check(spec, rng, torch, compare_arrays)
                rec["correct"] = problem is None
                if problem:
                    rec["mismatch"] = problem[:300]
            except Exception as exc:  # noqa: BLE001
                rec["check_error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
        except Exception as exc:  # noqa: BLE001
            rec["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
            rec["traceback"] = traceback.format_exc(limit=3)[-800:]
        rec["wall_s"] = time.time() - t0
        doc["results"].append(rec)
        print(json.dumps({k: rec.get(k) for k in ("kernel", "correct", "median_ms", "error", "check_error")}),
              flush=True)
        Path(out_dir, "registry_tilelang_h200.json").write_text(json.dumps(doc, indent=1))
        torch.cuda.empty_cache()
    print(f"\n{'kernel':26s} {'ok':>5s} {'ms':>9s}")
    for r in doc["results"]:
        print(f"{r['kernel']:26s} {str(r.get('correct')):>5s} {r.get('median_ms', float('nan')):9.4f} "
              f"{(r.get('error') or r.get('check_error') or '')[:60]}")


if __name__ == "__main__":
    main()
