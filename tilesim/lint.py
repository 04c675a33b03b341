"""TileLang-compatibility lint: constructs tilesim runs but real TileLang 0.1.15 rejects.

tilesim's interpreter accepts a superset of what TileLang's compiler can lower. ``lint`` reports, before
a GPU run, what real TileLang 0.1.15 refuses at compile time for the H200 (sm_90):

* the checks of TileLang's source that the tile IR decides (:mod:`tilesim.lint_rules`, each rule's
  docstring names the file and quotes the message): ``gemm-scope``, ``gemm-full-region``,
  ``gemm-dtype``, ``gemm-shape`` ("M must be divisible by 16"), ``gemm-warp-partition``, ``gemm-k``,
  ``reduce-scope``, ``cumsum``, ``parallel-fragment-indices``, ``fragment-scalar-index``, ``shared-memory``;
* the patterns real TileLang 0.1.15 refused on the H200 (2026-11-29, see docs/simulator.md §5 and
  docs/kernels-1.md), checked here as ``level="advice"``: each rule generalises an observed failure and
  may over-approximate (``pow2`` flags the 192-wide shared tiles of TileLang's own
  examples/flash_attention/example_gqa_bwd.py, ``data-dependent-pipeline`` its
  examples/grouped_gemm/example_grouped_gemm_bwd.py):

  - ``pow2``: a fragment or shared tile, or a reduction, whose extent is not a power of two (layout
    inference fails, e.g. a whole 7168-wide row in registers; src/backend/common/op/reduce.h: "XOR-
    butterfly AllReduce requires logical_width (threads / scale) to be a positive power of two");
  - ``fragment-index``: a fragment element indexed inside ``T.Parallel`` by something other than the
    enclosing parallel loop variables and constants (layout inference cannot invert it);
  - ``data-dependent-pipeline``: a ``T.Pipelined`` loop whose bounds read tensor data (the async-copy
    wait counts become symbolic and code generation fails);
  - ``global-narrow-workspace``: a ``T.alloc_global`` workspace of a narrow float type (bf16
    workspaces failed to allocate).

Contract
--------
* ``lint(prim_func, pass_configs=None) -> list[Finding]`` (empty: nothing known to fail);
  ``JITKernel.lint()``; ``tilesim lint FILE.py::factory --args`` (exit 1 when there are findings).
  ``pass_configs`` matters only through ``tl.disable_wgmma`` (TileLang then never picks WGMMA).
* ``warn_on_compile(prim_func, pass_configs=None)`` is called when a kernel is compiled: one
  :class:`~tilesim.errors.TileLangCompatWarning` per ``level="error"`` finding (advice is left to
  ``tilesim lint``, so a program real TileLang compiles is never warned about), attributed to the finding's
  file:line (shown once per location, as Python's default filter does). It does nothing when
  linting is off: ``TILESIM_LINT=0`` in the environment, the pass config ``{"tilesim.lint": False}``
  or ``set_enabled(False)``. It never raises for a kernel tilesim accepted.
* A finding is advice, not an error: tilesim itself runs all of these correctly.
"""

from __future__ import annotations

import os
import warnings

from . import dtypes as dt
from .errors import TileLangCompatWarning
from .ir import nodes as N
from .ir.traverse import bodies, loads_in, walk_exprs
from .lint_rules import Ctx, Finding, check_launch

__all__ = ["Finding", "lint", "warn_on_compile", "set_enabled", "enabled", "TileLangCompatWarning"]

_enabled = True
_OFF = ("0", "false", "off", "no")
#: warnings registry: each location warns once per process (reset when the warning filters change)
_registry: dict = {}


def set_enabled(flag: bool) -> bool:
    """Turn the compile-time lint warnings on or off for this process; returns the previous setting."""
    global _enabled
    old, _enabled = _enabled, bool(flag)
    return old


def enabled(pass_configs=None) -> bool:
    """Whether ``warn_on_compile`` warns: on unless ``set_enabled(False)``, ``TILESIM_LINT=0`` or the
    pass config ``tilesim.lint`` is false."""
    if not _enabled or os.environ.get("TILESIM_LINT", "1").strip().lower() in _OFF:
        return False
    v = (pass_configs or {}).get("tilesim.lint", True)
    return not (v is False or v == 0 or (isinstance(v, str) and v.strip().lower() in _OFF))


