"""Registers per thread and register spills of one launch (GPU profiles).

Contract
--------
* :func:`registers` → ``(granted, spilled)`` registers per thread: demand from the launch's live
  fragment bytes (``LaunchProgram.register_peak_bytes`` under a liveness profile, else every fragment)
  plus the profile's overhead, rounded to the allocation unit; the cap is the hardware's per-thread
  limit, the block's share of the register file, or the ``setmaxnreg`` grant of a warp-specialised
  kernel's consumers. ``details["registers_at_launch"]`` is the count the compiled kernel declares
  (what ``cuobjdump -res-usage`` prints): a warp-specialised kernel launches every thread, producer
  included, with the register file's share ``floor(file / all threads)`` (at most the grant) and
  ``setmaxnreg`` moves registers from the producer to the consumers afterwards (TileLang's
  128×256 GEMM at 256 consumer threads: 168 at launch, 240 per consumer). Demand over the cap is never refused: the registers the hot loop needs beyond
  ``cap - register_min_overhead_per_thread`` are *spilled*.
* :func:`with_spills` returns the block program with the spilled registers' local-memory traffic
  added to its innermost, most-executed loop (``prog`` is not modified): one store and one reload per
  spilled register and iteration, times ``spill_traffic_factor`` when that loop's ``T.gemm``
  accumulates across iterations (a spilled wgmma accumulator also serialises the MMAs).
* Where spilled bytes go (``spill_l1`` profiles): local memory is cached in the core's L1, the part of
  the combined L1/shared-memory array (a ``caches`` level ``l1`` with ``core_kind`` set: its ``bytes``
  per core) that the resident blocks' shared memory leaves free. When the MMA accumulators of the hot
  loop's gemms fit under the cap (what spills is CUDA-core state, e.g. the fp8 GEMM's promoted
  accumulator beside a 128-register wgmma fragment) and the spilled bytes of the resident blocks fit in
  that free L1, the traffic is costed at the array's bandwidth (``smem`` work), without the
  serialisation factor; otherwise as L2 requests as before.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..analysis.program import Loop, Op
from ..ir import nodes as N
from ..ir.traverse import buffers_of, walk_stmts

__all__ = ["l1_free_bytes", "registers", "with_spills"]


def registers(prog, machine, producer: int, details: dict) -> tuple[float, float]:
    """(registers per thread granted, registers per thread spilled in the hot loop).

    Demand: live fragment registers per thread (``prog.register_peak_bytes`` under a liveness profile,
    else every fragment) plus the profile's overhead, rounded up to the allocation unit. Cap: the
    hardware's per-thread limit (255 on NVIDIA), the register file shared by one block's threads, and
    in warp-specialised kernels the consumer's ``setmaxnreg`` value. Demand over the cap is spilled
    (never refused): the spilled registers that the hot loop needs are fragment registers beyond
    ``cap - register_min_overhead_per_thread``; the rest of the overhead is spilled or rematerialised
    outside it at no modelled cost.
    """
    p, occ = machine.profile, machine.core.occupancy
    live = prog.register_peak_bytes if prog.register_peak_bytes is not None else \
        sum(prog.fragment_bytes.values()) + sum(prog.local_bytes.values())
    frag_regs = live / 4.0 / max(1, prog.threads)
    unit = getattr(occ, "register_alloc_unit_count", None) or 1
    demand = math.ceil((frag_regs + p.register_overhead_per_thread) / unit - 1e-9) * unit
    cap = float(getattr(occ, "max_registers_per_thread_count", None) or math.inf)
    if occ.registers_count:  # one block's threads share the register file (launch bounds)
        avail = occ.registers_count - producer * p.producer_registers_per_thread
        cap = min(cap, math.floor(avail / max(1, prog.threads) / unit) * unit)
    at_launch = None
    if producer and p.consumer_registers_per_thread:
        cap = min(cap, p.consumer_registers_per_thread)
        regs = cap  # setmaxnreg grants the consumers this many whatever they use
        if occ.registers_count:  # the kernel's own count (cuobjdump): the file shared by every thread
            at_launch = min(cap, math.floor(occ.registers_count / (prog.threads + producer) / unit) * unit)
    else:
        regs = min(demand, cap)
    spill = max(0.0, frag_regs + p.register_min_overhead_per_thread - cap)
    details["registers_per_thread"] = regs
    details["registers_at_launch"] = at_launch if at_launch is not None else regs
    details["registers_demand"] = demand
    details["spill_registers_per_thread"] = spill
    details["register_cap"] = cap
    return regs, spill


def _hot_path(body, mult=1.0, path=()):
    """(executions, path of loop indices) of the innermost loop executed most often."""
    best = (0.0, None)
    for i, n in enumerate(body):
        if isinstance(n, Loop):
            m = mult * float(np.max(n.trip)) * float(np.max(n.weight))
            inner = _hot_path(n.body, m, path + (i,))
            cand = inner if inner[1] is not None and inner[0] >= m else (m, path + (i,))
            if cand[0] > best[0]:
                best = cand
    return best


def _carries_accumulator(prog, path) -> bool:
    """Whether the hot loop carries register fragments across its ``T.gemm``: a gemm that accumulates
    across iterations (no ``clear_accum``), or a fragment the loop reads before it writes it (a promoted
    fp8 accumulator ``acc += partial * scale``). Spilling such state around the asynchronous MMAs also
    serialises them (``spill_traffic_factor``); a loop whose gemm starts afresh every iteration and whose
    fragments are all produced in it (the DSA indexer's per-head sums) spills like any value."""
    stmts = list(walk_stmts(list(prog.launch.body)))
    frags = {b.uid for st in stmts for b in buffers_of(st) if b.scope in ("fragment", "local")}
    fresh = {}  # loc -> the buffer a clearing gemm / reduction writes without reading
    for st in stmts:
        if isinstance(st, N.Gemm):
            if not st.clear_accum:
                fresh[st.loc] = None
            else:
                fresh[st.loc] = st.c.buffer.uid
        elif isinstance(st, N.Reduce) and st.clear:
            fresh[st.loc] = st.dst.buffer.uid
    ops = _loop_ops(prog, path)
    if not any(o.node == "Gemm" for o in ops):
        return False
    if any(o.node == "Gemm" and o.loc in fresh and fresh[o.loc] is None for o in ops):
        return True
    looped = {u for o in ops for u in o.writes} & frags
    seen: set = set()
    for o in ops:
        reads = set(o.reads)
        if o.node in ("Gemm", "Reduce") and fresh.get(o.loc) is not None:
            reads.discard(fresh[o.loc])
        if (reads & looped) - seen:
            return True
        seen |= set(o.writes)
    return False


def _loop_ops(prog, path) -> list:
    nodes = prog.body
    for i in path or ():
        nodes = nodes[i].body
    ops, stack = [], list(nodes)
    while stack:  # program order, loops flattened
        n = stack.pop(0)
        if isinstance(n, Loop):
            stack[:0] = list(n.body)
        else:
            ops.append(n)
    return ops


def _mma_registers(prog, path) -> float:
    """Registers per thread of the accumulators the hot loop's ``T.gemm`` statements write."""
    locs = {o.loc for o in _loop_ops(prog, path) if o.node == "Gemm"}
    accs = {}
    for st in walk_stmts(list(prog.launch.body)):
        if isinstance(st, N.Gemm) and st.loc in locs and st.c.buffer.scope in ("fragment", "local"):
            accs[st.c.buffer.uid] = float(prog.fragment_bytes.get(st.c.buffer.name, 0.0))
    return sum(accs.values()) / 4.0 / max(1, prog.threads)


def l1_free_bytes(machine, blocks_per_core: int, shared_bytes: float) -> float | None:
    """Bytes of the core's combined L1/shared array left to L1 by ``blocks_per_core`` resident blocks
    (None: the hardware model has no per-core ``l1`` level)."""
    l1 = next((c for c in machine.hw.caches if c.name == "l1" and c.core_kind), None)
    if l1 is None or not l1.bytes:
        return None
    return max(0.0, float(l1.bytes) - blocks_per_core * float(shared_bytes))


def with_spills(prog, machine, details: dict, blocks_per_core: int = 1):
    """``prog.body`` with the spilled registers' local-memory traffic added to its hot loop.

    Each hot-loop iteration stores and reloads the spilled registers of every thread
    (``2 × spill × 4 B × threads``, times ``spill_traffic_factor`` when spilled state is carried across
    the gemm and the MMA accumulators themselves do not fit under the cap). The bytes are L1 traffic
    (``smem`` work) when the profile's ``spill_l1`` holds, the MMA accumulators fit and the resident
    blocks' spilled bytes fit in the L1 that shared memory leaves free; else L2 requests (never DRAM:
    the lines stay on chip). ``prog`` is not modified.
    """
    spill = float(details.get("spill_registers_per_thread", 0.0) or 0.0)
    if spill <= 0:
        return prog.body
    _, path = _hot_path(prog.body)
    p = machine.profile
    in_l1 = False
    if p.spill_l1:
        free = l1_free_bytes(machine, blocks_per_core, details.get("shared_bytes", 0.0))
        fits_mma = _mma_registers(prog, path) + p.register_min_overhead_per_thread <= details["register_cap"]
        in_l1 = bool(free is not None and fits_mma and blocks_per_core * spill * 4.0 * prog.threads <= free)
    factor = p.spill_traffic_factor if (not in_l1 and _carries_accumulator(prog, path)) else 1.0
    nbytes = 2.0 * spill * 4.0 * prog.threads * factor
    work = {"smem": nbytes} if in_l1 else {"global": nbytes}
    op = Op(kind="compute", label="register spills", node="Spill", loc=prog.launch.loc, side="matrix",
            reads=frozenset(), writes=frozenset(), work=work, xfer={"registers<->local": nbytes})

    def rebuild(nodes, rest):
        if not rest:
            return list(nodes) + [op]
        out = list(nodes)
        out[rest[0]] = dataclasses.replace(out[rest[0]], body=rebuild(out[rest[0]].body, rest[1:]))
        return out
    return rebuild(prog.body, path or ())
