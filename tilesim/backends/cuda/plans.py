"""Per-signature call plans: the CUDA target's fast path for repeated calls with device tensors.

A call ``kc(x, w)`` with device tensors first takes the full path of :class:`.runtime.CudaProgram`
(binding and checks by :mod:`tilesim.binding`, output allocation, launches through numba's dispatcher).
When that call succeeds, a :class:`CallPlan` is stored under the call's :func:`call_key`; a later call
with the same key skips binding, checking and numba's dispatcher: it allocates the outputs and launches.

Contract
--------
* :func:`call_key` is a hashable tuple of everything the full path's checks and launch parameters depend
  on, or ``None`` when the call is not eligible (then the full path runs every time): ``out_idx``; per
  tensor argument its framework type, dtype, shape, strides (so contiguity), device and, for torch,
  ``requires_grad`` and the negative bit; per scalar argument its exact type and value (floats also their sign, so ``-0.0`` is not
  ``0.0``); the current torch stream of the first CUDA tensor. Eligible arguments: an exact
  ``torch.Tensor``, an object with ``__cuda_array_interface__`` (CuPy, numba device arrays), a numba
  simulator array; scalars of exact type ``int``/``float``/``bool`` or a NumPy scalar. Anything else (host
  arrays, tensor subclasses, 0-d tensors as scalars) → ``None``.
* Errors are preserved: a plan is stored only after the full path accepted a call with that key, and every
  check of the full path is a function of the key; a changed shape, dtype, stride, device or scalar is
  another key, so it takes the full path again (and raises there when it is wrong).
* A plan is refused (``False`` stored for its key, the full path runs) when the full path had to copy
  (a non-contiguous or host tensor), or when a torch tensor's stream is not the default stream (the full
  path orders such calls with host synchronisation; the plan launches on the legacy default stream, which
  orders after torch's default stream by itself).
* Workspaces (``alloc`` steps) and the stand-ins for empty tensors are allocated once per plan and reused
  by its calls (all launches are on one stream, in order). Outputs are allocated per call, like the full path.
* :class:`PlanCache` holds at most ``LIMIT`` keys per program (cleared when full); ``stats`` counts hits,
  misses, plans built and refused.

Launching (see docs/cuda-backend.md, "Call plans")
  * :class:`RawLauncher` (a GPU): per kernel, the argument list numba's own ``_Kernel._prepare_args``
    builds is prepared once from the first call's arrays; per call only the data-pointer slots are
    replaced (the pointer of each tensor: ``data_ptr()`` or ``__cuda_array_interface__``) and cuda.core's
    ``launch`` — what ``_Kernel.launch`` calls — runs with a ``LaunchConfig`` made once. Built only when
    each pointer slot is verified against the first call's pointers; otherwise the dispatch launcher is used.
    If its first launch ever raises (before any kernel ran), the plan switches to the dispatch launcher for good
    (``plan.note`` says why) and that call dispatches.
  * :class:`DispatchLauncher` (numba's CUDA simulator, and the fallback): flat device views of the call's
    tensors, then the configured dispatcher ``kernel[grid, block, 0, smem](*args)`` with the grids and
    scalars computed once.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ... import binding as B
from ... import dtypes as dt
from ...errors import KernelError
from ...ir import nodes as N
from ...optional import loaded
from . import rules as Rl
from .caps import launch_api

_FLOATS = frozenset({float, np.float16, np.float32, np.float64})
_SCALARS = _FLOATS | frozenset({int, bool, np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                                np.uint32, np.uint64})
#: where the data pointer sits in numba's flattened argument of a 1-d array:
#: (meminfo, parent, size, itemsize, data, shape[0], stride[0])
PTR_SLOT = 4


def storage_dtype(dtype: str) -> np.dtype:
    return np.dtype(Rl.storage_np(dtype))


def scalar_value(v, dtype):
    """A scalar kernel argument in the type of the kernel's signature (``runtime.CudaProgram.signature``)."""
    if dtype == "bool":
        return bool(v)
    if dtype == "float64":
        return np.float64(v)
    if dt.is_float(dtype):
        return np.float32(v)
    return np.int64(int(v))


