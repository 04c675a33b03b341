"""Register-fragment layouts of one launch by TileLang's free-mode layout inference, for launches without a gemm.

Contract
--------
* :func:`infer_layouts(launch, threads)` → a :class:`Layouts` (or None when the launch is outside what this module
  models: a ``T.gemm``, a fragment of symbolic shape, a fragment region that does not cover its fragment, a fragment
  index that is not an affine-ish function of its ``T.Parallel`` variables, more than ``MAX_ELEMENTS`` elements).
  ``Layouts.slots[uid]`` is the registers' worth of elements one thread holds of fragment ``uid`` (replication
  included: a fragment every thread holds whole has ``slots`` = its element count); ``Layouts.reduce[id(stmt)]`` is
  ``(P, scale, calls)`` of a ``T.reduce_*``: the threads that combine one output (``tl::AllReduce<P·scale, scale>``),
  their stride, and the all-reduces one thread runs in sequence (its slots of the destination);
  ``Layouts.loop_rep[id(stmt)]`` is how many times a ``T.Parallel``/``T.copy`` point runs (its loop layout's
  replication: every owner of a replicated fragment computes it).
* The rule is TileLang's (``src/transform/layout_inference``, ``src/op/parallel.cc``, ``src/op/reduce.cc``; read, not
  copied): tile ops that share a fragment form a component; each op is tried as the root of an inference pass at the
  free level, a pass that meets a layout conflict is skipped, and the pass with the fewest register slots per thread
  summed over the fragments wins, ties to the earliest root. A ``T.Parallel`` (and a ``T.copy`` to or from a
  fragment, a loop over its elements) takes its thread mapping from a fragment it writes, else from a non-replicated
  fragment it reads, else chooses between the mapping of the fragment it reads with the most indices and its own
  partition (``flat // vec % threads``, replicated when the loop has fewer vectors than threads); reads must be held
  by every thread that runs the point, writes by exactly those threads; the fragments it names without a layout get
  the loop's (an element is held by every thread that runs a point naming it; a read-only fragment a thread would
  hold for several points holds once). A reduction gives its destination the union of the threads of each row and
  never infers its source.
* Layouts are concrete: one bit per (element, thread). Pure function of the launch; no analysis state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..ir import nodes as N
from ..ir.traverse import loads_in, walk_stmts
from .node_helpers import _scope, _size

#: the largest fragment (elements) or loop this module lays out bit by bit
MAX_ELEMENTS = 1 << 15
_POP = np.array([bin(i).count("1") for i in range(256)], dtype=np.int64)


class _Conflict(Exception):
    """A layout conflict: the attempt is skipped (TileLang's ``LayoutConflictException``)."""


class _Unsupported(Exception):
    """Outside what this module models: no layouts for the launch."""


@dataclass
class Layouts:
    slots: dict = field(default_factory=dict)      # fragment uid -> elements per thread (max over threads)
    reduce: dict = field(default_factory=dict)     # id(Reduce) -> (P, scale, calls)
    loop_rep: dict = field(default_factory=dict)   # id(Parallel / Copy) -> replication of its loop layout
    root: int = -1                                 # index of the winning root op
    cost: int = 0                                  # its register slots


@dataclass
class _Access:
    uid: int
    idx: np.ndarray          # flat element index per loop point
    read: bool
    write: bool
    common: bool             # indices are the loop variables themselves (same shape)
    nind: int


@dataclass
class _Op:
    kind: str                # "par", "reduce", "fill"
    stmt: object
    frags: tuple = ()        # fragment uids it names (use list)
    points: int = 0
    accesses: list = field(default_factory=list)
    vec: int = 1
    stores_out: bool = False  # stores to shared/global memory
    memory: bool = False      # touches shared/global memory
    src: int = 0
    dst: int = 0
    rows: np.ndarray | None = None   # reduce: (outputs, row length) src element indices


# ---------------------------------------------------------------------------------------------- IR -> ops
def _shape(b: N.Buffer):
    s = b.static_shape()
    if s is None or b.alias_of is not None:
        raise _Unsupported(b.name)
    return s


def _is_frag(b: N.Buffer) -> bool:
    return _scope(b) == "reg" and b.scope == "fragment"


def _eval(e, env: dict, shape):
    """Integer value of an index expression on the loop grid (numpy), other variables 0."""
    if isinstance(e, int):
        return np.full(shape, e, dtype=np.int64)
    if isinstance(e, N.Const):
        return np.full(shape, int(e.value), dtype=np.int64)
    if isinstance(e, N.Var):
        return env[e.uid] if e.uid in env else np.zeros(shape, dtype=np.int64)
    if isinstance(e, N.Cast):
        return _eval(e.value, env, shape)
    if isinstance(e, N.Binary):
        a, b = _eval(e.a, env, shape), _eval(e.b, env, shape)
        ops = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "min": np.minimum, "max": np.maximum,
               "bitand": np.bitwise_and, "bitor": np.bitwise_or, "shl": np.left_shift, "shr": np.right_shift}
        if e.op in ops:
            return ops[e.op](a, b)
        if e.op in ("floordiv", "div") and np.all(b != 0):
            return np.floor_divide(a, b)
        if e.op in ("floormod", "truncmod") and np.all(b != 0):
            return np.mod(a, b)
    raise _Unsupported(f"index {e!r}")


