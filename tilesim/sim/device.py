"""The device: occupancy, the L2 reuse model, waves of blocks and the tail.

Contract
--------
* :func:`occupancy` gives blocks per core from shared memory, registers, threads and the block limit
  of the hardware model (NPUs: one block per AI core; buffers checked against their capacity). A
  block whose shared memory or threads do not fit at all raises ``KernelError`` naming the buffer, the
  bytes and the limit; registers never refuse (:mod:`.registers`: demand past the cap is spilled and
  its local-memory traffic costed in the hot loop).
* :func:`reuse` sets every op's DRAM bytes from its global bytes. For each global tensor it finds
  the block axes its addresses depend on; blocks differing only in the other axes re-read the same
  data. Walking the dispatch order (row-major ``bx`` fastest, or TileLang's ``T.use_swizzle`` panels)
  a re-read at distance ``D`` blocks hits L2 when ``D`` is within one wave (the blocks run together)
  or when the data touched in between fits in L2; otherwise a fraction ``1 - L2 / footprint`` misses.
  A tensor every block reads its own part of (its addresses use every block axis) and reads more of
  than that part (a second pass over a row) misses on the re-read the fraction ``1 - L2 / F``, ``F``
  the resident blocks' parts of every tensor they touch (reads and writes; a shared tensor once).
* :func:`simulate_launch`: the largest of a fluid bound (critical paths over ``cores × k`` slots;
  each resource's busy time over the cores, DRAM/L2 shared device-wide) and a wave-quantisation
  bound (per block class, ``ceil(blocks at least that slow / slots)`` rounds of its per-core time),
  plus the launch latency. The work is proportional to the number of block *classes*, not blocks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..analysis.program import Loop
from ..errors import KernelError
from .engine import BlockModel, Timeline, block_time, busy, sfu_funcs
from .registers import registers, with_spills

__all__ = ["occupancy", "reuse", "simulate_launch", "LaunchResult", "dispatch_coords"]


@dataclass
class LaunchResult:
    name: str
    time_s: float
    launch_s: float
    fluid_s: float
    quantisation_s: float
    blocks: int
    blocks_per_core: int
    occupancy_limit: str
    waves: float
    slots: int
    busy_s: dict
    dram_read: float
    dram_write: float
    dram_compulsory: float
    l2_bytes: float
    flops: dict
    xfer: dict
    sfu: dict
    block_time_s: float
    registers_per_thread: float | None = None  # the occupancy estimate (GPU profiles)
    registers_demand: float | None = None  # what the live fragments + overhead want (may exceed the grant)
    registers_at_launch: float | None = None  # the compiled kernel's declared count (cuobjdump -res-usage)
    spill_registers_per_thread: float = 0.0  # spilled registers the hot loop reloads
    trace_events: list = field(default_factory=list)
    notes: list = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# Occupancy
# ---------------------------------------------------------------------------------------------


def occupancy(prog, machine) -> tuple[int, str, dict]:
    hw, p = machine.hw, machine.profile
    details: dict = {}
    core = machine.core
    occ = core.occupancy
    shared = sum(prog.shared_bytes.values())
    frag = sum(prog.fragment_bytes.values()) + sum(prog.local_bytes.values())
    details["shared_bytes"] = shared
    details["fragment_bytes"] = frag
    if not p.fragment_registers:
        # NPU: every on-chip buffer lives in a named buffer of the core kind that uses it
        for side, core_kind in (("matrix", machine.mcore), ("vector", machine.vcore)):
            names = [n for n, s in prog.side_of_buffer.items() if s == side]
            for scope, table in (("shared", prog.shared_bytes), ("fragment", prog.fragment_bytes),
                                 ("local", prog.local_bytes)):
                need = sum(v for n, v in table.items() if n in names)
                if not need:
                    continue
                try:
                    buf = hw.buffer_for_scope(scope, core_kind.name)
                except Exception:  # noqa: BLE001
                    continue
                cap = buf.bytes * (machine.vec_per_block if side == "vector" and core_kind is not machine.mcore else 1)
                if need > cap:
                    big = max(((n, v) for n, v in table.items() if n in names), key=lambda x: x[1])
                    raise KernelError(
                        f"the {scope} buffers of one block need {need:,.0f} bytes on {core_kind.name}'s "
                        f"{buf.name}, which holds {cap:,.0f} (largest: '{big[0]}', {big[1]:,.0f} bytes)",
                        prog.launch.loc, hint="use smaller tiles or fewer pipeline stages")
        return 1, "one block per core", details
    producer = p.producer_threads if prog.has_async_copies and prog.warp_specialized else 0
    threads = prog.threads + producer
    details["threads"] = threads
    limits = {}
    if occ is not None and occ.max_threads_per_block_count and prog.threads > occ.max_threads_per_block_count:
        raise KernelError(f"a block of {prog.threads} threads exceeds {hw.name}'s limit of "
                          f"{occ.max_threads_per_block_count} threads per block", prog.launch.loc,
                          hint="use fewer threads")
    try:
        sbuf = hw.buffer_for_scope("shared", core.name)
    except Exception:  # noqa: BLE001
        sbuf = None
    if sbuf is not None and shared:
        cap_block = sbuf.block_bytes or sbuf.bytes
        if p.max_shared_bytes_per_block is not None:
            cap_block = min(cap_block, p.max_shared_bytes_per_block)
        if shared > cap_block:
            big = max(prog.shared_bytes.items(), key=lambda x: x[1])
            who = f"the {p.name} backend's limit" if cap_block == p.max_shared_bytes_per_block else \
                f"{hw.name}'s per-block limit ({sbuf.name})"
            raise KernelError(
                f"one block needs {shared:,.0f} bytes of shared memory, over {who} of {cap_block:,.0f} bytes "
                f"(largest buffer: '{big[0]}', {big[1]:,.0f} bytes, pipeline copies included)",
                prog.launch.loc, hint="reduce the tile sizes or num_stages")
        limits["shared memory"] = int(sbuf.bytes // shared)
    if occ is not None:
        regs_per_thread, spill = registers(prog, machine, producer, details)
        if occ.registers_count:
            need = regs_per_thread * prog.threads + producer * p.producer_registers_per_thread
            limits["registers"] = max(1, int(occ.registers_count // need))
        if occ.max_threads_count:
            limits["threads"] = int(occ.max_threads_count // threads)
        if occ.max_warps_count and occ.warp_size_count:
            limits["warps"] = int(occ.max_warps_count // math.ceil(threads / occ.warp_size_count))
        if occ.max_blocks_count:
            limits["blocks"] = int(occ.max_blocks_count)
    if not limits:
        return 1, "unknown limits (1 block per core)", details
    name, k = min(limits.items(), key=lambda x: x[1])
    if k < 1:
        raise KernelError(f"a block does not fit on a {core.name} ({name})", prog.launch.loc)
    details["limits"] = limits
    return k, name, details


def _largest(table):
    if not table:
        return ""
    n, v = max(table.items(), key=lambda x: x[1])
    return f"(largest '{n}', {v:,.0f} bytes)"


# ---------------------------------------------------------------------------------------------
# Dispatch order and L2 reuse
# ---------------------------------------------------------------------------------------------


def dispatch_axes(grid, swizzle):
    """Axes of the dispatch order, fastest first: (extent, stride, block axis)."""
    gx, gy, gz = grid
    if swizzle and gx > 1 and gy > 1:
        panel, order = int(swizzle[0]), str(swizzle[1])
        if order == "column":
            w = max(1, min(panel, gx))
            ax = [(w, 0), (gy, 1), (math.ceil(gx / w), 0), (gz, 2)]
        else:
            w = max(1, min(panel, gy))
            ax = [(w, 1), (gx, 0), (math.ceil(gy / w), 1), (gz, 2)]
    else:
        ax = [(gx, 0), (gy, 1), (gz, 2)]
    out, stride = [], 1
    for ext, a in ax:
        out.append((ext, stride, a))
        stride *= ext
    return out


def dispatch_coords(grid, swizzle, pos: np.ndarray):
    """Block coordinates (bx, by, bz) of dispatch positions ``pos`` (TileLang rasterisation)."""
    gx, gy, gz = grid
    pos = np.asarray(pos, dtype=np.int64)
    z = pos // (gx * gy)
    q = pos % (gx * gy)
    if swizzle and gx > 1 and gy > 1:
        panel, order = int(swizzle[0]), str(swizzle[1])
        if order == "column":
            w = max(1, min(panel, gx))
            psize = w * gy
            pidx, off = q // psize, q % psize
            total = -(-(gx * gy) // psize)
            stride = np.where(pidx + 1 < total, w, (gx * gy - pidx * psize) // gy)
            stride = np.maximum(stride, 1)
            row = np.where(pidx & 1, gy - 1 - off // stride, off // stride)
            col = off % stride + pidx * w
        else:
            w = max(1, min(panel, gy))
            psize = w * gx
            pidx, off = q // psize, q % psize
            total = -(-(gx * gy) // psize)
            stride = np.where(pidx + 1 < total, w, (gx * gy - pidx * psize) // gx)
            stride = np.maximum(stride, 1)
            col = np.where(pidx & 1, gx - 1 - off // stride, off // stride)
            row = off % stride + pidx * w
        return np.clip(col, 0, gx - 1), np.clip(row, 0, gy - 1), z
    return q % gx, q // gx, z


def _walk_mult(body, mult=1.0):
    for n in body:
        if isinstance(n, Loop):
            yield from _walk_mult(n.body, mult * n.trip * n.weight)
        else:
            yield n, mult * n.weight


def reuse(prog, machine, slots: int) -> dict:
    """Set ``op.dram`` for every op; return per-tensor totals (requests, DRAM, compulsory)."""
    counts = prog.counts
    n = prog.num_blocks
    per: dict = {}
    for op, mult in _walk_mult(prog.body):
        for g in op.gaccess:
            key = (g.buffer.uid, g.write)
            ent = per.setdefault(key, {"buf": g.buffer, "R": 0.0, "deps": set(), "data": False, "blk": 0.0})
            ent["R"] += _sum_classes(g.bytes * mult, counts)
            ent["blk"] = ent["blk"] + g.bytes * mult
            ent["deps"] |= set(g.deps)
            ent["data"] = ent["data"] or g.data_dependent
    axes = dispatch_axes(prog.grid, prog.swizzle)
    sizes = {ax: prog.grid[ax] for ax in range(3)}

    def tiles(deps):
        t = 1
        for a in deps:
            t *= sizes[a]
        return t

    for ent in per.values():
        tb = prog.global_buffers.get(ent["buf"].uid, (None, float("inf")))[1]
        T = tiles(ent["deps"])
        # unique bytes: the blocks of one reuse group read (at most) what the largest of them reads
        blk = ent["blk"]
        biggest = float(np.max(np.where(counts > 0, blk, 0.0))) if isinstance(blk, np.ndarray) else float(blk)
        ent["F"] = min(tb, ent["R"], biggest * T) if n else 0.0
        ent["T"] = T

    def footprint(dist):
        fp = 0.0
        for ent in per.values():
            if ent["data"]:
                fp += ent["R"] * min(1.0, dist / n)
                continue
            distinct = 1.0
            for ext, stride, a in axes:
                if a in ent["deps"] and ext > 1:
                    distinct *= min(ext, math.ceil(dist / stride))
            fp += ent["F"] * min(1.0, distinct / max(1, ent["T"]))
        return fp

    # intra-block re-reads (a block reading its own rows again in a second pass): between the two reads
    # the resident blocks stream their own data through L2; a re-read misses the fraction of that
    # footprint L2 cannot hold
    resident = min(n, slots) if n else 0
    # what the resident blocks hold in L2 at once: their parts of each tensor (a shared tensor once)
    intra_fp = sum(e["F"] * min(1.0, resident / max(1, e["T"])) for e in per.values())
    intra_miss = max(0.0, 1.0 - machine.l2_bytes / intra_fp) if intra_fp > 0 and machine.l2_bytes else 0.0
    ratio = {}
    for key, ent in per.items():
        if key[1]:
            dram = ent["F"]
        elif ent["data"]:
            dram = min(ent["R"], max(ent["F"], ent["R"] * min(1.0, footprint(slots) / max(machine.l2_bytes, 1.0))
                                     if machine.l2_bytes else ent["R"]))
        else:
            reload = 1.0
            for ext, stride, a in axes:
                if a in ent["deps"] or ext <= 1:
                    continue
                if stride < slots:
                    miss = 0.0
                else:
                    fp = footprint(stride)
                    miss = max(0.0, 1.0 - machine.l2_bytes / fp) if fp > 0 else 0.0
                reload *= 1.0 + (ext - 1) * miss
            dram = min(ent["R"], ent["F"] * reload)
            if n and ent["T"] >= n:  # every block reads its own data: what is read beyond it is re-read
                dram = min(ent["R"], dram + max(0.0, ent["R"] - ent["F"]) * intra_miss)
        ent["DRAM"] = dram
        ratio[key] = dram / ent["R"] if ent["R"] > 0 else 0.0
    for op, _ in _walk_mult(prog.body):
        d = 0.0
        for g in op.gaccess:
            d = d + g.bytes * ratio.get((g.buffer.uid, g.write), 1.0)
        op.dram = d
    return per


# ---------------------------------------------------------------------------------------------
# Waves
# ---------------------------------------------------------------------------------------------


def _sum_classes(v, counts):
    if isinstance(v, np.ndarray):
        return float(np.sum(np.broadcast_to(v, np.broadcast_shapes(v.shape, counts.shape)) * counts))
    return float(v) * float(np.sum(counts))


#: Resources of one core (blocks on different cores do not share them); the rest are device-wide.
CORE_RESOURCES = ("matrix", "vector", "sfu", "smem", "operand", "path", "roundtrip")


def simulate_launch(prog, machine, name: str, trace: bool = False) -> LaunchResult:
    """Schedule one launch (see the module docstring).

    The time is the largest of three bounds, each monotone in the work and exact for uniform blocks:
    the fluid of critical paths over all ``cores × k`` slots; per resource, its busy time summed over
    all blocks over the cores (device-wide DRAM/L2 bandwidth is a fluid, so a short last wave gets
    the whole bandwidth); and wave quantisation — for every block class, the blocks at least as
    slow as it need ``ceil(count / slots)`` rounds of its per-core time ``max(critical path,
    k × busiest per-core resource)``.
    """
    k, limit, details = occupancy(prog, machine)
    body = with_spills(prog, machine, details, k)
    C = machine.n_cores
    n = prog.num_blocks
    slots = C * k
    per = reuse(prog, machine, slots)
    counts = prog.counts
    if n > slots:
        ca, ke = C, k
    else:
        ca = min(C, n)
        ke = max(1, math.ceil(n / ca))
    dram_bw = machine.dram_bw_for(ke * prog.threads, ca, prog.sync_load_bytes_per_thread, prog.has_async_copies)
    bm = BlockModel(machine, machine.l2_bw / ca, dram_bw / ca, prog.threads, machine.dram_bw / ca)
    # under the Little's-law bound each core's loads in flight set its own DRAM rate: a per-core resource
    # (a short block on one more core does not speed up the others)
    per_core = CORE_RESOURCES + (("dram",) if dram_bw < machine.dram_bw else ())
    cp = block_time(bm, body)
    bz = busy(bm, body)
    if machine.profile.serial_block_launch and machine.block_launch_s:
        # a core starts its blocks one after another: the launch is a per-core resource, not only a
        # stretch of each block's critical path (docs/simulator.md §3h)
        bz["launch"] = machine.block_launch_s
        per_core = per_core + ("launch",)
    per_slot = _sum_classes(cp, counts) / (ca * ke)
    res_terms = {r: _sum_classes(v, counts) / ca for r, v in bz.items()}
    core_busy = np.zeros(counts.shape)
    for r, v in bz.items():
        if r in per_core:
            core_busy = np.maximum(core_busy, np.broadcast_to(v, counts.shape))
    cp_k = np.broadcast_to(cp, counts.shape)
    if machine.profile.phase_locked_issue and ke > 1 and "vector" in bz:
        # identical blocks started together stay in phase: their memory waits coincide, and so do their
        # bursts of CUDA-core instructions, which then take turns at the schedulers (docs/simulator.md §3f)
        cp_k = cp_k + (ke - 1) * np.minimum(np.broadcast_to(bz["vector"], counts.shape), cp_k)
    if machine.profile.mma_phase_locked and ke > 1 and "issue" in bz:
        # the co-resident blocks' mma.sync/cp.async instruction streams take turns at the schedulers: each warp's
        # step lengthens by the other blocks' issue (docs/simulator.md §6c)
        cp_k = cp_k + (ke - 1) * np.minimum(np.broadcast_to(bz["issue"], counts.shape), cp_k)
    tq = np.maximum(cp_k, ke * core_busy)
    if machine.profile.chain_latency:
        # the per-block critical path with physical step latencies: co-resident blocks overlap their chains,
        # so a round of the wave quantisation lasts at least one chain (docs/simulator.md §3h)
        bmc = BlockModel(machine, machine.l2_bw / ca, dram_bw / ca, prog.threads, machine.dram_bw / ca, chain=True)
        tq = np.maximum(tq, np.broadcast_to(block_time(bmc, body), counts.shape))
    tq = tq.ravel()
    cnt = counts.ravel()
    order = np.argsort(-tq, kind="stable")
    cum = np.cumsum(cnt[order])
    quant = float(np.max(np.ceil(cum / (ca * ke) - 1e-9) * tq[order])) if cum.size else 0.0
    fluid = max([per_slot] + list(res_terms.values()))
    body_s = max(fluid, quant)
    block_s = float(np.max(np.broadcast_to(cp, counts.shape)))
    busy_tot = res_terms
    fluid_s, quant_s = fluid, max(0.0, quant - fluid)
    events = []
    if trace:
        cls = np.unravel_index(int(np.argmax(np.broadcast_to(cp, counts.shape) * (counts > 0))), counts.shape)

        def pick(v):
            if isinstance(v, np.ndarray):
                v = np.broadcast_to(v, counts.shape)
                return v[cls]
            return v
        rec = Timeline(pick)
        block_time(bm, body, rec)
        events = rec.events
    flops: dict = {}
    xfer: dict = {}
    l2 = 0.0
    for op, mult in _walk_mult(body):
        for kkey, v in op.flops.items():
            flops[kkey] = flops.get(kkey, 0.0) + _sum_classes(v * mult, counts)
        for kkey, v in op.xfer.items():
            xfer[kkey] = xfer.get(kkey, 0.0) + _sum_classes(v * mult, counts)
        if "global" in op.work:
            l2 += _sum_classes(op.work["global"] * mult, counts)
    dram_read = sum(e["DRAM"] for (uid, w), e in per.items() if not w)
    dram_write = sum(e["DRAM"] for (uid, w), e in per.items() if w)
    compulsory = sum(e["F"] for e in per.values())
    sfu = {}
    for kkey, v in sfu_funcs(body).items():
        sfu[kkey] = _sum_classes(v, counts)
    notes = list(prog.notes)
    if details.get("spill_registers_per_thread"):
        notes.append(f"registers: about {details['registers_demand']:.0f} per thread wanted, "
                     f"{details['registers_per_thread']:.0f} granted; "
                     f"{details['spill_registers_per_thread']:.0f} per thread spilled in the hot loop "
                     "(costed as local-memory traffic)")
    return LaunchResult(
        name=name, time_s=machine.launch_s + body_s, launch_s=machine.launch_s, fluid_s=fluid_s,
        quantisation_s=quant_s, blocks=n, blocks_per_core=k, occupancy_limit=limit, waves=n / slots, slots=slots,
        busy_s=busy_tot, dram_read=dram_read, dram_write=dram_write, dram_compulsory=compulsory, l2_bytes=l2,
        flops=flops, xfer=xfer, sfu=sfu, block_time_s=block_s,
        registers_per_thread=details.get("registers_per_thread"), registers_demand=details.get("registers_demand"),
        registers_at_launch=details.get("registers_at_launch"),
        spill_registers_per_thread=details.get("spill_registers_per_thread", 0.0), trace_events=events, notes=notes)
