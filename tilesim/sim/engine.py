"""One block on one core: ops occupy the core's engines in program order, with dependencies.

Contract
--------
* :class:`BlockModel` turns each :class:`~tilesim.analysis.program.Op` into times for the block's
  share of the machine: ``lat`` (memory or round-trip latency), ``xfer`` (global transfer at the
  core's share of L2/DRAM bandwidth, capped by the core's load path), ``comp`` (the slowest of its
  unit/shared-memory demands) and ``sync`` (barriers), and a per-resource busy time.
* :func:`block_time` is the block's critical path when it runs alone on its core: threads issue ops
  in order on their side's timeline (one timeline on GPUs; cube and vector timelines on Ascend);
  ``async`` copies run on the copy engine and only their consumers wait; a synchronous load issued
  right after another it does not depend on overlaps its latency with it; ``store``\\ s drain in the
  background; a serial loop is its body × trips (an ``unrolled`` loop — a short barrier-free loop the
  compiler unrolls, its loads hoisted — pays its memory latencies once: first iteration + the rest
  without latency); a pipelined loop (``num_stages`` = S ≥ 2, profile
  with overlap) runs at the steady-state period ``P = max(compute, copy transfer, (copy latency +
  transfer + compute) / S)`` per iteration after one fully exposed iteration, so more stages never
  make it slower; S ≤ 1 or no overlap: copy + compute in sequence.
* :func:`busy` sums each resource's busy time over the block (trips and weights included): with
  ``k`` blocks on a core the simulator takes ``max(critical path, k × busiest resource)``.
* All times are NumPy arrays over block classes (or floats): one pass serves every class.
"""

from __future__ import annotations

import math

import numpy as np

from ..analysis.program import Loop, Op

__all__ = ["BlockModel", "block_time", "busy", "Timeline"]

INF = float("inf")


def _mx(a, b):
    return np.maximum(a, b)


