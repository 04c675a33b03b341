"""Cost analysis: tile IR + launch shapes + lowering profile → the per-block cost program.

Contract
--------
* :data:`COST_RULES` maps every statement class of :mod:`tilesim.ir.groups` to a rule
  ``rule(analyzer, stmt) -> list[Op | Loop]``; :data:`EXPR_RULES` maps every expression class to a
  rule that adds one element's cost (ALU slots, SFU results, shared/global bytes) to an accumulator.
  A node class without a rule is an ``InternalError`` (``tests/sim`` checks the tables are complete).
* Trip counts, ``if`` conditions and the in-bounds part of every global region are evaluated as NumPy
  arrays over all blocks at once (:mod:`tilesim.analysis.symbolic`); inner loops are sampled. A trip
  count that depends on tensor data is read from the tensors passed in ``tensors`` (by parameter
  name) or taken from ``hints`` (``{"<loop var>": trips}``, ``{"while:<line>": trips}``,
  ``{"if:<line>": taken fraction}``); without either it is a ``KernelError`` that says so.
* Copies with edges count only in-bounds bytes; ``T.Parallel`` global accesses count every element
  (TileLang does not guard them) times the taken fraction of enclosing ``if``s.
* :func:`analyze` returns one :class:`~tilesim.analysis.program.LaunchProgram` per launch, already
  compressed into block classes.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..errors import InternalError, KernelError, KernelTypeError
from ..ir import nodes as N
from .profiles import MATH_COST, LoweringProfile, get_profile
from .program import GAccess, LaunchProgram, Loop, Op, compress
from .symbolic import MAX_ELEMENTS, DataDependent, Evaluator, Space, fit, free_vars, loop_samples

__all__ = ["COST_RULES", "EXPR_RULES", "analyze", "Analyzer", "resolve_shapes"]

COST_RULES: dict = {}
EXPR_RULES: dict = {}


def rule(table, *classes):
    def deco(fn):
        for c in classes:
            table[c] = fn
        return fn
    return deco


def _size(dtype) -> float:
    return float(dt.itemsize(dtype))


def _static(ext) -> int:
    if isinstance(ext, int):
        return ext
    if isinstance(ext, N.Const):
        return int(ext.value)
    raise InternalError(f"on-chip extent {ext!r} is not static")


def _scope(buf: N.Buffer) -> str:
    if buf.scope == "global":
        return "global"
    if buf.scope.startswith("shared"):
        return "shared"
    return "reg"


def _root(buf: N.Buffer) -> N.Buffer:
    while buf.alias_of is not None:
        buf = buf.alias_of
    return buf


def _elems(region: N.Region) -> int:
    n = 1
    for e in region.extents:
        n *= _static(e) if not isinstance(e, int) else e
    return n


def _label(loc) -> str:
    return f":{loc.line}" if loc is not None else ""


class _Acc:
    """Per-element cost of element-level code (``T.Parallel`` bodies)."""

    __slots__ = ("alu", "flops", "sfu", "smem", "gload", "gstore", "loads")

    def __init__(self):
        self.alu: dict[str, float] = {}
        self.flops: dict[str, float] = {}
        self.sfu: dict[str, float] = {}
        self.smem = 0.0
        self.gload: dict[int, list] = {}  # buffer uid -> [buffer, bytes/elem, deps, data_dep]
        self.gstore: dict[int, list] = {}
        self.loads = set()

    def add_alu(self, dtype, n, flops=0.0):
        key = "float32" if not dt.is_float(dtype) or dtype in dt.FP8 else dtype
        self.alu[key] = self.alu.get(key, 0.0) + n
        if flops:
            self.flops[key] = self.flops.get(key, 0.0) + flops

    def scaled(self, f) -> _Acc:
        out = _Acc()
        out.alu = {k: v * f for k, v in self.alu.items()}
        out.flops = {k: v * f for k, v in self.flops.items()}
        out.sfu = {k: v * f for k, v in self.sfu.items()}
        out.smem = self.smem * f
        out.gload = {k: [v[0], v[1] * f, v[2], v[3]] for k, v in self.gload.items()}
        out.gstore = {k: [v[0], v[1] * f, v[2], v[3]] for k, v in self.gstore.items()}
        out.loads = set(self.loads)
        return out

    def merge(self, o: _Acc):
        for k, v in o.alu.items():
            self.alu[k] = self.alu.get(k, 0.0) + v
        for k, v in o.flops.items():
            self.flops[k] = self.flops.get(k, 0.0) + v
        for k, v in o.sfu.items():
            self.sfu[k] = self.sfu.get(k, 0.0) + v
        self.smem += o.smem
        for src, dst in ((o.gload, self.gload), (o.gstore, self.gstore)):
            for k, v in src.items():
                if k in dst:
                    dst[k][1] = dst[k][1] + v[1]
                    dst[k][2] = dst[k][2] | v[2]
                    dst[k][3] = dst[k][3] or v[3]
                else:
                    dst[k] = list(v)
        self.loads |= o.loads


def resolve_shapes(pf: N.PrimFunc, shapes: dict):
    """Split the caller's keyword arguments into dynamic-dimension values, tensors and hints."""
    dims: dict[int, int] = {}
    tensors: dict[int, np.ndarray] = {}
    hints: dict = dict(shapes.pop("hints", None) or {})
    by_name = {d.name: d for d in pf.dyn_vars}
    params = {p.name: p for p in pf.params}
    norm = {p.name.lower().replace("_", ""): p.name for p in pf.params}
    for k, v in list(shapes.items()):
        if k not in params and k not in by_name and k.lower().replace("_", "") in norm:
            k = norm[k.lower().replace("_", "")]
        if k in by_name:
            dims[by_name[k].uid] = int(v)
        elif k in params and isinstance(params[k], N.Buffer) and (hasattr(v, "shape") or isinstance(v, (list, tuple))):
            arr = np.asarray(v)
            tensors[params[k].uid] = arr
            for want, got in zip(params[k].shape, arr.shape):
                if isinstance(want, N.Var) and want.kind == "dynamic":
                    dims.setdefault(want.uid, int(got))
        elif k in params and isinstance(params[k], N.Var):
            dims[params[k].uid] = v
        else:
            hints[k] = v
    missing = [d.name for d in pf.dyn_vars if d.uid not in dims]
    if missing:
        raise KernelTypeError(f"{pf.name} has symbolic dimension(s) {', '.join(missing)} with no value",
                              pf.loc, hint="pass them as keywords, e.g. simulate(..., "
                              + ", ".join(f"{m}=4096" for m in missing) + ")")
    return dims, tensors, hints


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
        self.pipelined_depth = 0
        self.pipe_stages = 0
        self.side_of: dict[int, str] = {}
        self.shared_written_by_threads: set[int] = set()
        self.async_dst: set[int] = set()
        # Ascend: which on-chip buffers feed/come from the matrix unit
        self.gemm_operands: set[int] = set()
        self.gemm_outputs: set[int] = set()
        self.parallel_vars: set[int] = set()
        self._uniform: dict[int, bool] = {}
        self.var_exprs: dict = self.ev.var_exprs
        self._prescan(launch.body)

    # ------------------------------------------------------------------ helpers
    def _prescan(self, body):
        for s in body:
            if isinstance(s, N.Gemm):
                self.gemm_operands |= {_root(s.a.buffer).uid, _root(s.b.buffer).uid}
                self.gemm_outputs.add(_root(s.c.buffer).uid)
            for attr in ("body", "then", "orelse"):
                sub = getattr(s, attr, None)
                if isinstance(sub, tuple):
                    self._prescan(sub)

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

    def sync_amount(self, n=1.0) -> float:
        return float(n)

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
            fn = COST_RULES.get(type(s))
            if fn is None:
                raise InternalError(f"the cost analysis has no rule for {type(s).__name__}")
            out.extend(fn(self, s))
        return out

    def element_cost(self, e, acc: _Acc):
        if self.parallel_vars and type(e) not in (N.Const, N.Var, N.Load) and self.uniform(e):
            return  # loop-invariant in the element loop: computed once per thread, not per element
        fn = EXPR_RULES.get(type(e))
        if fn is None:
            raise InternalError(f"the cost analysis has no rule for expression {type(e).__name__}")
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


