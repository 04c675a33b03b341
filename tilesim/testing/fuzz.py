"""A deterministic fuzzer of tilesim's user-facing surface: bad kernels and bad calls made by mutating good ones.

Contract
--------
* :func:`generate(n, seed)` returns ``n`` :class:`Case` objects, the same for the same arguments. Each
  starts from one of the valid kernels in :data:`BASES` (a lazy factory or an eager kernel, with its
  NumPy reference) and applies one mutation, of one of three families:

  - ``src:*`` — the kernel source is mutated through its AST (a dtype, shape, index, name, primitive,
    launch or reduction argument made wrong; the factory's ``return`` removed). Invalid by construction.
  - ``call:*`` — the kernel is built as written and called or built wrongly (wrong dtype, rank, shape,
    missing/extra/unknown argument, ``None``/list/string/complex where a tensor or scalar goes, a
    read-only output, a bad ``out_idx``, a bad factory argument). Invalid by construction.
  - ``ok:*`` — a legal variation (tile sizes that do not divide the shape, transposed or read-only
    inputs, a strided output written in place, serial mode). Must run and match the reference.

* :func:`run_case(case, timeout_s)` runs a case in this process and returns an :class:`Outcome`
  whose ``kind`` is one of

  - ``"rejected"``: a ``KernelError`` / ``HardwareModelError`` for an invalid case (the goal), or an
    exception Python itself raises in the kernel's own file (a ``NameError`` in a signature);
  - ``"ok"``: a valid case ran and matched its reference (the goal);
  - ``"silent"``: an invalid case ran without an error (a silent acceptance);
  - ``"wrong"``: a valid case ran and did not match, or was refused (a wrong answer / false rejection);
  - ``"internal"``: any other exception, ``InternalError`` included;
  - ``"hang"``: it ran past ``timeout_s`` (``SIGALRM``; main thread only).

  ``located`` says whether a rejection carries a source location (a ``Loc`` or, for a hardware
  file, a key).

Mutated sources are written to files in a temporary folder (the frontend reads kernel source through
``inspect``) and imported under unique module names; nothing outside that folder is touched.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import random
import signal
import sys
import tempfile
import textwrap
from dataclasses import dataclass, field

import numpy as np

from ..backends.interp import InterpOptions
from ..errors import HardwareModelError, KernelError
from ..jit import compile as compile_kernel
from ..optional import require

__all__ = ["BASES", "Case", "Outcome", "generate", "run_case", "summarise"]

HEADER = "import tilesim as tilelang\nimport tilesim.language as T\n\n"

#: name -> (source, inputs(rng, M, N, K) -> list, reference(*inputs) -> array)
BASES = {
    "scale": ('''
@tilelang.jit(out_idx=[-1])
def kernel(M, N, bm=16, bn=16):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), alpha: T.float32, B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            for i, j in T.Parallel(bm, bn):
                if by * bm + i < M and bx * bn + j < N:
                    B[by * bm + i, bx * bn + j] = A[by * bm + i, bx * bn + j] * alpha
    return main
''', lambda rng, m, n, k: [rng.standard_normal((m, n)).astype(np.float32), 1.5],
        lambda a, alpha: a * np.float32(alpha)),
    "tile": ('''
@tilelang.jit(out_idx=[-1])
def kernel(M, N, bm=16, bn=16):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bn), "float32")
            B_l = T.alloc_fragment((bm, bn), "float32")
            T.copy(A[by * bm, bx * bn], A_s)
            T.copy(A_s, B_l)
            for i, j in T.Parallel(bm, bn):
                B_l[i, j] = T.exp(B_l[i, j]) + 1.0
            T.copy(B_l, B[by * bm, bx * bn])
    return main
''', lambda rng, m, n, k: [rng.standard_normal((m, n)).astype(np.float32)],
        lambda a: np.exp(a) + 1),
    "gemm": ('''
@tilelang.jit(out_idx=[-1])
def kernel(M, N, K=24, bm=16, bn=16, bk=16):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])
    return main
''', lambda rng, m, n, k: [rng.standard_normal((m, k)).astype(np.float16),
                           rng.standard_normal((k, n)).astype(np.float16)],
        lambda a, b: a.astype(np.float32) @ b.astype(np.float32)),
    "rowsum": ('''
@tilelang.jit(out_idx=[-1])
def kernel(M, N, bm=8):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), S: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            A_l = T.alloc_fragment((bm, N), "float32")
            S_l = T.alloc_fragment((bm,), "float32")
            T.copy(A[bx * bm, 0], A_l)
            T.reduce_sum(A_l, S_l, dim=1)
            T.copy(S_l, S[bx * bm])
    return main
''', lambda rng, m, n, k: [rng.standard_normal((m, n)).astype(np.float32)],
        lambda a: a.sum(axis=1)),
    "eager": ('''
@tilelang.jit
def kernel(A, B):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), "float32")
    B: T.Tensor((M, N), "float32")
    C = T.empty((M, N), "float32")
    with T.Kernel(T.ceildiv(N, 16), T.ceildiv(M, 16), threads=128) as (bx, by):
        for i, j in T.Parallel(16, 16):
            C[by * 16 + i, bx * 16 + j] = A[by * 16 + i, bx * 16 + j] - B[by * 16 + i, bx * 16 + j]
    return C
''', lambda rng, m, n, k: [rng.standard_normal((m, n)).astype(np.float32),
                           rng.standard_normal((m, n)).astype(np.float32)],
        lambda a, b: a - b),
}

BAD_DTYPES = ["float17", "half2", "", "fp32x4", "intx"]


@dataclass
class Case:
    """One fuzz case: ``base`` kernel, ``mutation`` name, the (mutated) source and how to call it."""

    id: int
    base: str
    mutation: str
    source: str
    valid: bool
    shape: tuple  # (M, N, K)
    factory_kwargs: dict = field(default_factory=dict)
    call: str = "plain"  # how run_case calls the kernel (see _CALLS)
    detail: str = ""


@dataclass
class Outcome:
    case: Case
    kind: str
    message: str = ""
    located: bool = False


# ------------------------------------------------------------------------------------------ source mutations
def _kernel_body(tree: ast.Module):
    """The statements that make the kernel (the prim_func body, or the eager function's)."""
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
    inner = [n for n in fn.body if isinstance(n, ast.FunctionDef)]
    return fn, (inner[0] if inner else fn)


def _calls(node, name):
    return [c for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
            and c.func.attr == name and isinstance(c.func.value, ast.Name) and c.func.value.id == "T"]


def _m_dtype(tree, rng):
    _, body = _kernel_body(tree)
    sites = [c for name in ("alloc_shared", "alloc_fragment") for c in _calls(body, name)]
    if not sites:
        return None
    site = rng.choice(sites)
    bad = rng.choice(BAD_DTYPES + [None])
    site.args[1] = ast.Constant(bad)
    return f"alloc dtype {bad!r}"


def _m_alloc_extent(tree, rng):
    _, body = _kernel_body(tree)
    sites = [c for name in ("alloc_shared", "alloc_fragment") for c in _calls(body, name)]
    if not sites:
        return None
    site = rng.choice(sites)
    bad = rng.choice([0, -1, -16, 2.5, "16"])
    shape = site.args[0]
    elts = shape.elts if isinstance(shape, ast.Tuple) else [shape]
    elts[rng.randrange(len(elts))] = ast.Constant(bad)
    return f"alloc extent {bad!r}"


def _m_extra_index(tree, rng):
    _, body = _kernel_body(tree)
    sites = [s for s in ast.walk(body) if isinstance(s, ast.Subscript) and isinstance(s.value, ast.Name)
             and s.value.id[0].isupper() and isinstance(s.ctx, (ast.Load, ast.Store))]
    if not sites:
        return None
    site = rng.choice(sites)
    elts = list(site.slice.elts) if isinstance(site.slice, ast.Tuple) else [site.slice]
    site.slice = ast.Tuple(elts + [ast.Constant(0)], ast.Load())
    return f"extra index on {site.value.id}"


def _m_undefined_name(tree, rng):
    _, body = _kernel_body(tree)
    sites = [n for n in ast.walk(body) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id != "T"]
    if not sites:
        return None
    site = rng.choice(sites)
    old = site.id
    site.id = "undefined_" + old
    return f"undefined name for {old}"


def _m_unknown_primitive(tree, rng):
    _, body = _kernel_body(tree)
    sites = [c for c in ast.walk(body) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
             and isinstance(c.func.value, ast.Name) and c.func.value.id == "T"]
    site = rng.choice(sites)
    site.func.attr += "_x"
    return f"T.{site.func.attr}"


def _m_float_index(tree, rng):
    _, body = _kernel_body(tree)
    sites = [s for s in ast.walk(body) if isinstance(s, ast.Subscript) and isinstance(s.value, ast.Name)
             and s.value.id[0].isupper()]
    site = rng.choice(sites)
    elts = list(site.slice.elts) if isinstance(site.slice, ast.Tuple) else [site.slice]
    d = rng.randrange(len(elts))
    elts[d] = ast.BinOp(elts[d], ast.Mult(), ast.Constant(0.5))
    site.slice = ast.Tuple(elts, ast.Load()) if len(elts) > 1 else elts[0]
    return f"float index into {site.value.id}"


def _m_launch(tree, rng):
    _, body = _kernel_body(tree)
    site = _calls(body, "Kernel")[0]
    what = rng.choice(["threads", "grid"])
    if what == "threads":
        bad = rng.choice([0, -128, "x", 2.5, None])
        for kw in site.keywords:
            if kw.arg == "threads":
                kw.value = ast.Constant(bad)
        return f"threads={bad!r}"
    bad = rng.choice([0, -3, 1.5, "x"])
    site.args[rng.randrange(len(site.args))] = ast.Constant(bad)
    return f"grid extent {bad!r}"


def _m_string_operand(tree, rng):
    _, body = _kernel_body(tree)
    sites = [s for s in ast.walk(body) if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Subscript)]
    if not sites:
        return None
    site = rng.choice(sites)
    site.value = ast.BinOp(site.value, ast.Add(), ast.Constant(rng.choice(["abc", b"x", None])))
    return "non-numeric operand in a store"


