"""``cp.async`` software pipelining of ``T.Pipelined`` loops: a mixin of :class:`~.lower.KernelGen`.

Contract
--------
:meth:`PipelineLowering.plan_pipelines` (run before shared memory is laid out) picks, in every
``T.Pipelined(..., num_stages=n)`` loop with ``n >= 2`` of a launch, the *asynchronous copies*: the
``T.copy(global → shared)`` statements that satisfy every condition below; a loop with at least one becomes
a *pipeline*. Every other copy (and every loop without one) keeps the ordinary lowering.

Conditions on a copy ``c`` directly in the body of loop ``L`` (not under an ``if``):

1. the source is a global tensor that no statement of the launch writes; the destination is a whole
   shared buffer (starts 0, extents = its shape) that no view aliases; same dtype on both sides (the copy
   moves bytes), of 1, 2, 4 or 8 bytes;
2. no broadcast, and the last dimension of the source pairs with the last of the destination (rows are
   contiguous on both sides); the row is a multiple of 16 bytes, and so is every static stride of the
   source between rows (dynamic strides, the array's address and the tile's start are checked at run time);
3. the source's starts read no memory and name only ``L``'s variable and values bound outside ``L``; its
   extents are static;
4. inside the launch the destination buffer is named only inside ``L``'s body, never before ``c`` in it,
   and written only by ``c``;
5. ``L`` has a positive static step and contains no ``break``/``continue``; the launch is not per-thread
   (``T.thread_binding``) code.

Lowering of a pipeline with ``n`` stages (``it`` = the iteration number, from 0):

* each asynchronous destination gets ``n`` copies of itself (``<name>_st``, stage ``s`` at element
  ``s * stage_elems``; rows laid out as tensor-core operands are, so every row starts 16-byte aligned);
  ``_smem_layout`` counts them and the over-limit error names each buffer with its stage count;
* prologue: for ``p < n - 1``, iteration ``p``'s copies (if it exists) into stage ``p``, then
  ``cp.async.commit_group``;
* iteration ``it``: ``cp.async.wait_group n-2`` (so this thread's copies of iteration ``it`` have landed)
  and ``__syncthreads`` (so every thread's have, and every thread finished iteration ``it-1``, the last
  reader of stage ``(it-1) % n``); then iteration ``it+n-1``'s copies (if it exists) into stage
  ``(it+n-1) % n = (it-1) % n`` and a commit; then the rest of the body, in which the destination names
  are views of stage ``it % n``; ``cp.async.wait_group 0`` and ``__syncthreads`` after the loop (so a
  pipeline inside an outer loop never refills a stage another thread still reads);
* with a ``wgmma`` gemm kept in flight (:meth:`~.tile_wgmma.WgmmaLowering.inflight_gemm`, ``n >= 3``; its
  docstring argues why it is race-free) ``n - 1`` becomes ``d = n - 2`` throughout: the prologue fills stages
  ``0..d-1``, iteration ``it`` waits with ``cp.async.wait_group d-1`` and refills stage ``(it+d) % n = (it-2) %
  n`` — the stage of iteration ``it-2``, whose ``wgmma`` group every warpgroup retired (``wait_group 1`` at the
  end of iteration ``it-1``) before the barrier — and ``wgmma.wait_group 0`` follows the loop;
* one asynchronous copy: when the whole tile's global rows are 16-byte aligned at run time (the global
  array's address, every outer stride and the tile's start), each thread issues 16-byte chunks
  ``_cp_async16(dst, ·, src, ·, bytes)``: when the whole tile is inside the tensor (one check per tile) every
  chunk is 16 bytes with no per-chunk test; otherwise ``bytes`` is the part of the chunk inside the tensor
  (0 for a chunk outside: zero-filled, as the ordinary copy reads zeros). Not aligned: today's copy writes
  the stage with ordinary stores (the barrier before the stage's compute publishes them too).

The barrier pass (:mod:`.barriers`) treats an asynchronous copy as having no events, a pipeline's body
as starting after a barrier (the one it contains) and the statements after the loop as following one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ... import dtypes as dt
from ...ir import nodes as N
from ...ir.queries import buffer_refs, referenced_vars
from ...ir.traverse import binds, loads_in, regions, walk_stmts
from . import emitter as E
from . import rules as Rl
from .codestr import _add, _mul, _prod
from .cp_async import MAX_WAIT


@dataclass
class Pipeline:
    """A ``T.Pipelined`` loop lowered with ``cp.async``: its stage count and asynchronous copies."""

    loop: N.For
    stages: int
    copies: list = field(default_factory=list)
    #: the ``wgmma`` gemm of the body whose group stays in flight into the next iteration (None: none)
    inflight: N.Gemm | None = None


def _root(x):
    b = x.buffer if isinstance(x, N.Region) else x
    return b.alias_of or b


class PipelineLowering:
    """``T.Pipelined`` with ``cp.async`` (see the module docstring)."""

    # ------------------------------------------------------------------------------------------ planning
    def plan_pipelines(self):
        self.pipelines: dict = {}  # id(For) -> Pipeline
        self.async_copies: set = set()  # id(Copy)
        self.staged: dict = {}  # shared buffer uid -> stage count
        if not self.async_copy or self.launch.thread_vars:
            return
        written = set()
        for s in walk_stmts(self.launch.body):
            written |= {_root(w).uid for w in regions(s)[1]}
        for s in walk_stmts(self.launch.body):
            if not (isinstance(s, N.For) and s.kind == "pipelined"):
                continue
            n = s.annotation("num_stages") or 0
            if not isinstance(n, int) or n < 2 or n - 2 > MAX_WAIT or not isinstance(s.step, int) or s.step <= 0:
                continue
            if any(isinstance(x, (N.Break, N.Continue)) for x in walk_stmts(s.body)):
                continue
            inner = set()
            for x in walk_stmts(s.body):
                inner |= {v.uid for v in binds(x) if isinstance(v, N.Var)}
            p = Pipeline(s, n)
            for i, c in enumerate(s.body):
                if isinstance(c, N.Copy) and self._async_ok(s, i, c, written, inner):
                    p.copies.append(c)
            if p.copies:
                self.pipelines[id(s)] = p
                for c in p.copies:
                    self.async_copies.add(id(c))
                    self.staged[c.dst.buffer.uid] = n
                # a wgmma gemm kept in flight across iterations (tile_wgmma.py, "One group in flight"): the refill
                # then goes two stages back, one stage fewer is loaded ahead
                p.inflight = self.inflight_gemm(s, n, {c.dst.buffer.uid for c in p.copies})

    def _async_ok(self, loop: N.For, i: int, c: N.Copy, written: set, inner: set) -> bool:
        src, dst = c.src, c.dst
        b = dst.buffer
        if self.where(src.buffer) != "global" or _root(src).uid in written:
            return False
        if b.alias_of is not None or self.where(b) != "shared" or b.uid in self._aliased or b.uid in self.staged:
            return False
        if src.buffer.dtype != b.dtype or dt.itemsize(b.dtype) not in (1, 2, 4, 8):
            return False
        if not all(isinstance(e, int) for e in tuple(src.extents) + tuple(dst.extents)):
            return False
        if tuple(dst.extents) != tuple(b.shape) or any(not (isinstance(x, N.Const) and x.value == 0)
                                                       for x in dst.starts):
            return False
        if [e for e in src.extents if e != 1] != [e for e in dst.extents if e != 1] or src.extents[-1] != dst.extents[-1]:
            return False
        ce = 16 // int(dt.itemsize(b.dtype))
        if dst.extents[-1] % ce:
            return False
        shape = src.buffer.shape
        for d in range(len(shape) - 1):  # a static outer stride that is not a whole number of chunks
            rest = shape[d + 1:]
            if src.extents[d] != 1 and all(isinstance(x, int) for x in rest) and _prod(rest) % ce:
                return False
        if any(True for _ in loads_in(tuple(src.starts))):
            return False
        if set(referenced_vars(tuple(src.starts))) & inner:
            return False
        allocs = sum(1 for x in walk_stmts(self.launch.body) if isinstance(x, N.Alloc) and x.buffer.uid == b.uid)
        if buffer_refs(self.launch.body, b.uid) - allocs != buffer_refs(loop.body, b.uid):
            return False
        if buffer_refs(tuple(loop.body[:i]), b.uid):
            return False
        for x in walk_stmts(loop.body):
            if x is not c and any(_root(w).uid == b.uid for w in regions(x)[1]):
                return False
        return True

    def stage_name(self, buf: N.Buffer) -> str:
        """Name of the shared array holding every stage of an asynchronous copy's destination."""
        return f"{self.arr(buf)}_st"

    # ------------------------------------------------------------------------------------------ lowering
    def pipelined_loop(self, s: N.For):
        p = self.pipelines[id(s)]
        n = p.stages
        d = self.loads_ahead(p)
        name = self.bind_loop(s.var)
        start = self.hoist(Rl.convert(self.expr(s.start), s.start.dtype, "int64"))
        stop = self.hoist(Rl.convert(self.expr(s.stop), s.stop.dtype, "int64"))
        step = int(s.step)
        pv = self.fresh("_p")
        self.emit(f"for {pv} in range({d}):  # cp.async pipeline prologue: stages 0..{d - 1}")
        with self.indent():
            kp = self.hoist(_add(start, _mul(pv, step)))
            self.emit(f"if {kp} < {stop}:")
            with self.indent():
                self._issue(p, kp, pv)
            self.emit("_cp_commit()")
        counter = E.INT_FORMS  # the stage number as a counter (no int64 floor modulo per iteration)
        sc = self.fresh("_sc")
        if counter:
            self.emit(f"{sc} = 0  # stage of the iteration (it % {n})")
        self.defer_begin(s)
        self.emit(f"for {name} in range({start}, {stop}, {step}):")
        with self.indent():
            it = self.fresh("_it")
            if not counter:
                self.emit(f"{it} = {name} - {start}" if step == 1 else f"{it} = ({name} - {start}) // {step}")
            self.emit(f"_cp_wait{d - 1}()")
            self.emit("cuda.syncthreads()")
            kn = self.hoist(_add(name, d * step))
            self.emit(f"if {kn} < {stop}:")
            with self.indent():
                # the stage d ahead of this iteration's: (it + d) % n, from the counter without a modulo
                self._issue(p, kn, f"({sc} + {d - n} if {sc} >= {n - d} else {sc} + {d})" if counter
                            else f"({it} + {d}) % {n}")
            self.emit("_cp_commit()")
            if not counter:
                self.emit(f"{sc} = {it} % {n}")
            for c in p.copies:
                self._bind_stage(c.dst.buffer, sc)
            n0 = self.nlines()
            self.body([x for x in s.body if id(x) not in self.async_copies])
            if counter:  # the body has no break/continue (a pipeline's condition 5)
                self.emit(f"{sc} = {sc} + 1 if {sc} < {n - 1} else 0")
            elif self.nlines() == n0:
                self.emit("pass")
        if p.inflight is not None:
            self.emit("_wg_wait0()")  # the last group retired before the accumulator is read or a stage refilled
        self.defer_end(s)
        self.emit("_cp_wait0()")
        self.emit("cuda.syncthreads()")  # no thread still reads a stage when the pipeline runs again (outer loop)

    def loads_ahead(self, p: Pipeline) -> int:
        """Iterations whose copies are in flight ahead of the one computing: ``n - 1``, or ``n - 2`` with a ``wgmma``
        group in flight (its stage is still read while the next iteration refills, so the refill goes to the stage
        of iteration ``it - 2``, whose group is retired)."""
        return p.stages - 2 if p.inflight is not None else p.stages - 1

    def _bind_stage(self, buf: N.Buffer, stage: str):
        sz = self.stage_elems[buf.uid]
        self.emit(f"{self.arr(buf)} = {self.stage_name(buf)}[{stage} * {sz}:{stage} * {sz} + {sz}]")
        self.__dict__.setdefault("_stage_views", {})[self.arr(buf)] = (self.stage_name(buf), f"{stage} * {sz}")

    def stage_view(self, arr: str):
        """``(stage array, element offset code)`` of the latest binding of the stage view ``arr``, or None."""
        return getattr(self, "_stage_views", {}).get(arr)

    def _issue(self, p: Pipeline, k: str, stage: str):
        """The asynchronous copies of the iteration whose loop variable is ``k`` into stage ``stage``."""
        uid = p.loop.var.uid
        saved = self.names[uid]
        self.names[uid] = k
        try:
            st = self.hoist(stage)
            for c in p.copies:
                self._issue_copy(c, st)
        finally:
            self.names[uid] = saved

    def _issue_copy(self, c: N.Copy, st: str):
        src, dst = c.src, c.dst
        item = int(dt.itemsize(src.buffer.dtype))
        ce = 16 // item
        ostarts = self.region_starts(src)
        conds = self._tile_aligned(src, ostarts, ce)
        dims, _ = self.gdims(src.buffer)
        if "False" not in conds and all(d.isdigit() for d in dims) and E.INT_FORMS and self._inside_proven(src, dims):
            # every tile the loop copies is inside the tensor (value ranges of the starts, affine_mask.interval; the
            # issue is guarded by ``k < stop``): no bounds check at all, only the alignment
            self.emit(f"if {' and '.join(conds)}:")
            with self.indent():
                self._chunks(c, ostarts, st, item, inside=True)
            self.emit("else:")
            with self.indent():
                self._bind_stage(dst.buffer, st)  # not aligned: the ordinary copy into the stage
                self.tile_copy(c)
            return
        if "False" not in conds:
            if all(d.isdigit() for d in dims):
                # static shapes: the whole tile inside the tensor (one check) issues every chunk without a bounds
                # test (dynamic shapes keep only the per-chunk form: the extra path cost a 128x128 bf16 GEMM its
                # last registers, 56 bytes of spills)
                inb = [f"{o} >= 0 and {_add(o, e)} <= {d}" if e > 1 else f"{o} >= 0 and {o} < {d}"
                       for o, e, d in zip(ostarts, src.extents, dims)]
                self.emit(f"if {' and '.join(conds + inb)}:")
                with self.indent():
                    self._chunks(c, ostarts, st, item, inside=True)
                self.emit(f"elif {' and '.join(conds)}:")
            else:
                self.emit(f"if {' and '.join(conds)}:")
            with self.indent():
                self._chunks(c, ostarts, st, item)
            self.emit("else:")
            self.push_indent()
        self._bind_stage(dst.buffer, st)  # not aligned: the ordinary copy into the stage
        self.tile_copy(c)
        if "False" not in conds:
            self.pop_indent()

    def _inside_proven(self, src: N.Region, dims) -> bool:
        """Whether every tile of ``src`` (static tensor dims ``dims``) the pipeline issues lies inside the tensor, from
        the value ranges of its starts (the loop variable over its loop's bounds)."""
        from .affine_mask import interval

        for o, e, d in zip(src.starts, src.extents, dims):
            r = interval(self, o)
            if r is None or r[0] < 0 or r[1] + e > int(d):
                return False
        return True

    def _chunks(self, c: N.Copy, ostarts, st: str, item: int, inside: bool = False):
        """Each thread's 16-byte ``cp.async`` chunks of the tile (bytes outside the tensor zero-filled;
        ``inside``: the caller checked that the whole tile is inside the tensor, so every chunk is 16 bytes)."""
        if inside and c.dst.buffer.uid in self.smap and self._chunks_u32(c, ostarts, st, item):
            return
        src, dst = c.src, c.dst
        b = dst.buffer
        ce = 16 // item
        ext = list(dst.extents)
        cpr = ext[-1] // ce
        total = _prod(ext[:-1]) * cpr
        nt = self.nt
        pairing = self.pair(dst, src, True)
        dims, gstr = self.gdims(src.buffer)
        sstr = self.sstrides(b)
        sz = self.stage_elems[b.uid]
        if E.INT_FORMS and len(ext) == 2 and nt % cpr == 0 and b.uid not in self.smap:
            self._chunks_strided(c, ostarts, st, item, inside, (cpr, total, pairing, dims, gstr, sstr, sz))
            return
        j, q = self.fresh("_j"), self.fresh("_q")
        self.emit(f"for {j} in range({-(-total // nt)}):")
        self.push_indent()
        self.emit(f"{q} = _tid + {j} * {nt}")
        if total % nt:
            self.emit(f"if {q} < {total}:")
            self.push_indent()
        rel = [None] * len(ext)
        rel[-1] = self.hoist(f"({q} % {cpr}) * {ce}" if cpr > 1 else "0")
        rem = f"({q} // {cpr})" if cpr > 1 else q
        for d in range(len(ext) - 2, -1, -1):
            if d == 0:
                rel[d] = self.hoist(rem)
            else:
                rel[d] = self.hoist(f"{rem} % {ext[d]}")
                rem = f"({rem} // {ext[d]})"
        gidx = [self.hoist(_add(s0, rel[pd] if pd is not None else "0")) for s0, pd in zip(ostarts, pairing)]
        gi = self.lin(gstr, gidx)
        sidx = _add(_mul(st, sz), self.slin(b, rel) if b.uid in self.smap else self.lin(sstr, rel))
        self._chunk_issue(c, sidx, gi, gidx, dims, item, inside)
        if total % nt:
            self.pop_indent()
        self.pop_indent()

    def _chunk_issue(self, c: N.Copy, sidx: str, gi: str, gidx: list, dims: list, item: int, inside: bool):
        """One ``cp.async`` of 16 bytes (``inside``) or of the chunk's bytes inside the tensor, into element
        ``sidx`` of the stage array from element ``gi`` (global indices ``gidx``) of the source."""
        b, ce = c.dst.buffer, 16 // item
        if E.INT_FORMS:
            sa = self._stage_sbase(b)
            head = f"_cp_async16a({sa} + {item} * ({sidx}), {self.arr(c.src.buffer)}"
        else:
            head = f"_cp_async16({self.stage_name(b)}, {sidx}, {self.arr(c.src.buffer)}"
        if inside:
            self.emit(f"{head}, {gi}, 16)")
            return
        ok = [f"{g} >= 0 and {g} < {d}" for g, d in zip(gidx[:-1], dims[:-1])] + [f"{gidx[-1]} >= 0"]
        nb = self.fresh("_nb")
        self.emit(f"{nb} = min(max({dims[-1]} - {gidx[-1]}, 0), {ce}) * {item} if ({' and '.join(ok)}) else 0")
        self.emit(f"{head}, {gi} if {nb} > 0 else 0, {nb})")

    def _stage_sbase(self, buf: N.Buffer) -> str:
        """``_sbase`` (:mod:`.smem_addr`) of a stage array, emitted at the current line (LLVM folds it into the shared
        symbol's address, so repeating it costs nothing)."""
        return self.hoist(f"_sbase({self.stage_name(buf)})")

    def _chunks_strided(self, c: N.Copy, ostarts, st: str, item: int, inside: bool, geo):
        """:meth:`_chunks` of a 2-D tile whose chunks per row ``cpr`` divide the block: every thread keeps its chunk
        column (``_tid % cpr``) and steps ``nt // cpr`` rows per round, so its global and shared element indices
        are a per-thread base plus a constant per round (no division or remainder per chunk; the constants become
        immediate offsets)."""
        cpr, total, pairing, dims, gstr, sstr, sz = geo
        ce, nt = 16 // item, self.nt
        rstep = nt // cpr
        col = self.hoist(f"(_tid % {cpr}) * {ce}" if cpr > 1 else "0")
        row = self.hoist(f"_tid // {cpr}" if cpr > 1 else "_tid")
        rel0 = [row, col]
        gidx0 = [self.hoist(_add(s0, rel0[pd] if pd is not None else "0")) for s0, pd in zip(ostarts, pairing)]
        gbase = self.hoist(self.lin(gstr, gidx0))
        grow = next((gs for gs, pd in zip(gstr, pairing) if pd == 0), "0")  # global stride of the tile rows
        sbase = self.hoist(_add(_mul(st, sz), self.lin(sstr, rel0)))
        j = self.fresh("_j")
        self.emit(f"for {j} in range({-(-total // nt)}):")
        self.push_indent()
        if total % nt:
            self.emit(f"if _tid + {j} * {nt} < {total}:")
            self.push_indent()
        step = _mul(j, rstep)
        gidx = [_add(g, step) if pd == 0 else g for g, pd in zip(gidx0, pairing)]
        gi = _add(gbase, _mul(step, grow))
        si = _add(sbase, _mul(step, sstr[0]))
        self._chunk_issue(c, si, gi, gidx, dims, item, inside)
        if total % nt:
            self.pop_indent()
        self.pop_indent()

    def _chunks_u32(self, c: N.Copy, ostarts, st: str, item: int) -> bool:
        """The whole-tile chunks of a swizzled ``wgmma`` operand (:mod:`.tile_wgmma`) as one 32-bit shared address
        and one global index per thread plus a constant per chunk, unrolled (False: the deltas depend on the
        thread, or the strides are dynamic; the caller then emits the rolled form).

        Chunk ``j`` of thread ``t`` is chunk ``q = t + j * nthreads`` of the tile; its destination (the buffer's
        swizzled address map) and source offsets are evaluated here for every thread: when ``offset(t, j) -
        offset(t, 0)`` is the same for all ``t`` (the 8-row swizzle phase and A's row permutation move with whole
        passes of the threads), the code computes ``offset(t, 0)`` once (loop-invariant: one 32-bit register for the
        shared side instead of 64-bit chunk addresses, which spilled) and adds literals."""
        src, dst = c.src, c.dst
        b = dst.buffer
        m = self.smap[b.uid]
        ce = 16 // item
        ext = list(dst.extents)
        cpr = ext[-1] // ce
        total = _prod(ext[:-1]) * cpr
        nt = self.nt
        pairing = self.pair(dst, src, True)
        dims, gstr = self.gdims(src.buffer)
        if len(ext) != 2:
            return False
        gnum = _static_strides(src.buffer)  # a static tensor's strides are named in the source, known here
        if gnum is None:
            if not all(str(g).lstrip("-").isdigit() for g in gstr):
                return False
            gnum = [int(g) for g in gstr]

        def rel(q):
            return [q // cpr, (q % cpr) * ce]

        def goff(r):
            return sum(g * (r[pd] if pd is not None else 0) for g, pd in zip(gnum, pairing))

        nj = -(-total // nt)
        deltas = []
        for j in range(nj):
            ts = [t for t in range(nt) if t + j * nt < total]
            ds = {(m.offset(*rel(t + j * nt)) - m.offset(*rel(t)), goff(rel(t + j * nt)) - goff(rel(t))) for t in ts}
            if len(ds) != 1:
                return False
            deltas.append((ds.pop(), len(ts)))
        r0 = [self.hoist(f"_tid // {cpr}" if cpr > 1 else "_tid"), self.hoist(f"(_tid % {cpr}) * {ce}" if cpr > 1 else "0")]
        gidx = [self.hoist(_add(s0, r0[pd] if pd is not None else "0")) for s0, pd in zip(ostarts, pairing)]
        ga, sa = self.fresh("_ga"), self.fresh("_sa")
        self.emit(f"{ga} = {self.lin(gstr, gidx)}")
        self.emit(f"{sa} = uint32(_smem_u32({self.stage_name(b)}, {_mul(st, self.stage_elems[b.uid])})) + "
                  f"uint32(({self.slin(b, r0)}) * {item})")
        for (ds, dg), nthr in deltas:
            line = f"_cp_async16u({sa} + uint32({ds * item}), {self.arr(src.buffer)}, {_add(ga, dg)}, 16)"
            self.emit(line if nthr == nt else f"if _tid < {nthr}:")
            if nthr != nt:
                self.emit(f"    {line}")
        return True


def _static_strides(buf: N.Buffer) -> list | None:
    """Row-major element strides of a global buffer whose shape is all literal ints, else None."""
    if not all(isinstance(x, int) for x in buf.shape):
        return None
    out, acc = [], 1
    for x in reversed(buf.shape):
        out.append(acc)
        acc *= int(x)
    return out[::-1]
