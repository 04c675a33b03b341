"""Compile cache and launching of lowered programs.

* :class:`CudaProgram` holds a lowered :class:`~tilesim.backends.cuda.lower.Program`; its kernels are
  compiled on first use with ``numba.cuda.jit(signature)`` (explicit signature: the flat arrays'
  storage types and the scalars' types) and cached process-wide by (source, fastmath) — so two
  ``JITKernel`` objects with the same specialisation share one compiled kernel.
* :meth:`CudaProgram.compile_ptx` compiles every kernel to PTX for a given compute capability with
  ``numba.cuda.compile_ptx`` — no GPU or driver needed (what the CPU test-suite runs).
* :meth:`CudaProgram.call` runs the program for ``JITKernel.run``: NumPy arguments are copied to the
  device and the written ones back; torch CUDA tensors and CuPy arrays (anything with
  ``__cuda_array_interface__``) are used in place, and outputs are allocated on the inputs' device with
  the inputs' framework. Under numba's CUDA simulator the same source runs on the CPU.
"""

from __future__ import annotations

import numpy as np

from ... import dtypes as dt
from ...errors import KernelRuntimeError, KernelTypeError
from ...ir import nodes as N
from . import rules as Rl
from .caps import DEFAULT_CC, cuda_module, simulator
from .layout import sub_bodies
from .lower import Program, lower_program

_DISPATCH_CACHE: dict = {}
_PTX_CACHE: dict = {}
_NS_CACHE: dict = {}


def _namespace(sim: bool) -> dict:
    ns = _NS_CACHE.get(sim)
    if ns is None:
        from .intrinsics import gpu_namespace, sim_namespace

        ns = _NS_CACHE[sim] = sim_namespace() if sim else gpu_namespace()
    return ns


def _nb_scalar(dtype: str):
    from numba import types

    if dtype == "bool":
        return types.boolean
    if dtype == "float64":
        return types.float64
    if dt.is_float(dtype):
        return types.float32
    return types.int64


def _nb_array(dtype: str):
    from numba import types

    return types.Array(getattr(types, Rl.storage_np(dtype)), 1, "C")


def _np_storage(dtype: str):
    return np.dtype(Rl.storage_np(dtype))


def _written_globals(pf: N.PrimFunc) -> set:
    """uids of the global buffers (alias roots) any launch writes."""
    out = set()

    def root(b):
        return (b.alias_of or b).uid

    def walk(body):
        for s in body:
            if isinstance(s, N.Store) and (s.buffer.alias_of or s.buffer).scope == "global":
                out.add(root(s.buffer))
            elif isinstance(s, (N.Copy, N.Reduce, N.Cumsum)) and (s.dst.buffer.alias_of or s.dst.buffer).scope == "global":
                out.add(root(s.dst.buffer))
            elif isinstance(s, (N.Fill, N.Atomic)) and (s.dst.buffer.alias_of or s.dst.buffer).scope == "global":
                out.add(root(s.dst.buffer))
            for b in sub_bodies(s):
                walk(b)

    walk(pf.body)
    return out