def _m_reduce_dim(tree, rng):
    _, body = _kernel_body(tree)
    sites = _calls(body, "reduce_sum")
    if not sites:
        return None
    bad = rng.choice([2, 5, -3, "1", 1.0])
    for kw in sites[0].keywords:
        if kw.arg == "dim":
            kw.value = ast.Constant(bad)
    return f"reduce dim={bad!r}"


def _m_gemm_k(tree, rng):
    _, body = _kernel_body(tree)
    sites = _calls(body, "alloc_shared")
    if len(sites) < 2 or not _calls(body, "gemm"):
        return None
    site = sites[1]  # B_s (bk, bn): a K extent that differs from A_s's
    site.args[0].elts[0] = ast.BinOp(site.args[0].elts[0], ast.Mult(), ast.Constant(2))
    return "gemm K extents differ"


def _m_no_return(tree, rng):
    fn, body = _kernel_body(tree)
    holder = fn if body is not fn else fn
    rets = [s for s in holder.body if isinstance(s, ast.Return)]
    if not rets:
        return None
    holder.body.remove(rets[0])
    return "factory/eager kernel without return"


def _m_copy_in_parallel(tree, rng):
    _, body = _kernel_body(tree)
    loops = [s for s in ast.walk(body) if isinstance(s, ast.For) and _calls(s.iter, "Parallel")]
    copies = [s for s in ast.walk(body) if isinstance(s, ast.Expr) and _calls(s, "copy")]
    if not loops or not copies:
        return None
    loop = rng.choice(loops)
    loop.body.insert(0, copies[0])
    return "T.copy inside T.Parallel"