# ---------------------------------------------------------------------------------------------
# Statement rules
# ---------------------------------------------------------------------------------------------


@rule(COST_RULES, N.Alloc)
def _alloc(a: Analyzer, s: N.Alloc):
    a.buffers[s.buffer.uid] = s.buffer
    if s.buffer.scope == "var" and s.init is not None:
        a.set_var(s.buffer, s.init)
    return []


@rule(COST_RULES, N.Let)
def _let(a: Analyzer, s: N.Let):
    a.lets[s.var.uid] = s.value
    return []


@rule(COST_RULES, N.Break, N.Continue)
def _break(a: Analyzer, s):
    # The loop's trip count stays the upper bound (early exits are not modelled).
    return []


@rule(COST_RULES, N.Launch)
def _nested_launch(a: Analyzer, s):
    raise KernelTypeError("a T.Kernel inside another T.Kernel", s.loc)


@rule(COST_RULES, N.Copy)
def _copy(a: Analyzer, s: N.Copy):
    p = a.profile
    src, dst = s.src, s.dst
    ss, ds = _scope(src.buffer), _scope(dst.buffer)
    n = float(_elems(dst) if ds != "global" else _elems(src))
    if ss == "global" and ds != "global":
        inb = a.in_bounds(src)
        gbytes = inb * _size(src.dtype)
        tile = n * _size(dst.dtype)
        side = a.side_for("copy", dst=dst.buffer)
        asyn = p.async_copy and ds == "shared"
        op = a.new_op("async" if asyn else "load", s, side, (src.buffer,), (dst.buffer,),
                      f"copy {src.buffer.name}→{dst.buffer.name}")
        op.work["global"] = gbytes
        op.gaccess.append(a.gaccess(src, gbytes, False))
        op.latency = "global"
        level = "global->shared" if ds == "shared" else "global->registers"
        op.xfer[level] = gbytes
        if ds == "shared":
            op.work["smem"] = tile
            if not asyn:
                op.work["vector:float32"] = 2.0 * n  # a load and a store per element, by the threads
                if p.sync_per_shared_write:
                    op.syncs = 1.0
            else:
                a.async_dst.add(_root(dst.buffer).uid)
        else:
            op.work["vector:float32"] = tile / a.vec_bytes
        a.mark_written(op, (dst.buffer,))
        return [op]
    if ds == "global":
        inb = a.in_bounds(dst)
        gbytes = inb * _size(dst.dtype)
        side = a.side_for("store", src=src.buffer)
        op = a.new_op("store", s, side, (src.buffer,), (), f"copy {src.buffer.name}→{dst.buffer.name}")
        op.work["global"] = gbytes
        op.gaccess.append(a.gaccess(dst, gbytes, True))
        if ss == "shared":
            op.work["smem"] = n * _size(src.dtype)
            op.xfer["shared->global"] = gbytes
        elif ss == "reg":
            op.work["vector:float32"] = n * _size(src.dtype) / a.vec_bytes
            op.xfer["registers->global"] = gbytes
        else:  # global -> global
            ginb = a.in_bounds(src)
            op.work["global"] = gbytes + ginb * _size(src.dtype)
            op.gaccess.append(a.gaccess(src, ginb * _size(src.dtype), False))
            op.kind = "load"
            op.latency = "global"
            op.xfer["global->global"] = gbytes
        a.round_trip(op, (src.buffer,))
        return [op]
    # on-chip copies
    side = a.side_for("copy", dst=dst.buffer)
    op = a.new_op("compute", s, side, (src.buffer,), (dst.buffer,), f"copy {src.buffer.name}→{dst.buffer.name}")
    a.round_trip(op, (src.buffer,))
    if not p.fragment_registers:
        op.work["vector:" + _vec_dtype(dst.dtype)] = n
        op.xfer["on-chip"] = n * _size(dst.dtype)
    elif ss == "shared" and ds == "reg":
        op.work["smem"] = n * _size(src.dtype)
        op.work["vector:float32"] = n * _size(src.dtype) / a.vec_bytes
        op.xfer["shared->registers"] = n * _size(src.dtype)
    elif ss == "reg" and ds == "shared":
        op.work["smem"] = n * _size(dst.dtype)
        op.work["vector:float32"] = n
        op.xfer["registers->shared"] = n * _size(dst.dtype)
        op.syncs = 1.0 if p.sync_per_shared_write else 0.0
    elif ss == "shared" and ds == "shared":
        op.work["smem"] = n * (_size(src.dtype) + _size(dst.dtype))
        op.work["vector:float32"] = n / 4.0
        op.syncs = 1.0 if p.sync_per_shared_write else 0.0
    else:  # registers -> registers (a cast)
        op.work["vector:float32"] = n if src.dtype != dst.dtype else n / 2.0
    a.mark_written(op, (dst.buffer,))
    return [op]


