"""The test-kernel registry: every kernel of ``tests/core_kernels.py`` registered once with what checking
it needs, on every executor (``tests/executors.py``).

Contract
--------
A :class:`TestKernel` holds, for one kernel configuration (one name):

* ``build(p) -> JITKernel`` and ``inputs(rng, p) -> tuple`` (NumPy arrays in call order, fresh random
  data) for a parameter dict ``p`` (shapes, tiles, dtype);
* ``reference(p, *inputs)`` — the NumPy result(s), in float64 where the math calls for it, one per
  output: the returned outputs first, then the inputs the kernel writes in place (``inplace``);
* ``tol(p) -> dict`` — ``rtol``/``atol`` (or ``exact=True``) for ``tilesim.testing.compare_arrays``
  against the reference; ``serial_tol`` the same for the serial interpreter against the batched one;
* ``shapes`` — a Hypothesis strategy of ``p`` with shapes the tiles do not divide (the interpreter
  executors), drawn ``examples`` times;
* ``toy`` — fixed ``p`` for the CUDA simulator (fp32/fp16 only, small), ``None`` if not run there;
  ``gpu`` — fixed ``p`` for a real GPU (also the size compiled for sm_90); ``ptx`` — whether
  ``tests/backends/test_compile_ptx.py`` compiles it;
* ``eager`` — the factory is an eager ``T.const`` kernel: the batched interpreter also calls it as
  ``factory(*inputs)``.

The executors a kernel runs on are derived (:attr:`TestKernel.executors`); so are the name lists the
CUDA checks use (:func:`names`, :func:`cuda_cases`). Kernel sources stay in ``tests/core_kernels.py``,
which must stay a standalone TileLang-style module (``benchmarks/tilelang_h200.py`` text-shims it for
real TileLang). ``benchmarks/gpu_run.py`` imports :func:`cuda_cases` from here.

Adding a kernel: write it in ``tests/core_kernels.py`` (as TileLang users write it) and add one
``register(TestKernel(...))`` below; every executor's test is generated from the entry.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from hypothesis import strategies as st

from tests import core_kernels as K
from tests import simt_kernels as SK
from tilesim.testing.strategies import dim, gemm_case, random_array

#: every executor of the suite, in test-id order
EXECUTORS = ("interp-batched", "interp-serial", "cpu", "cudasim", "gpu")


@dataclass(frozen=True)
class TestKernel:
    __test__ = False  # not a pytest class

    name: str
    build: Callable  # p -> JITKernel
    inputs: Callable  # (rng, p) -> tuple of arrays
    reference: Callable  # (p, *inputs) -> array or tuple of arrays
    tol: Callable  # p -> {"rtol":, "atol":} or {"exact": True}
    shapes: st.SearchStrategy  # Hypothesis: p for the interpreter executors
    examples: int
    toy: dict | None = None
    gpu: dict | None = None
    ptx: bool = False
    inplace: tuple = ()
    serial_tol: dict = field(default_factory=lambda: {"rtol": 1e-6, "atol": 1e-6})
    eager: Callable | None = None  # *inputs -> output(s), the eager-call path of a T.const factory

    @property
    def executors(self) -> tuple:
        """The executors this kernel runs on (the CUDA ones only where it has a size for them)."""
        out = ["interp-batched", "interp-serial"]
        if self.toy is not None or self.gpu is not None:
            out.append("cpu")
        if self.toy is not None:
            out.append("cudasim")
        if self.gpu is not None:
            out.append("gpu")
        return tuple(out)

    def sizes(self, executor: str) -> dict | None:
        """Fixed parameters for a CUDA executor (``None`` for the interpreter: shapes are drawn)."""
        return {"cudasim": self.toy, "gpu": self.gpu, "cpu": self.toy or self.gpu}.get(executor)

    def seed(self) -> int:
        """The fixed input seed of the CUDA-simulator run (stable across processes)."""
        return zlib.crc32(self.name.encode())


REGISTRY: dict[str, TestKernel] = {}


def register(k: TestKernel) -> TestKernel:
    if k.name in REGISTRY:
        raise ValueError(f"test kernel {k.name!r} is registered twice")
    REGISTRY[k.name] = k
    return k


def names(executor: str | None = None) -> list[str]:
    """Registered names, in registration order (those ``executor`` runs, if given)."""
    return [n for n, k in REGISTRY.items() if executor is None or executor in k.executors]


def cuda_cases(size: str = "toy") -> list:
    """``tilesim.backends.cuda.check.Case`` objects (CUDA vs interpreter) at ``toy`` or ``gpu`` sizes."""
    from tilesim.backends.cuda.check import Case

    out = []
    for k in REGISTRY.values():
        p = k.toy if size == "toy" else k.gpu
        if p is not None:
            out.append(Case(k.name, k.build(p), (lambda rng, k=k, p=p: k.inputs(rng, p)), inplace=k.inplace))
    return out


# ------------------------------------------------------------------------------------------ helpers
def f64(x):
    return x.astype(np.float64)


def _kw(p, *keys):
    return {k: p[k] for k in keys if k in p}


SEEDS = st.integers(0, 2**31 - 1)
GEMM_TOL = {"float32": 1e-4, "float16": 1e-3, "bfloat16": 1e-3, "float8_e4m3fn": 1e-3}


def _gemm_tol(p):
    t = GEMM_TOL[p["dtype"]]
    return {"rtol": t, "atol": t * np.sqrt(p["K"])}


# ------------------------------------------------------------------------------------------ GEMMs
@st.composite
def _relu_shapes(draw):
    M, N, Kd, bm, bn, bk, dtype = draw(gemm_case())
    return dict(M=M, N=N, K=Kd, block_M=bm, block_N=bn, block_K=bk, dtype=dtype)


register(TestKernel(
    "matmul_relu",
    build=lambda p: K.matmul_relu(**p),
    inputs=lambda rng, p: (random_array(rng, (p["M"], p["K"]), p["dtype"]),
                           random_array(rng, (p["K"], p["N"]), p["dtype"])),
    reference=lambda p, a, b: np.maximum(f64(a) @ f64(b), 0),
    tol=_gemm_tol, shapes=_relu_shapes(), examples=8,
    toy=dict(M=40, N=36, K=20, block_M=32, block_N=32, block_K=16, threads=64, dtype="float16"),
    gpu=dict(M=1000, N=777, K=515, dtype="float16"), ptx=True))


def _dynamic(ta, tb):
    tiles = ("block_M", "block_N", "block_K", "dtype", "threads")

    @st.composite
    def shapes(draw):
        return dict(dtype=draw(st.sampled_from(["float16", "bfloat16", "float32"])), M=draw(dim(32, 2)),
                    N=draw(dim(32, 2)), K=draw(dim(16, 3)), block_M=32, block_N=32, block_K=16)

    def inputs(rng, p):
        M, N, Kd, t = p["M"], p["N"], p["K"], p["dtype"]
        return random_array(rng, (Kd, M) if ta else (M, Kd), t), random_array(rng, (N, Kd) if tb else (Kd, N), t)

    def reference(p, a, b):
        return (f64(a).T if ta else f64(a)) @ (f64(b).T if tb else f64(b))

    register(TestKernel(
        f"matmul_dynamic_{'T' if ta else 'N'}{'T' if tb else 'N'}",
        build=lambda p: K.matmul_dynamic(trans_A=ta, trans_B=tb, **_kw(p, *tiles)),
        inputs=inputs, reference=reference, tol=_gemm_tol, shapes=shapes(), examples=2,
        toy=dict(M=20, N=18, K=13, block_M=16, block_N=16, block_K=8, threads=32, dtype="float16"),
        gpu=dict(M=1001, N=517, K=263, dtype="float16"), ptx=ta == tb))


for _ta in (False, True):
    for _tb in (False, True):
        _dynamic(_ta, _tb)


@st.composite
def _splitk_shapes(draw):
    return dict(M=draw(dim(32, 2)), N=draw(dim(32, 2)), K=draw(dim(16, 6)), split_k=draw(st.integers(1, 4)),
                block_M=32, block_N=32, block_K=16)


register(TestKernel(
    "matmul_splitk",
    build=lambda p: K.matmul_splitk(**p),
    inputs=lambda rng, p: (random_array(rng, (p["M"], p["K"]), "float16"),
                           random_array(rng, (p["K"], p["N"]), "float16"), np.zeros((p["M"], p["N"]), np.float32)),
    reference=lambda p, a, b, c: f64(a) @ f64(b),
    tol=lambda p: {"rtol": 1e-4, "atol": 1e-4 * np.sqrt(p["K"])}, shapes=_splitk_shapes(), examples=6,
    toy=dict(M=20, N=18, K=40, block_M=16, block_N=16, block_K=8, split_k=2),
    gpu=dict(M=333, N=290, K=1000), ptx=True, inplace=(2,),
    serial_tol={"rtol": 1e-6, "atol": 1e-5}))  # atomics: another summation order

# ------------------------------------------------------------------------------------------ elementwise
register(TestKernel(
    "elementwise_add",
    build=lambda p: K.elementwise_add.compile(**p),
    inputs=lambda rng, p: (random_array(rng, (p["M"], p["N"]), "float32"),
                           random_array(rng, (p["M"], p["N"]), "float32")),
    reference=lambda p, a, b: a + b,
    tol=lambda p: {"exact": True},
    shapes=st.fixed_dictionaries({"M": st.integers(1, 40), "N": st.integers(1, 70)}), examples=6,
    toy=dict(M=7, N=45, block=64, threads=32), gpu=dict(M=1000, N=999), ptx=True,
    serial_tol={"exact": True}, eager=K.elementwise_add))

# ------------------------------------------------------------------------------------------ row kernels


def softmax_ref(p, x):
    x = f64(x)
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def rms_norm_ref(p, x, w):
    return f64(x) / np.sqrt((f64(x) ** 2).mean(1, keepdims=True) + 1e-6) * f64(w)


def _rows(name, factory, ref, tol, shapes, examples, toy, gpu, ptx, with_w):
    def inputs(rng, p):
        M, N = p["M"], p["N"]
        if with_w:
            return random_array(rng, (M, N), "float32"), random_array(rng, (N,), "float32")
        return (random_array(rng, (M, N), "float32", scale=3.0),)

    register(TestKernel(name, build=lambda p: factory(**p), inputs=inputs, reference=ref, tol=lambda p: tol,
                        shapes=shapes, examples=examples, toy=toy, gpu=gpu, ptx=ptx))


_rows("softmax", K.softmax, softmax_ref, {"rtol": 1e-5, "atol": 1e-6},
      st.fixed_dictionaries({"M": dim(8, 3), "N": st.integers(1, 150)}), 6,
      toy=dict(M=10, N=37, block_M=4, threads=32), gpu=dict(M=1000, N=777), ptx=True, with_w=False)
_rows("rms_norm", K.rms_norm, rms_norm_ref, {"rtol": 1e-5, "atol": 1e-5},
      st.fixed_dictionaries({"M": dim(4, 3), "N": st.integers(1, 130)}), 6,
      toy=dict(M=6, N=37, block_M=4), gpu=dict(M=1001, N=515), ptx=True, with_w=True)
# rows long enough for vector (4-wide) global accesses on CUDA, with a ragged edge
_rows("rms_norm_vec", K.rms_norm, rms_norm_ref, {"rtol": 1e-5, "atol": 1e-5},
      st.fixed_dictionaries({"M": dim(2, 3), "N": st.just(256), "block_M": st.just(2)}), 2,
      toy=dict(M=5, N=256, block_M=2), gpu=dict(M=999, N=4096, block_M=2), ptx=False, with_w=True)
# the row softmax written the obvious way (issue 14's memory-bound yardstick), and its 1/sum variant
_rows("softmax_plain", K.softmax_plain, softmax_ref, {"rtol": 1e-5, "atol": 1e-6},
      st.fixed_dictionaries({"M": dim(4, 3), "N": st.integers(1, 150), "recip": st.booleans()}), 6,
      toy=dict(M=10, N=37, block_M=4, threads=32), gpu=dict(M=1001, N=1024), ptx=True, with_w=False)
_rows("softmax_vec", K.softmax, softmax_ref, {"rtol": 1e-5, "atol": 1e-6},
      st.fixed_dictionaries({"M": dim(2, 3), "N": st.just(256), "block_M": st.just(2), "threads": st.just(32)}), 2,
      toy=dict(M=5, N=256, block_M=2, threads=32), gpu=dict(M=999, N=4096, block_M=2, threads=128), ptx=False,
      with_w=False)

# ------------------------------------------------------------------------------------------ attention


def attention_ref(q, k, v, causal):
    q, k, v = f64(q), f64(k), f64(v)
    s = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
    if causal:
        n = q.shape[1]
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhqk,bkhd->bqhd", p / p.sum(-1, keepdims=True), v)


def _attention(causal):
    dims = ("batch", "heads", "seq_len", "dim")
    shapes = st.fixed_dictionaries({
        "batch": st.integers(1, 2), "heads": st.integers(1, 3), "seq_len": dim(32, 3),
        "dim": st.sampled_from([16, 32]), "dtype": st.sampled_from(["float16", "bfloat16"]),
        "block_M": st.just(32), "block_N": st.just(32)})

    def inputs(rng, p):
        shape = (p["batch"], p["seq_len"], p["heads"], p["dim"])
        return tuple(random_array(rng, shape, p.get("dtype", "float16")) for _ in range(3))

    def tol(p):
        t = 2e-3 if p.get("dtype", "float16") == "float16" else 2e-2
        return {"rtol": t, "atol": t}

    register(TestKernel(
        f"flash_attention_{'causal' if causal else 'full'}",
        build=lambda p: K.flash_attention(*(p[d] for d in dims), is_causal=causal,
                                          **{k: v for k, v in p.items() if k not in dims}),
        inputs=inputs, reference=lambda p, q, k, v: attention_ref(q, k, v, causal), tol=tol, shapes=shapes,
        examples=3, toy=dict(batch=1, heads=2, seq_len=40, dim=16, block_M=16, block_N=16, threads=32),
        gpu=dict(batch=2, heads=3, seq_len=300, dim=64), ptx=True))


_attention(True)
_attention(False)


# ------------------------------------------------------------------------------------------ per-thread (SIMT)
@st.composite
def _scan_shapes(draw):
    t = draw(st.sampled_from([32, 64, 128]))
    return dict(M=draw(st.integers(1, 5)), N=draw(st.integers(1, t)), threads=t)


register(TestKernel(
    "simt_block_scan",
    build=lambda p: SK.block_scan(**p),
    inputs=lambda rng, p: (rng.integers(-1000, 1000, (p["M"], p["N"])).astype(np.int32),),
    reference=lambda p, a: np.cumsum(a.astype(np.int64), axis=1),
    tol=lambda p: {"exact": True}, shapes=_scan_shapes(), examples=4,
    toy=dict(M=3, N=29, threads=32), gpu=dict(M=1000, N=1000, threads=1024), ptx=True))


@st.composite
def _hist_shapes(draw):
    return dict(N=draw(st.integers(1, 2000)), bins=draw(st.integers(1, 300)),
                per_thread=draw(st.integers(1, 4)), threads=draw(st.sampled_from([32, 64])))


register(TestKernel(
    "simt_histogram",
    build=lambda p: SK.histogram(**p),
    inputs=lambda rng, p: (rng.integers(0, p["bins"], p["N"]).astype(np.int32), np.zeros(p["bins"], np.int32)),
    reference=lambda p, x, out: np.bincount(x, minlength=p["bins"]),
    tol=lambda p: {"exact": True}, shapes=_hist_shapes(), examples=4, inplace=(1,),
    toy=dict(N=300, bins=40, per_thread=2, threads=32), gpu=dict(N=1 << 20, bins=256, threads=256), ptx=True,
    serial_tol={"exact": True}))


@st.composite
def _select_shapes(draw):
    n = draw(st.integers(1, 400))
    return dict(M=draw(st.integers(1, 4)), N=n, k=draw(st.integers(1, n)), threads=draw(st.sampled_from([32, 64])))


def _select_ref(p, x):
    out = np.zeros(x.shape, np.int32)
    for r in range(x.shape[0]):
        out[r, np.argsort(-x[r], kind="stable")[:p["k"]]] = 1
    return out


register(TestKernel(
    "simt_radix_select",
    build=lambda p: SK.radix_select(**p),
    inputs=lambda rng, p: (np.stack([rng.permutation(1 << 16)[:p["N"]] for _ in range(p["M"])]).astype(np.int32),),
    reference=_select_ref, tol=lambda p: {"exact": True}, shapes=_select_shapes(), examples=4,
    toy=dict(M=2, N=70, k=9, threads=32), gpu=dict(M=64, N=4096, k=256, threads=256), ptx=True,
    serial_tol={"exact": True}))