def _m_parallel_extent(tree, rng):
    _, body = _kernel_body(tree)
    sites = _calls(body, "Parallel")
    if not sites:
        return None
    site = rng.choice(sites)
    bad = rng.choice([0, -4, 2.5, "16", None])
    site.args[rng.randrange(len(site.args))] = ast.Constant(bad)
    return f"T.Parallel extent {bad!r}"


def _m_pipeline(tree, rng):
    _, body = _kernel_body(tree)
    sites = _calls(body, "Pipelined")
    if not sites:
        return None
    if rng.random() < 0.5:
        bad = rng.choice([-1, 2.5, "x", None])
        sites[0].keywords[0].value = ast.Constant(bad)
        return f"num_stages={bad!r}"
    bad = rng.choice([2.5, "x", None, -1.5])
    sites[0].args[0] = ast.Constant(bad)
    return f"T.Pipelined extent {bad!r}"


def _m_tensor_annotation(tree, rng):
    fn, body = _kernel_body(tree)
    calls = [c for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
             and c.func.attr == "Tensor"]
    site = rng.choice(calls)
    if rng.random() < 0.5:
        bad = rng.choice(BAD_DTYPES + [None, 3])
        site.args[1] = ast.Constant(bad)
        return f"T.Tensor dtype {bad!r}"
    bad = rng.choice([2.5, -1, "N", None, -16])  # 0 is left out: an empty dimension is legal
    shape = site.args[0]
    shape.elts[rng.randrange(len(shape.elts))] = ast.Constant(bad)
    return f"T.Tensor extent {bad!r}"


