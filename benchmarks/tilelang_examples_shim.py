"""tilelang_examples harness shim: map torch CUDA device requests to the CPU; report tilesim's kernel time."""
import atexit
import contextlib
import os
import sys
import time
import types


def _report_kernel_time():
    kernel = sys.modules.get("tilesim.kernel")
    if kernel is not None:
        st = kernel.RUN_STATS
        print(f"tilesim-kernel-time: {st['seconds']:.3f} s in {st['calls']} calls", file=sys.stderr)


atexit.register(_report_kernel_time)
try:
    import torch
    from torch.overrides import TorchFunctionMode
except Exception:  # no torch: nothing to shim
    torch = None

if torch is not None:
    def _cpu(v):
        cuda = (isinstance(v, str) and v.startswith("cuda")) or (isinstance(v, torch.device) and v.type == "cuda")
        return "cpu" if cuda else v

    class _CudaToCpu(TorchFunctionMode):
        """Every torch call: device 'cuda'/'cuda:N'/torch.device('cuda') -> 'cpu'; .cuda()/.pin_memory() -> self."""
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func is torch.Tensor.cuda or func is torch.Tensor.pin_memory:
                return args[0]
            if (func in _DIVS and len(args) == 2 and isinstance(args[1], (int, float)) and not kwargs
                    and isinstance(args[0], torch.Tensor) and args[0].is_floating_point()):
                # CUDA torch divides by a Python number as a multiplication by its reciprocal (in float32
                # for float32 and narrower types; seen on the H200, 2026-12-01): references give GPU bits
                a = args[0]
                op = torch.float64 if a.dtype == torch.float64 else torch.float32
                return (a.to(op) * (torch.ones((), dtype=op) / float(args[1]))).to(a.dtype)
            kwargs = {k: _cpu(v) for k, v in (kwargs or {}).items()}
            kwargs.pop("pin_memory", None)
            return func(*(_cpu(a) for a in args), **kwargs)

    _DIVS = {torch.Tensor.__truediv__, torch.Tensor.div, torch.Tensor.true_divide, torch.div, torch.true_divide}
    _CudaToCpu().__enter__()   # bottom of the mode stack: also sees `with torch.device("cuda")`

    class Generator(torch.Generator):
        def __new__(cls, device="cpu"):
            return torch._C.Generator.__new__(cls, _cpu(device))
        def __init__(self, *args, **kwargs):
            pass
    torch.Generator = Generator

    class Event:
        def __init__(self, *args, **kwargs): self.t = time.perf_counter()
        def record(self, stream=None): self.t = time.perf_counter()
        def elapsed_time(self, end): return (end.t - self.t) * 1e3
        def synchronize(self): pass
        def wait(self, stream=None): pass
        def query(self): return True

    class Stream(contextlib.nullcontext):
        cuda_stream = 0
        def __init__(self, *args, **kwargs): super().__init__()
        def synchronize(self): pass
        def wait_stream(self, other): pass
        def wait_event(self, event): pass
        def record_event(self, event=None): return event or Event()
        def query(self): return True

    def _noop():  # a new function per attribute: torch._dynamo rejects one object under two names
        return lambda *args, **kwargs: None
    def _seed():  # torch.manual_seed calls back into torch.cuda.manual_seed_all
        return lambda seed: torch.default_generator.manual_seed(int(seed))
    _cc = tuple(int(v) for v in os.environ.get("TILESIM_SHIM_CAPABILITY", "9.0").split("."))
    _props = types.SimpleNamespace(name=f"tilesim CPU shim (sm_{_cc[0]}{_cc[1]})", major=_cc[0], minor=_cc[1],
                                   multi_processor_count=132,
                                   total_memory=80 << 30, L2_cache_size=50 << 20, max_threads_per_multi_processor=2048,
                                   regs_per_multiprocessor=65536, warp_size=32)
    _stream = Stream()
    for _name, _value in dict(
            is_available=lambda: True, device_count=lambda: 1, current_device=lambda: 0, set_device=_noop(), init=_noop(),
            synchronize=_noop(), empty_cache=_noop(), manual_seed=_seed(), manual_seed_all=_seed(),
            get_device_capability=lambda d=None: _cc,
            get_device_name=lambda d=None: _props.name, get_device_properties=lambda d=None: _props, Event=Event,
            Stream=Stream, current_stream=lambda d=None: _stream, default_stream=lambda d=None: _stream,
            stream=lambda s=None: contextlib.nullcontext(), device=lambda d=None: contextlib.nullcontext(),
            memory_allocated=lambda d=None: 0, max_memory_allocated=lambda d=None: 0,
            reset_peak_memory_stats=_noop(), is_current_stream_capturing=lambda: False,
            get_rng_state=lambda device=None: torch.get_rng_state(),
            set_rng_state=lambda state, device=None: torch.set_rng_state(state)).items():
        setattr(torch.cuda, _name, _value)
    for _name in ("get_rng_state", "set_rng_state"):  # torch.random.fork_rng(devices=...) asks the device module
        if not hasattr(torch.cpu, _name):
            setattr(torch.cpu, _name, getattr(torch.cuda, _name))
    class _Profile(torch.profiler.profile):
        """torch.profiler with CUDA activity: the CPU activity (where the shim runs the CUDA work)."""
        def __init__(self, *args, activities=None, **kwargs):
            if activities is not None:
                cpu, cuda = torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA
                activities = list(dict.fromkeys(cpu if a == cuda else a for a in activities))
            super().__init__(*args, activities=activities, **kwargs)
    torch.profiler.profile = _Profile
    for _mod, _names in (("profiler", ("start", "stop")), ("nvtx", ("range_push", "range_pop", "range_start",
                                                                     "range_end", "mark"))):
        for _name in _names:
            setattr(getattr(torch.cuda, _mod), _name, _noop())

