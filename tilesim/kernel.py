"""Compiled kernel objects: argument binding, output allocation, targets.

Contract
--------
``JITKernel(prim_func, out_idx, target, pass_configs, options)`` is what ``tilesim.compile`` and the
``@tilesim.jit`` decorators return. Calling it takes every parameter that is not an output, in order
(tensors as NumPy arrays, torch tensors, or anything with ``__array__``/``__dlpack__``; scalars as
Python numbers), allocates the outputs (uninitialised, like ``torch.empty``), runs the program and
returns the outputs: one bare, several as a list, in the caller's array type (torch in → torch out).
Wrong counts, dtypes or shapes raise ``KernelRuntimeError`` naming the parameter.

Targets: ``"interp"`` (the NumPy interpreter), ``"cuda"`` (the Numba CUDA backend, where present),
``"auto"`` (``cuda`` when a CUDA GPU and the backend are usable, else ``interp``).
"""

from __future__ import annotations

import numpy as np

from . import dtypes as dt
from .backends.interp import InterpOptions
from .backends.interp import run as interp_run
from .config import normalise_pass_configs
from .errors import KernelRuntimeError, KernelTypeError, user_facing
from .ir import nodes as N
from .ir.printer import format_ir

TARGETS = ("auto", "interp", "cuda")


def resolve_target(target) -> str:
    t = "auto" if target in (None, "auto") else str(target).split()[0].lower()
    if t in ("numpy", "cpu", "interpreter"):
        t = "interp"
    if t not in TARGETS:
        raise KernelTypeError(f"unknown target {target!r}", hint="use 'interp', 'cuda' or 'auto'")
    if t == "auto":
        try:
            from .backends.cuda import available
        except ImportError:
            return "interp"
        return "cuda" if available() else "interp"
    return t


def _normalise_out_idx(out_idx, nparams):
    if out_idx is None:
        return ()
    idx = [out_idx] if isinstance(out_idx, int) else list(out_idx)
    out = []
    for i in idx:
        if not -nparams <= i < nparams:
            raise KernelTypeError(f"out_idx {i} is out of range for {nparams} parameters")
        out.append(i % nparams)
    return tuple(sorted(set(out), key=out.index))


class _Converted:
    """A caller's tensor as a NumPy array, and how to give results back."""

    def __init__(self, obj):
        self.obj = obj
        self.kind = "numpy"
        self.copy_back = False
        self.array = self._to_numpy(obj)

    def _to_numpy(self, obj):
        if isinstance(obj, np.ndarray):
            return obj
        mod = type(obj).__module__
        if mod.startswith("torch"):
            self.kind = "torch"
            t = obj.detach()
            if t.device.type != "cpu" or not t.is_contiguous():
                self.copy_back = True
                t = t.cpu().contiguous()
            name = str(t.dtype).replace("torch.", "")
            if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
                raw = t.view(getattr(__import__("torch"), "int16" if name == "bfloat16" else "uint8")).numpy()
                return raw.view(dt.np_dtype(name))
            return t.numpy()
        if hasattr(obj, "__cuda_array_interface__") and mod.startswith("cupy"):
            self.kind = "cupy"
            self.copy_back = True
            return obj.get()
        if hasattr(obj, "__array__"):
            return np.asarray(obj)
        if hasattr(obj, "__dlpack__"):
            return np.from_dlpack(obj)
        raise KernelRuntimeError(f"cannot use a {type(obj).__name__} as a tensor",
                                 hint="pass NumPy arrays, torch tensors or objects with __array__/__dlpack__")

    def finish(self, arr):
        if self.copy_back and self.kind == "torch":
            import torch
            self.obj.copy_(_np_to_torch(arr, torch).to(self.obj.device))
        elif self.copy_back and self.kind == "cupy":
            self.obj.set(arr)


def _np_to_torch(arr, torch):
    name = dt.canon(arr.dtype)
    if name == "bfloat16":
        return torch.from_numpy(arr.view(np.int16).copy()).view(torch.bfloat16)
    if name in ("float8_e4m3fn", "float8_e5m2"):
        return torch.from_numpy(arr.view(np.uint8).copy()).view(getattr(torch, name))
    return torch.from_numpy(np.ascontiguousarray(arr))


