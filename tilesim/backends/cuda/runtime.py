"""Compile cache and launching of lowered programs: the ``cuda`` target.

* :class:`CudaProgram` holds a lowered :class:`~tilesim.backends.cuda.lower.Program`; its kernels are
  compiled on first use with ``numba.cuda.jit(signature)`` (explicit signature: the flat arrays'
  storage types and the scalars' types) and cached process-wide by (source, fastmath) — so two
  ``JITKernel`` objects with the same specialisation share one compiled kernel.
* :meth:`CudaProgram.compile_ptx` compiles every kernel to PTX for a given compute capability with
  ``numba.cuda.compile_ptx`` — no GPU or driver needed (what the CPU test-suite runs).
* It is a :class:`tilesim.backends.Program`: :meth:`CudaProgram.call` takes a call whose arguments
  include device tensors — torch CUDA tensors and CuPy arrays (anything with
  ``__cuda_array_interface__``) are used in place, outputs are allocated on the inputs' device with the
  inputs' framework — and returns ``NotImplemented`` otherwise; :meth:`CudaProgram.run` takes NumPy
  arguments bound by ``tilesim.binding.bind_host``, copies them to the device and the written ones
  back. Under numba's CUDA simulator the same source runs on the CPU. A device call whose signature
  (shapes, dtypes, strides, devices, scalars) was seen before runs the stored plan of :mod:`.plans`.

Arguments are checked by :mod:`tilesim.binding` (the same checks and messages as the interpreter);
this module only adds the device-side rules: a device array of a parameter's storage type is accepted
for the narrow floats CuPy lacks, and a device array must be C-contiguous. A kernel using the fp8
``mma.sync.m16n8k32`` (sm_89 and later) is refused with a ``KernelRuntimeError`` before compiling for an older
compute capability (:func:`check_fp8_mma`).
"""

from __future__ import annotations

import os
import re

import numpy as np

from ... import binding as B
from ... import dtypes as dt
from ...errors import KernelRuntimeError, KernelSyntaxError
from ...ir import nodes as N
from ...optional import loaded
from .. import Program as _TargetProgram
from . import plans as P
from . import rules as Rl
from .caps import DEFAULT_CC, STATIC_SMEM_LIMIT, cuda_module, numba_types, opt_in_dynamic_smem, simulator
from .intrinsics import gpu_namespace, sim_namespace
from .lower import Program, lower_program
from .smem_addr import sim_smem_addr_namespace
from .wgmma_intrinsics import wgmma_namespace
from .wgmma_sim import sim_wgmma_namespace

_DISPATCH_CACHE: dict = {}
_PTX_CACHE: dict = {}
_NS_CACHE: dict = {}


def _namespace(sim: bool) -> dict:
    ns = _NS_CACHE.get(sim)
    if ns is None:
        ns = _NS_CACHE[sim] = sim_namespace() if sim else gpu_namespace()
    return ns


def _nb_scalar(dtype: str):
    types = numba_types()
    if dtype == "bool":
        return types.boolean
    if dtype == "float64":
        return types.float64
    if dt.is_float(dtype):
        return types.float32
    return types.int64


def _nb_array(dtype: str):
    types = numba_types()
    return types.Array(getattr(types, Rl.storage_np(dtype)), 1, "C")


_np_storage = P.storage_dtype


#: ``launch_bounds = (threads, MIN_BLOCKS_PER_SM)`` for every kernel (ptxas then caps the registers so that this
#: many blocks fit an SM; it may spill). None reads ``TILESIM_CUDA_MIN_BLOCKS`` (unset or 0: no launch bounds, the
#: default). A tuning switch of issue 14's flash-attention A/B (brief AU), not a correctness matter.
MIN_BLOCKS_PER_SM: int | None = None


def launch_bounds(threads: int):
    """``(threads, min blocks per SM)`` while :data:`MIN_BLOCKS_PER_SM` (or its env) asks for it, else None."""
    mb = MIN_BLOCKS_PER_SM if MIN_BLOCKS_PER_SM is not None else int(os.environ.get("TILESIM_CUDA_MIN_BLOCKS", "0") or 0)
    return (int(threads), int(mb)) if mb and mb > 0 else None