# Triton under TRITON_INTERPRET=1 runs kernels on the CPU, with gaps against the GPU the programs' references
# were written for, closed here once the Triton module concerned is imported (lazily: programs that never import
# triton pay nothing):
# * driver discovery picks the CUDA driver (the shim says CUDA is available), whose first use compiles a C module
#   against libcuda: a CPU driver becomes the active one instead, the sm_90 device the torch shim describes, for
#   autotune, triton.testing.do_bench and device queries. It launches nothing (the interpreter runs the kernels).
# * the interpreter holds bfloat16 values as their uint16 bit patterns and does arithmetic, dots and compares on
#   those integers (a silently wrong result), lacks bf16 constants, and truncates fp32 -> bf16 where the GPU rounds
#   to nearest even: bf16 values are held as ml_dtypes.bfloat16 instead (the same bits in memory), whose numpy
#   arithmetic rounds every result to bf16 as the GPU's bf16 instructions do, and every cast is numpy's (RTNE).
# * the interpreter's tensor.__index__ (a scalar used as a range bound) is int() of a 1-element array, an error
#   since NumPy 2.3: it takes the element (.item()). The variable of a `for` over range/tl.range is a tensor
#   when compiled (only tl.static_range's is a constexpr) and the interpreter's a Python int, so `i.to(tl.int64)`
#   fails: each such loop body starts by making it a tensor, as the interpreter already does for assignments.
#   A builtin bound to a global name (`exp = tl.exp`) is called by the compiler with its semantic but left
#   unpatched by the interpreter (which patches the tl modules only): such globals are patched too.
# * triton.language.extra.libdevice holds stubs the compiler maps to CUDA's libdevice, which the interpreter
#   never does (a call returns None): the float functions the programs use get numpy bodies (fp32/fp64 operands,
#   as libdevice's signatures); any other stub raises NotImplementedError naming itself.
# * autotune times the interpreter, not a GPU, so its pick among configs is arbitrary either way (every config
#   computes the same result: autotune's contract): each config runs once (not ~8 times), and configs differing
#   only in launch settings (num_warps, num_stages, ...: the interpreter ignores them) are tried once.
import ast
import importlib.abc
import importlib.util
import os


def _install_cpu_driver(driver_module):
    from triton.backends.compiler import GPUTarget
    from triton.backends.driver import DriverBase

    props = dict(max_shared_mem=232448, max_num_regs=65536, multiprocessor_count=132, warpSize=32,
                 sm_clock_rate=1980000, mem_clock_rate=2619000, mem_bus_width=5120)  # an H100/H200 (kHz, bits)

    class CpuDriver(DriverBase):
        is_active = staticmethod(lambda: False)   # never found by discovery; installed below
        utils = types.SimpleNamespace(get_device_properties=lambda device=0: dict(props),
                                      set_printf_fifo_size=lambda size: None)
        get_current_device = staticmethod(lambda: 0)
        set_current_device = staticmethod(lambda device: None)
        get_current_stream = staticmethod(lambda device=None: 0)
        get_device_capability = staticmethod(lambda device=None: (9, 0))
        def get_current_target(self): return GPUTarget("cuda", 90, 32)
        def get_active_torch_device(self): return torch.device("cpu")
        def get_device_interface(self): return torch.cuda   # the shimmed module: Event, synchronize
        def map_python_to_cpp_type(self, ty): return ty
        def get_benchmarker(self):   # autotune: one timed run per config (see _autotuner below)
            def bench(kernel_call, quantiles=None, **kwargs):
                start = time.perf_counter()
                kernel_call()
                ms = (time.perf_counter() - start) * 1e3
                return [ms] * len(quantiles) if quantiles else ms
            return bench
        def get_empty_cache_for_benchmark(self): return torch.empty(0)  # no L2 to flush
        def clear_cache(self, cache): pass

    cpu = CpuDriver()
    driver_module.driver._default = cpu
    driver_module.driver.set_active(cpu)