def bind_arguments(pf: N.PrimFunc, values: list):
    """Check ``values`` (one per parameter) against ``pf``; return (arrays, scalars, converted)."""
    arrays, scalars, conv = {}, {}, []
    dims: dict[int, int] = {}
    for p, v in zip(pf.params, values):
        if isinstance(p, N.Var):
            if isinstance(v, np.ndarray) and v.ndim > 0 or hasattr(v, "shape") and getattr(v, "ndim", 0) > 0:
                raise KernelRuntimeError(f"argument '{p.name}' of {pf.name} is a scalar {p.dtype}, got a tensor", p.loc)
            scalars[p.uid] = (dt.compute_dtype(p.dtype).type(v) if dt.is_float(p.dtype) else
                              (bool(v) if p.dtype == "bool" else int(v)))
            continue
        c = _Converted(v)
        arr = c.array
        want = dt.np_dtype(p.dtype)
        if arr.dtype != want:
            raise KernelRuntimeError(
                f"argument '{p.name}' of {pf.name}: expected dtype {p.dtype}, got {dt.canon(arr.dtype) if _known(arr.dtype) else arr.dtype}",
                p.loc, hint=f"convert it first, e.g. x.astype({p.dtype!r}) / tensor.to(torch.{p.dtype})")
        if arr.ndim != p.ndim:
            raise KernelRuntimeError(f"argument '{p.name}' of {pf.name}: expected {p.ndim} dimension(s) "
                                     f"{_fmt_shape(p.shape)}, got shape {arr.shape}", p.loc)
        for d, (want_d, got) in enumerate(zip(p.shape, arr.shape)):
            if isinstance(want_d, int):
                if want_d != got:
                    raise KernelRuntimeError(f"argument '{p.name}' of {pf.name}: dimension {d} must be {want_d}, "
                                             f"got shape {arr.shape} (expected {_fmt_shape(p.shape)})", p.loc)
            elif isinstance(want_d, N.Var):
                if want_d.uid in dims and dims[want_d.uid] != got:
                    raise KernelRuntimeError(
                        f"argument '{p.name}' of {pf.name}: dimension {d} ({want_d.name}) is {got} but another "
                        f"argument set {want_d.name} = {dims[want_d.uid]}", p.loc)
                dims[want_d.uid] = got
        if not arr.flags.c_contiguous or not arr.flags.writeable:
            arr = np.ascontiguousarray(arr).copy()
            c.copy_back = c.copy_back or c.kind != "numpy"
            c.array = arr
        arrays[p.uid] = arr
        conv.append(c)
    for dv in pf.dyn_vars:
        if dv.uid not in dims:
            raise KernelRuntimeError(f"symbolic dimension '{dv.name}' of {pf.name} is not bound by any argument", pf.loc)
        scalars[dv.uid] = dims[dv.uid]
    # shapes given by expressions of symbols are checked once the symbols are known
    for p in pf.params:
        if isinstance(p, N.Buffer) and p.uid in arrays:
            for d, want_d in enumerate(p.shape):
                if isinstance(want_d, N.Expr) and not isinstance(want_d, N.Var):
                    got = arrays[p.uid].shape[d]
                    val = eval_dim(want_d, scalars)
                    if val != got:
                        raise KernelRuntimeError(f"argument '{p.name}': dimension {d} must be {val}, got {got}", p.loc)
    return arrays, scalars, conv


def _known(d):
    try:
        dt.canon(d)
        return True
    except Exception:  # noqa: BLE001
        return False


def _fmt_shape(shape):
    return "(" + ", ".join(str(s) if isinstance(s, int) else getattr(s, "name", "?") for s in shape) + ")"


def eval_dim(e, scalars) -> int:
    """Value of a shape expression given bound symbols."""
    from .backends.interp.exprs import ev
    from .backends.interp.options import InterpOptions as _O
    from .backends.interp.state import Ctx
    if isinstance(e, int):
        return e
    ctx = Ctx(1, _O(), dict(scalars), {}, np.zeros(1, dtype=np.int64))
    return int(ev(e, ctx))