class CudaProgram:
    """A lowered tilesim program for ``target="cuda"`` (see the module docstring)."""

    def __init__(self, pf: N.PrimFunc, fastmath: bool = False, sim: bool | None = None):
        self.pf = pf
        self.fastmath = bool(fastmath)
        self.sim = simulator() if sim is None else bool(sim)
        self.program: Program = lower_program(pf, sim=self.sim)
        self.written = _written_globals(pf)

    @property
    def source(self) -> str:
        return self.program.source

    @property
    def kernels(self):
        return self.program.kernels

    # ------------------------------------------------------------------------------ compiling
    def signature(self, k):
        sig = []
        for kind, x in k.args:
            sig.append(_nb_array(x.dtype) if kind == "array" else _nb_scalar(x.dtype))
        return tuple(sig)

    def python_function(self, k):
        ns = dict(_namespace(self.sim))
        code = compile(k.source, f"<tilesim-cuda {k.name}>", "exec")
        exec(code, ns)  # noqa: S102 - our own generated source
        return ns[k.name]

    def compile_ptx(self, cc=DEFAULT_CC) -> list:
        """``[(kernel name, PTX text)]`` for compute capability ``cc`` (no GPU needed)."""
        cuda = cuda_module()
        out = []
        for k in self.kernels:
            key = (k.source, self.fastmath, tuple(cc))
            ptx = _PTX_CACHE.get(key)
            if ptx is None:
                fn = self.python_function(k)
                ptx, _ = cuda.compile_ptx(fn, self.signature(k), cc=tuple(cc), fastmath=self.fastmath)
                _PTX_CACHE[key] = ptx
            out.append((k.name, ptx))
        return out

    def dispatcher(self, k):
        key = (k.source, self.fastmath, self.sim)
        d = _DISPATCH_CACHE.get(key)
        if d is None:
            cuda = cuda_module()
            fn = self.python_function(k)
            if self.sim:
                d = cuda.jit(fn)
            else:
                d = cuda.jit(self.signature(k), fastmath=self.fastmath)(fn)
            _DISPATCH_CACHE[key] = d
        return d

    def compile(self):
        """Compile every kernel for the current device now (else on first call)."""
        for k in self.kernels:
            self.dispatcher(k)

    # ------------------------------------------------------------------------------ launching
    def launch_all(self, dev: dict, scalars: dict):
        """Run the program: ``dev`` maps global buffer uid → flat device array (storage dtype)."""
        from ...kernel import eval_dim

        cuda = cuda_module()
        scalars = dict(scalars)
        for kind, x in self.program.steps:
            if kind == "let":
                scalars[x.var.uid] = _host_eval(x.value, scalars)
            elif kind == "alloc":
                b = x
                if b.alias_of is not None:
                    continue
                n = 1
                for d in b.shape:
                    n *= d if isinstance(d, int) else eval_dim(d, scalars)
                dev[b.uid] = cuda.device_array(max(1, int(n)), dtype=_np_storage(b.dtype))
            else:
                k = x
                grid = []
                for g in k.launch.grid:
                    v = int(_host_eval(g, scalars))
                    grid.append(v)
                if any(g <= 0 for g in grid):
                    if any(g < 0 for g in grid):
                        raise KernelRuntimeError(f"negative grid extent {tuple(grid)}", k.launch.loc)
                    continue
                if len(grid) > 1 and max(grid[1:]) > 65535:
                    raise KernelRuntimeError(f"grid {tuple(grid)}: the y/z extents of a CUDA grid are limited to "
                                             "65535", k.launch.loc, hint="put the largest extent first in T.Kernel")
                args = []
                for kind2, a in k.args:
                    if kind2 == "array":
                        args.append(self._array_arg(a, dev))
                    else:
                        if a.uid not in scalars:
                            raise KernelRuntimeError(f"value of {a.name} is unknown at launch", k.launch.loc)
                        args.append(_scalar_value(scalars[a.uid], a.dtype))
                d = self.dispatcher(k)
                d[tuple(grid), k.threads](*args)

    def launcher(self, dev: dict, scalars: dict):
        """A closure replaying the program's launches on fixed device arrays (for timing loops).

        Workspaces are allocated once; per call it only launches (numba dispatch, no binding).
        """
        from ...kernel import eval_dim

        cuda = cuda_module()
        scalars = dict(scalars)
        dev = dict(dev)
        plan = []
        for kind, x in self.program.steps:
            if kind == "let":
                scalars[x.var.uid] = _host_eval(x.value, scalars)
            elif kind == "alloc":
                if x.alias_of is None:
                    n = 1
                    for d in x.shape:
                        n *= d if isinstance(d, int) else eval_dim(d, scalars)
                    dev[x.uid] = cuda.device_array(max(1, int(n)), dtype=_np_storage(x.dtype))
            else:
                grid = tuple(int(_host_eval(g, scalars)) for g in x.launch.grid)
                if any(g <= 0 for g in grid):
                    continue
                args = [self._array_arg(a, dev) if k2 == "array" else _scalar_value(scalars[a.uid], a.dtype)
                        for k2, a in x.args]
                plan.append((self.dispatcher(x)[grid, x.threads], args))

        def run():
            for fn, args in plan:
                fn(*args)

        return run

    def prepare(self, jk, args):
        """(launch closure, outputs) for ``jk`` called with CUDA tensors ``args`` (outputs allocated once)."""
        captured = {}
        orig = self.launch_all

        def capture(dev, scalars):
            captured["dev"], captured["scalars"] = dict(dev), dict(scalars)

        self.launch_all = capture
        try:
            outs = self._call_device(jk, args)
        finally:
            self.launch_all = orig
        return self.launcher(captured["dev"], captured["scalars"]), outs

    def _array_arg(self, b: N.Buffer, dev: dict):
        root = b.alias_of or b
        arr = dev.get(root.uid)
        if arr is None:
            raise KernelRuntimeError(f"no device memory for {b.name}")
        if b.alias_of is not None and b.dtype != root.dtype:
            arr = arr.view(_np_storage(b.dtype))
        return arr

    def run(self, pf, values, arrays, scalars):
        """Run on NumPy ``arrays`` (uid → array, already checked): copy in, launch, copy written ones back."""
        cuda = cuda_module()
        dev = {}
        for p in pf.params:
            if isinstance(p, N.Buffer):
                a = arrays[p.uid]
                flat = np.ascontiguousarray(a).reshape(-1).view(_np_storage(p.dtype))
                dev[p.uid] = cuda.to_device(flat) if flat.size else cuda.device_array(1, dtype=flat.dtype)
        self.launch_all(dev, scalars)
        for p in pf.params:
            if isinstance(p, N.Buffer) and p.uid in self.written and arrays[p.uid].size:
                a = arrays[p.uid]
                host = dev[p.uid].copy_to_host()
                a.reshape(-1).view(_np_storage(p.dtype))[...] = host

    # ------------------------------------------------------------------------------ JITKernel entry
    def call(self, jk, args, options):
        """``JITKernel.run`` for ``target="cuda"``: device tensors in place, NumPy through copies."""
        if any(_is_device(a) for a in args):
            return self._call_device(jk, args)
        return NotImplemented  # the caller takes the NumPy path (bind_arguments + run)

    def _call_device(self, jk, args):
        from ...kernel import eval_dim

        cuda = cuda_module()
        pf = self.pf
        outs_idx = jk.out_idx
        it = iter(args)
        values = [None] * len(pf.params)
        for i in range(len(pf.params)):
            if i not in outs_idx:
                values[i] = next(it)
        scalars, dims, dev, keep = {}, {}, {}, {}
        mods = {type(v).__module__.split(".")[0] for v in args}
        framework = "torch" if "torch" in mods else ("cupy" if "cupy" in mods else "numba")
        device = None
        for i, (p, v) in enumerate(zip(pf.params, values)):
            if i in outs_idx:
                continue
            if isinstance(p, N.Var):
                scalars[p.uid] = v
                continue
            arr, info = _device_view(v, p, cuda)
            if device is None and info.get("device") is not None:
                device = info["device"]
            for d, (want, got) in enumerate(zip(p.shape, info["shape"])):
                if isinstance(want, int):
                    if want != got:
                        raise KernelRuntimeError(f"argument '{p.name}' of {pf.name}: dimension {d} must be {want}, "
                                                 f"got shape {tuple(info['shape'])}", p.loc)
                elif isinstance(want, N.Var):
                    if want.uid in dims and dims[want.uid] != got:
                        raise KernelRuntimeError(f"argument '{p.name}' of {pf.name}: dimension {d} ({want.name}) is "
                                                 f"{got} but another argument set it to {dims[want.uid]}", p.loc)
                    dims[want.uid] = got
            if len(info["shape"]) != p.ndim:
                raise KernelRuntimeError(f"argument '{p.name}' of {pf.name}: expected {p.ndim} dimension(s), got "
                                         f"shape {tuple(info['shape'])}", p.loc)
            dev[p.uid] = arr
            keep[p.uid] = info
        scalars.update(dims)
        for dv in pf.dyn_vars:
            if dv.uid not in scalars:
                raise KernelRuntimeError(f"symbolic dimension '{dv.name}' of {pf.name} is not bound by any argument",
                                         pf.loc)
        outs = []
        for i in outs_idx:
            p = pf.params[i]
            shape = tuple(d if isinstance(d, int) else eval_dim(d, scalars) for d in p.shape)
            o = _alloc_like(framework, shape, p.dtype, device)
            arr, info = _device_view(o, p, cuda)
            dev[p.uid] = arr
            keep[p.uid] = info
            outs.append(o)
        self.launch_all(dev, scalars)
        for uid, info in keep.items():
            if info.get("copy_back") is not None and uid in self.written:
                info["copy_back"]()
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else outs