def _interpreter(interp):
    import ml_dtypes
    import numpy as np
    tl, handle, np_dtype = interp.tl, interp.TensorHandle, interp._get_np_dtype
    bf16 = np.dtype(ml_dtypes.bfloat16)

    def get_np_dtype(tt):
        element = tt.element_ty if isinstance(tt, tl.block_type) else tt
        return bf16 if element == tl.bfloat16 else np_dtype(tt)

    interp._get_np_dtype = get_np_dtype
    interp.InterpreterBuilder.get_bf16 = lambda self, value: handle(np.array([value], dtype=bf16), tl.bfloat16)
    interp.InterpreterBuilder.cast_impl = lambda self, src, ty: handle(src.data.astype(get_np_dtype(ty)), ty.scalar)
    patch_tensor = interp._patch_lang_tensor

    def patch_lang_tensor(tensor, scope):
        patch_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.item()))
    interp._patch_lang_tensor = patch_lang_tensor

    def visit_for(self, node):
        self.generic_visit(node)
        call = node.iter.func if isinstance(node.iter, ast.Call) else None
        if (isinstance(node.target, ast.Name) and (isinstance(call, ast.Name) and call.id == "range"
                                                   or isinstance(call, ast.Attribute) and call.attr == "range")):
            as_tensor = ast.Attribute(ast.Name("interpreter_semantic", ast.Load()), "to_tensor", ast.Load())
            node.body.insert(0, ast.Assign([ast.Name(node.target.id, ast.Store())],
                                           ast.Call(as_tensor, [ast.Name(node.target.id, ast.Load()),
                                                                ast.Constant(False)], [])))
        return node
    interp.ASTTransformer.visit_For = visit_for

    class Globals:   # a kernel's globals dict seen as attributes, for the interpreter's patch scope
        def __init__(self, names): object.__setattr__(self, "names", names)
        def __getattr__(self, name): return self.names[name]
        def __setattr__(self, name, value): self.names[name] = value

    patch_lang = interp._patch_lang

    def patch_lang_globals(fn):
        scope = patch_lang(fn)
        names = Globals(fn.__globals__)
        for name, value in list(fn.__globals__.items()):
            if tl.core.is_builtin(value):
                interp._patch_attr(names, name, value, interp.interpreter_builder, scope)
        return scope
    interp._patch_lang = patch_lang_globals


def _libdevice(module):
    import numpy as np
    half_away = lambda x: np.copysign(np.floor(np.abs(x) + 0.5), x)   # C roundf
    bodies = dict(exp=np.exp, fast_expf=np.exp, exp2=np.exp2, log=np.log, fast_logf=np.log, log2=np.log2,
                  fast_log2f=np.log2, log1p=np.log1p, tanh=np.tanh, fast_tanhf=np.tanh, sin=np.sin, fast_sinf=np.sin,
                  cos=np.cos, fast_cosf=np.cos, sqrt=np.sqrt, round=half_away, floor=np.floor, ceil=np.ceil)

    def elementwise(name, body):
        def run(arg0, _semantic=None):
            import triton.language as tl
            from triton.runtime.interpreter import TensorHandle, interpreter_semantic
            x = interpreter_semantic.to_tensor(arg0)
            if x.dtype not in (tl.float32, tl.float64):
                raise TypeError(f"libdevice.{name}: operand of type {x.dtype}; libdevice takes fp32 or fp64")
            with np.errstate(all="ignore"):
                data = body(x.handle.data).astype(x.handle.data.dtype)
            return tl.tensor(TensorHandle(data, x.dtype), x.type)
        return run

    def missing(name):
        def run(*args, **kwargs):
            raise NotImplementedError(f"libdevice.{name} has no CPU body in the tilelang_examples harness shim")
        return run

    for name, stub in list(vars(module).items()):
        if callable(stub) and getattr(stub, "__module__", "") == module.__name__:
            fn = elementwise(name, bodies[name]) if name in bodies else missing(name)
            fn.__module__, fn.__name__ = module.__name__, name   # jit's dependency scan skips this module's stubs
            setattr(module, name, fn)


def _autotuner(module):
    prune = module.Autotuner.prune_configs

    def prune_configs(self, kwargs):
        seen, kept = set(), []
        for config in prune(self, kwargs):
            key = (tuple(sorted(config.kwargs.items())), config.pre_hook)
            if key not in seen:
                seen.add(key)
                kept.append(config)
        return kept
    module.Autotuner.prune_configs = prune_configs


_TRITON_PATCHES = {"triton.runtime.autotuner": _autotuner, "triton.runtime.driver": _install_cpu_driver,
                   "triton.runtime.interpreter": _interpreter, "triton.language.extra.libdevice": _libdevice}


class _TritonHook(importlib.abc.MetaPathFinder):
    """Runs _TRITON_PATCHES[name](module) right after the module executes; leaves sys.meta_path when all ran."""
    def find_spec(self, name, path=None, target=None):
        patch = _TRITON_PATCHES.pop(name, None)
        if patch is None:
            return None
        if not _TRITON_PATCHES:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module
        def exec_module(module):
            run(module)
            patch(module)
        spec.loader.exec_module = exec_module
        return spec


if torch is not None and os.environ.get("TRITON_INTERPRET") == "1" and importlib.util.find_spec("triton"):
    sys.meta_path.insert(0, _TritonHook())