def _m_reduce_shape(tree, rng):
    _, body = _kernel_body(tree)
    if not _calls(body, "reduce_sum"):
        return None
    site = _calls(body, "alloc_fragment")[1]  # S_l (bm,): the reduction's destination
    site.args[0].elts[0] = ast.BinOp(site.args[0].elts[0], ast.Add(), ast.Constant(rng.choice([1, 3])))
    return "reduce destination extent differs"


def _m_onchip_oob(tree, rng):
    _, body = _kernel_body(tree)
    allocs = [s for s in ast.walk(body) if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call)
              and _calls(s.value, "alloc_fragment") + _calls(s.value, "alloc_shared")]
    if not allocs:
        return None
    site = rng.choice(allocs)
    name = site.targets[0].id
    extents = site.value.args[0].elts
    d = rng.randrange(len(extents))
    idx = [ast.Constant(0)] * len(extents)
    idx[d] = ast.BinOp(extents[d], ast.Add(), ast.Constant(rng.choice([0, 1, 5])))
    store = ast.Assign([ast.Subscript(ast.Name(name, ast.Load()), ast.Tuple(idx, ast.Load()) if len(idx) > 1
                                      else idx[0], ast.Store())], ast.Constant(1.0), lineno=0)
    launch = next(s for s in ast.walk(body) if isinstance(s, ast.With))
    launch.body.append(store)
    return f"store past the end of {name} (dim {d})"


def _m_const_names(tree, rng):
    _, body = _kernel_body(tree)
    sites = _calls(body, "const")
    if not sites:
        return None
    bad = rng.choice([42, "3", "M N N", "", None, "M-1"])
    sites[0].args[0] = ast.Constant(bad)
    return f"T.const({bad!r})"


SRC_MUTATIONS = {"dtype": _m_dtype, "alloc-extent": _m_alloc_extent, "extra-index": _m_extra_index,
                 "undefined-name": _m_undefined_name, "unknown-primitive": _m_unknown_primitive,
                 "float-index": _m_float_index, "launch": _m_launch, "string-operand": _m_string_operand,
                 "reduce-dim": _m_reduce_dim, "gemm-k": _m_gemm_k, "no-return": _m_no_return,
                 "copy-in-parallel": _m_copy_in_parallel, "parallel-extent": _m_parallel_extent,
                 "pipeline": _m_pipeline, "tensor-annotation": _m_tensor_annotation, "reduce-shape": _m_reduce_shape,
                 "onchip-oob": _m_onchip_oob, "const-names": _m_const_names}

#: call mutations (all invalid by construction) and legal variations
CALL_MUTATIONS = ["dtype", "rank", "shape", "missing", "extra", "none-tensor", "list-tensor", "unknown-kwarg",
                  "scalar-none", "scalar-str", "scalar-complex", "readonly-output", "out-idx", "factory-arg",
                  "float-tensor", "bad-options", "torch-dtype"]
VALID_MUTATIONS = ["odd-shape", "transposed-input", "readonly-input", "strided-output", "serial", "by-name", "torch"]
#: the mutations that call the kernel with torch tensors: generated only where torch is installed (optional)
TORCH_MUTATIONS = ("torch", "torch-dtype")


def torch_installed() -> bool:
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