def _host_eval(e, scalars):
    from ...kernel import eval_dim

    if isinstance(e, int):
        return e
    if isinstance(e, N.Const):
        return e.value
    from ..interp.exprs import ev
    from ..interp.options import InterpOptions
    from ..interp.state import Ctx

    ctx = Ctx(1, InterpOptions(), dict(scalars), {}, np.zeros(1, dtype=np.int64))
    v = ev(e, ctx)
    if isinstance(v, np.ndarray):
        v = v.reshape(-1)[0]
    del eval_dim
    return v.item() if hasattr(v, "item") else v


def _scalar_value(v, dtype):
    if dtype == "bool":
        return bool(v)
    if dtype == "float64":
        return np.float64(v)
    if dt.is_float(dtype):
        return np.float32(v)
    return np.int64(int(v))


def _is_numba_device(v) -> bool:
    mod = type(v).__module__
    return mod.startswith("numba") and hasattr(v, "copy_to_host")


def _is_device(v) -> bool:
    mod = type(v).__module__
    if mod.startswith("torch"):
        return getattr(getattr(v, "device", None), "type", "cpu") == "cuda"
    return hasattr(v, "__cuda_array_interface__") or _is_numba_device(v)


_TORCH_RAW = {"bfloat16": "int16", "float8_e4m3fn": "uint8", "float8_e5m2": "uint8"}


