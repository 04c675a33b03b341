"""Thread layouts of register fragments, and the pass that places every on-chip buffer.

Layout
------
A :class:`Layout` spreads a tile of static ``shape`` over the ``nthreads`` threads of a block. Along
dimension ``d`` the threads form ``tcount[d]`` groups; thread ``tid`` is in group
``t_d = (tid // tstride[d]) % tcount[d]`` and owns the indices ``t_d + s * tcount[d]`` for
``s < slots[d] = ceil(shape[d] / tcount[d])`` (indices past ``shape[d]`` are padding, guarded). A
dimension may be *split* (``split[d] = (lo, hstride)``, ``1 < lo < tcount[d]``): its group is then
``(tid // tstride[d]) % lo + lo * ((tid // hstride) % (tcount[d] // lo))`` — the tensor-core accumulator
of a warp grid with several warps along N, whose column group is ``lane % 4`` plus the warp's column
(:meth:`Layout.pieces` lists the ``(count, stride)`` factors; the emitter builds the group from them). A
reduction along a split dimension is not lowered: the placement then chooses another grid (``place_buffers``).
A
thread's elements are the ``prod(slots)`` combinations, kept in a per-thread ``cuda.local.array``
indexed by the row-major slot number — registers, once NVVM unrolls the constant-trip slot loops.

Threads whose groups coincide hold the same elements (*replicas*): a row statistic of a 2-D tile (the
running max of flash attention) uses the rows' thread groups of the tile and is replicated over its
column groups, so ``x[i, j] - m[i]`` needs no communication. Replicas compute the same values; only
the *primary* replica (``tid`` equal to the sum of its group factors times their strides) performs side effects on memory. With every
``tcount`` 1 a layout is *fully replicated* (``FR``): each thread holds the whole tile, which is what
block-level scalar code on a fragment needs.

Placement
---------
:func:`place_buffers` decides, per launch, where each on-chip buffer lives:

* ``shared`` buffers → ``cuda.shared.array`` (rows padded so column walks avoid bank conflicts);
* ``var`` scalars → per-thread locals;
* ``fragment``/``local`` buffers → registers with a layout found by propagation: gemm accumulators
  take the gemm's thread grid; a ``T.Parallel`` loop takes the layout of the first fragment it
  indexes with all its loop variables and imposes the restriction of that layout on every fragment
  it indexes with a subset of them (``m[i]`` in an ``(i, j)`` loop); a reduction's destination takes
  its source's layout without the reduced dimension; fragment-to-fragment copies share layouts;
  block-level or non-loop-variable indexing asks for ``FR``. Loops with no placed fragment take the
  default layout of their extents (coalesced: the last dimension over consecutive threads).
* A fragment whose requirements conflict, that is indexed in a way no register layout serves (writes
  at non-loop-variable indices, an operand ``A``/``B`` of a gemm, a view, a cumsum, a partial region
  in a tile op) is *demoted* to shared memory: correct for any access pattern, slower, and counted
  against the shared-memory limit (48 KB static, up to 227 KB dynamic).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ... import dtypes as dt
from ...ir import nodes as N
from ...ir.traverse import loads_in, regions_of, stmt_exprs, walk_stmts


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _pow2_ceil(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


@dataclass(frozen=True)
class Layout:
    shape: tuple[int, ...]
    tcount: tuple[int, ...]
    tstride: tuple[int, ...]
    nthreads: int
    #: per dimension, how many *consecutive* indices a thread owns in each round (vector width; 1: cyclic):
    #: index of slot ``s`` = ``(s // V) * P * V + t * V + s % V``
    vec: tuple[int, ...] | None = None
    #: per dimension ``(lo, hstride)``: the group is ``lo`` groups at ``tstride`` then ``tcount // lo`` at
    #: ``hstride``; ``(tcount, 0)`` (the normal form of "not split") where the dimension is one factor
    split: tuple[tuple[int, int], ...] | None = None

    def __post_init__(self):
        # a dimension spread over one thread group has no thread stride: normalise it so equal layouts compare equal
        object.__setattr__(self, "tstride", tuple(s if p > 1 else 1 for p, s in zip(self.tcount, self.tstride)))
        v = self.vec if self.vec is not None else tuple(1 for _ in self.shape)
        object.__setattr__(self, "vec", tuple(int(x) if p > 1 else 1 for x, p in zip(v, self.tcount)))
        sp = self.split if self.split is not None else tuple((p, 0) for p in self.tcount)
        ts, norm = list(self.tstride), []
        for d, (p, (lo, hs)) in enumerate(zip(self.tcount, sp)):
            if p > 1 and 1 <= lo < p:
                if p % lo:
                    raise ValueError(f"split {lo} does not divide {p} thread groups")
                if lo == 1:  # only the high factor: an ordinary dimension at hstride
                    ts[d], lo = hs, p
                elif hs == ts[d] * lo:  # the two factors are adjacent: one factor
                    lo = p
            norm.append((p, 0) if lo >= p or p <= 1 else (lo, hs))
        object.__setattr__(self, "tstride", tuple(ts))
        object.__setattr__(self, "split", tuple(norm))

    def pieces(self, d: int) -> list[tuple[int, int]]:
        """``[(count, stride), ...]`` of dimension ``d``'s group, low factor first (empty: one group)."""
        p, (lo, hs) = self.tcount[d], self.split[d]
        if p <= 1:
            return []
        if lo < p:
            return [(lo, self.tstride[d]), (p // lo, hs)]
        return [(p, self.tstride[d])]

    def is_split(self, d: int) -> bool:
        return len(self.pieces(d)) > 1

    def group_of(self, d: int, tid: int) -> int:
        """Thread ``tid``'s group along dimension ``d`` (the contract above, with ints)."""
        t, scale = 0, 1
        for c, st in self.pieces(d):
            t += ((tid // st) % c) * scale
            scale *= c
        return t

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def slots(self) -> tuple[int, ...]:
        return tuple(_ceil(e, p * v) * v for e, p, v in zip(self.shape, self.tcount, self.vec))

    @property
    def nslots(self) -> int:
        n = 1
        for s in self.slots:
            n *= s
        return n

    @property
    def used_threads(self) -> int:
        n = 1
        for p in self.tcount:
            n *= p
        return n

    @property
    def replicated(self) -> bool:
        return self.used_threads < self.nthreads

    @property
    def full_replicated(self) -> bool:
        return all(p == 1 for p in self.tcount)

    def needs_guard(self, d: int) -> bool:
        return self.tcount[d] * self.slots[d] != self.shape[d]

    def restrict(self, dims) -> Layout:
        """The layout of the sub-tile on loop dimensions ``dims`` (in the sub-tile's order)."""
        return Layout(tuple(self.shape[d] for d in dims), tuple(self.tcount[d] for d in dims),
                      tuple(self.tstride[d] if self.tcount[d] > 1 else 1 for d in dims), self.nthreads,
                      tuple(self.vec[d] for d in dims), tuple(self.split[d] for d in dims))

    def permuted_from(self, dims, loop_shape) -> Layout:
        """Inverse of :meth:`restrict` for a full-rank access: buffer dim ``k`` is loop dim ``dims[k]``."""
        n = len(loop_shape)
        tc, ts, vv, sp = [1] * n, [1] * n, [1] * n, [(1, 0)] * n
        for k, d in enumerate(dims):
            tc[d], ts[d], vv[d], sp[d] = self.tcount[k], self.tstride[k], self.vec[k], self.split[k]
        return Layout(tuple(loop_shape), tuple(tc), tuple(ts), self.nthreads, tuple(vv), tuple(sp))

    def drop(self, dim: int, keep_unit: bool) -> Layout:
        """Projection without ``dim`` (a reduction's output); ``keep_unit`` keeps it as extent 1."""
        if keep_unit:
            return Layout(tuple(1 if d == dim else e for d, e in enumerate(self.shape)),
                          tuple(1 if d == dim else p for d, p in enumerate(self.tcount)),
                          tuple(1 if d == dim else s for d, s in enumerate(self.tstride)), self.nthreads,
                          tuple(1 if d == dim else v for d, v in enumerate(self.vec)),
                          tuple((1, 0) if d == dim else x for d, x in enumerate(self.split)))
        dims = [d for d in range(self.ndim) if d != dim]
        return self.restrict(dims)

    def key(self) -> tuple:
        return tuple(tuple(self.pieces(d)) for d in range(self.ndim) if self.tcount[d] > 1)

    def describe(self) -> str:
        parts = []
        for d, (e, p, s, v, n) in enumerate(zip(self.shape, self.tcount, self.tstride, self.vec, self.slots)):
            at = "@(" + "+".join(f"{c}@{st}" for c, st in self.pieces(d)) + ")" if self.is_split(d) else f"@{s}"
            parts.append(f"{e}:{p}x{n}" + (at if p > 1 else "") + (f"v{v}" if v > 1 else ""))
        return "(" + ", ".join(parts) + ")" + (" replicated" if self.replicated else "")


def full_replicated(shape, nthreads: int) -> Layout:
    return Layout(tuple(shape), tuple(1 for _ in shape), tuple(1 for _ in shape), nthreads)


#: consecutive elements a thread owns along the last dimension in default layouts (vector accesses)
DEFAULT_VEC = 4


def default_layout(shape, nthreads: int, vec: int | None = None, fallback: bool = False,
                   min_vec: int = DEFAULT_VEC) -> Layout:
    """Coalesced layout: the last dimension over consecutive threads (``vec`` consecutive elements each,
    when the dimension is long enough), then outwards. ``fallback``: when ``vec`` does not fit, halve it
    (down to ``min_vec``, at least 2) — and for a wide ``vec`` give the last dimension fewer threads if the outer
    dimensions can take the rest (16-byte accesses for a 128-wide bf16 tile). ``min_vec`` is ``DEFAULT_VEC``
    unless the launch's global dtypes make 2 lanes an 8-byte access (``_preferred_vec``): the 4-byte 2-lane
    bf16 fallback of run 4 stays off (see docs, run 4)."""
    v0 = DEFAULT_VEC if vec is None else vec
    cands = [v0]
    if fallback:
        while cands[-1] > max(2, min_vec):
            cands.append(cands[-1] // 2)
    lay = None
    for v in cands:
        lay = _default_layout_v(shape, nthreads, v, shrink=fallback and v > DEFAULT_VEC)
        if lay.vec and lay.vec[-1] == v or v <= 1:
            return lay
    return lay


def copy_layout(shape, nthreads: int, itemsize: int) -> Layout:
    """Layout of a copy between a static shared tile and global memory of ``itemsize``-byte elements: the
    widest vector of at most 16 bytes (at least 4) that the last dimension allows, giving a row fewer threads
    when the outer dimensions take the rest (a 64-wide fp16 tile: 8 threads x 8 lanes per row, 4 rows per
    warp: still whole 128-byte segments); else ``default_layout``."""
    if itemsize in (1, 2, 4, 8):
        v, floor = min(8, 16 // itemsize), max(2, 4 // itemsize)
        while v >= floor:
            lay = _default_layout_v(shape, nthreads, v, shrink=True)
            if lay.vec and lay.vec[-1] == v:
                return lay
            v //= 2
    return default_layout(shape, nthreads)


def _default_layout_v(shape, nthreads: int, v: int, shrink: bool = False) -> Layout:
    n = len(shape)
    tc, ts = [1] * n, [1] * n
    remaining = nthreads
    stride = 1
    for d in reversed(range(n)):
        e = shape[d]
        if remaining <= 1 or e <= 1:
            continue
        p = min(remaining, _pow2_ceil(e))
        outer = 1
        for x in shape[:d]:
            outer *= x
        q = 1
        while q * 2 <= outer:
            q *= 2
        if p > 32:  # leave threads to the outer dims so that a row stays within a warp where it can
            p = max(32, p // q)
        if shrink and d == n - 1 and e % v == 0 and e < v * p:
            p2 = 1
            while p2 * 2 * v <= e:
                p2 *= 2
            if p2 >= 2 and p2 * q >= remaining:  # the outer dims absorb the other threads
                p = p2
        tc[d], ts[d] = p, stride
        stride *= p
        remaining //= p
    vv = [1] * n
    if n and v > 1 and tc[-1] > 1 and shape[-1] % v == 0 and shape[-1] >= v * tc[-1]:
        vv[-1] = v
    return Layout(tuple(shape), tuple(tc), tuple(ts), nthreads, tuple(vv))


def gemm_layout(M: int, N: int, nthreads: int, rows_hint: int | None = None) -> Layout:
    """Thread grid ``TR x TC`` for a gemm accumulator: square-ish per-thread micro-tiles, TC >= TR."""
    best = None
    tc = 1
    while tc <= nthreads:
        if nthreads % tc == 0:
            tr = nthreads // tc
            if rows_hint is None or tr == rows_hint:
                tm, tn = _ceil(M, tr), _ceil(N, tc)
                waste = tr * tm * tc * tn - M * N
                loads = (tm + tn) / (tm * tn)
                cost = (waste / max(1, M * N), loads, 0 if tc >= tr else 1, -tc)
                if best is None or cost < best[0]:
                    best = (cost, tr, tc)
        tc *= 2
    if best is None:
        return gemm_layout(M, N, nthreads, None)
    _, tr, tc = best
    return Layout((M, N), (tr, tc), (tc, 1), nthreads)


# ------------------------------------------------------------------------------------------ placement
SHARED = "shared"


@dataclass
class Placement:
    """Where the on-chip buffers of one launch live (by buffer uid)."""

    nthreads: int
    reg: dict = field(default_factory=dict)  # uid -> Layout
    demoted: dict = field(default_factory=dict)  # uid -> reason
    loop_layouts: dict = field(default_factory=dict)  # id(Parallel) -> Layout
    mma: set = field(default_factory=set)  # id(Gemm) of the gemms lowered to tensor cores
    notes: list = field(default_factory=list)

    def where(self, buf: N.Buffer) -> str:
        if buf.scope == "global":
            return "global"
        if buf.scope in ("shared", "shared.dyn"):
            return "shared"
        if buf.scope == "var":
            return "var"
        if buf.uid in self.demoted:
            return "shared"
        return "reg"


def is_full_region(r: N.Region) -> bool:
    buf = r.buffer
    if buf.static_shape() is None:
        return False
    for s, e, n in zip(r.starts, r.extents, buf.shape):
        if not (isinstance(s, N.Const) and s.value == 0 and e == n):
            return False
    return True


class _Access:
    __slots__ = ("buf", "dims", "write", "aligned")

    def __init__(self, buf, dims, write, aligned):
        self.buf, self.dims, self.write, self.aligned = buf, dims, write, aligned


def _parallel_accesses(p: N.Parallel, onchip):
    """Fragment accesses in a Parallel loop's body: (buffer, loop dims per buffer dim, write, aligned)."""
    pv = {v.uid: k for k, v in enumerate(p.vars)}
    acc = []

    def classify(buf, indices, write):
        dims = []
        ok = len(indices) == buf.ndim and buf.ndim > 0
        for d, i in enumerate(indices):
            if ok and type(i) is N.Var and i.uid in pv and pv[i.uid] not in dims \
                    and p.extents[pv[i.uid]] == buf.shape[d]:
                dims.append(pv[i.uid])
            else:
                ok = False
        acc.append(_Access(buf, tuple(dims) if ok else None, write, ok))

    for s in walk_stmts(p.body):
        if isinstance(s, N.Store) and onchip(s.buffer):
            classify(s.buffer, s.indices, True)
        if isinstance(s, N.Atomic) and onchip(s.dst.buffer):
            classify(s.dst.buffer, s.dst.starts, True)
        for e in loads_in(stmt_exprs(s)):
            if onchip(e.buffer):
                classify(e.buffer, e.indices, False)
    return acc


def place_buffers(launch: N.Launch, gemm_rows_hint=None, accumulator=None) -> Placement:
    """Run the placement pass over one launch (see the module docstring).

    ``accumulator(gemm, M, N, nthreads, in_shared, full_row)``, when given, may return the layout of a gemm's
    register accumulator (tensor cores: :func:`~.mma_layout.tensor_core_accumulator`; ``in_shared(buf)``
    tells whether an operand lives in shared memory); those gemms are recorded in ``Placement.mma``. When
    a placed layout has a *split* dimension (a warp grid with several warps along N) that a consumer cannot
    lower — a reduction along it (a row max/sum must see a whole row in one warp's lanes), a CUDA-core
    gemm's accumulator — the launch is placed again with ``full_row=True`` (every tensor-core gemm's warps
    along M) and ``Placement.notes`` says so: a slower grid, never a wrong answer."""
    nt = launch.num_threads
    frags = {}

    for s in walk_stmts(launch.body):
        if isinstance(s, N.Alloc) and s.buffer.scope in ("fragment", "local"):
            frags[s.buffer.uid] = s.buffer
    pl = _place_fixpoint(launch, nt, frags, accumulator)
    why = _split_unserved(launch, pl) if pl.mma else None
    if why is not None:
        pl = _place_fixpoint(launch, nt, frags, lambda *a, **kw: accumulator(*a, full_row=True, **kw))
        pl.notes.append(f"tensor-core gemm warps all along M (FullRow): {why}")
    return pl


def _place_fixpoint(launch, nt, frags, accumulator):
    forced: dict[int, str] = {}
    while True:
        pl = _place_once(launch, nt, frags, forced, accumulator)
        bad = _validate(launch, pl, frags)
        if not bad:
            return pl
        for uid, why in bad.items():
            forced.setdefault(uid, why)


def _split_unserved(launch, pl: Placement) -> str | None:
    """Why a split layout of ``pl`` cannot be lowered (see :func:`place_buffers`), or None."""
    for s in walk_stmts(launch.body):
        if isinstance(s, N.Reduce):
            lay = pl.reg.get(s.src.buffer.uid)
            if lay is not None and s.src.buffer.uid not in pl.demoted and lay.is_split(s.dim):
                return f"{s.src.buffer.name} is reduced along a dimension its warps share"
        if isinstance(s, N.Gemm) and id(s) not in pl.mma:
            lay = pl.reg.get(s.c.buffer.uid)
            if lay is not None and s.c.buffer.uid not in pl.demoted and any(lay.is_split(d) for d in range(lay.ndim)):
                return f"{s.c.buffer.name} is also the accumulator of a CUDA-core gemm"
    return None


def _place_once(launch, nt, frags, forced, accumulator=None):
    pl = Placement(nt)
    assign: dict[int, object] = {}  # uid -> Layout | SHARED
    for uid, why in forced.items():
        assign[uid] = SHARED
        pl.demoted[uid] = why

    def onchip_reg(buf):
        return buf.uid in frags

    def demote(buf, why):
        if assign.get(buf.uid) is not SHARED:
            assign[buf.uid] = SHARED
            pl.demoted[buf.uid] = why
            return True
        return False

    def require(buf, lay, why):
        cur = assign.get(buf.uid)
        if cur is SHARED:
            return False
        if cur is None:
            assign[buf.uid] = lay
            return True
        if cur != lay:
            return demote(buf, f"{why}: needs {lay.describe()} but has {cur.describe()}")
        return False

    def suggest(buf, lay):
        if buf.uid in frags and assign.get(buf.uid) is None:
            assign[buf.uid] = lay
            return True
        return False

    # 1. static demotions and FR requirements
    parallels: list[N.Parallel] = []
    reduces, copies, gemms = [], [], []
    reg_a: dict[int, list] = {}  # uid -> the gemms reading that fragment as operand A (register operand candidates)

    # T.Parallel bodies are not entered: their accesses are classified with the loop
    for s in walk_stmts(launch.body, enter=lambda s: not isinstance(s, N.Parallel)):
        if isinstance(s, N.Alloc) and s.buffer.alias_of is not None:
            root = s.buffer.alias_of
            if root.uid in frags:
                demote(root, "viewed with T.view/T.reshape")
            if s.buffer.uid in frags:
                demote(s.buffer, "a T.view/T.reshape of another buffer")
        if isinstance(s, N.Parallel):
            parallels.append(s)
            for a in _parallel_accesses(s, onchip_reg):
                if not a.aligned:
                    if a.write:
                        demote(a.buf, "written at indices that are not the T.Parallel loop variables")
                    else:
                        require(a.buf, full_replicated(a.buf.shape, nt), "read at computed indices")
            continue
        for e in loads_in(stmt_exprs(s)):
            if e.buffer.uid in frags:
                require(e.buffer, full_replicated(e.buffer.shape, nt), "read outside T.Parallel")
        if isinstance(s, N.Store) and s.buffer.uid in frags:
            require(s.buffer, full_replicated(s.buffer.shape, nt), "written outside T.Parallel")
        if isinstance(s, N.Gemm):
            gemms.append(s)
            for r in (s.a, s.b):
                if r.buffer.uid in frags:
                    if r is s.a and accumulator is not None and _register_a_candidate(s, frags):
                        reg_a.setdefault(r.buffer.uid, []).append(s)  # decided with the accumulators (step 2)
                    else:
                        demote(r.buffer, "an operand A/B of T.gemm (read by every thread)")
        if isinstance(s, (N.Copy, N.Reduce, N.Cumsum, N.Fill, N.Atomic, N.Gemm)):
            regions = (s.c,) if isinstance(s, N.Gemm) else regions_of(s)  # gemm A/B: demoted above
            for r in regions:
                if r.buffer.uid in frags and not is_full_region(r):
                    demote(r.buffer, f"a partial region in {type(s).__name__}")
            if isinstance(s, N.Cumsum):
                for r in (s.src, s.dst):
                    if r.buffer.uid in frags:
                        demote(r.buffer, "an operand of T.cumsum")
            if isinstance(s, N.Atomic) and s.dst.buffer.uid in frags:
                demote(s.dst.buffer, "the destination of an atomic")
            if isinstance(s, N.Reduce):
                reduces.append(s)
            if isinstance(s, N.Copy):
                copies.append(s)
                if s.src.buffer.uid in frags and s.dst.buffer.uid in frags:
                    if s.src.buffer.static_shape() != s.dst.buffer.static_shape():
                        pass  # relayout through shared scratch handles it
                elif s.src.buffer.uid in frags or s.dst.buffer.uid in frags:
                    r = s.src if s.src.buffer.uid in frags else s.dst
                    other = s.dst if r is s.src else s.src
                    if r is s.src and _broadcasts(s):
                        demote(r.buffer, "broadcast by T.copy into a larger tile")
                    del other

    vpref, vmin = _preferred_vec(copies, frags)

    # 2. gemm accumulators
    rows_for_m: dict[int, int] = {}
    for g in gemms:
        c = g.c.buffer
        if c.uid not in frags or assign.get(c.uid) is SHARED:
            continue
        m, n = _mat_shape(g.c)
        lay = None
        a = g.a.buffer
        in_regs = a.uid in reg_a and assign.get(a.uid) is not SHARED and len(reg_a[a.uid]) == 1
        if accumulator is not None and c.ndim == 2:
            in_shared = lambda b: b.scope in ("shared", "shared.dyn") or assign.get(b.uid) is SHARED  # noqa: E731
            lay = accumulator(g, m, n, nt, in_shared, reg_a=in_regs) if in_regs else accumulator(g, m, n, nt, in_shared)
        if a.uid in reg_a:
            if lay is not None and in_regs:
                # A stays in registers as the C fragment of an m16 x K tile on the same warps (tile_mma.py)
                require(a, a_register_layout(lay, int(a.shape[1])), "register operand A of a tensor-core gemm")
            else:
                demote(a, "an operand A/B of T.gemm (read by every thread)")
        if lay is not None:
            pl.mma.add(id(g))
        else:
            lay = gemm_layout(m, n, nt, rows_for_m.get(m))
            rows_for_m.setdefault(m, lay.tcount[0])
        if c.ndim != 2:
            demote(c, "a gemm accumulator that is not 2-D")
            continue
        require(c, lay, "gemm accumulator")

    # 3. propagation to a fixpoint, defaults when stuck
    def loop_layout(p):
        accs = _parallel_accesses(p, onchip_reg)
        cands = [a for a in accs if a.aligned and len(a.dims) == len(p.extents)
                 and isinstance(assign.get(a.buf.uid), Layout)
                 and (a.write or not assign[a.buf.uid].full_replicated)]
        cands.sort(key=lambda a: not a.write)
        for a in cands:
            return assign[a.buf.uid].permuted_from(a.dims, p.extents), accs
        if any(a.aligned and len(a.dims) == len(p.extents) and assign.get(a.buf.uid) is None for a in accs):
            return None, accs
        return default_layout(p.extents, nt, vpref, True, vmin), accs

    def apply_loop(p, lay, accs):
        changed = False
        for a in accs:
            if not a.aligned:
                continue
            cur = assign.get(a.buf.uid)
            sub = lay.restrict(a.dims)
            if isinstance(cur, Layout) and cur.full_replicated and not a.write:
                continue
            changed |= require(a.buf, sub, "indexed in a T.Parallel loop")
        return changed

    def propagate():
        changed = True
        while changed:
            changed = False
            for p in parallels:
                lay, accs = loop_layout(p)
                if lay is not None:
                    changed |= apply_loop(p, lay, accs)
            for r in reduces:
                src = assign.get(r.src.buffer.uid)
                if isinstance(src, Layout) and r.dst.buffer.uid in frags:
                    keep = r.dst.buffer.ndim == r.src.buffer.ndim
                    changed |= suggest(r.dst.buffer, src.drop(r.dim, keep))
            for c in copies:
                a, b = c.src.buffer, c.dst.buffer
                if a.uid in frags and b.uid in frags and a.static_shape() == b.static_shape():
                    la, lb = assign.get(a.uid), assign.get(b.uid)
                    if isinstance(la, Layout):
                        changed |= suggest(b, la)
                    if isinstance(lb, Layout):
                        changed |= suggest(a, lb)

    while True:
        propagate()
        # when stuck, seed the largest undecided loop first: row statistics follow their tiles
        stuck = None
        for p in parallels:
            lay, accs = loop_layout(p)
            if lay is None and (stuck is None or (len(p.extents), _size(p.extents)) >
                                (len(stuck.extents), _size(stuck.extents))):
                stuck = p
        if stuck is not None:
            apply_loop(stuck, default_layout(stuck.extents, nt, vpref, True, vmin), _parallel_accesses(stuck, onchip_reg))
            continue
        left = [b for uid, b in frags.items() if assign.get(uid) is None]
        if not left:
            break
        assign[left[0].uid] = default_layout(left[0].shape, nt, vpref, True, vmin)

    for uid, a in assign.items():
        if isinstance(a, Layout):
            pl.reg[uid] = a
    for p in parallels:
        lay, _ = loop_layout(p)
        pl.loop_layouts[id(p)] = lay
    return pl


#: False: every fragment operand of a gemm goes through shared memory, as before register operands
#: (``benchmarks/gpu_run.py --only tc`` times flash attention both ways in one process)
REGISTER_A = True


def _register_a_candidate(g: N.Gemm, frags) -> bool:
    """Whether fragment operand ``A`` of gemm ``g`` may stay in registers on tensor cores: a whole 2-D fp16/bf16
    fragment (not transposed) multiplied with a B of its dtype into a float32 register accumulator. The
    accumulator function then decides (``reg_a=True``: all warps along M, K a multiple of 16)."""
    a = g.a.buffer
    return (REGISTER_A and not g.trans_a and a.ndim == 2 and is_full_region(g.a) and a.dtype in ("float16", "bfloat16")
            and g.b.buffer.dtype == a.dtype and g.c.buffer.uid in frags and g.c.buffer.dtype == "float32")


def a_register_layout(acc: Layout, K: int) -> Layout:
    """The layout of a register operand ``A`` (``M x K``) of a tensor-core gemm with accumulator layout ``acc``
    (warps all along M): the accumulator layout of an ``M x K`` tile on the same warps, so the C fragments of
    n8 tiles ``2s``, ``2s + 1`` are the A fragment of k16 step ``s`` (:mod:`.tile_mma`)."""
    return Layout((acc.shape[0], K), (acc.tcount[0], 4), acc.tstride, acc.nthreads, (1, 2))


def _preferred_vec(copies, frags) -> tuple[int, int]:
    """(lanes, fewest lanes) of fragment default layouts: (8, 4) — 16-byte bf16/fp16 loads, 8-byte fp8 stores —
    when every global <-> fragment copy of the launch has a global dtype of at most 2 bytes; (4, 2) when they
    are all 4 bytes (fp32/int32: a row too short for 4 lanes per thread still gets 8-byte accesses); else
    (``DEFAULT_VEC``, ``DEFAULT_VEC``)."""
    sizes = set()
    for c in copies:
        for g, f in ((c.src, c.dst), (c.dst, c.src)):
            if g.buffer.scope == "global" and f.buffer.uid in frags:
                sz = dt.itemsize(g.buffer.dtype)
                if g.buffer.dtype == "float4_e2m1fn" or not sz or sz > 4:
                    return DEFAULT_VEC, DEFAULT_VEC
                sizes.add(sz)
    if sizes and max(sizes) <= 2:
        return 8, DEFAULT_VEC
    if sizes == {4}:
        return DEFAULT_VEC, 2
    return DEFAULT_VEC, DEFAULT_VEC


def _validate(launch, pl: Placement, frags) -> dict:
    """Fragments whose uses the final loop layouts do not serve (to demote in the next round)."""
    bad = {}
    for p in _all_parallels(launch.body):
        lay = pl.loop_layouts[id(p)]
        for a in _parallel_accesses(p, lambda b: b.uid in frags):
            if a.buf.uid in pl.demoted:
                continue
            cur = pl.reg.get(a.buf.uid)
            if cur is None:
                bad[a.buf.uid] = "unplaced"
                continue
            if not a.aligned:
                if a.write or not cur.full_replicated:
                    bad[a.buf.uid] = "indexed at computed indices in a T.Parallel loop"
                continue
            if cur.full_replicated and not a.write:
                continue
            if cur != lay.restrict(a.dims):
                bad[a.buf.uid] = "conflicting T.Parallel layouts"
    return bad


def _all_parallels(body):
    return [s for s in walk_stmts(body) if isinstance(s, N.Parallel)]


def _size(ext) -> int:
    n = 1
    for e in ext:
        n *= e
    return n


def _broadcasts(c: N.Copy) -> bool:
    s = tuple(e for e in c.src.extents if e != 1)
    d = tuple(e for e in c.dst.extents if e != 1)
    return s != d


def _mat_shape(r: N.Region):
    ext = [e for e in r.extents]
    while len(ext) > 2 and ext[0] == 1:
        ext.pop(0)
    return int(ext[-2]), int(ext[-1])