class CudaProgram(_TargetProgram):
    """A lowered tilesim program for ``target="cuda"`` (see the module docstring)."""

    def __init__(self, pf: N.PrimFunc, fastmath: bool = False, sim: bool | None = None, tensor_cores: bool = False,
                 async_copy: bool = False, wgmma: bool = False):
        self.pf = pf
        self.fastmath = bool(fastmath)
        self.sim = simulator() if sim is None else bool(sim)
        self.tensor_cores = bool(tensor_cores)
        self.async_copy = bool(async_copy)
        self.wgmma = bool(wgmma) and self.tensor_cores
        self.program: Program = lower_program(pf, sim=self.sim, tensor_cores=self.tensor_cores,
                                              async_copy=self.async_copy, wgmma=self.wgmma)
        self.written = B.written_globals(pf)
        #: per-signature call plans (:mod:`.plans`); ``TILESIM_CUDA_CALL_PLANS=0`` turns them off
        self.call_plans = os.environ.get("TILESIM_CUDA_CALL_PLANS", "1") != "0"
        self.plans = P.PlanCache()
        self._is_var = tuple(isinstance(p, N.Var) for p in pf.params)

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
        wg = sorted(set(re.findall(r"\b_wgmma_\w+", k.source)))
        if wg:  # wgmma instructions are built per (types, N, majorness) on first use; one state per kernel (sim)
            full = sim_wgmma_namespace(ns.get("_cp_async16")) if self.sim else wgmma_namespace(wg)
            ns.update(full)
            ns.update({n: full[n] for n in wg})  # the simulator's namespace builds them on lookup
            if self.sim:  # the 32-bit-address copies go through the wrapped _cp_async16 too (pending-read check)
                ns.update(sim_smem_addr_namespace(ns))
        code = compile(k.source, f"<tilesim-cuda {k.name}>", "exec")
        exec(code, ns)  # noqa: S102 - our own generated source
        return ns[k.name]

    def compile_ptx(self, cc=DEFAULT_CC) -> list:
        """``[(kernel name, PTX text)]`` for compute capability ``cc`` (no GPU needed)."""
        cuda = cuda_module()
        out = []
        for k in self.kernels:
            check_fp8_mma(k, cc)
            lb = launch_bounds(k.threads)
            key = (k.source, self.fastmath, tuple(cc), lb)
            ptx = _PTX_CACHE.get(key)
            if ptx is None:
                fn = self.python_function(k)
                ptx, _ = cuda.compile_ptx(fn, self.signature(k), cc=tuple(cc), fastmath=self.fastmath, launch_bounds=lb)
                _PTX_CACHE[key] = ptx
            out.append((k.name, ptx))
        return out

    def dispatcher(self, k):
        lb = None if self.sim else launch_bounds(k.threads)
        key = (k.source, self.fastmath, self.sim, lb)
        d = _DISPATCH_CACHE.get(key)
        if d is None:
            cuda = cuda_module()
            fn = self.python_function(k)
            if self.sim:
                d = cuda.jit(fn)
            else:
                check_fp8_mma(k, tuple(cuda.get_current_device().compute_capability))
                d = cuda.jit(self.signature(k), fastmath=self.fastmath, launch_bounds=lb)(fn)
                if k.dyn_smem > STATIC_SMEM_LIMIT:
                    opt_in_dynamic_smem(d, k.dyn_smem, f"kernel {k.name}")
            _DISPATCH_CACHE[key] = d
        return d

    def compile(self):
        """Compile every kernel for the current device now (else on first call)."""
        for k in self.kernels:
            self.dispatcher(k)

    # ------------------------------------------------------------------------------ launching
    def launch_all(self, dev: dict, scalars: dict):
        """Run the program: ``dev`` maps global buffer uid → flat device array (storage dtype)."""
        cuda = cuda_module()
        scalars = dict(scalars)
        for kind, x in self.program.steps:
            if kind == "let":
                scalars[x.var.uid] = B.host_value(x.value, scalars)
            elif kind == "alloc":
                b = x
                if b.alias_of is not None:
                    continue
                n = 1
                for d in b.shape:
                    n *= d if isinstance(d, int) else B.eval_dim(d, scalars)
                dev[b.uid] = cuda.device_array(max(1, int(n)), dtype=_np_storage(b.dtype))
            else:
                k = x
                grid = []
                for g in k.launch.grid:
                    v = int(B.host_value(g, scalars))
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
                        args.append(P.scalar_value(scalars[a.uid], a.dtype))
                d = self.dispatcher(k)
                d[tuple(grid), k.threads, 0, k.dyn_smem](*args)

    def launcher(self, dev: dict, scalars: dict):
        """A closure replaying the program's launches on fixed device arrays (for timing loops).

        Workspaces are allocated once; per call it only launches (numba dispatch, no binding).
        """
        cuda = cuda_module()
        scalars = dict(scalars)
        dev = dict(dev)
        plan = []
        for kind, x in self.program.steps:
            if kind == "let":
                scalars[x.var.uid] = B.host_value(x.value, scalars)
            elif kind == "alloc":
                if x.alias_of is None:
                    n = 1
                    for d in x.shape:
                        n *= d if isinstance(d, int) else B.eval_dim(d, scalars)
                    dev[x.uid] = cuda.device_array(max(1, int(n)), dtype=_np_storage(x.dtype))
            else:
                grid = tuple(int(B.host_value(g, scalars)) for g in x.launch.grid)
                if any(g <= 0 for g in grid):
                    continue
                args = [self._array_arg(a, dev) if k2 == "array" else P.scalar_value(scalars[a.uid], a.dtype)
                        for k2, a in x.args]
                plan.append((self.dispatcher(x)[grid, x.threads, 0, x.dyn_smem], args))

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
            outs = self._call_device(self.pf, jk.out_idx, B.split_call(self.pf, jk.out_idx, tuple(args)))
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

    def run(self, pf, arrays, scalars, options=None, progress=None):
        """Run on NumPy ``arrays`` (uid → array, already bound): copy in, launch, copy written ones back."""
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
    def call(self, pf, out_idx, values):
        """Device tensors are used in place; ``NotImplemented`` (host binding, then :meth:`run`) otherwise.

        A call whose :func:`.plans.call_key` has a stored plan runs the plan; the first call of a key takes
        the full path and stores a plan for the next ones (see :mod:`.plans`)."""
        key = None
        if self.call_plans:
            key = P.call_key(self._is_var, out_idx, values)
            if key is not None:
                plan = self.plans.get(key)
                if plan is not None:
                    return plan(values)
        if any(B.is_device(v) for i, v in enumerate(values) if i not in out_idx):
            bound = self._bind_device(pf, out_idx, values)
            res = self._finish_device(bound)
            if key is not None and not self.plans.known(key):
                self.plans.store(key, P.build_plan(self, pf, out_idx, values, bound, self._flat_view(pf),
                                                   raw=not self.sim))
            return res
        return NotImplemented

    def _flat_view(self, pf):
        cuda = cuda_module()
        return lambda p, v: _device_view(pf, v, p, cuda)[0]

    def _call_device(self, pf, out_idx, values):
        return self._finish_device(self._bind_device(pf, out_idx, values))

    def _finish_device(self, bound):
        self.launch_all(bound.dev, bound.scalars)
        for uid, info in bound.keep.items():
            if info.get("copy_back") is not None and uid in self.written:
                info["copy_back"]()
        outs = bound.outs
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else outs

    def _bind_device(self, pf, out_idx, values) -> P.DeviceBinding:
        cuda = cuda_module()
        inputs = [v for i, v in enumerate(values) if i not in out_idx]
        kinds = {B.framework(v) for v in inputs}
        kind = "torch" if "torch" in kinds else ("cupy" if "cupy" in kinds else "numba")
        scalars, dims, dev, keep = {}, {}, {}, {}
        device = None
        for i, (p, v) in enumerate(zip(pf.params, values)):
            if i in out_idx:
                continue
            if isinstance(p, N.Var):
                scalars[p.uid] = B.scalar_arg(pf, p, v)
                continue
            arr, info = _device_view(pf, v, p, cuda)
            if device is None and info.get("device") is not None:
                device = info["device"]
            B.check_shape(pf, p, info["shape"], dims)
            dev[p.uid] = arr
            keep[p.uid] = info
        scalars.update(B.bind_dims(pf, dims))
        for p in pf.params:
            if p.uid in keep:
                B.check_derived(pf, p, keep[p.uid]["shape"], scalars)
        outs = []
        for i in out_idx:
            p = pf.params[i]
            shape = B.output_shape(p, scalars)
            if kind == "numba":
                o = cuda.device_array(shape, dtype=_np_storage(p.dtype))
            else:
                o = B.empty_like(kind, shape, p.dtype, device)
            arr, info = _device_view(pf, o, p, cuda)
            dev[p.uid] = arr
            keep[p.uid] = info
            outs.append(o)
        return P.DeviceBinding(dev, scalars, keep, outs, kind, device, cuda)