# ------------------------------------------------------------------------------------------ generation
def generate(n: int, seed: int = 0) -> list:
    """``n`` cases, deterministic in ``seed`` (see the module docstring)."""
    rng = random.Random(seed)
    cases = []
    kinds = [("src", m) for m in SRC_MUTATIONS] + [("call", m) for m in CALL_MUTATIONS] + \
            [("ok", m) for m in VALID_MUTATIONS]
    kinds = [k for k in kinds if k[1] not in TORCH_MUTATIONS or torch_installed()]
    while len(cases) < n:
        family, mut = kinds[len(cases) % len(kinds)]
        base = rng.choice(sorted(BASES))
        src = textwrap.dedent(BASES[base][0])
        shape = (rng.randint(1, 70), rng.randint(1, 70), rng.randint(1, 40))
        case = Case(len(cases), base, f"{family}:{mut}", src, family == "ok", shape)
        if family == "src":
            tree = ast.parse(src)
            detail = SRC_MUTATIONS[mut](tree, rng)
            if detail is None:
                continue
            case.source, case.detail = ast.unparse(tree), detail
        elif family == "call":
            if mut.startswith("scalar") and base != "scale" or mut in ("out-idx", "factory-arg") and base == "eager":
                continue
            case.call = mut
            if mut == "factory-arg":
                key = rng.choice(["M", "N", "bm"])
                case.factory_kwargs = {key: rng.choice([0, -5, 2.5, "abc", None])}
                case.detail = f"{key}={case.factory_kwargs[key]!r}"
        else:
            if base == "eager" and mut in ("strided-output", "odd-shape"):
                continue
            case.call = mut
            if mut == "odd-shape":
                case.factory_kwargs = {"bm": rng.choice([8, 16, 32])} | ({"bn": rng.choice([8, 16, 32])}
                                                                         if base in ("scale", "tile", "gemm") else {})
        cases.append(case)
    return cases


# ------------------------------------------------------------------------------------------ running
class _Timeout(BaseException):
    pass


def _alarm(signum, frame):
    raise _Timeout()


_DIR: list = []