def _barrier_scale(threads: int, machine) -> float:
    """A block barrier's cost relative to the hardware file's ``overheads.sync_cycles`` (measured as
    ``__syncthreads`` in a 1024-thread block): with ``profile.barrier_per_warp`` it is proportional to the
    warps that arrive (each warp's arrival and release takes its scheduler's issue slots), so a
    128-thread barrier costs an eighth of a 1024-thread one; otherwise 1."""
    if not (machine.profile.barrier_per_warp and threads):
        return 1.0
    w = max(1, threads // machine.warp_size)
    return min(1.0, w / BARRIER_MEASURED_WARPS)


#: Warps of the block in which ``overheads.sync_cycles`` was measured (``hwmodels/microbench.py``).
BARRIER_MEASURED_WARPS = 32.0


class BlockModel:
    """Per-op times of one block given the core's shares of L2/DRAM bandwidth."""

    def __init__(self, machine, l2_share: float, dram_share: float, threads: int = 0,
                 store_dram_share: float | None = None, chain: bool = False):
        self.m = machine
        #: physical step latencies (``Op.chain_cycles``) for the per-block critical-path bound (§3h)
        self.chain = chain
        wg = machine.profile.warpgroup_warps * machine.warp_size
        self.wgs = max(1, threads // wg) if wg else 1
        self.l2_share = l2_share
        self.dram_share = dram_share
        #: stores wait for no data: the Little's-law bound of loads in flight does not apply to them
        self.store_dram_share = dram_share if store_dram_share is None else store_dram_share
        self.sync_s = machine.sync_s * _barrier_scale(threads, machine)
        self._cache: dict[int, tuple] = {}

    def side(self, op_side: str) -> str:
        return op_side if self.m.separate_sides else "core"

    def parts(self, op: Op):
        hit = self._cache.get(id(op))
        if hit is not None:
            return hit
        m = self.m
        busy: dict = {}
        comp = 0.0
        for key, amount in op.work.items():
            if key in ("global", "roundtrip"):
                continue
            rate = m.rate(key)
            if rate == INF:
                continue
            t = amount / rate
            rk = key.split(":")[0]
            busy[rk] = busy.get(rk, 0.0) + t
            comp = _mx(comp, t)
        xfer = 0.0
        lat = 0.0
        g = op.work.get("global")
        if g is not None:
            d = op.dram
            tl2 = g / self.l2_share
            if op.kind == "async" and not m.profile.cp_async:
                tl2 = tl2 / m.profile.tma_l2_scale  # TMA's L2 reads (profile field; 1.0: the file's L2 bandwidth)
            tdr = d / (self.store_dram_share if op.kind == "store" else self.dram_share)
            path = m.path_rate(op.side)
            pb = g
            if op.kind == "async" and m.profile.tma_full_box and not m.profile.cp_async and "smem" in op.work:
                pb = _mx(g, op.work["smem"])  # the TMA engine moves the whole box, zero fill included
            tp = pb / path if path != INF else 0.0
            # a block's own transfer is limited by its core's L2 share and load path; DRAM bandwidth
            # is a device-wide fluid (the busy term below), so per-block DRAM shares never enter here
            xfer = _mx(tl2, tp)
            busy["l2"] = busy.get("l2", 0.0) + tl2
            busy["dram"] = busy.get("dram", 0.0) + tdr
            if path != INF:
                busy["path"] = busy.get("path", 0.0) + tp
            if op.latency == "global":
                # blocks of one wave that share a tile miss together: a global read waits for DRAM
                if op.kind == "async" and m.profile.cp_async:
                    # cp.async: a global load issued by the threads, served by L2 or DRAM (no TMA path)
                    miss = np.clip(np.divide(d, np.maximum(g, 1e-30)), 0.0, 1.0)
                    lat = m.l2_lat_s + (m.dram_lat_s - m.l2_lat_s) * miss
                elif op.kind == "async":
                    al = m.async_latency(op.side)
                    lat = al if al is not None else m.dram_lat_s
                    if m.profile.async_hit_latency and lat > m.dram_lat_s - m.l2_lat_s:
                        # the path's latency includes a DRAM access; bytes L2 serves save its difference
                        miss = np.clip(np.divide(d, np.maximum(g, 1e-30)), 0.0, 1.0)
                        lat = lat - (m.dram_lat_s - m.l2_lat_s) * (1.0 - miss)
                elif m.profile.async_copy and not m.profile.sync_loads_little and not m.profile.cp_async:
                    lat = m.dram_lat_s
                else:
                    # synchronous loads: a load whose bytes the reuse model serves from L2 (a second
                    # pass over a row, scales many blocks read) waits for L2, the rest for DRAM
                    miss = np.clip(np.divide(d, np.maximum(g, 1e-30)), 0.0, 1.0)
                    lat = m.l2_lat_s + (m.dram_lat_s - m.l2_lat_s) * miss
                if op.kind != "async" and op.load_rounds > 1.0:
                    lat = lat * op.load_rounds  # few threads load: their outstanding bytes return round by round
                if op.gather and op.kind != "async":
                    # the addresses come from an index load (a small, reused table: an L2 hit) issued first;
                    # with serial gathers each thread's chunks wait index and data one chunk after another
                    lat = (lat + m.l2_lat_s) * op.gather_rounds
        rt = op.work.get("roundtrip")
        rtt = 0.0
        if rt is not None:
            rate, rlat = m.roundtrip()
            rtt = rt / min(rate, self.l2_share) + rlat
            busy["roundtrip"] = busy.get("roundtrip", 0.0) + rt / min(rate, self.l2_share)
            busy["l2"] = busy.get("l2", 0.0) + rt / self.l2_share
        cyc = op.chain_cycles if (self.chain and op.chain_cycles is not None) else op.latency_cycles
        if cyc:
            lat = lat + cyc / m.clock
        sync = op.syncs * self.sync_s
        res = (lat, xfer, comp, sync, rtt, busy)
        self._cache[id(op)] = res
        return res


class Timeline:
    """Optional event recorder for a Chrome trace (scalar times of one block class)."""

    def __init__(self, pick):
        self.pick = pick  # amount -> float
        self.events: list = []

    def add(self, name, track, start, end, args=None):
        s, e = float(self.pick(start)), float(self.pick(end))
        if e > s:
            self.events.append((name, track, s, e, args or {}))


class _State:
    __slots__ = ("t", "mem_free", "ready", "pending")

    def __init__(self):
        self.t: dict = {}
        self.mem_free = 0.0
        self.ready: dict = {}
        self.pending = 0.0

    def now(self, side):
        return self.t.get(side, 0.0)

    def all_t(self):
        out = 0.0
        for v in self.t.values():
            out = _mx(out, v)
        return out

    def end(self):
        out = _mx(self.all_t(), self.pending)
        for v in self.ready.values():
            out = _mx(out, v)
        return out


def _dep(st: _State, uids):
    out = 0.0
    for u in uids:
        r = st.ready.get(u)
        if r is not None:
            out = _mx(out, r)
    return out


def _run_op(bm: BlockModel, op: Op, st: _State, rec: Timeline | None, off, scale=1.0, nolat=False):
    lat, xfer, comp, sync, rtt, _ = bm.parts(op)
    if nolat:
        lat = 0.0
    w = op.weight
    side = bm.side(op.side)
    if op.kind == "async":
        start = _mx(st.now(side), st.mem_free)
        end = start + w * (lat + xfer)
        st.mem_free = start + w * xfer
        for u in op.writes:
            st.ready[u] = end
        st.pending = _mx(st.pending, end)
        if rec:
            rec.add(op.label, "copy engine", off + start, off + end)
        return
    dep = _dep(st, op.reads)
    if op.kind == "store":
        start = _mx(st.now(side), dep)
        issue = w * (comp + sync + rtt)
        st.t[side] = start + issue
        ms = _mx(st.t[side], st.mem_free)
        st.mem_free = ms + w * xfer
        # the block's slot frees when its threads exit: stores drain in the background (their bytes
        # still count against the bandwidth in the throughput bound)
        if rec:
            rec.add(op.label, f"{side} threads", off + start, off + start + issue)
            rec.add(op.label, "copy engine", off + ms, off + st.mem_free)
        return
    start = _mx(st.now(side), dep)
    dur = w * (lat + _mx(xfer, comp * scale) + sync + rtt)
    end = start + dur
    st.t[side] = end
    for u in op.writes:
        st.ready[u] = end
    if rec:
        rec.add(op.label, f"{side} threads", off + start, off + end)


def _fresh_time(bm, nodes, rec, off, scale=1.0, nolat=False):
    st = _State()
    _run_seq(bm, nodes, st, rec, off, scale, nolat)
    return st.end()


def _dominant_busy(bm, nodes) -> tuple:
    """(sum of compute durations, busiest unit's time) of one pass over ``nodes`` (no memory)."""
    chain = 0.0
    units: dict = {}
    for n in nodes:
        if isinstance(n, Loop):
            c, u = _dominant_busy(bm, n.body)
            chain = chain + c * n.trip * n.weight
            units["_loop"] = units.get("_loop", 0.0) + u * n.trip * n.weight
            continue
        lat, xfer, comp, sync, rtt, b = bm.parts(n)
        chain = chain + n.weight * comp
        for k, v in b.items():
            if k in ("l2", "dram", "path", "roundtrip"):
                continue
            units[k] = units.get(k, 0.0) + n.weight * v
    mx = 0.0
    for v in units.values():
        mx = _mx(mx, v)
    return chain, mx


def _wg_factor(bm, nodes):
    """Stretch of compute durations when ``w`` consumer warpgroups share the core's units.

    One warpgroup's chain runs on ``1/w`` of the data while the others keep the busiest unit going:
    ``(chain + (w - 1) × busiest) / w`` instead of ``chain`` (1 for ``w = 1``).
    """
    w = bm.wgs
    if w <= 1:
        return 1.0
    chain, mx = _dominant_busy(bm, nodes)
    safe = np.where(chain > 0, chain, 1.0) if isinstance(chain, np.ndarray) else (chain or 1.0)
    f = (chain + (w - 1) * mx) / (w * safe)
    return np.minimum(f, 1.0) if isinstance(f, np.ndarray) else min(f, 1.0)


#: Iterations of a pipelined loop simulated event by event before extrapolating the steady state.
SIM_ITERS = 12


def _pipelined(bm: BlockModel, lp: Loop, S: int, rec: Timeline | None, off):
    """Event model of a pipelined loop; returns per-iteration cumulative end times ``E[0..n]``."""
    m = bm.m
    copies = [n for n in lp.body if isinstance(n, Op) and n.kind == "async"]
    rest = [n for n in lp.body if not (isinstance(n, Op) and n.kind == "async")]
    async_uids = set()
    for c in copies:
        async_uids |= c.writes
    trip = lp.trip
    tmax = float(np.max(trip)) if isinstance(trip, np.ndarray) else float(trip)
    n = int(min(math.ceil(tmax), SIM_ITERS + S))
    f = _wg_factor(bm, rest)
    sync_it = m.profile.sync_per_pipelined_iteration * m.sync_s
    mem_free = 0.0
    ready: dict = {}
    release: dict = {}
    t = 0.0
    E = [0.0]
    for i in range(n):
        r = rec if (rec is not None and i == 0) else None
        for c in copies:
            lat, xfer, comp, sync, rtt, _ = bm.parts(c)
            slot = 0.0
            for u in c.writes:
                slot = _mx(slot, release.get((u, i - S), 0.0))
            st0 = _mx(mem_free, slot)
            end = st0 + c.weight * (lat + xfer)
            mem_free = st0 + c.weight * xfer
            for u in c.writes:
                ready[(u, i)] = end
            if r:
                r.add(c.label, "copy engine", off + st0, off + end)
        prev = None
        for node in rest:
            if isinstance(node, Loop):
                d = _fresh_time(bm, [node], None, 0.0)
                dep = 0.0
                reads = set()
                for o in _ops(node.body):
                    reads |= o.reads
            else:
                lat, xfer, comp, sync, rtt, _ = bm.parts(node)
                if _overlaps_previous(prev, node):
                    lat = 0.0
                d = node.weight * (lat + _mx(xfer, comp * f) + sync + rtt)
                reads = node.reads
            prev = node
            dep = 0.0
            for u in reads & async_uids:
                dep = _mx(dep, ready.get((u, i), 0.0))
            st0 = _mx(t, dep)
            t = st0 + d
            for u in reads & async_uids:
                release[(u, i)] = _mx(release.get((u, i), 0.0), t)
            if r:
                r.add(node.label, "threads", off + st0, off + t)
        t = t + sync_it
        E.append(t)
    return E


def _interp_total(E, trip, S: int = 1):
    """Time of ``trip`` iterations from the simulated cumulative ends ``E`` (steady-state beyond).

    The steady state repeats every ``S`` iterations (one per pipeline stage), so the period is the
    mean increment over the last ``S`` simulated iterations.
    """
    n = len(E) - 1
    if n == 0:
        return 0.0 * trip
    k = S if n > S else 1
    period = (E[n] - E[n - k]) / k
    tr = trip
    total = E[n] + (tr - n) * period
    for j in range(n, 0, -1):
        seg = E[j - 1] + (tr - (j - 1)) * (E[j] - E[j - 1])
        total = np.where(tr <= j, seg, total) if isinstance(tr, np.ndarray) or isinstance(seg, np.ndarray) \
            else (seg if tr <= j else total)
    return np.maximum(total, 0.0) if isinstance(total, np.ndarray) else max(total, 0.0)


def _run_loop(bm: BlockModel, lp: Loop, st: _State, rec: Timeline | None, off):
    m = bm.m
    trip = lp.trip
    reads = set()
    for n in _ops(lp.body):
        reads |= n.reads
    start = _mx(st.all_t(), _dep(st, reads))
    has_async = any(isinstance(n, Op) and n.kind == "async" for n in lp.body)
    if lp.kind == "pipelined" and has_async and m.profile.overlap:
        S = max(1, lp.stages)
        total = None
        for s_ in range(1, S + 1):  # more stages can only help: keep the best schedule
            E = _pipelined(bm, lp, s_, rec if s_ == S else None, off + start)
            t_s = _interp_total(E, trip, s_)
            total = t_s if total is None else np.minimum(total, t_s)
        it_end = E[1] if len(E) > 1 else 0.0
    else:
        f = _wg_factor(bm, lp.body)
        body = _fresh_time(bm, lp.body, rec, off + start, scale=f)
        if lp.kind == "pipelined":
            body = body + m.profile.sync_per_pipelined_iteration * m.sync_s
        if lp.kind == "unrolled":  # the iterations' loads are in flight together: latency paid once
            total = body + (trip - 1) * _fresh_time(bm, lp.body, None, 0.0, scale=f, nolat=True)
        else:
            total = trip * body
        it_end = body
    total = total * lp.weight
    end = start + total
    if rec:
        rec.add(f"{lp.label} × {float(rec.pick(trip)):.4g}", "loops", off + start, off + end,
                {"first iteration (s)": float(rec.pick(it_end))})
    for side in list(st.t) or [bm.side("vector")]:
        st.t[side] = end
    if bm.m.separate_sides:
        st.t["matrix"] = end
        st.t["vector"] = end
    st.mem_free = _mx(st.mem_free, end)
    st.pending = _mx(st.pending, end)


def _ops(nodes):
    for n in nodes:
        if isinstance(n, Loop):
            yield from _ops(n.body)
        else:
            yield n


def _overlaps_previous(prev, n) -> bool:
    """A synchronous load issued right after another it does not depend on, with no barrier between
    them (the first does not end in one): their latencies overlap."""
    return (isinstance(prev, Op) and isinstance(n, Op) and prev.kind == "load" and n.kind == "load"
            and not prev.syncs and not (n.reads & prev.writes))


def _run_seq(bm, nodes, st, rec, off, scale=1.0, nolat=False):
    prev = None
    for n in nodes:
        if isinstance(n, Loop):
            _run_loop(bm, n, st, rec, off)
        else:
            _run_op(bm, n, st, rec, off, scale, nolat or _overlaps_previous(prev, n))
        prev = n


def block_time(bm: BlockModel, body, rec: Timeline | None = None):
    """Critical path of one block alone on its core (seconds, array over block classes)."""
    st = _State()
    _run_seq(bm, body, st, rec, 0.0)
    return st.end() + bm.m.block_launch_s


def busy(bm: BlockModel, body, mult=1.0, out: dict | None = None) -> dict:
    """Busy time of each resource for one block (seconds, arrays over block classes)."""
    out = {} if out is None else out
    for n in body:
        if isinstance(n, Loop):
            busy(bm, n.body, mult * n.trip * n.weight, out)
        else:
            b = bm.parts(n)[5]
            f = mult * n.weight
            for k, v in b.items():
                out[k] = out.get(k, 0.0) + f * v
    return out


def sfu_funcs(body, mult=1.0, out: dict | None = None) -> dict:
    out = {} if out is None else out
    for n in body:
        if isinstance(n, Loop):
            sfu_funcs(n.body, mult * n.trip * n.weight, out)
        else:
            for k, v in n.sfu_funcs.items():
                out[k] = out.get(k, 0.0) + mult * n.weight * v
    return out