def check_fp8_mma(k, cc) -> None:
    """Refuse kernel ``k`` for compute capability ``cc`` when it uses the fp8 tensor-core mma (sm_89+)."""
    if tuple(cc) < (8, 9) and ("_mma_e4m3_" in k.source or "_mma_e5m2_" in k.source):
        raise KernelRuntimeError(
            f"kernel {k.name} runs fp8 T.gemm on tensor cores (mma.sync m16n8k32 e4m3/e5m2), which needs compute "
            f"capability 8.9 or later; this target is {cc[0]}.{cc[1]}", k.launch.loc,
            hint='turn tensor cores off for it: pass_configs={"tilesim.cuda_tensor_cores": False}')


def _device_view(pf: N.PrimFunc, v, p: N.Buffer, cuda):
    """(flat numba device array in storage dtype, info) for a caller's tensor bound to parameter ``p``."""
    kind = B.framework(v)
    info = {"copy_back": None, "device": None}
    if kind == "torch":
        torch = loaded("torch")
        name = str(v.dtype).replace("torch.", "")
        if B.dtype_name(name) != p.dtype:
            raise B.dtype_error(pf, p, name)
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
        if p.dtype in B.TORCH_RAW:
            flat = flat.view(getattr(torch, B.TORCH_RAW[p.dtype]))
        elif p.dtype == "bool":
            flat = flat.view(torch.uint8)
        if flat.numel() == 0:
            return cuda.device_array(1, dtype=_np_storage(p.dtype)), info
        return cuda.as_cuda_array(flat), info
    if kind == "numba" or hasattr(v, "__cuda_array_interface__"):
        info["shape"] = tuple(v.shape)
        want = _np_storage(p.dtype)
        got = np.dtype(v.__cuda_array_interface__["typestr"]) if hasattr(v, "__cuda_array_interface__") \
            else np.dtype(v.dtype)
        if p.dtype in dt.NARROW_FLOATS and p.dtype != "float16":
            ok = got.itemsize == want.itemsize
        else:
            ok = got == np.dtype(dt.np_dtype(p.dtype)) or got == want
        if not ok:
            raise B.dtype_error(pf, p, got)
        a = v if kind == "numba" else cuda.as_cuda_array(v)
        if not a.is_c_contiguous():
            raise KernelRuntimeError(f"argument '{p.name}' of {pf.name} is not C-contiguous", p.loc,
                                     hint="pass a contiguous array (e.g. cupy.ascontiguousarray)")
        flat = a.reshape(a.size) if a.size else cuda.device_array(1, dtype=want)
        if flat.dtype != want:
            flat = flat.view(want)
        return flat, info
    # host data inside a device call: copy in (and back if written)
    arr = np.ascontiguousarray(B.to_host(v).array)
    info["shape"] = arr.shape
    B.check_dtype(pf, p, arr.dtype)
    d = cuda.to_device(arr.reshape(-1).view(_np_storage(p.dtype)))
    if isinstance(v, np.ndarray):
        info["copy_back"] = lambda: v.reshape(-1).view(_np_storage(p.dtype)).__setitem__(Ellipsis, d.copy_to_host())
    return d, info


def reject_unsupported(pf: N.PrimFunc) -> None:
    """Constructs the CUDA lowering does not implement: a clear error instead of a different answer."""
    for launch in pf.launches:
        if launch.annotation("safe_value"):
            raise KernelSyntaxError("T.annotate_safe_value is not lowered by the CUDA backend yet", launch.loc,
                                    hint="run this kernel with target='interp', or fill with T.if_then_else")
