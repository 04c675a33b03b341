"""The state of the cost analysis of one launch: :class:`Analyzer`.

Contract
--------
* ``Analyzer(pf, launch, hw, profile, dims, tensors, hints, lets)`` evaluates the grid, binds the
  block indices to NumPy axes (:mod:`tilesim.analysis.symbolic`) and holds what the rules share:
  the evaluator and environment, buffers seen, the enclosing loops and pipelining depth, which core
  side made each on-chip buffer, async-copy destinations and notes for the report.
* :meth:`Analyzer.body` dispatches statements through :data:`COST_RULES`,
  :meth:`Analyzer.element_cost` dispatches expressions through :data:`EXPR_RULES` (an
  ``InternalError`` for a class without a rule); :meth:`Analyzer.trip_of` gives a loop's start and
  trip count per block, from the tensors or ``hints`` when it depends on data (else a
  ``KernelError``). It does not register rules; :mod:`tilesim.analysis.cost` imports the rule modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import KernelError, KernelTypeError
from ..ir import nodes as N
from ..ir.traverse import walk_stmts
from .layout_infer import layouts_of
from .node_helpers import _label, _root, _scope, _size, _static
from .profiles import LoweringProfile
from .program import GAccess, Op
from .rule_tables import COST_RULES, EXPR_RULES
from .symbolic import MAX_ELEMENTS, DataDependent, Evaluator, Space, fit, free_vars

if TYPE_CHECKING:
    from .expr_rules import _Acc

__all__ = ["Analyzer"]

_COST, _EXPR = COST_RULES.rules, EXPR_RULES.rules  # the plain dicts, for the hot paths


class Analyzer:
    """Walks one launch and builds its :class:`LaunchProgram`."""

    def __init__(self, pf: N.PrimFunc, launch: N.Launch, hw, profile: LoweringProfile, dims: dict,
                 tensors: dict, hints: dict, lets: dict):
        self.pf, self.launch, self.hw, self.profile = pf, launch, hw, profile
        self.hints = hints
        self.notes: list[str] = []
        self.lets = dict(lets)
        env = dict(dims)
        ev0 = Evaluator(Space([1, 1, 1]), env, self.lets, tensors)
        grid = []
        for g in launch.grid:
            try:
                grid.append(int(ev0(g)))
            except DataDependent as exc:
                raise KernelError(f"the grid of {pf.name} depends on {exc.what}", launch.loc,
                                  hint="pass the missing dimension as a keyword") from None
        grid = grid + [1] * (3 - len(grid))
        self.grid = tuple(grid[:3])
        if len(launch.grid) > 3:
            raise KernelTypeError("a launch grid has at most 3 dimensions", launch.loc)
        self.space = Space(self.grid)
        for axis, v in enumerate(launch.block_vars[:3]):
            env[v.uid] = self.space.axis_array(np.arange(self.grid[axis], dtype=np.int64), axis)
        self.block_axis = {v.uid: a for a, v in enumerate(launch.block_vars[:3])}
        self.env = env
        self.ev = Evaluator(self.space, env, self.lets, tensors)
        self.tensors = tensors
        self.threads = launch.num_threads
        occ = hw.primary_core.occupancy
        self.warp_size = int(occ.warp_size_count) if occ is not None and occ.warp_size_count else 1
        self.vec_bytes = float(profile.vector_load_bytes)
        self.buffers: dict[int, N.Buffer] = {}
        self.loop_stack: list[tuple] = []  # (For, stages)
        self.deferred_reduces: set = set()
        self.gemm_outputs: set | None = None  # uids of gemm accumulators (tile_rules._gemm_outputs)
        #: TileLang's fragment layouts of the launch (profile ``fragment_layout_inference``; None: not modelled)
        self.layouts = layouts_of(launch) if profile.fragment_layout_inference else None
        self.sync_load_bytes = 0.0  # largest per-thread bytes of one synchronous global -> on-chip copy  # ids of Reduce nodes whose cross-thread part follows their loop
        self.pipelined_depth = 0
        self.pipe_stages = 0
        #: ``if`` statements inside a pipelined loop whose condition is not taken in every block and iteration
        #: (profile ``guarded_copies_sync``: copies under them are synchronous loads)
        self.guarded_depth = 0
        #: bytes an owner thread of a replicated-owner load loop keeps in registers (``owner_rules``; 0: none)
        self.owner_inflight_bytes = 0.0
        self.side_of: dict[int, str] = {}
        self.shared_written_by_threads: set[int] = set()
        self.async_dst: set[int] = set()
        #: an asynchronous copy inside a T.Pipelined loop: TileLang warp-specialises the kernel (producer)
        self.pipelined_async = False
        # Ascend: which on-chip buffers feed/come from the matrix unit
        self.gemm_operands: set[int] = set()
        self.gemm_outputs: set[int] = set()
        self.parallel_vars: set[int] = set()
        self._uniform: dict[int, bool] = {}
        self.var_exprs: dict = self.ev.var_exprs
        self._prescan(launch.body)

    # ------------------------------------------------------------------ helpers
    def _prescan(self, body):
        for s in walk_stmts(body):
            if isinstance(s, N.Gemm):
                self.gemm_operands |= {_root(s.a.buffer).uid, _root(s.b.buffer).uid}
                self.gemm_outputs.add(_root(s.c.buffer).uid)

    def mean(self, v):
        return self.space.mean(v)

    def block_deps(self, exprs) -> tuple[frozenset, bool]:
        uids: set = set()
        loads: list = []
        for e in exprs:
            free_vars(e, self.lets, uids, loads)
        axes = frozenset(self.block_axis[u] for u in uids if u in self.block_axis)
        data = bool(loads)
        if data:
            axes = frozenset(range(3))
        return axes, data

    def side_for(self, kind: str, *, dst: N.Buffer | None = None, src: N.Buffer | None = None) -> str:
        if kind == "gemm":
            return "matrix"
        if dst is not None and _root(dst).uid in self.gemm_operands and _scope(dst) == "shared":
            return "matrix"
        if kind == "fill" and dst is not None and _root(dst).uid in self.gemm_outputs:
            return "matrix"
        if kind == "store" and src is not None:
            return self.side_of.get(_root(src).uid, "vector")
        return "vector"

    def round_trip(self, op: Op, buffers):
        """NPUs: a tile made on the other core kind travels through global memory first."""
        if not self.profile.cross_unit_round_trip:
            return
        rt = 0.0
        for b in buffers:
            if b.scope == "global":
                continue
            r = _root(b)
            made = self.side_of.get(r.uid)
            if made is not None and made != op.side:
                nbytes = float(np.prod([_static(s) for s in r.shape])) * _size(r.dtype)
                rt += 2.0 * nbytes
                self.side_of[r.uid] = op.side
        if rt:
            op.work["roundtrip"] = op.work.get("roundtrip", 0.0) + rt
            op.xfer["cube<->vector (global memory)"] = op.xfer.get("cube<->vector (global memory)", 0.0) + rt
            op.latency = op.latency or "roundtrip"

    def mark_written(self, op: Op, buffers):
        for b in buffers:
            if b.scope != "global":
                self.side_of[_root(b).uid] = op.side

    def in_bounds(self, region: N.Region):
        """Mean number of in-bounds elements of a global region per execution (block array)."""
        total = 1.0
        try:
            for d, (s, e) in enumerate(zip(region.starts, region.extents)):
                sv = self.ev(s)
                ev = self.ev(e) if not isinstance(e, int) else e
                D = region.buffer.shape[d]
                Dv = self.ev(D) if not isinstance(D, int) else D
                cnt = np.clip(np.minimum(np.add(sv, ev), Dv) - np.maximum(sv, 0), 0, ev)
                total = total * cnt
            return self.mean(fit(total, self.space.ndim) if isinstance(total, np.ndarray) else total)
        except DataDependent:
            n = 1.0
            for e in region.extents:
                n *= e if isinstance(e, int) else 1.0
            return n

    def gaccess(self, region: N.Region, nbytes, write: bool) -> GAccess:
        deps, data = self.block_deps(list(region.starts))
        return GAccess(_root(region.buffer), nbytes, write, deps, data)

    def new_op(self, kind, s, side, reads=(), writes=(), label=None) -> Op:
        return Op(kind=kind, label=label or type(s).__name__, node=type(s).__name__, loc=s.loc, side=side,
                  reads=frozenset(_root(b).uid for b in reads), writes=frozenset(_root(b).uid for b in writes))

    def trip_of(self, loop: N.For):
        try:
            start = self.ev(loop.start)
            stop = self.ev(loop.stop)
            trip = np.maximum(0, -(-(np.subtract(stop, start)) // loop.step))
            return start, trip
        except DataDependent as exc:
            for key in (loop.var.name, f"loop:{loop.loc.line}" if loop.loc else None):
                if key and key in self.hints:
                    self.notes.append(f"loop '{loop.var.name}'{_label(loop.loc)}: {self.hints[key]} iterations (hint)")
                    return 0, float(self.hints[key])
            raise KernelError(
                f"the trip count of loop '{loop.var.name}' depends on {exc.what}", loop.loc,
                hint=f"pass the tensor (simulate(..., <param>=array)) or a hint: hints={{'{loop.var.name}': n}}"
            ) from None

    # ------------------------------------------------------------------ walking
    def body(self, stmts) -> list:
        out = []
        for s in stmts:
            fn = _COST.get(type(s))
            if fn is None:
                raise COST_RULES.error(s)
            out.extend(fn(self, s))
        return out

    def element_cost(self, e, acc: _Acc):
        if self.parallel_vars and type(e) not in (N.Const, N.Var, N.Load) and self.uniform(e):
            return  # loop-invariant in the element loop: computed once per thread, not per element
        fn = _EXPR.get(type(e))
        if fn is None:
            raise EXPR_RULES.error(e)
        fn(self, e, acc)

    def set_var(self, buf: N.Buffer, value):
        """Remember what a ``T.alloc_var`` scalar holds (for trip counts that read it)."""
        loads: list = []
        free_vars(value, self.lets, set(), loads)
        if any(_root(b).uid == _root(buf).uid for b in loads) or self.loop_stack:
            self.var_exprs[buf.uid] = None  # a counter updated in a loop: its value is run-time data
        else:
            self.var_exprs[buf.uid] = value

    def uniform(self, e) -> bool:
        """Whether ``e`` is the same for every element of the enclosing ``T.Parallel``."""
        key = id(e)
        hit = self._uniform.get(key)
        if hit is None:
            loads: list = []
            uids = free_vars(e, self.lets, set(), loads)
            hit = not loads and not (uids & self.parallel_vars)
            self._uniform[key] = hit
        return hit

    def element_fraction(self, cond) -> float:
        """Mean truth of an element-level condition over all (or a sample of) blocks and elements."""
        saved = None
        if float(np.prod(self.space.sizes)) > MAX_ELEMENTS:
            saved = {uid: self.env[uid] for uid in self.block_axis}
            for uid, ax in self.block_axis.items():
                g = self.grid[ax]
                idx = np.unique(np.linspace(0, g - 1, min(g, 64)).round().astype(np.int64))
                self.env[uid] = self.space.axis_array(idx, ax)
        try:
            v = self.ev(cond)
        except (DataDependent, MemoryError, ValueError):
            return 1.0
        finally:
            if saved:
                self.env.update(saved)
        if isinstance(v, np.ndarray):
            return float(np.mean(v.astype(np.float64)))
        return 1.0 if v else 0.0