def torch_stream(torch, t) -> int:
    """The handle of torch's current stream on CUDA tensor ``t``'s device (0: the default stream). Through
    ``torch._C._cuda_getCurrentRawStream`` where present (what torch's own compiler calls: no Stream object),
    else ``torch.cuda.current_stream``."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return int(raw(t.get_device()))
    return int(torch.cuda.current_stream(t.device).cuda_stream)


def call_key(is_var: tuple, out_idx: tuple, values: list):
    """The plan key of a call (see the module docstring), or ``None`` when the call is not eligible."""
    torch = loaded("torch")
    tensor = torch.Tensor if torch is not None else None
    parts = [out_idx]
    stream = None
    for i, v in enumerate(values):
        if i in out_idx:
            continue
        t = type(v)
        if is_var[i]:
            if t not in _SCALARS:
                return None
            parts.append((t, v, math.copysign(1.0, v)) if t in _FLOATS else (t, v))
        elif t is tensor:
            if stream is None and v.is_cuda:
                stream = torch_stream(torch, v)
            parts.append((v.dtype, v.device, v.shape, v.stride(), v.requires_grad, v.is_neg()))
        else:
            cai = getattr(v, "__cuda_array_interface__", None)
            if cai is not None:
                parts.append((t, cai["typestr"], cai["shape"], cai.get("strides"), cai.get("mask") is None,
                              cai.get("stream")))
            elif B.framework(v) == "numba":  # numba's simulator arrays have no __cuda_array_interface__
                parts.append((t, v.dtype, v.shape, v.strides))
            else:
                return None
    parts.append(stream)
    return tuple(parts)


@dataclass
class DeviceBinding:
    """A call bound on the device path: flat device arrays by buffer uid (workspaces are added by the launch),
    scalar and dimension values, per tensor its conversion info, the outputs, their framework and device."""

    dev: dict
    scalars: dict
    keep: dict
    outs: list
    kind: str
    device: object
    cuda: object


class CallPlan:
    """What a call with a stored key does: allocate the outputs, launch, return them (one bare, several as a list)."""

    __slots__ = ("inputs", "allocs", "launcher", "note", "fallback")

    def __init__(self, inputs: tuple, allocs: tuple, launcher, note: str = "", fallback=None):
        self.inputs = inputs  # indices of the tensor inputs in ``values``, in parameter order
        self.allocs = allocs  # per output: a function allocating it
        self.launcher = launcher
        self.note = note  # why the plan dispatches where a raw launcher was asked for ("" otherwise)
        self.fallback = fallback  # the dispatch launcher a raw launcher gives way to if its first launch fails

    def __call__(self, values):
        outs = [a() for a in self.allocs]
        objs = [values[i] for i in self.inputs] + outs
        try:
            self.launcher(objs)
        except RawLaunchRefused as e:  # nothing was launched: dispatch from now on, this call included
            self.launcher, self.note = self.fallback, f"raw launch failed: {e}"
            self.launcher(objs)
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else outs


class PlanCache:
    """``key -> CallPlan | False`` (refused) for one program; at most ``LIMIT`` keys."""

    LIMIT = 64

    def __init__(self):
        self.plans: dict = {}
        self.stats = {"hits": 0, "misses": 0, "built": 0, "refused": 0}

    def get(self, key):
        plan = self.plans.get(key)
        if plan:
            self.stats["hits"] += 1
            return plan
        self.stats["misses"] += 1
        return None

    def known(self, key) -> bool:
        return key in self.plans

    def store(self, key, plan) -> None:
        if len(self.plans) >= self.LIMIT:
            self.plans.clear()
        self.plans[key] = plan or False
        self.stats["built" if plan else "refused"] += 1


class DispatchLauncher:
    """Launch through numba's configured dispatchers; ``view(k, obj)`` is the flat device array of source ``k``."""

    def __init__(self, launches: list, view):
        self.launches = launches  # [(configured dispatcher, arg specs)]
        self.view = view

    def __call__(self, objs):
        flat = [self.view(k, o) for k, o in enumerate(objs)]
        for cfg, specs in self.launches:
            args = []
            for kind, a, b in specs:
                if kind == "src":
                    args.append(flat[a] if b is None else flat[a].view(b))
                else:
                    args.append(a)
            cfg(*args)


