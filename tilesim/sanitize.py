"""The sanitizer: run a kernel with every check on and say what is wrong with it (``tilesim check``).

Contract
--------
``check_kernel(kernel, inputs=None, *, shapes=None, seed=0, modes=("batched",), differential=None)
-> CheckReport``

* ``kernel``: a ``JITKernel`` (``@tilesim.jit`` / ``tilesim.compile``) or a ``PrimFunc`` (every
  parameter then an input).
* ``inputs``: the kernel's inputs (the parameters not in ``out_idx``, in order). Default: made by
  :func:`tilesim.supply.make_input` (floats uniform in [-1, 1)), except that integer tensors are
  zeros — index tensors then stay in range; give real inputs to check gathers through loaded
  indices. ``shapes`` gives symbolic dimensions by name for the default inputs.
* Each mode in ``modes`` (``"batched"``, ``"serial"``) runs the kernel once on copies of the inputs with
  ``InterpOptions(mode, oob="check", races=True, uninit="check")``:

  - **out of bounds**: an element access outside its buffer through an explicit index (a scalar
    access, a serial-loop index, a gather through loaded indices), or any on-chip access out of
    range, is a finding naming the buffer, the index and the source line. Tile copies and
    ``T.Parallel`` accesses that overhang a tensor edge are TileLang's masked edges, not findings.
  - **races**: two blocks writing one global element in one launch, whatever the kinds of store
    (plain, tile copy, atomic), unless all writes are atomics of one kind; a block reading an element
    another block writes. In a launch with grid barriers (``T.sync_grid``) only accesses between the
    same two barriers can race.
  - **uninitialised memory** (the shadow mask, ``interp/shadow.py``): the first read of an element of
    an on-chip buffer or of an output tilesim allocated that no statement wrote — by an element load,
    a tile copy, a gemm operand or accumulator, a reduction, an atomic — names the buffer, the
    element, the block and the reading statement's line; an output element never written is a
    finding too. Inputs the caller passed are initialised by definition; lanes masked off (an
    ``if``, ``T.if_then_else``, the right side of ``and``/``or``) and copy padding are not reads.
  - **differential fallback** (``differential=True``, or ``None`` = only for kernels holding a
    ``T.view`` of another element width, which the mask does not track): two more runs with
    uninitialised memory filled with zeros and ones (``uninit="zero"|"one"``) besides NaN; an
    element of a written tensor that differs between the fills depends on memory nobody wrote.

  The first error of a run ends that run. Findings are one line each.
* Argument errors (wrong inputs) are raised, not reported: they are the caller's, not the kernel's.

``CheckReport``: ``kernel`` (name), ``findings`` (list of str), ``ok`` (no findings), ``seconds``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from . import binding as B
from . import dtypes as dt
from .backends.interp.options import InterpOptions
from .config import TensorSupplyType
from .errors import KernelError, KernelRuntimeError
from .ir import nodes as N
from .ir.traverse import walk_stmts
from .kernel import JITKernel
from .supply import make_input

__all__ = ["CheckReport", "check_kernel"]


@dataclass
class CheckReport:
    kernel: str
    findings: list = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.findings

    def summary(self) -> str:
        if self.ok:
            return f"{self.kernel}: no findings (out-of-bounds, races, uninitialised memory) in {self.seconds:.2f} s"
        return "\n".join(f"{self.kernel}: {f}" for f in self.findings)


def _default_inputs(kernel: JITKernel, shapes: dict | None, seed: int) -> list:
    rng = np.random.default_rng(seed)
    out = []
    for p in kernel.input_params:
        if isinstance(p, N.Var):
            out.append(1)
        elif dt.is_int(p.dtype) or p.dtype == "bool":
            out.append(make_input(p, TensorSupplyType.Zero, rng, shapes))
        else:
            out.append(make_input(p, TensorSupplyType.Uniform, rng, shapes))
    return out


def _copy(x):
    return np.array(x, copy=True) if isinstance(x, np.ndarray) else x


def _as_list(res):
    if res is None:
        return []
    return list(res) if isinstance(res, (list, tuple)) else [res]


def _comparable(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype.type.__module__.startswith("ml_dtypes"):
        return a.astype(np.float32)
    return a


def _one_line(e: KernelError) -> str:
    return e.message + (f" (at {e.loc})" if e.loc is not None else "")


def _run(kernel: JITKernel, inputs: list, options: InterpOptions):
    """(results of the written tensors by name, error finding or None)."""
    args = [_copy(x) for x in inputs]
    try:
        outs = _as_list(kernel.run(*args, options=options))
    except KernelRuntimeError as e:
        return None, _one_line(e)
    written = B.written_globals(kernel.prim_func)
    res = {p.name: a for p, a in zip(kernel.input_params, args) if isinstance(p, N.Buffer) and p.uid in written}
    for i, o in zip(kernel.out_idx, outs):
        res[kernel.prim_func.params[i].name] = np.asarray(o)
    return res, None


def untracked_views(pf: N.PrimFunc) -> list:
    """Names of the ``T.view`` buffers whose element width differs from their root's: the shadow mask
    does not track them (nor their roots), so the differential runs do."""
    out = []
    for s in walk_stmts(pf.body):
        b = getattr(s, "buffer", None)
        if isinstance(s, N.Alloc) and b.alias_of is not None and \
                dt.np_dtype(b.dtype).itemsize != dt.np_dtype(b.alias_of.dtype).itemsize:
            out.append(b.name)
    return out


def check_kernel(kernel, inputs=None, *, shapes: dict | None = None, seed: int = 0,
                 modes=("batched",), differential=None) -> CheckReport:
    """Run ``kernel`` under every check (see the module docstring); the findings."""
    if isinstance(kernel, N.PrimFunc):
        kernel = JITKernel(kernel, target="interp")
    t0 = time.perf_counter()
    inputs = list(inputs) if inputs is not None else _default_inputs(kernel, shapes, seed)
    pf = kernel.prim_func  # the caller's argument errors are raised here, not reported as findings
    B.bind_host(pf, kernel.out_idx, B.split_call(pf, kernel.out_idx, tuple(_copy(x) for x in inputs)),
                lambda shape, dtype: np.empty(shape, dt.np_dtype(dtype)))
    rep = CheckReport(pf.name)
    if differential is None:
        differential = bool(untracked_views(pf))
    for mode in modes:
        res, err = _run(kernel, inputs, InterpOptions(mode=mode, oob="check", races=True, uninit="check"))
        if err is not None:
            if err not in rep.findings:
                rep.findings.append(err)
            continue
        if not differential:
            continue
        runs = [res]
        for fill in ("zero", "one"):
            res, err = _run(kernel, inputs, InterpOptions(mode=mode, oob="check", races=True, uninit=fill))
            if err is not None:
                if err not in rep.findings:
                    rep.findings.append(err)
                break
            runs.append(res)
        if len(runs) < 3:
            continue
        for name, a in runs[0].items():
            same = np.ones(np.shape(a), dtype=bool)
            for other in runs[1:]:
                x, y = _comparable(a), _comparable(other[name])
                same &= (x == y) | (np.isnan(x) & np.isnan(y)) if x.dtype.kind == "f" else (x == y)
            if not np.all(same):
                bad = np.argwhere(~same)
                text = (f"{name}: {len(bad)} of {x.size} element(s) depend on uninitialised memory or are never "
                        f"written, first at {tuple(int(v) for v in bad[0])} (mode {mode})")
                rep.findings.append(text)
    rep.seconds = time.perf_counter() - t0
    return rep