def warn_on_compile(pf: N.PrimFunc, pass_configs=None) -> list[Finding]:
    """Warn (``TileLangCompatWarning``) once per error-level finding of ``lint(pf)``; those findings, or []
    when linting is off."""
    if not enabled(pass_configs):
        return []
    found = [f for f in lint(pf, pass_configs) if f.level == "error"]
    for f in found:
        file, line = (f.loc.file, f.loc.line) if f.loc is not None else ("<tilesim>", 0)
        where = f"{f.loc}: " if f.loc is not None else ""
        warnings.warn_explicit(f"{where}[{f.rule}] {f.message} (hint: {f.hint}; real TileLang 0.1.15 would "
                               f"not compile this kernel; TILESIM_LINT=0 silences)", TileLangCompatWarning,
                               file, line, module="tilesim.lint", registry=_registry)
    return found


def _pow2(n) -> bool:
    return isinstance(n, int) and n > 0 and (n & (n - 1)) == 0


def _has_load(e) -> bool:
    return next(loads_in(e), None) is not None


class _Linter:
    def __init__(self):
        self.out: list[Finding] = []
        self.lets: dict[int, N.Expr] = {}

    def add(self, rule, message, loc, hint):
        self.out.append(Finding(rule, message, loc, hint, "advice"))

    def body(self, stmts, pvars):
        for s in stmts:
            self.stmt(s, pvars)
            inner = pvars | {v.uid for v in s.vars} if isinstance(s, N.Parallel) else pvars
            for b in bodies(s):
                self.body(b, inner)

    def stmt(self, s, pvars):
        t = type(s)
        if t is N.Alloc:
            b = s.buffer
            if b.scope in ("fragment", "shared") and b.alias_of is None:
                bad = [d for d in b.shape if not _pow2(d)]
                if bad and b.ndim:
                    self.add("pow2", f"{b.scope} buffer {b.name} {tuple(b.shape)} has a dimension that is not a power "
                                     "of two", b.loc, "use power-of-two tiles and loop over the rest "
                                                      "(tiles may overhang the tensor edge)")
            if b.scope == "global" and b.alias_of is None and b.dtype in dt.NARROW_FLOATS:
                self.add("global-narrow-workspace", f"T.alloc_global workspace {b.name} is {b.dtype}", b.loc,
                         "allocate the workspace as float32 (or as uint16 bit patterns and T.reinterpret)")
        elif t is N.Reduce:
            ext = s.src.extents[s.dim]
            if not _pow2(ext):
                self.add("pow2", f"T.reduce_{s.kind} over an extent of {ext}, not a power of two", s.loc,
                         "reduce power-of-two chunks and combine them with clear=False")
        elif t is N.For:
            if s.kind == "pipelined" and (_has_load(s.start) or _has_load(s.stop) or self._let_loads(s.stop)):
                self.add("data-dependent-pipeline", f"T.Pipelined loop '{s.var.name}' has bounds read from a tensor",
                         s.loc, "use T.serial for data-dependent trip counts, or a fixed trip count with masked tiles")
        elif t is N.Let:
            self.lets[s.var.uid] = s.value
            self.expr(s.value, pvars, s.loc)
        elif t is N.Store:
            if pvars and s.buffer.scope in ("fragment", "local"):
                self.index(s.buffer, s.indices, pvars, s.loc)
            for i in s.indices:
                self.expr(i, pvars, s.loc)
            self.expr(s.value, pvars, s.loc)

    def _let_loads(self, e) -> bool:
        """Whether ``e`` names a ``Let`` variable whose value reads a tensor (directly or through lets)."""
        for x in walk_exprs(e):
            if type(x) is N.Var and x.uid in self.lets:
                v = self.lets[x.uid]
                if _has_load(v) or self._let_loads(v):
                    return True
        return False

    def index(self, buf, indices, pvars, loc):
        for i in indices:
            if isinstance(i, N.Const) or (isinstance(i, N.Var) and i.uid in pvars):
                continue
            self.add("fragment-index", f"fragment {buf.name} is indexed by a computed expression inside T.Parallel",
                     loc, "index fragments only by the T.Parallel loop variables; route computed indices through "
                          "shared or global memory")
            return

    def expr(self, e, pvars, loc):
        for x in loads_in(e):
            if pvars and x.buffer.scope in ("fragment", "local") and x.buffer.ndim:
                self.index(x.buffer, x.indices, pvars, x.loc or loc)


def lint(pf: N.PrimFunc, pass_configs=None) -> list[Finding]:
    """TileLang-compatibility findings of ``pf`` (empty when nothing known to fail was found)."""
    li = _Linter()
    li.body(pf.body, frozenset())
    nowg = bool((pass_configs or {}).get("tl.disable_wgmma", False))
    for launch in pf.launches:
        li.out.extend(check_launch(launch, Ctx(launch.num_threads, nowg)))
    seen, out = set(), []
    for f in li.out:
        key = (f.rule, f.loc)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out