def _device_view(v, p: N.Buffer, cuda):
    """(flat numba device array in storage dtype, info) for a caller's tensor bound to parameter ``p``."""
    mod = type(v).__module__
    info = {"copy_back": None, "device": None}
    if mod.startswith("torch"):
        import torch

        name = str(v.dtype).replace("torch.", "")
        if dt.canon(name) != p.dtype:
            raise KernelRuntimeError(f"argument '{p.name}': expected dtype {p.dtype}, got {name}", p.loc,
                                     hint=f"convert it first, e.g. tensor.to(torch.{p.dtype})")
        if v.device.type != "cuda":
            v = v.to("cuda")
        info["shape"] = tuple(v.shape)
        info["device"] = v.device
        t = v
        if not v.is_contiguous():
            t = v.contiguous()
            orig = v
            info["copy_back"] = lambda: orig.copy_(t)
        flat = t.reshape(-1)
        if p.dtype in _TORCH_RAW:
            flat = flat.view(getattr(torch, _TORCH_RAW[p.dtype]))
        elif p.dtype == "bool":
            flat = flat.view(torch.uint8)
        if flat.numel() == 0:
            return cuda.device_array(1, dtype=_np_storage(p.dtype)), info
        return cuda.as_cuda_array(flat), info
    if hasattr(v, "__cuda_array_interface__") or _is_numba_device(v):
        info["shape"] = tuple(v.shape)
        want = _np_storage(p.dtype)
        got = np.dtype(v.__cuda_array_interface__["typestr"]) if hasattr(v, "__cuda_array_interface__") \
            else np.dtype(v.dtype)
        if p.dtype in dt.NARROW_FLOATS and p.dtype != "float16":
            ok = got.itemsize == want.itemsize
        else:
            ok = got == np.dtype(dt.np_dtype(p.dtype)) or got == want
        if not ok:
            raise KernelRuntimeError(f"argument '{p.name}': expected dtype {p.dtype}, got {got}", p.loc)
        a = v if _is_numba_device(v) else cuda.as_cuda_array(v)
        if not a.is_c_contiguous():
            raise KernelRuntimeError(f"argument '{p.name}' is not C-contiguous", p.loc,
                                     hint="pass a contiguous array (e.g. cupy.ascontiguousarray)")
        flat = a.reshape(a.size) if a.size else cuda.device_array(1, dtype=want)
        if flat.dtype != want:
            flat = flat.view(want)
        return flat, info
    # host data inside a device call: copy in (and back if written)
    arr = np.ascontiguousarray(np.asarray(v))
    info["shape"] = arr.shape
    if arr.dtype != dt.np_dtype(p.dtype):
        raise KernelRuntimeError(f"argument '{p.name}': expected dtype {p.dtype}, got {arr.dtype}", p.loc)
    d = cuda.to_device(arr.reshape(-1).view(_np_storage(p.dtype)))
    if isinstance(v, np.ndarray):
        info["copy_back"] = lambda: v.reshape(-1).view(_np_storage(p.dtype)).__setitem__(Ellipsis, d.copy_to_host())
    return d, info


def _alloc_like(framework, shape, dtype, device):
    if framework == "numba":
        return cuda_module().device_array(shape, dtype=_np_storage(dtype))
    if framework == "torch":
        import torch

        return torch.empty(shape, dtype=getattr(torch, dtype), device=device or "cuda")
    import cupy

    if dtype in dt.NARROW_FLOATS and dtype != "float16":
        raise KernelTypeError(f"CuPy has no {dtype} arrays: pass torch tensors for {dtype} outputs")
    return cupy.empty(shape, dtype=dt.np_dtype(dtype))


def compile_cuda(pf: N.PrimFunc, fastmath: bool = False, sim: bool | None = None) -> CudaProgram:
    return CudaProgram(pf, fastmath=fastmath, sim=sim)


def reject_unsupported(pf: N.PrimFunc) -> None:
    """Constructs the CUDA lowering does not implement: a clear error instead of a different answer."""
    from ...errors import KernelSyntaxError
    for launch in pf.launches:
        if launch.annotation("safe_value"):
            raise KernelSyntaxError("T.annotate_safe_value is not lowered by the CUDA backend yet", launch.loc,
                                    hint="run this kernel with target='interp', or fill with T.if_then_else")