def _vec_dtype(dtype: str) -> str:
    return dtype if dt.is_float(dtype) and dtype not in dt.FP8 else "float32"


def _partition(policy: str, units: int, m_units: int, n_units: int) -> tuple[int, int]:
    """(units along M, units along N) of a warp/warpgroup partition (TileLang's policies)."""
    units = max(1, units)
    if policy == "FullRow":
        wm = max(1, min(units, m_units))
        return wm, max(1, units // wm)
    if policy == "FullCol":
        wn = max(1, min(units, n_units))
        return max(1, units // wn), wn
    best = (1, units)
    for wm in range(1, units + 1):
        if units % wm or wm > max(1, m_units):
            continue
        wn = units // wm
        if wn > max(1, n_units):
            continue
        if abs(m_units / wm - n_units / wn) < abs(m_units / best[0] - n_units / best[1]) or \
                (best[1] > max(1, n_units)):
            best = (wm, wn)
    return best


@rule(COST_RULES, N.Gemm)
def _gemm(a: Analyzer, s: N.Gemm):
    p, hw = a.profile, a.hw
    at, ct = s.a.tile_shape(), s.c.tile_shape()
    if len(ct) != 2 or len(at) != 2:
        raise KernelTypeError("T.gemm operands must be 2-D tiles", s.loc)
    M, N_ = (_static(x) for x in ct)
    K = _static(at[0] if s.trans_a else at[1])
    flops = 2.0 * M * N_ * K
    op = a.new_op("compute", s, "matrix", (s.a.buffer, s.b.buffer, s.c.buffer), (s.c.buffer,),
                  f"gemm {M}x{N_}x{K}")
    a.round_trip(op, (s.a.buffer, s.b.buffer, s.c.buffer))
    in_dt = s.a.dtype
    if p.gemm_unit == "matrix":
        mdt = p.matrix_dtype(in_dt)
        core = _core(hw, p.matrix_core)
        unit = next((u for u in core.units if u.kind == "matrix"), None)
        if unit is None:
            raise KernelTypeError(f"{hw.name} has no matrix unit on core kind '{core.name}' for T.gemm", s.loc)
        op.work[f"matrix:{mdt}"] = flops
        op.flops[(unit.name, mdt)] = flops
    else:
        core = _core(hw, p.vector_core or p.matrix_core)
        unit = next((u for u in core.units if u.kind == "vector"), None)
        op.work["vector:float32"] = flops / p.vector_flops_per_slot
        op.flops[(unit.name if unit else "vector", "float32")] = flops
    a_sh = _scope(s.a.buffer) == "shared"
    b_sh = _scope(s.b.buffer) == "shared"
    A_bytes = M * K * _size(s.a.dtype) if a_sh else 0.0
    B_bytes = N_ * K * _size(s.b.dtype) if b_sh else 0.0
    warps = max(1, a.threads // a.warp_size)
    mode = p.gemm_operands
    if mode == "wgmma" and in_dt not in p.wgmma_dtypes:
        mode = "warps"
    if mode == "wgmma":
        wgs = max(1, warps // max(1, p.warpgroup_warps))
        rows, cols = p.wgmma_rows, p.mma_shape[1]
        wm, wn = _partition(s.policy, wgs, max(1, M // rows), max(1, N_ // cols))
        smem = wn * A_bytes + max(1, math.ceil(M / rows)) * B_bytes
    elif mode == "warps":
        wm, wn = _partition(s.policy, warps, max(1, M // p.mma_shape[0]), max(1, N_ // p.mma_shape[1]))
        smem = wn * A_bytes + wm * B_bytes
    elif mode == "fma":
        o = max(1.0, M * N_ / a.threads)
        r = math.sqrt(o)
        per = max(4.0, _size(s.a.dtype))
        smem = a.threads * K * 2.0 * r * per if (a_sh or b_sh) else 0.0
    else:  # "path": operands cross a data path once (NPU L1 -> L0A/L0B)
        smem = 0.0
        op.work["operand"] = A_bytes + B_bytes
        op.xfer["L1->L0 (matrix operands)"] = A_bytes + B_bytes
    if smem:
        op.work["smem"] = smem
        op.xfer["shared->matrix unit" if p.gemm_unit == "matrix" else "shared->registers"] = smem
    a.mark_written(op, (s.c.buffer,))
    return [op]


def _vec_unit(a: Analyzer) -> str:
    core = _core(a.hw, a.profile.vector_core or a.profile.matrix_core)
    u = next((u for u in core.units if u.kind == "vector"), None)
    return u.name if u else "vector"


def _core(hw, name: str):
    return hw.core_kind(name) if name else hw.primary_core


@rule(COST_RULES, N.Reduce)
def _reduce(a: Analyzer, s: N.Reduce):
    side = "vector"
    op = a.new_op("compute", s, side, (s.src.buffer, s.dst.buffer), (s.dst.buffer,), f"reduce_{s.kind}")
    a.round_trip(op, (s.src.buffer,))
    E = float(_elems(s.src))
    Ed = float(max(1, _elems(s.dst)))
    vd = _vec_dtype(s.src.dtype)
    slots = E * (2.0 if s.kind in ("absmax", "abssum") else 1.0)
    if a.profile.fragment_registers and _scope(s.src.buffer) == "reg":
        per_row = max(1.0, a.threads / Ed)
        ws = float(a.warp_size)
        steps = math.log2(min(ws, per_row)) if per_row > 1 else 0.0
        slots += Ed * 2.0 * steps  # a shuffle and an op per step of the warp tree
        if per_row > ws:
            op.syncs = 1.0
    if _scope(s.src.buffer) == "shared":
        op.work["smem"] = E * _size(s.src.dtype)
    op.work[f"vector:{vd}"] = slots
    op.flops[(_vec_unit(a), vd)] = E
    a.mark_written(op, (s.dst.buffer,))
    return [op]


@rule(COST_RULES, N.Cumsum)
def _cumsum(a: Analyzer, s: N.Cumsum):
    op = a.new_op("compute", s, "vector", (s.src.buffer,), (s.dst.buffer,), "cumsum")
    a.round_trip(op, (s.src.buffer,))
    E = float(_elems(s.src))
    length = float(_static(s.src.tile_shape()[s.dim])) if s.src.tile_shape() else 1.0
    vd = _vec_dtype(s.src.dtype)
    op.work[f"vector:{vd}"] = E * max(1.0, math.log2(max(2.0, length)))
    op.flops[(_vec_unit(a), vd)] = E
    op.syncs = 1.0 if a.profile.sync_per_shared_write else 0.0
    a.mark_written(op, (s.dst.buffer,))
    return [op]


@rule(COST_RULES, N.Fill)
def _fill(a: Analyzer, s: N.Fill):
    ds = _scope(s.dst.buffer)
    if ds == "global":
        inb = a.in_bounds(s.dst)
        gbytes = inb * _size(s.dst.dtype)
        op = a.new_op("store", s, "vector", (), (), f"fill {s.dst.buffer.name}")
        op.work["global"] = gbytes
        op.gaccess.append(a.gaccess(s.dst, gbytes, True))
        op.xfer["registers->global"] = gbytes
        return [op]
    side = a.side_for("fill", dst=s.dst.buffer)
    op = a.new_op("compute", s, side, (), (s.dst.buffer,), f"fill {s.dst.buffer.name}")
    E = float(_elems(s.dst))
    if ds == "shared":
        op.work["smem"] = E * _size(s.dst.dtype)
        op.syncs = 1.0 if a.profile.sync_per_shared_write else 0.0
    op.work[f"vector:{_vec_dtype(s.dst.dtype)}"] = E if not a.profile.fragment_registers else E / 2.0
    a.mark_written(op, (s.dst.buffer,))
    return [op]


@rule(COST_RULES, N.Atomic)
def _atomic(a: Analyzer, s: N.Atomic):
    dst = s.dst
    val_buf = s.value.buffer if isinstance(s.value, N.Region) else None
    reads = (val_buf,) if val_buf is not None else ()
    if _scope(dst.buffer) == "global":
        inb = a.in_bounds(dst)
        gbytes = inb * _size(dst.dtype)
        op = a.new_op("store", s, a.side_for("store", src=val_buf), reads, (), f"atomic_{s.kind} {dst.buffer.name}")
        op.work["global"] = 2.0 * gbytes  # read-modify-write at L2
        op.gaccess.append(a.gaccess(dst, gbytes, True))
        op.work["vector:float32"] = float(_elems(dst))
        op.xfer["registers->global (atomic)"] = gbytes
        if val_buf is not None:
            a.round_trip(op, (val_buf,))
        return [op]
    op = a.new_op("compute", s, "vector", reads, (dst.buffer,), f"atomic_{s.kind} {dst.buffer.name}")
    E = float(_elems(dst))
    op.work["vector:float32"] = 2.0 * E
    if _scope(dst.buffer) == "shared":
        op.work["smem"] = 2.0 * E * _size(dst.dtype)
    a.mark_written(op, (dst.buffer,))
    return [op]


def _loop_axis(a: Analyzer, var: N.Var, start, trip, step: int):
    """Bind ``var`` to sampled iterations on a new inner axis (validity: ``j < trip`` per block)."""
    tmax = int(np.max(trip)) if isinstance(trip, np.ndarray) else int(trip)
    j, w = loop_samples(max(tmax, 1))
    a.space.push(len(j))
    jj = a.space.axis_array(j, a.space.ndim - 1)
    valid = jj < (fit(trip, a.space.ndim) if isinstance(trip, np.ndarray) else trip)
    a.space.inner[-1] = (w, valid)
    st = fit(start, a.space.ndim) if isinstance(start, np.ndarray) else start
    a.env[var.uid] = st + jj * step


@rule(COST_RULES, N.For)
def _for(a: Analyzer, s: N.For):
    start, trip = a.trip_of(s)
    stages = int(s.annotation("num_stages", 0) or 0) if s.kind == "pipelined" else 0
    trip_mean = a.mean(trip)
    _loop_axis(a, s.var, start, trip, s.step)
    a.loop_stack.append(s)
    prev_stages = a.pipe_stages
    if s.kind == "pipelined":
        a.pipelined_depth += 1
        a.pipe_stages = stages
    try:
        body = a.body(s.body)
    finally:
        if s.kind == "pipelined":
            a.pipelined_depth -= 1
            a.pipe_stages = prev_stages
        a.loop_stack.pop()
        a.space.pop()
        a.env.pop(s.var.uid, None)
    kind = "pipelined" if s.kind == "pipelined" else "serial"
    return [Loop(trip=trip_mean, kind=kind, stages=stages, body=body,
                 label=f"{'T.Pipelined' if kind == 'pipelined' else 'for'} {s.var.name}", loc=s.loc)]


@rule(COST_RULES, N.While)
def _while(a: Analyzer, s: N.While):
    line = s.loc.line if s.loc else None
    for key in (f"while:{line}", "while"):
        if key in a.hints:
            trip = float(a.hints[key])
            a.notes.append(f"while loop{_label(s.loc)}: {trip:g} iterations (hint)")
            break
    else:
        raise KernelError("the trip count of a while loop depends on run-time data", s.loc,
                          hint=f"pass a hint: hints={{'while:{line}': expected_iterations}}")
    body = a.body(s.body)
    return [Loop(trip=trip, kind="serial", stages=0, body=body, label="while", loc=s.loc)]


def _weighted(nodes, f):
    for n in nodes:
        n.weight = n.weight * f
    return nodes


@rule(COST_RULES, N.If)
def _if(a: Analyzer, s: N.If):
    try:
        c = a.ev(s.cond)
        f = a.mean(np.asarray(c, dtype=np.float64)) if isinstance(c, np.ndarray) else (1.0 if c else 0.0)
    except DataDependent:
        key = f"if:{s.loc.line}" if s.loc else "if"
        f = float(a.hints.get(key, 1.0))
        a.notes.append(f"if{_label(s.loc)}: taken fraction {f:g} ({'hint' if key in a.hints else 'assumed'})")
    then = _weighted(a.body(s.then), f)
    orelse = _weighted(a.body(s.orelse), 1.0 - f) if s.orelse else []
    return then + orelse


@rule(COST_RULES, N.Store)
def _store_stmt(a: Analyzer, s: N.Store):
    # a scalar store outside T.Parallel (a T.alloc_var or a single element)
    if s.buffer.scope == "var":
        a.set_var(s.buffer, s.value)
    acc = _Acc()
    _element_store(a, s, acc)
    return [_element_op(a, s, acc, 1.0, f"store {s.buffer.name}")]


@rule(COST_RULES, N.Parallel)
def _parallel(a: Analyzer, s: N.Parallel):
    E = float(np.prod(s.extents)) if s.extents else 1.0
    # bind the element variables to (small) axes so element-level conditions can be evaluated
    pushed = 0
    big = E > (1 << 16)
    for v, n in zip(s.vars, s.extents):
        ax = a.space.push(n if not big else 1)
        a.env[v.uid] = a.space.axis_array(np.arange(n) if not big else np.zeros(1, dtype=np.int64), ax)
        pushed += 1
    outer = set(a.parallel_vars)
    a.parallel_vars |= {v.uid for v in s.vars}
    a._uniform = {}
    try:
        acc = _Acc()
        _element_body(a, s.body, acc)
    finally:
        a.parallel_vars = outer
        a._uniform = {}
        for v in s.vars:
            a.env.pop(v.uid, None)
        for _ in range(pushed):
            a.space.pop()
    names = sorted({_root(b).name for b in acc.loads}) if acc.loads else []
    label = "T.Parallel" + (f" ({', '.join(names)})" if names else "")
    return [_element_op(a, s, acc, E, label)]


def _element_body(a: Analyzer, stmts, acc: _Acc, f: float = 1.0):
    for st in stmts:
        t = type(st)
        if t is N.Store:
            sub = _Acc()
            _element_store(a, st, sub)
            acc.merge(sub.scaled(f) if f != 1.0 else sub)
        elif t is N.Let:
            a.lets[st.var.uid] = st.value
            sub = _Acc()
            a.element_cost(st.value, sub)
            acc.merge(sub.scaled(f) if f != 1.0 else sub)
        elif t is N.If:
            frac = a.element_fraction(st.cond)
            sub = _Acc()
            a.element_cost(st.cond, sub)
            acc.merge(sub.scaled(f))
            _element_body(a, st.then, acc, f * frac)
            if st.orelse:
                _element_body(a, st.orelse, acc, f * (1.0 - frac))
        elif t is N.For:
            start, trip = a.trip_of(st)
            tm = float(np.mean(trip)) if isinstance(trip, np.ndarray) else float(trip)
            a.env[st.var.uid] = start if not isinstance(start, np.ndarray) else start
            _element_body(a, st.body, acc, f * tm)
            a.env.pop(st.var.uid, None)
        elif t is N.Atomic:
            sub = _Acc()
            if not isinstance(st.value, N.Region):
                a.element_cost(st.value, sub)
            size = _size(st.dst.dtype)
            sc = _scope(st.dst.buffer)
            if sc == "global":
                deps, data = a.block_deps(list(st.dst.starts))
                r = _root(st.dst.buffer)
                sub.gstore[r.uid] = [r, 2.0 * size, deps, data]  # read-modify-write at L2
                sub.loads.add(st.dst.buffer)
            elif sc == "shared":
                sub.smem += 2.0 * size
            sub.add_alu(st.dst.dtype, 2.0)
            acc.merge(sub.scaled(f) if f != 1.0 else sub)
        elif t in (N.Break, N.Continue, N.Alloc):
            continue
        elif t is N.Parallel:
            inner = float(np.prod(st.extents))
            _element_body(a, st.body, acc, f * inner)
        else:
            fn = COST_RULES.get(t)
            if fn is None:
                raise InternalError(f"the cost analysis has no rule for {t.__name__}")
            raise KernelTypeError(f"{t.__name__} inside T.Parallel is not supported by the cost analysis",
                                  st.loc)


def _element_store(a: Analyzer, st: N.Store, acc: _Acc):
    a.element_cost(st.value, acc)
    sc = _scope(st.buffer)
    size = _size(st.buffer.dtype)
    if sc == "global":
        deps, data = a.block_deps(list(st.indices))
        r = _root(st.buffer)
        cur = acc.gstore.get(r.uid)
        if cur:
            cur[1] += size
            cur[2] |= deps
        else:
            acc.gstore[r.uid] = [r, size, deps, data]
    elif sc == "shared":
        acc.smem += size
    if sc == "global":
        acc.loads.add(st.buffer)


def _element_op(a: Analyzer, s, acc: _Acc, E: float, label: str) -> Op:
    p = a.profile
    has_load = bool(acc.gload)
    has_store = bool(acc.gstore)
    writes_shared = False
    writes = set()
    reads = set()
    body = getattr(s, "body", (s,)) if not isinstance(s, N.Store) else (s,)
    _collect_rw(body, reads, writes)
    writes_shared = any(_scope(b) == "shared" for b in writes)
    kind = "compute"
    if has_load:
        kind = "load"
        if p.async_copy and a.pipelined_depth and writes_shared and not has_store and \
                all(_scope(b) == "shared" for b in writes):
            kind = "async"
    elif has_store:
        kind = "store" if not acc.alu and not acc.sfu else "compute"
    side = "vector"
    op = Op(kind=kind, label=label, node=type(s).__name__, loc=s.loc, side=side,
            reads=frozenset(_root(b).uid for b in reads), writes=frozenset(_root(b).uid for b in writes))
    a.round_trip(op, [b for b in reads if b.scope != "global"])
    for d, n in acc.alu.items():
        op.work[f"vector:{d}"] = op.work.get(f"vector:{d}", 0.0) + n * E
    core = _core(a.hw, p.vector_core or p.matrix_core)
    vunit = next((u for u in core.units if u.kind == "vector"), None)
    for d, n in acc.flops.items():
        key = (vunit.name if vunit else "vector", d)
        op.flops[key] = op.flops.get(key, 0.0) + n * E
    sfu_n = sum(acc.sfu.values())
    if sfu_n:
        op.work["sfu"] = sfu_n * E
        sunit = next((u for u in core.units if u.kind == "sfu"), None)
        op.flops[(sunit.name if sunit else "sfu", "float32")] = sfu_n * E
        op.sfu_funcs = {k: v * E for k, v in acc.sfu.items()}
    if acc.smem:
        op.work["smem"] = acc.smem * E
    gtotal = 0.0
    for buf, per, deps, data in acc.gload.values():
        nb = per * E
        op.gaccess.append(GAccess(buf, nb, False, deps if not data else frozenset(range(3)), data))
        gtotal = gtotal + nb
        op.xfer["global->" + ("shared" if writes_shared else "registers")] = \
            op.xfer.get("global->" + ("shared" if writes_shared else "registers"), 0.0) + nb
    for buf, per, deps, data in acc.gstore.values():
        nb = per * E
        op.gaccess.append(GAccess(buf, nb, True, deps if not data else frozenset(range(3)), data))
        gtotal = gtotal + nb
        op.xfer["registers->global"] = op.xfer.get("registers->global", 0.0) + nb
    if gtotal:
        op.work["global"] = gtotal
        op.latency = "global" if has_load else ""
    if writes_shared and p.sync_per_shared_write:
        op.syncs = 1.0
    if kind == "async":
        a.async_dst |= {_root(b).uid for b in writes}
    a.mark_written(op, [b for b in writes if b.scope != "global"])
    return op


def _collect_rw(stmts, reads: set, writes: set):
    for st in stmts:
        t = type(st)
        if t is N.Store:
            writes.add(st.buffer)
            _expr_loads(st.value, reads)
            for i in st.indices:
                _expr_loads(i, reads)
        elif t is N.Let:
            _expr_loads(st.value, reads)
        elif t is N.If:
            _expr_loads(st.cond, reads)
            _collect_rw(st.then, reads, writes)
            _collect_rw(st.orelse, reads, writes)
        elif t in (N.For, N.Parallel, N.While):
            _collect_rw(st.body, reads, writes)


def _expr_loads(e, out: set):
    stack = [e]
    while stack:
        x = stack.pop()
        t = type(x)
        if t is N.Load:
            out.add(x.buffer)
            stack.extend(x.indices)
        elif t in (N.Binary, N.Compare, N.Logical):
            stack.extend((x.a, x.b))
        elif t is N.Unary:
            stack.append(x.a)
        elif t is N.Select:
            stack.extend((x.cond, x.a, x.b))
        elif t in (N.Cast, N.Reinterpret):
            stack.append(x.value)
        elif t is N.Call:
            stack.extend(x.args)


# ---------------------------------------------------------------------------------------------
# Expression rules: the cost of one element
# ---------------------------------------------------------------------------------------------


@rule(EXPR_RULES, N.Const, N.Var)
def _e_leaf(a, e, acc):
    return None


def _is_mul(x) -> bool:
    return type(x) is N.Binary and x.op == "mul" and dt.is_float(x.dtype)


@rule(EXPR_RULES, N.Binary)
def _e_binary(a, e, acc: _Acc):
    a.element_cost(e.a, acc)
    a.element_cost(e.b, acc)
    if dt.is_float(e.dtype):
        if e.op in ("add", "sub") and (_is_mul(e.a) or _is_mul(e.b)):
            acc.add_alu(e.dtype, 0.0, flops=1.0)  # fused into the multiply's FMA slot
        elif e.op == "div":
            acc.sfu["rcp"] = acc.sfu.get("rcp", 0.0) + 1.0
            acc.add_alu(e.dtype, 2.0, flops=1.0)
        elif e.op == "pow":
            s, n = MATH_COST["pow"]
            acc.sfu["pow"] = acc.sfu.get("pow", 0.0) + s
            acc.add_alu(e.dtype, n, flops=1.0)
        else:
            acc.add_alu(e.dtype, 1.0, flops=1.0)
    else:
        acc.add_alu(e.dtype, 1.0)


@rule(EXPR_RULES, N.Compare, N.Logical)
def _e_cmp(a, e, acc: _Acc):
    a.element_cost(e.a, acc)
    a.element_cost(e.b, acc)
    acc.add_alu(getattr(e.a, "dtype", "float32"), 1.0)


@rule(EXPR_RULES, N.Unary)
def _e_unary(a, e, acc: _Acc):
    a.element_cost(e.a, acc)
    acc.add_alu(e.dtype, 1.0)


@rule(EXPR_RULES, N.Call)
def _e_call(a, e, acc: _Acc):
    for x in e.args:
        a.element_cost(x, acc)
    s, n = MATH_COST.get(e.func, (0, 1))
    if s:
        acc.sfu[e.func] = acc.sfu.get(e.func, 0.0) + s
    acc.add_alu(e.dtype, float(n), flops=1.0 if dt.is_float(e.dtype) else 0.0)


@rule(EXPR_RULES, N.Select)
def _e_select(a, e, acc: _Acc):
    a.element_cost(e.cond, acc)
    a.element_cost(e.a, acc)
    a.element_cost(e.b, acc)
    acc.add_alu(e.dtype, 1.0)


@rule(EXPR_RULES, N.Cast)
def _e_cast(a, e, acc: _Acc):
    a.element_cost(e.value, acc)
    if getattr(e.value, "dtype", e.dtype) != e.dtype:
        acc.add_alu(e.dtype, 1.0)


@rule(EXPR_RULES, N.Reinterpret)
def _e_reinterpret(a, e, acc: _Acc):
    a.element_cost(e.value, acc)


@rule(EXPR_RULES, N.Load)
def _e_load(a, e, acc: _Acc):
    sc = _scope(e.buffer)
    size = _size(e.buffer.dtype)
    if sc == "global":
        deps, data = a.block_deps(list(e.indices))
        r = _root(e.buffer)
        cur = acc.gload.get(r.uid)
        if cur:
            cur[1] += size
            cur[2] |= deps
        else:
            acc.gload[r.uid] = [r, size, deps, data]
        acc.loads.add(e.buffer)
    elif sc == "shared":
        acc.smem += size


# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------


def _footprint(a: Analyzer, launch: N.Launch, body_nodes):
    shared, frag, local, side = {}, {}, {}, {}
    for b in a.buffers.values():
        if b.alias_of is not None or b.scope in ("global",):
            continue
        shape = b.static_shape()
        if shape is None:
            raise KernelTypeError(f"on-chip buffer '{b.name}' has a symbolic shape", b.loc)
        nbytes = float(np.prod(shape)) * _size(b.dtype) if shape else _size(b.dtype)
        sc = _scope(b)
        if sc == "shared":
            mult = 1
            if b.uid in a.async_dst and a.profile.async_copy:
                mult = max(1, _stages_of(launch.body, b.uid))
            shared[b.name] = nbytes * mult
        elif b.scope == "fragment":
            frag[b.name] = nbytes
        else:
            local[b.name] = nbytes
        side[b.name] = "matrix" if (b.uid in a.gemm_operands and sc == "shared") or b.uid in a.gemm_outputs \
            else "vector"
    return shared, frag, local, side


def _stages_of(stmts, uid) -> int:
    """num_stages of the innermost pipelined loop that copies into buffer ``uid``."""
    best = 1
    for s in stmts:
        if isinstance(s, N.For):
            if s.kind == "pipelined" and _writes(s.body, uid):
                best = max(best, int(s.annotation("num_stages", 0) or 0))
            best = max(best, _stages_of(s.body, uid))
        elif isinstance(s, N.If):
            best = max(best, _stages_of(s.then, uid), _stages_of(s.orelse, uid))
        elif isinstance(s, N.While):
            best = max(best, _stages_of(s.body, uid))
    return best


def _writes(stmts, uid) -> bool:
    for s in stmts:
        if isinstance(s, N.Copy) and _root(s.dst.buffer).uid == uid:
            return True
        if isinstance(s, N.Parallel):
            w: set = set()
            _collect_rw(s.body, set(), w)
            if any(_root(b).uid == uid for b in w):
                return True
        for attr in ("body", "then", "orelse"):
            sub = getattr(s, attr, None)
            if isinstance(sub, tuple) and not isinstance(s, N.Parallel) and _writes(sub, uid):
                return True
    return False


def analyze(pf: N.PrimFunc, hw, profile="tensorcore", **shapes) -> list[LaunchProgram]:
    """The per-block cost program of every launch of ``pf`` (see the module docstring).

    Args:
        pf: the program.
        hw: a loaded hardware model (``hwmodels.load``).
        profile: lowering profile name or object.
        **shapes: values of dynamic dimensions by name; tensors by parameter name (for data-dependent
            loops); ``hints={...}`` for data-dependent trip counts and branches.
    """
    prof = get_profile(profile)
    dims, tensors, hints = resolve_shapes(pf, dict(shapes))
    top_lets: dict = {}
    progs = []
    for s in pf.body:
        if isinstance(s, N.Let):
            top_lets[s.var.uid] = s.value
        elif isinstance(s, N.Launch):
            a = Analyzer(pf, s, hw, prof, dims, tensors, hints, top_lets)
            body = a.body(s.body)
            shared, frag, local, side = _footprint(a, s, body)
            gbufs = {}
            for p in pf.params:
                if isinstance(p, N.Buffer):
                    try:
                        n = float(np.prod([a.ev(d) if not isinstance(d, int) else d for d in p.shape]))
                    except DataDependent:
                        n = float("inf")
                    gbufs[p.uid] = (p, n * _size(p.dtype))
            swz = s.annotation("swizzle")
            prog = LaunchProgram(launch=s, grid=a.grid, threads=a.threads, body=body, shared_bytes=shared,
                                 fragment_bytes=frag, local_bytes=local, side_of_buffer=side, swizzle=swz,
                                 has_async_copies=bool(a.async_dst), global_buffers=gbufs, notes=a.notes)
            progs.append(compress(prog))
    if not progs:
        raise KernelTypeError(f"{pf.name} has no T.Kernel launch to simulate", pf.loc)
    return progs
