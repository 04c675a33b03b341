"""One comparison helper for kernels against NumPy references.

``assert_matches_reference(kernel, inputs, ref_fn, ...)`` runs ``kernel(*inputs)``, runs
``ref_fn(*inputs)`` and compares every output.

Tolerance policy (``TOLERANCES``, by the output's dtype, overridable per call):

* float64/float32 outputs of float32 math: ``rtol=1e-4, atol=1e-5`` — reassociation and fp32
  accumulation order differ from a float64 reference;
* float16: ``rtol=atol=2e-3`` (11-bit significand, and a rounding on every store);
* bfloat16: ``rtol=atol=1.6e-2`` (8-bit significand);
* fp8 e4m3 / e5m2 outputs: one unit in the last place at the value (``rtol=0.125 / 0.25``);
* integers and bool: exact.

Reduction outputs over long axes may need looser ``atol``; callers pass it explicitly. The relative
error of each output as a whole, ``‖out − ref‖ / ‖ref‖``, must also be under ``rtol``.

Special values: NaN in the output where the reference is finite always fails (an unwritten output);
matching NaN/Inf positions pass. On failure the message carries the kernel name, the shapes and dtypes
of the inputs, the worst element, and a runnable reproduction snippet.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..binding import framework, to_host

TOLERANCES = {
    "float64": (1e-7, 1e-9), "float32": (1e-4, 1e-5), "float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2),
    "float8_e4m3fn": (0.125, 1e-3), "float8_e5m2": (0.25, 1e-3), "float4_e2m1fn": (0.5, 0.5),
}


def _as_np(x):
    if isinstance(x, np.ndarray):
        return x
    if framework(x) == "torch":
        return to_host(x).array
    return np.asarray(x)


def tolerance_for(dtype: str, rtol=None, atol=None):
    r, a = TOLERANCES.get(dtype, (0.0, 0.0))
    return (r if rtol is None else rtol), (a if atol is None else atol)


def describe(inputs) -> str:
    parts = []
    for i, x in enumerate(inputs):
        if hasattr(x, "shape"):
            parts.append(f"arg{i}: shape={tuple(x.shape)} dtype={dt.canon(x.dtype) if not isinstance(x.dtype, str) else x.dtype}")
        else:
            parts.append(f"arg{i}: {x!r}")
    return "; ".join(parts)


def compare_arrays(out, ref, *, rtol=None, atol=None, name="output", exact=False) -> str | None:
    """Return None if ``out`` matches ``ref``, else a description of the worst mismatch."""
    out = _as_np(out)
    ref = np.asarray(ref)
    if out.shape != ref.shape:
        return f"{name}: shape {out.shape} != reference {ref.shape}"
    dname = dt.canon(out.dtype)
    o = out.astype(np.float64) if dname not in ("bool",) and not dt.is_int(dname) else out.astype(np.int64)
    r = ref.astype(np.float64) if o.dtype == np.float64 else ref.astype(np.int64)
    if exact or dt.is_int(dname) or dname == "bool":
        bad = o != r
        if o.dtype == np.float64:
            bad &= ~(np.isnan(o) & np.isnan(r))
        if bad.any():
            k = np.unravel_index(np.argmax(bad), bad.shape)
            return f"{name}: {int(bad.sum())} element(s) differ; first at {tuple(map(int, k))}: {o[k]} vs {r[k]}"
        return None
    rt, at = tolerance_for(dname, rtol, atol)
    nan_bad = np.isnan(o) & ~np.isnan(r)
    if nan_bad.any():
        k = np.unravel_index(np.argmax(nan_bad), nan_bad.shape)
        return f"{name}: NaN at {tuple(map(int, k))} where the reference is {r[k]} ({int(nan_bad.sum())} NaNs): unwritten output?"
    both_special = (np.isnan(o) & np.isnan(r)) | (np.isinf(o) & (o == r))
    with np.errstate(invalid="ignore"):
        diff = np.where(both_special, 0.0, np.abs(o - r))
    diff = np.nan_to_num(diff, nan=np.inf)
    lim = at + rt * np.abs(np.nan_to_num(r, nan=0.0, posinf=0.0, neginf=0.0))
    bad = diff > lim
    if bad.any():
        k = np.unravel_index(np.argmax(diff - lim), bad.shape)
        return (f"{name}: {int(bad.sum())}/{bad.size} element(s) outside rtol={rt}, atol={at}; worst at "
                f"{tuple(map(int, k))}: {o[k]!r} vs reference {r[k]!r}")
    fin = np.isfinite(r) & np.isfinite(o)
    nr = np.linalg.norm(r[fin])
    if nr > 0:
        with np.errstate(invalid="ignore"):
            rel = np.linalg.norm((o - r)[fin]) / nr
        if rel > max(rt, 1e-12):
            return f"{name}: relative norm error {rel:.3g} > rtol={rt}"
    return None


def assert_matches_reference(kernel, inputs, ref_fn, *, rtol=None, atol=None, exact=False, name=None,
                             repro: str | None = None):
    """Run ``kernel(*inputs)`` and ``ref_fn(*inputs)``; raise ``AssertionError`` with a repro if they differ."""
    outs = kernel(*inputs)
    refs = ref_fn(*inputs)
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    refs = list(refs) if isinstance(refs, (list, tuple)) else [refs]
    kname = name or getattr(getattr(kernel, "prim_func", None), "name", getattr(kernel, "__name__", "kernel"))
    if len(outs) != len(refs):
        raise AssertionError(f"{kname}: kernel returned {len(outs)} output(s), reference {len(refs)}")
    problems = []
    for i, (o, r) in enumerate(zip(outs, refs)):
        p = compare_arrays(o, r, rtol=rtol, atol=atol, exact=exact, name=f"output {i}")
        if p:
            problems.append(p)
    if problems:
        msg = [f"{kname} does not match its reference", *problems, f"inputs: {describe(inputs)}"]
        if repro:
            msg.append("reproduce with:\n" + repro)
        raise AssertionError("\n".join(msg))
    return outs