class RawLaunchRefused(Exception):
    """The first launch of a :class:`RawLauncher` failed before any kernel ran (caught by :class:`CallPlan`)."""


class RawLauncher:
    """Launch compiled overloads with argument lists prepared once; per call only the data pointers change."""

    def __init__(self, launch, stream, launches: list, ptr_fns: list, keep: list):
        self.launch = launch
        self.stream = stream
        self.launches = launches  # [(cuda.core kernel, LaunchConfig, argument template, ((slot, source), ...))]
        self.ptr_fns = ptr_fns  # per source: object -> device pointer
        self.keep = keep  # the plan's own device arrays (workspaces), whose pointers the templates hold
        self.proven = False  # a call has launched every kernel

    def __call__(self, objs):
        ptrs = [fn(o) for fn, o in zip(self.ptr_fns, objs)]
        launch, stream = self.launch, self.stream
        for i, (kernel, config, template, slots) in enumerate(self.launches):
            args = template.copy()
            for slot, k in slots:
                args[slot] = ptrs[k]
            if self.proven or i:
                launch(stream, config, kernel, *args)
                continue
            try:  # the first launch ever: an argument list cuda.core refuses is met before anything ran
                launch(stream, config, kernel, *args)
            except Exception as e:  # noqa: BLE001 - handed to CallPlan, which dispatches instead
                raise RawLaunchRefused(f"{type(e).__name__}: {e}") from e
        self.proven = True

    @classmethod
    def build(cls, launches: list, first_objs: list, ptr_fns: list, api):
        """From ``launches`` ``[(configured dispatcher, arg specs, the first call's argument values)]``; ``None``
        when an overload or a pointer slot is not what this launcher assumes (the caller then dispatches)."""
        launch, make_config = api
        first_ptrs = [fn(o) for fn, o in zip(ptr_fns, first_objs)]
        out, keep, stream = [], [], None
        for cfg, specs, args in launches:
            overloads = list(cfg.dispatcher.overloads.values())
            if len(overloads) != 1:
                return None
            ov = overloads[0]
            if ov.debug or getattr(ov, "cooperative", False) or ov.extensions or len(ov.argument_types) != len(args):
                return None
            template, retr, slots = [], [], []
            for ty, v, (kind, a, _) in zip(ov.argument_types, args, specs):
                start = len(template)
                ov._prepare_args(ty, v, cfg.stream, retr, template)
                if kind == "src":
                    slot = start + PTR_SLOT
                    if slot >= len(template) or template[slot] != first_ptrs[a]:
                        return None
                    slots.append((slot, a))
                elif kind == "fixed":
                    keep.append(v)
            if retr:
                return None
            stream = cfg.stream if stream is None else stream  # every launch is configured on stream 0
            kernel = ov._codelibrary.get_cufunc().kernel
            out.append((kernel, make_config(cfg.griddim, cfg.blockdim, cfg.sharedmem), template, tuple(slots)))
        return cls(launch, stream, out, ptr_fns, keep)


def torch_ptr(t) -> int:
    return t.data_ptr()


def cai_ptr(a) -> int:
    return a.__cuda_array_interface__["data"][0]