class JITKernel:
    """A compiled tilesim program. See the module docstring for the calling convention."""

    def __init__(self, prim_func: N.PrimFunc, out_idx=None, target="auto", pass_configs=None,
                 options: InterpOptions | None = None, outputs=None):
        self.prim_func = pf = prim_func
        self.pass_configs = normalise_pass_configs(pass_configs)
        if outputs is not None:
            self.out_idx = tuple(pf.params.index(b) for b in outputs)
        else:
            self.out_idx = _normalise_out_idx(out_idx, len(pf.params))
        for i in self.out_idx:
            if not isinstance(pf.params[i], N.Buffer):
                raise KernelTypeError(f"out_idx {i} names the scalar parameter '{pf.params[i].name}'")
        self.target = resolve_target(target)
        opts = options or InterpOptions()
        if self.pass_configs.get("tl.disable_safe_memory_legalize"):
            from dataclasses import replace
            opts = replace(opts, oob="error")
        self.options = opts
        self._cuda = None
        if self.target == "cuda":
            from .backends.cuda import compile_cuda
            self._cuda = compile_cuda(pf, fastmath=bool(self.pass_configs.get("tl.enable_fast_math")))
        self.config = None
        self.latency = None

    # -- introspection ---------------------------------------------------------------------------
    @property
    def params(self):
        return self.prim_func.params

    @property
    def input_params(self):
        return [p for i, p in enumerate(self.prim_func.params) if i not in self.out_idx]

    def get_kernel_source(self) -> str:
        """The interpreter's input (tile IR text), or the generated Python/CUDA source for ``cuda``."""
        if self._cuda is not None:
            return self._cuda.source
        return format_ir(self.prim_func)

    def get_ir(self) -> str:
        return format_ir(self.prim_func)

    def __repr__(self):
        return f"<tilesim.JITKernel {self.prim_func.name} target={self.target}>"

    # -- running ---------------------------------------------------------------------------------
    @user_facing
    def __call__(self, *args, **kwargs):
        return self.run(*args, **kwargs)

    @user_facing
    def run(self, *args, options: InterpOptions | None = None, progress=None):
        pf = self.prim_func
        n_in = len(pf.params) - len(self.out_idx)
        if len(args) != n_in:
            names = ", ".join(p.name for p in self.input_params)
            raise KernelRuntimeError(f"kernel {pf.name} takes {n_in} argument(s) ({names}), got {len(args)}", pf.loc,
                                     hint="outputs listed in out_idx are allocated and returned, not passed")
        if self._cuda is not None:
            from .backends.cuda.caps import available, simulator
            if not (available() or simulator()):
                raise KernelRuntimeError(
                    f"kernel {pf.name} was compiled for target='cuda' but this machine has no usable CUDA GPU",
                    pf.loc, hint="run it with target='interp' (or 'auto'), or on a machine with an NVIDIA GPU; "
                                 "get_kernel_source() still shows the generated CUDA code")
            # CUDA tensors (torch/cupy, __cuda_array_interface__) run in place on their device
            res = self._cuda.call(self, args, options or self.options)
            if res is not NotImplemented:
                return res
        it = iter(args)
        values: list = [None] * len(pf.params)
        for i in range(len(pf.params)):
            if i not in self.out_idx:
                values[i] = next(it)
        # bind inputs first to learn symbolic dims, then allocate outputs
        inputs_pf = [p for i, p in enumerate(pf.params) if i not in self.out_idx]
        sub = N.PrimFunc(pf.name, tuple(inputs_pf), (), tuple(d for d in pf.dyn_vars if _bound_by(d, inputs_pf)), pf.loc)
        _, scalars, _ = bind_arguments(sub, [values[i] for i in range(len(pf.params)) if i not in self.out_idx])
        opts = options or self.options
        kinds = {type(v).__module__.split(".")[0] for v in args if not isinstance(v, (int, float, bool))}
        for i in self.out_idx:
            p = pf.params[i]
            shape = tuple(eval_dim(d, scalars) if not isinstance(d, int) else d for d in p.shape)
            from .backends.interp.runtime import new_array
            values[i] = new_array(shape, p.dtype, opts.uninit)
        arrays, scalars, conv = bind_arguments(pf, values)
        if self._cuda is not None:
            self._cuda.run(pf, values, arrays, scalars)
        else:
            interp_run(pf, arrays, scalars, opts, progress=progress)
        for c in conv:
            c.finish(c.array)
        outs = [arrays[pf.params[i].uid] for i in self.out_idx]
        if "torch" in kinds:
            import torch
            outs = [_np_to_torch(o, torch) for o in outs]
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else outs

    def lint(self):
        """TileLang-compatibility findings (``tilesim.lint``): constructs real TileLang rejects."""
        from .lint import lint
        return lint(self.prim_func)

    def get_profiler(self, tensor_supply_type=None):
        from .profiler import Profiler
        return Profiler(self, tensor_supply_type)

    @user_facing
    def simulate(self, hw="h200_sxm_141gb", profile=None, **shapes):
        """Cycle-approximate simulation of this kernel (see ``tilesim.sim``)."""
        from .sim import simulate_kernel
        return simulate_kernel(self, hw=hw, profile=profile, **shapes)


def _bound_by(d, params):
    return any(isinstance(p, N.Buffer) and any(s is d or (isinstance(s, N.Var) and s.uid == d.uid) for s in p.shape)
               for p in params)