def _flat(indices, env, grid, shape) -> np.ndarray:
    flat = np.zeros(grid, dtype=np.int64)
    for ix, ext in zip(indices, shape):
        v = _eval(ix, env, grid)
        if v.min() < 0 or v.max() >= ext:
            raise _Unsupported("fragment index out of its extent")
        flat = flat * ext + v
    return flat.reshape(-1)


def _loop_vec(accs_nonfrag, inner_uid, env, grid, dtypes) -> int:
    """Vector width of a loop: the widest ≤ 16 B that every global/shared access reads contiguously along the
    innermost loop variable (fragments do not constrain it)."""
    width = max(1, int(16 // max(_size(d) for d in dtypes))) if dtypes else 4
    inner = env.get(inner_uid)
    for b, indices in accs_nonfrag:
        shp = b.static_shape() or ()
        if not indices or inner is None:
            continue
        last = _eval(indices[-1], env, grid)
        others = [_eval(ix, env, grid) for ix in indices[:-1]]
        step = np.diff(last, axis=-1) if last.shape[-1] > 1 else np.ones((1,))
        contiguous = step.size == 0 or bool(np.all(step == 1)) and all(
            o.shape[-1] < 2 or bool(np.all(np.diff(o, axis=-1) == 0)) for o in others)
        if not contiguous:
            return 1
        w = width
        ext = shp[-1] if shp and isinstance(shp[-1], int) else None
        while w > 1 and ((ext is not None and ext % w) or int(last.reshape(-1)[0]) % w or grid[-1] % w):
            w //= 2
        width = min(width, w)
    return width


def _parallel_op(st: N.Parallel) -> _Op:
    grid = tuple(int(x) for x in st.extents)
    pts = int(np.prod(grid))
    if pts > MAX_ELEMENTS:
        raise _Unsupported("loop too large")
    mesh = np.meshgrid(*[np.arange(x, dtype=np.int64) for x in grid], indexing="ij")
    env = {v.uid: m for v, m in zip(st.vars, mesh)}
    var_uids = [v.uid for v in st.vars]
    accesses, order, nonfrag, dtypes, stores_out = {}, [], [], [], False

    def note(buf, indices, read, write):
        nonlocal stores_out
        dtypes.append(buf.dtype)
        if not _is_frag(buf):
            if buf.scope != "var":
                nonfrag.append((buf, indices))
                stores_out |= write
            return
        shp = _shape(buf)
        idx = _flat(indices, env, grid, shp)
        common = len(indices) == len(var_uids) and all(
            isinstance(ix, N.Var) and ix.uid == u for ix, u in zip(indices, var_uids)) and tuple(shp) == grid
        if buf.uid in accesses:
            acc = accesses[buf.uid]
            if not np.array_equal(acc.idx, idx):
                raise _Unsupported("a fragment read at two index patterns in one loop")
            acc.read |= read
            acc.write |= write
        else:
            accesses[buf.uid] = _Access(buf.uid, idx, read, write, common, len(indices))
            order.append(buf.uid)

    for s in walk_stmts(list(st.body)):
        if isinstance(s, N.Store):
            note(s.buffer, s.indices, False, True)
            exprs = [s.value, *s.indices]
        else:
            exprs = [getattr(s, k) for k in ("value", "cond") if getattr(s, k, None) is not None]
        for ld in loads_in(exprs):
            note(ld.buffer, ld.indices, True, False)
    vec = _loop_vec(nonfrag, var_uids[-1] if var_uids else None, env, grid, dtypes)
    return _Op("par", st, tuple(order), pts, [accesses[u] for u in order], vec, stores_out, bool(nonfrag))


def _copy_op(st: N.Copy) -> _Op | None:
    fr = [r for r in (st.src, st.dst) if _is_frag(r.buffer)]
    if not fr:
        return None
    if len(fr) == 2:
        raise _Unsupported("fragment-to-fragment copy")
    r = fr[0]
    shp = _shape(r.buffer)
    ext = tuple(int(e) if isinstance(e, int) else int(e.value) for e in r.extents)
    if ext != tuple(shp) or any(not (isinstance(s, N.Const) and s.value == 0) and s != 0 for s in r.starts):
        raise _Unsupported("copy of part of a fragment")
    pts = int(np.prod(shp))
    if pts > MAX_ELEMENTS:
        raise _Unsupported("fragment too large")
    width = max(1, int(16 // max(_size(st.src.dtype), _size(st.dst.dtype))))
    last = ext[-1] if ext else 1
    while width > 1 and last % width:
        width //= 2
    write = r is st.dst
    acc = _Access(r.buffer.uid, np.arange(pts, dtype=np.int64), not write, write, True, len(shp))
    return _Op("par", st, (r.buffer.uid,), pts, [acc], width, stores_out=not write, memory=True)


def _reduce_op(st: N.Reduce) -> _Op:
    sb, db = st.src.buffer, st.dst.buffer
    if not (_is_frag(sb) and _is_frag(db)):
        raise _Unsupported("reduction outside registers")
    ss, ds = _shape(sb), _shape(db)
    if tuple(int(e) if isinstance(e, int) else int(e.value) for e in st.src.extents) != tuple(ss):
        raise _Unsupported("reduction of part of a fragment")
    ids = np.arange(int(np.prod(ss)), dtype=np.int64).reshape(ss)
    rows = np.moveaxis(ids, st.dim, -1).reshape(-1, ss[st.dim])
    if rows.shape[0] != int(np.prod(ds)):
        raise _Unsupported("reduction shape")
    return _Op("reduce", st, (sb.uid, db.uid), src=sb.uid, dst=db.uid, rows=rows)


def _ops(launch) -> tuple[list, dict]:
    ops, sizes = [], {}
    for b in walk_stmts(list(launch.body)):
        if isinstance(b, N.Alloc) and _is_frag(b.buffer):
            shp = _shape(b.buffer)
            sizes[b.buffer.uid] = int(np.prod(shp)) if shp else 1
            if sizes[b.buffer.uid] > MAX_ELEMENTS:
                raise _Unsupported("fragment too large")
    for st in walk_stmts(list(launch.body)):
        if isinstance(st, N.Gemm) or isinstance(st, (N.Atomic, N.Cumsum)):
            raise _Unsupported("tile op outside the modelled set")
        if isinstance(st, N.Parallel):
            op = _parallel_op(st)
            if op.frags:
                ops.append(op)
        elif isinstance(st, N.Copy):
            op = _copy_op(st)
            if op is not None:
                ops.append(op)
        elif isinstance(st, N.Reduce):
            ops.append(_reduce_op(st))
        elif isinstance(st, N.Fill) and _is_frag(st.dst.buffer):
            ops.append(_Op("fill", st, (st.dst.buffer.uid,)))
    for op in ops:
        if any(u not in sizes for u in op.frags):
            raise _Unsupported("a fragment without an allocation in the launch")
    return ops, sizes


# ---------------------------------------------------------------------------------------------- layouts
def _pop_rows(bits: np.ndarray) -> np.ndarray:
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(bits).sum(axis=1, dtype=np.int64)
    return _POP[bits].sum(axis=1)


def _full_row(threads: int) -> np.ndarray:
    return np.packbits(np.ones(threads, dtype=np.uint8))


def _replicated(own: np.ndarray, threads: int) -> bool:
    return bool(np.all(own == _full_row(threads)))


def _group_or(idx: np.ndarray, rows: np.ndarray, n: int, nb: int) -> np.ndarray:
    """(n, nb) bits: for each element x the OR of ``rows[p]`` over the points p with ``idx[p] == x``."""
    out = np.zeros((n, nb), dtype=np.uint8)
    order = np.argsort(idx, kind="stable")
    si = idx[order]
    starts = np.flatnonzero(np.r_[True, si[1:] != si[:-1]])
    out[si[starts]] = np.bitwise_or.reduceat(rows[order], starts, axis=0)
    return out


def _rep(own: np.ndarray) -> int:
    c = _pop_rows(own)
    return int(c.max()) if c.size else 1


def _slots(own: np.ndarray) -> int:
    bits = np.unpackbits(own, axis=1)
    return int(bits.sum(axis=0).max()) if bits.size else 0


class _Attempt:
    def __init__(self, ops, sizes, threads):
        self.ops, self.sizes, self.T = ops, sizes, threads
        self.nb = (threads + 7) // 8
        self.layout: dict = {}       # uid -> packed owner bits (elements, nb)
        self.slot_of: dict = {}      # uid -> its slots per thread
        self.bound = math.inf        # the best complete attempt's cost (an attempt past it is abandoned)
        self.loop: dict = {}         # op index -> packed loop bits (points, nb)
        self.use: dict = {}
        for i, op in enumerate(ops):
            for u in op.frags:
                self.use.setdefault(u, []).append(i)

    # ---- a T.Parallel
    def _from_buffer(self, op, acc):
        return self.layout[acc.uid][acc.idx]

    def _plan(self, op):
        vec = op.vec if op.memory else 1  # a loop over registers only: one element per thread and step
        while vec > 1 and op.points % (self.T * vec):
            vec //= 2
        k = np.arange(op.points, dtype=np.int64) // vec
        extent = min(self.T, max(1, -(-op.points // vec)))
        t0 = k % extent
        bits = np.zeros((op.points, self.T), dtype=np.uint8)
        reps = self.T // extent
        for r in range(reps):
            bits[np.arange(op.points), t0 + r * extent] = 1
        return np.packbits(bits, axis=1)

    def _valid(self, op, L) -> bool:
        for acc in op.accesses:
            if acc.uid not in self.layout:
                continue
            own = self.layout[acc.uid]
            if _replicated(own, self.T):
                continue
            held = own[acc.idx]
            if acc.read and np.any(L & ~held):
                return False
            if acc.write and not np.array_equal(L, held):
                return False
        return True

    def _thread_indexed(self, op, L) -> bool:
        """Whether a fully replicated fragment the loop reads is indexed by the thread under loop layout L."""
        bits = np.unpackbits(L, axis=1)[:, :self.T]
        for acc in op.accesses:
            if acc.uid in self.layout and _replicated(self.layout[acc.uid], self.T):
                seqs = [acc.idx[bits[:, t] == 1] for t in range(self.T)]
                n = min(len(s) for s in seqs)
                if any(not np.array_equal(s[:n], seqs[0][:n]) for s in seqs[1:]):
                    return True
        return False

    def _choose(self, op, cb, cp):
        bok, pok = self._valid(op, cb), self._valid(op, cp)
        if bok and op.memory and any(acc.read and acc.uid in self.layout and _replicated(self.layout[acc.uid], self.T)
                                     for acc in op.accesses):
            # TileLang 0.1.15 (not the mirror's HEAD, which keeps the plan): a loop that touches memory and reads a
            # fragment every thread holds runs on every thread (the routers' w[i, k] = w_shared[i, k] / row_sum[i]:
            # w[64] / w[32] / w[16] in all three sigmoid routers' sources)
            return cb
        if bok != pok:
            return cb if bok else cp
        if not bok:
            return cb
        if op.stores_out:
            bt, pt = self._thread_indexed(op, cb), self._thread_indexed(op, cp)
            if bt != pt:
                return cp if bt else cb
        b_has_p = not np.any(cp & ~cb)
        p_has_b = not np.any(cb & ~cp)
        if b_has_p and not p_has_b:
            return cp
        if p_has_b and not b_has_p:
            return cb
        return cp if _rep(cp) <= _rep(cb) else cb

    def infer_par(self, i, free: bool) -> dict:
        op = self.ops[i]
        if i in self.loop:
            return {}
        source, read_source = None, None
        for acc in op.accesses:
            if acc.uid not in self.layout:
                continue
            if acc.write:
                source = acc
            else:
                if read_source is None or acc.nind > read_source.nind:
                    read_source = acc
                if source is None and _rep(self.layout[acc.uid]) == 1:
                    source = acc
        if source is not None:
            L = self._from_buffer(op, source)
        elif free:
            cp = self._plan(op)
            L = self._choose(op, self._from_buffer(op, read_source), cp) if read_source is not None else cp
        else:
            return {}
        if not self._valid(op, L):
            raise _Conflict(f"loop {i}")
        self.loop[i] = L
        out = {}
        for acc in op.accesses:
            if acc.uid in self.layout:
                continue
            # an element is held by every thread that runs a point naming it; a thread that would hold it for
            # several points holds it once (TileLang condenses a replica that does not move the thread)
            own = _group_or(acc.idx, L, self.sizes[acc.uid], self.nb)
            out[acc.uid] = own
        return out

    def infer_reduce(self, i) -> dict:
        op = self.ops[i]
        if op.src not in self.layout:
            return {}
        src = self.layout[op.src]
        red = np.bitwise_or.reduce(src[op.rows], axis=1)
        if op.dst not in self.layout:
            return {op.dst: red}
        if not _replicated(red, self.T) and np.any(self.layout[op.dst] & ~red):
            raise _Conflict(f"reduce {i}")
        return {}

    def step(self, i, free, queue):
        op = self.ops[i]
        if op.kind == "par":
            upd = self.infer_par(i, free)
        elif op.kind == "reduce":
            upd = self.infer_reduce(i)
        else:
            upd = {}
        for u, own in upd.items():
            self.layout[u] = own
            self.slot_of[u] = _slots(own)
            if queue is not None:
                for j in self.use.get(u, ()):
                    if j != i and j not in queue:
                        queue.insert(0, j)
        if upd and sum(self.slot_of.values()) > self.bound:  # layouts only accumulate: this attempt cannot win
            raise _Conflict("costlier than the best attempt so far")

    def drain(self, queue, free=True):
        while queue:
            self.step(queue.pop(0), free, queue)

    def cost(self) -> int:
        return sum(self.slot_of.values())


def _components(ops) -> list:
    parent = list(range(len(ops)))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x
    first = {}
    for i, op in enumerate(ops):
        for u in op.frags:
            if u in first:
                parent[find(i)] = find(first[u])
            else:
                first[u] = i
    comps = {}
    for i in range(len(ops)):
        comps.setdefault(find(i), []).append(i)
    return [comps[k] for k in sorted(comps)]


def _snapshot(att):
    return dict(att.layout), dict(att.loop), dict(att.slot_of)


def _restore(att, snap):
    att.layout, att.loop, att.slot_of = dict(snap[0]), dict(snap[1]), dict(snap[2])


def infer_layouts(launch, threads: int) -> Layouts | None:
    """The fragment layouts TileLang's free-mode inference gives ``launch`` at ``threads`` threads (see the module
    docstring); None when the launch is outside the modelled set."""
    try:
        ops, sizes = _ops(launch)
    except _Unsupported:
        return None
    if not ops:
        return None
    att = _Attempt(ops, sizes, threads)
    queue = list(range(len(ops)))  # the common level: layouts only from what is already laid out
    att.drain(queue, free=False)
    best_root = -1
    for members in _components(ops):
        base = _snapshot(att)
        best = None
        for root in members:
            _restore(att, base)
            att.bound = best[0] if best is not None else math.inf
            try:
                q = [root]
                att.drain(q)
                for other in members:
                    if other != root:
                        q = [other]
                        att.drain(q)
            except _Conflict:
                continue
            c = att.cost()
            if best is None or c < best[0]:  # ties: the earlier root (an equal cost is abandoned only when larger)
                best = (c, root, _snapshot(att))
        if best is None:
            return None
        _restore(att, best[2])
        att.bound = math.inf
        best_root = best[1] if best_root < 0 else best_root
    out = Layouts(root=best_root, cost=att.cost())
    for u, own in att.layout.items():
        out.slots[u] = _slots(own)
    for i, op in enumerate(ops):
        if op.kind == "par" and i in att.loop:
            out.loop_rep[id(op.stmt)] = _rep(att.loop[i])
        elif op.kind == "reduce" and op.src in att.layout and op.dst in att.layout:
            out.reduce[id(op.stmt)] = _allreduce(att.layout[op.src], op.rows, out.slots[op.dst], threads)
    return out


def _allreduce(src: np.ndarray, rows: np.ndarray, calls: int, threads: int) -> tuple[int, int, int]:
    """(P, scale, calls) of a reduction: the threads of one replica of a row that combine (the row's threads over the
    source's replication) and their stride (the nearest thread of the row that does not hold the row's first
    element)."""
    bits = np.unpackbits(src[rows[0]], axis=1)[:, :threads].astype(bool)
    union = np.flatnonzero(bits.any(axis=0))
    rep = max(1, int(bits.sum(axis=1).max()))
    P = max(1, len(union) // rep)
    if P <= 1:
        return 1, 1, calls
    P = 1 << int(math.log2(P))
    first = np.flatnonzero(bits[0])
    others = np.setdiff1d(union, first)
    scale = int(np.abs(others - first[0]).min()) if others.size else 1
    return P, max(1, scale), calls


_CACHE: dict = {}


def layouts_of(launch) -> Layouts | None:
    """:func:`infer_layouts` of ``launch`` at its own thread count, computed once per launch object (the launch is
    kept with its result, so its id is not reused while cached)."""
    key = id(launch)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is launch:
        return hit[1]
    if len(_CACHE) > 256:
        _CACHE.clear()
    out = infer_layouts(launch, int(launch.num_threads))
    _CACHE[key] = (launch, out)
    return out