def plan_launches(prog, dev: dict, scalars: dict, src_of: dict):
    """``[(configured dispatcher, arg specs, argument values)]`` of ``prog``'s launches for a bound call.

    ``dev``: uid → flat device array after the full path's launches (its workspaces included); ``src_of``:
    root uid → source index of a tensor whose pointer changes per call. Arg specs: ``("src", k, view dtype or
    None)``, ``("fixed", array, None)`` (workspaces, stand-ins for empty tensors), ``("val", scalar, None)``."""
    scalars = dict(scalars)
    out = []
    for kind, x in prog.program.steps:
        if kind == "let":
            scalars[x.var.uid] = B.host_value(x.value, scalars)
        elif kind != "alloc":  # a launch (workspaces are in ``dev`` already)
            grid = tuple(int(B.host_value(g, scalars)) for g in x.launch.grid)
            if any(g <= 0 for g in grid):
                continue
            specs, args = [], []
            for k2, a in x.args:
                if k2 != "array":
                    v = scalar_value(scalars[a.uid], a.dtype)
                    specs.append(("val", v, None))
                    args.append(v)
                    continue
                arr = prog._array_arg(a, dev)
                root = a.alias_of or a
                if root.uid in src_of:
                    view = storage_dtype(a.dtype) if a.alias_of is not None and a.dtype != root.dtype else None
                    specs.append(("src", src_of[root.uid], view))
                else:
                    specs.append(("fixed", arr, None))
                args.append(arr)
            out.append((prog.dispatcher(x)[grid, x.threads, 0, x.dyn_smem], specs, args))
    return out


def build_plan(prog, pf: N.PrimFunc, out_idx: tuple, values: list, bound, view, raw: bool):
    """A :class:`CallPlan` for a call the full path has just run (``bound``: its binding), or ``None`` (refused).

    ``view(param, obj)``: the flat device array of a tensor (the full path's conversion); ``raw``: try a
    :class:`RawLauncher` (on a GPU; not under the simulator). Where numba-cuda's internals are not what the raw
    launcher reads (another version), the plan dispatches instead and ``plan.note`` says why."""
    if any(info.get("copy_back") is not None for info in bound.keep.values()):
        return None
    inputs = tuple(i for i, p in enumerate(pf.params) if i not in out_idx and isinstance(p, N.Buffer))
    torch = loaded("torch")
    params = [pf.params[i] for i in inputs] + [pf.params[i] for i in out_idx]
    objs = [values[i] for i in inputs] + list(bound.outs)
    ptr_fns, src_of = [], {}
    for k, (p, o) in enumerate(zip(params, objs)):
        is_torch = torch is not None and type(o) is torch.Tensor
        if is_torch and (o.device.type != "cuda" or torch_stream(torch, o) != 0):
            return None
        cai = None if is_torch else getattr(o, "__cuda_array_interface__", None)
        if cai is not None and cai.get("stream") not in (None, 1, 2):  # a CuPy array on another stream
            return None
        ptr_fns.append(torch_ptr if is_torch else cai_ptr)
        if int(np.prod(B.shape_of(o))) > 0:
            src_of[p.uid] = k  # an empty tensor's stand-in array stays fixed
    allocs = []
    for i in out_idx:
        p = pf.params[i]
        shape = B.output_shape(p, bound.scalars)
        if bound.kind == "numba":
            allocs.append(functools.partial(bound.cuda.device_array, shape, dtype=storage_dtype(p.dtype)))
        else:
            allocs.append(functools.partial(B.empty_like, bound.kind, shape, p.dtype, bound.device))
    launches = plan_launches(prog, bound.dev, bound.scalars, src_of)
    launcher, note = None, ""
    if raw:
        try:
            launcher = RawLauncher.build(launches, objs, ptr_fns, launch_api())
            note = "" if launcher else "raw launcher refused: an overload or a pointer slot is not as expected"
        except (ImportError, KernelError, AttributeError, TypeError, KeyError, IndexError, ValueError) as e:
            note = f"raw launcher unavailable: {type(e).__name__}: {e}"
    views = [functools.partial(view, p) for p in params]
    dispatch = DispatchLauncher([(cfg, specs) for cfg, specs, _ in launches], lambda k, o: views[k](o))
    return CallPlan(inputs, tuple(allocs), launcher or dispatch, note, fallback=dispatch)
