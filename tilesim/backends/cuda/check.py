"""Cross-checks of the CUDA backend against the interpreter (used by the tests, the simulator run and
``benchmarks/gpu_run.py``).

A :class:`Case` is a kernel (built for the interpreter) plus an input maker (:func:`library_cases` makes
them for registered library kernels; the test kernels' come from ``tests/registry.py``, ``cuda_cases``).
:func:`run_case` runs it with ``target="interp"`` and with ``target="cuda"`` (on a GPU, or under numba's
CUDA simulator) on the same fresh random inputs and returns the relative norm error of every output,
``‖cuda − interp‖ / ‖interp‖`` (in float64), and whether it is within the output dtype's tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ... import dtypes as dt
from ...binding import written_globals
from ...kernel import JITKernel
from .runtime import CudaProgram

#: relative norm error allowed per output dtype (CUDA vs interpreter: summation order and fp32 math)
REL_TOL = {"float64": 1e-9, "float32": 1e-4, "float16": 3e-3, "bfloat16": 2e-2, "float8_e4m3fn": 8e-2,
           "float8_e5m2": 1.5e-1, "float4_e2m1fn": 0.3}


@dataclass
class Case:
    name: str
    kernel: object  # JITKernel (interp target)
    make_inputs: object  # rng -> tuple of arrays/scalars (inputs in the kernel's call order)
    inplace: tuple = ()  # indices of inputs the kernel writes (no out_idx): compared after the call
    rel_tol: float | None = None
    #: the library spec's own comparison ``compare(outs, refs)`` (raises AssertionError), used instead of the
    #: per-dtype relative tolerance: a kernel whose outputs are ill-conditioned documents its bound there
    #: (engram_gate_bwd's GWP inherits the cancellation of ``sd``; fp32 sum orders differ by up to ~1e-3)
    compare: object = None


def _outputs(res, inputs, inplace):
    outs = []
    if res is not None:
        outs.extend(res if isinstance(res, (list, tuple)) else [res])
    outs.extend(inputs[i] for i in inplace)
    return outs


def _f64(a):
    a = np.asarray(a)
    return a.astype(np.float64) if a.dtype.kind in "fcV" or a.dtype in (np.dtype(np.float16),) else a.astype(np.float64)


def rel_err(out, ref) -> float:
    o, r = _f64(out).ravel(), _f64(ref).ravel()
    both_nan = np.isnan(o) & np.isnan(r)
    o, r = np.where(both_nan, 0.0, o), np.where(both_nan, 0.0, r)
    inf_same = np.isinf(o) & np.isinf(r) & (np.sign(o) == np.sign(r))
    o, r = np.where(inf_same, 0.0, o), np.where(inf_same, 0.0, r)
    if np.isnan(o).any() or np.isinf(o).any():
        return float("inf")
    nr = np.linalg.norm(r)
    d = np.linalg.norm(o - r)
    return float(d / nr) if nr > 0 else float(d)


def cuda_twin(kernel, fastmath=False, tensor_cores=None, async_copy=None, wgmma=None):
    """``kernel`` on ``target="cuda"`` (never the interpreter fallback: ``fallback=False``); ``tensor_cores`` /
    ``async_copy`` / ``wgmma`` True/False override the defaults (env; tensor cores on, off under the simulator;
    wgmma off)."""
    cfg = {}
    if wgmma is not None:
        cfg["tilesim.cuda_wgmma"] = bool(wgmma)
    if async_copy is not None:
        cfg["tilesim.cuda_async_copy"] = bool(async_copy)
    if fastmath:
        cfg["tl.enable_fast_math"] = True
    if tensor_cores is not None:
        cfg["tilesim.cuda_tensor_cores"] = bool(tensor_cores)
    return JITKernel(kernel.prim_func, out_idx=kernel.out_idx, target="cuda", fallback=False,
                     pass_configs=cfg or None)


def interp_twin(kernel):
    """The same program on the interpreter (``target="auto"`` picks the GPU where there is one)."""
    if getattr(kernel, "target", None) == "interp":
        return kernel
    return JITKernel(kernel.prim_func, out_idx=kernel.out_idx, target="interp")


def run_case(case: Case, rng, twin=None) -> dict:
    k = interp_twin(case.kernel)
    kc = twin or cuda_twin(case.kernel)
    inputs = case.make_inputs(rng)
    a = [x.copy() if isinstance(x, np.ndarray) else x for x in inputs]
    b = [x.copy() if isinstance(x, np.ndarray) else x for x in inputs]
    ref = _outputs(k(*a), a, case.inplace)
    got = _outputs(kc(*b), b, case.inplace)
    errs, ok = [], True
    if case.compare is not None:
        try:
            case.compare(got, ref)
        except AssertionError as e:
            return {"name": case.name, "ok": False, "rel_err": [rel_err(o, r) for o, r in zip(got, ref)],
                    "compare": str(e)[:300], "shapes": [list(np.shape(x)) for x in inputs if hasattr(x, "shape")]}
        return {"name": case.name, "ok": True, "rel_err": [rel_err(o, r) for o, r in zip(got, ref)],
                "shapes": [list(np.shape(x)) for x in inputs if hasattr(x, "shape")]}
    for o, r in zip(got, ref):
        e = rel_err(o, r)
        name = dt.canon(np.asarray(r).dtype) if np.asarray(r).dtype.kind != "V" else "float32"
        tol = case.rel_tol if case.rel_tol is not None else REL_TOL.get(name, 0.0)
        if dt.is_int(name) or name == "bool":
            good = bool(np.array_equal(np.asarray(o), np.asarray(r)))
            e = 0.0 if good else float("inf")
        else:
            good = e <= tol
        errs.append(e)
        ok &= good
    return {"name": case.name, "ok": bool(ok), "rel_err": errs,
            "shapes": [list(np.shape(x)) for x in inputs if hasattr(x, "shape")]}


# ------------------------------------------------------------------------------------------ library kernels
def _spec_inputs(spec, params):
    def make(rng):
        return spec.make_inputs(rng, **params)

    return make


def library_cases(specs, allow_dtypes=None, shape_index=0, overrides=None, check_smem=True) -> list[Case]:
    """Cases for registered kernel-library specs at their ``test_shapes[shape_index]``.

    ``allow_dtypes``: if given, skip specs whose inputs/outputs use other float dtypes (the simulator
    has no bf16/fp8). Specs whose kernel cannot be built are returned with ``kernel=None``.
    """
    cases = []
    for spec in specs:
        shapes = spec.test_shapes or spec.shapes
        if not shapes:
            continue
        shape = shapes[min(shape_index, len(shapes) - 1)]
        params = spec.params(shape)
        if overrides:
            params.update({k: v for k, v in (overrides.get(spec.name) or overrides.get("*") or {}).items()
                           if k in params})
        note = None
        try:
            k = spec.build(**params)
            if check_smem:
                _check_smem(k)
        except Exception as e:  # noqa: BLE001
            # over the shared-memory limit (227 KB dynamic): retry with smaller tiles (recorded in the case name)
            small = {k2: v for k2, v in _SMALLER.items() if k2 in params and params[k2] > v}
            k = None
            if small and "shared memory" in str(e):
                try:
                    k = spec.build(**{**params, **small})
                    if check_smem:
                        _check_smem(k)
                    note = "smaller tiles " + ",".join(f"{a}={b}" for a, b in small.items())
                except Exception as e2:  # noqa: BLE001
                    e, k = e2, None
            if k is None:
                cases.append(Case(spec.name, None, None, rel_tol=None))
                cases[-1].error = f"{type(e).__name__}: {e}"
                continue
        inplace = tuple(i for i, p in enumerate(k.input_params)
                        if hasattr(p, "shape") and _writes(k.prim_func, p))
        if allow_dtypes is not None:
            used = {p.dtype for p in k.prim_func.params}
            if any(dt.is_float(u) and u not in allow_dtypes for u in used):
                continue
        cmp = spec.compare
        cases.append(Case(spec.name + (f" ({note})" if note else ""), k,
                          _spec_inputs(spec, params),
                          inplace=inplace,
                          compare=None if cmp is None else (lambda o, r, c=cmp, p=dict(params): c(o, r, p))))
    return cases


#: tile parameters tried when a library kernel's defaults exceed the shared-memory limit
_SMALLER = {"block_M": 64, "block_N": 64, "block_K": 64, "num_stages": 1}


def _check_smem(kernel):
    CudaProgram(kernel.prim_func, sim=False)  # raises KernelTypeError over the shared-memory limit


def _writes(pf, buf) -> bool:
    return (buf.alias_of or buf).uid in written_globals(pf)