def _load(case: Case):
    if not _DIR:
        _DIR.append(tempfile.mkdtemp(prefix="tilesim_fuzz_"))
    path = os.path.join(_DIR[0], f"fuzz_case_{case.id}.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(HEADER + case.source)
    name = f"_tilesim_fuzz_{case.id}"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod.kernel


def _execute(case: Case):
    """Build and call the case's kernel; returns (outputs, reference) for valid cases."""
    _, make_inputs, reference = BASES[case.base]
    m, n, k = case.shape
    rng = np.random.default_rng(case.id)
    lazy = case.base != "eager"
    factory = _load(case)
    fk = dict(case.factory_kwargs)
    if case.base == "gemm" and "K" not in fk:
        fk["K"] = k
    if lazy:
        if case.call == "factory-arg":
            fk = {"M": m, "N": n, **fk}
            kernel = factory(**fk)
            kernel(*make_inputs(rng, *(v if isinstance(v, int) and v > 0 else 4 for v in (fk["M"], fk["N"])), k))
            return None
        kernel = factory(m, n, **fk)
    else:
        kernel = factory
    inputs = make_inputs(rng, m, n, k)
    want = reference(*inputs)
    call = case.call
    if call in ("plain", "odd-shape"):
        return kernel(*inputs), want
    if call == "serial":
        if lazy:
            return kernel.run(*inputs, options=InterpOptions(mode="serial")), want
        return kernel.specialize(*inputs)[0].run(*inputs, options=InterpOptions(mode="serial")), want
    if call == "transposed-input":
        ins = [np.ascontiguousarray(x.T).T if isinstance(x, np.ndarray) and x.ndim == 2 else x for x in inputs]
        return kernel(*ins), want
    if call == "readonly-input":
        for x in inputs:
            if isinstance(x, np.ndarray):
                x.flags.writeable = False
        return kernel(*inputs), want
    if call == "by-name":
        names = [p.name for p in (kernel.input_params if lazy else kernel.specialize(*inputs)[0].input_params)]
        return kernel(**dict(zip(names, inputs))), want
    if call == "torch":
        torch = require("torch", "the torch fuzz cases")
        got = kernel(*[torch.from_numpy(x) if isinstance(x, np.ndarray) else x for x in inputs])
        return got.numpy(), want
    if call == "strided-output":
        pf = kernel.prim_func
        out = pf.params[kernel.out_idx[0]]
        full = np.zeros(tuple(2 * d for d in want.shape), np.float32)
        view = full[tuple(slice(None, None, 2) for _ in want.shape)]
        args = list(inputs)
        args.insert(kernel.out_idx[0], view)
        compile_kernel(pf, out_idx=None)(*args)
        assert out.dtype == "float32"
        return view, want
    return _bad_call(case, kernel, inputs, lazy, rng)


def _bad_call(case, kernel, inputs, lazy, rng):
    call = case.call
    a = inputs[0]
    if call == "dtype":
        return kernel(a.astype(np.float64), *inputs[1:])
    if call == "rank":
        return kernel(a[None], *inputs[1:])
    if call == "shape":
        return kernel(np.zeros((a.shape[0] + 1,) + a.shape[1:], a.dtype), *inputs[1:])
    if call == "missing":
        return kernel(*inputs[:-1])
    if call == "extra":
        return kernel(*inputs, a)
    if call == "none-tensor":
        return kernel(None, *inputs[1:])
    if call == "list-tensor":
        return kernel(a.tolist(), *inputs[1:])
    if call == "unknown-kwarg":
        return kernel(*inputs, bogus=a)
    if call.startswith("scalar-"):
        bad = {"scalar-none": None, "scalar-str": "1.5", "scalar-complex": 1j}[call]
        return kernel(a, bad)
    if call == "readonly-output":
        if not lazy:
            kernel, inputs = kernel.specialize(*inputs)
        pf = kernel.prim_func
        out = pf.params[kernel.out_idx[0]]
        shape = tuple(d if isinstance(d, int) else a.shape[0] for d in out.shape)
        ro = np.zeros(shape, np.float32)
        ro.flags.writeable = False
        args = list(inputs)
        args.insert(kernel.out_idx[0], ro)
        return compile_kernel(pf)(*args)
    if call == "out-idx":
        bad = ["C", [7], 1.5, [None], {"x": 1}, True][int(rng.integers(6))]
        return compile_kernel(kernel.prim_func, out_idx=bad)
    if call == "float-tensor":
        return kernel(1.5, *inputs[1:])
    if call == "bad-options":
        bad = [{"mode": "serial"}, "serial", 3][int(rng.integers(3))]
        if not lazy:
            kernel, inputs = kernel.specialize(*inputs)
        return compile_kernel(kernel.prim_func, out_idx=list(kernel.out_idx), options=bad)
    if call == "torch-dtype":
        torch = require("torch", "the torch fuzz cases")
        return kernel(torch.from_numpy(a.astype(np.float64)), *inputs[1:])
    raise AssertionError(f"unknown call {call}")


def run_case(case: Case, timeout_s: float = 20.0) -> Outcome:
    """Run ``case``; see the module docstring for the outcome kinds."""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        res = _execute(case)
    except _Timeout:
        return Outcome(case, "hang", f"over {timeout_s} s")
    except (KernelError, HardwareModelError) as e:
        located = getattr(e, "loc", None) is not None or isinstance(e, HardwareModelError)
        if case.valid:
            return Outcome(case, "wrong", f"valid case refused: {type(e).__name__}: {e.message}", located)
        return Outcome(case, "rejected", f"{type(e).__name__}: {getattr(e, 'message', str(e))}", located)
    except Exception as e:  # noqa: BLE001 - what the fuzzer looks for: anything that is not a user error
        tb = e.__traceback__
        while tb.tb_next is not None:
            tb = tb.tb_next
        if os.path.basename(tb.tb_frame.f_code.co_filename) == f"fuzz_case_{case.id}.py" and not case.valid:
            # Python itself refused the user's code (a NameError in an annotation), at the user's line
            return Outcome(case, "rejected", f"{type(e).__name__} (Python, in the kernel file): {e}", True)
        return Outcome(case, "internal", f"{type(e).__name__}: {str(e)[:300]}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        sys.modules.pop(f"_tilesim_fuzz_{case.id}", None)
    if not case.valid:
        return Outcome(case, "silent", "an invalid case ran without an error")
    got, want = res
    got = np.asarray(got, dtype=np.float64)
    tol = 2e-2 if case.base == "gemm" else 1e-5
    if got.shape != want.shape or not np.allclose(got, want, rtol=tol, atol=tol):
        return Outcome(case, "wrong", "output differs from the NumPy reference")
    return Outcome(case, "ok")


def summarise(outcomes: list) -> dict:
    """Counts per outcome kind and per mutation, and the cases that are not ``rejected``/``ok``."""
    kinds = ("rejected", "ok", "silent", "wrong", "internal", "hang")
    out = {"cases": len(outcomes), **{k: sum(o.kind == k for o in outcomes) for k in kinds}}
    out["rejected_with_location"] = sum(o.kind == "rejected" and o.located for o in outcomes)
    per: dict = {}
    for o in outcomes:
        per.setdefault(o.case.mutation, dict.fromkeys(kinds, 0))[o.kind] += 1
    out["per_mutation"] = per
    out["failures"] = [{"id": o.case.id, "base": o.case.base, "mutation": o.case.mutation, "detail": o.case.detail,
                        "shape": o.case.shape, "kind": o.kind, "message": o.message}
                       for o in outcomes if o.kind not in ("rejected", "ok")]
    return out
