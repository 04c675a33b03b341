"""Cost rules for tile operations: ``T.copy``, ``T.gemm``, reductions, ``T.cumsum``, ``T.fill``
and tile atomics.

Contract
--------
Each rule returns one :class:`~tilesim.analysis.program.Op` with its work by resource, FLOPs by
(unit, dtype), bytes by level pair and global accesses, under the launch's lowering profile.
Copies with edges count only in-bounds global bytes; ``T.gemm`` operand traffic follows the
profile's operand mode (``wgmma``, ``warps``, ``fma`` or an NPU data ``path``). Rules also record
which core side wrote each on-chip buffer (for NPU round trips) and async-copy destinations.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import KernelTypeError
from ..ir import nodes as N
from ..ir.traverse import walk_stmts
from ..warp_partition import mma_sync_grid
from .analyzer import Analyzer
from .mma_stream import matrix_key, tensor_turns, wgmma_lowered, wgmma_stream
from .node_helpers import (
    _core,
    _elems,
    _partition,
    _root,
    _scope,
    _size,
    _static,
    _vec_dtype,
    guarded_copy,
    single_stage,
)
from .owner_rules import column_vector_paired
from .rule_tables import COST_RULES


@COST_RULES.register(N.Copy)
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
        asyn = (p.async_copy and ds == "shared" and not single_stage(a) and not guarded_copy(a)
                and (not p.cp_async or a.pipelined_depth > 0))
        op = a.new_op("async" if asyn else "load", s, side, (src.buffer,), (dst.buffer,),
                      f"copy {src.buffer.name}→{dst.buffer.name}")
        # share of the tile's chunks in tiles wholly inside the tensor (static shapes; block classes averaged)
        inside = float(np.mean(inb)) / max(1.0, n) if src.buffer.static_shape() is not None else 0.0
        issue = _cp_async_issue(a, s, side, tile, inside) if asyn and p.cp_async else []
        op.work["global"] = gbytes
        op.gaccess.append(a.gaccess(src, gbytes, False))
        op.latency = "global"
        if not asyn:  # a thread issues all its loads of the tile before their first use (unrolled)
            a.sync_load_bytes = max(a.sync_load_bytes, n * _size(src.dtype) / max(1, a.threads))
        level = "global->shared" if ds == "shared" else "global->registers"
        op.xfer[level] = gbytes
        if ds == "shared":
            op.work["smem"] = tile
            if not asyn:
                op.work["vector:float32"] = 2.0 * n  # a load and a store per element, by the threads
                if p.cp_async and p.warp_issue_cycles:  # the same 16-byte chunk code as cp.async, loads and stores
                    _chunk_stream(a, op, tile)
                if p.sync_per_shared_write:
                    op.syncs = 1.0
            else:
                a.async_dst.add(_root(dst.buffer).uid)
                a.pipelined_async = a.pipelined_async or a.pipelined_depth > 0
        else:
            op.work["vector:float32"] = tile / a.vec_bytes
        a.mark_written(op, (dst.buffer,))
        return issue + [op]
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


#: label prefix of the threads' ``cp.async`` issue ops (not scaled by ``element_slot_factor``: counted in SASS)
CP_ASYNC_ISSUE = "cp.async issue"


def _cp_async_issue(a: Analyzer, s: N.Copy, side: str, tile_bytes: float, inside: float = 0.0) -> list:
    """The threads' side of a ``cp.async`` tile copy (profile ``cp_async``): ``cp_async_chunk_instr`` instructions
    per 16-byte chunk and thread, as issue slots only: the chunks' address arithmetic is independent, so it issues
    back to back (no dependent chain)."""
    p = a.profile
    per_thread = math.ceil(tile_bytes / 16.0 / max(1, a.threads)) * p.cp_async_chunk_instr
    if per_thread <= 0:
        return []
    op = a.new_op("compute", s, side, (), (), f"{CP_ASYNC_ISSUE} {s.dst.buffer.name}")
    if p.warp_issue_cycles:
        per_chunk = p.cp_async_chunk_instr
        extra = 0.0
        if p.cp_async_inside_chunk_instr:  # static shapes: tiles wholly inside skip the per-chunk bounds
            per_chunk = inside * p.cp_async_inside_chunk_instr + (1.0 - inside) * p.cp_async_chunk_instr
            extra = p.cp_async_tile_check_instr
        _chunk_stream(a, op, tile_bytes, per_chunk, extra)
    else:
        op.work["vector:float32"] = per_thread * a.threads
    return [op]


def _chunk_stream(a: Analyzer, op, tile_bytes: float, per_chunk: float | None = None, extra: float = 0.0) -> None:
    """A tile copy's per-thread 16-byte chunk code as a warp instruction stream (``per_chunk`` instructions a chunk,
    default ``cp_async_chunk_instr``, plus ``extra`` per tile): ``warp_issue_cycles`` of scheduler time per
    instruction (``issue`` work, phase-locked across co-resident blocks) and ``warp_cpi - warp_issue_cycles`` more
    per instruction on the warp's own chain."""
    p = a.profile
    per_chunk = p.cp_async_chunk_instr if per_chunk is None else per_chunk
    per_thread = math.ceil(tile_bytes / 16.0 / max(1, a.threads)) * per_chunk + extra
    op.work["vector:float32"] = op.work["issue"] = per_thread * a.threads * p.warp_issue_cycles
    op.latency_cycles = op.latency_cycles + per_thread * max(0.0, p.warp_cpi - p.warp_issue_cycles)


def _issue_cycles(a: Analyzer, lane_slots: float) -> float:
    """Core cycles the block's schedulers take to issue ``lane_slots`` (32 per warp instruction) at the vector
    unit's calibrated rate, the block alone on its core (what the simulator charges for that work)."""
    core = _core(a.hw, a.profile.vector_core or a.profile.matrix_core)
    u = next((u for u in core.units if u.kind == "vector"), None)
    fpc = (u.flops_per_cycle.get("float32") if u else None) or 0.0
    if not fpc:
        return 0.0
    eff = min(1.0, max(1e-3, a.hw.efficiency("vector", "float32", default=1.0) or 1.0))
    return lane_slots / (fpc / a.profile.vector_flops_per_slot * eff)


def mma_sync_counts(M: int, N: int, K: int, warps: int, policy, in_dtype: str, a_shared: bool, b_shared: bool):
    """Per warp: ``(HMMA, ldmatrix.x4, (WM, WN))`` of one ``mma.sync`` gemm ``M×N×K`` (fp8: ``m16n8k32`` = two HMMA,
    one x4 per m16 tile of A and per two n8 tiles of B per k step of the instruction)."""
    wm, wn = mma_sync_grid(M, N, warps, policy)
    fp8 = in_dtype.startswith("float8")
    ksteps = max(1, K // (32 if fp8 else 16))
    m16 = max(1, M // (16 * wm))
    n8 = max(1, N // (8 * wn))
    hmma = m16 * n8 * ksteps * (2 if fp8 else 1)
    ldsm = ksteps * ((m16 if a_shared else 0) + (math.ceil(n8 / 2) if b_shared else 0))
    return hmma, ldsm, (wm, wn)


@COST_RULES.register(N.Gemm)
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
    on_matrix = p.gemm_unit == "matrix" and (not p.matrix_dtypes or in_dt in p.matrix_dtypes)
    if on_matrix:
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
    mode = p.gemm_operands if on_matrix or p.gemm_unit != "matrix" else "fma"
    if mode == "wgmma" and in_dt not in p.wgmma_dtypes:
        mode = "warps"
    policy = p.gemm_policy or s.policy
    if mode == "wgmma":
        wgs = max(1, warps // max(1, p.warpgroup_warps))
        rows, cols = p.wgmma_rows, p.mma_shape[1]
        wm, wn = _partition(policy, wgs, max(1, M // rows), max(1, N_ // cols))
        smem = wn * A_bytes + max(1, math.ceil(M / rows)) * B_bytes
    elif mode == "warps" and on_matrix and p.mma_sync_issue:
        hmma, ldsm, (wm, wn) = mma_sync_counts(M, N_, K, warps, policy, in_dt, a_sh, b_sh)
        fp8 = in_dt.startswith("float8")
        chain = hmma * (1.0 + (p.mma_fp8_chain_instr if fp8 else 0.0)) + ldsm * (1.0 + p.ldsm_extra_instr) + \
            (p.loop_iter_instr if a.pipelined_depth else 0.0)
        extra = hmma * (p.mma_fp8_extra_instr - p.mma_fp8_chain_instr) if fp8 else 0.0
        if p.wgmma_stream and a.pipelined_depth and wgmma_lowered(s, M, N_, K, a.threads):
            # the backend's wgmma K loop (tilesim.cuda_wgmma on): its per-k-block stream and the group's tensor turn
            wgmma_stream(a, op, warps)
            tensor_turns(a, op, flops, mdt, matrix_key(in_dt), dict(p.wgmma_peak_fraction).get(matrix_key(in_dt), 0.0),
                         _issue_cycles(a, 1.0))
            chain = extra = None
        elif p.warp_issue_cycles:
            # additive contention: each instruction holds its scheduler warp_issue_cycles (issue slots), and a
            # warp's own chain adds warp_cpi - warp_issue_cycles per instruction (with phase_locked_issue the
            # co-resident blocks' issue adds to the chain: a warp's step = instr x (cpi + issue x (warps - 1)))
            op.work["vector:float32"] = (chain * p.warp_issue_cycles + extra) * warps * a.warp_size
            op.work["issue"] = op.work["vector:float32"]
            op.latency_cycles = max(0.0, chain * (p.warp_cpi - p.warp_issue_cycles))
        else:
            # the first model: one warp's chain or the block's issue, whichever is longer
            op.work["vector:float32"] = (chain + extra) * warps * a.warp_size
            op.latency_cycles = max(0.0, chain * p.warp_cpi - _issue_cycles(a, op.work["vector:float32"]))
        if chain is not None and p.mma_matrix_fraction:
            # today's lowering: HMMAs at a fraction of the unit's peak, co-resident blocks taking turns (§6d)
            tensor_turns(a, op, flops, mdt, matrix_key(in_dt), p.mma_matrix_fraction, _issue_cycles(a, 1.0))
        smem = wn * A_bytes + wm * B_bytes
    elif mode == "warps":
        wm, wn = _partition(policy, warps, max(1, M // p.mma_shape[0]), max(1, N_ // p.mma_shape[1]))
        smem = wn * A_bytes + wm * B_bytes
    elif mode == "fma":
        o = max(1.0, M * N_ / a.threads)
        r = math.sqrt(o)
        per = max(4.0, _size(s.a.dtype))
        smem = a.threads * K * 2.0 * r * per if (a_sh or b_sh) else 0.0
        if p.gemm_operand_issue and smem:
            loads = a.threads * K * 2.0 * r
            cvt = loads if in_dt != "float32" else 0.0
            op.work["vector:float32"] = (flops / p.vector_flops_per_slot + loads + cvt) / p.gemm_issue_fraction
    else:  # "path": operands cross a data path once (NPU L1 -> L0A/L0B)
        smem = 0.0
        op.work["operand"] = A_bytes + B_bytes
        op.xfer["L1->L0 (matrix operands)"] = A_bytes + B_bytes
    if smem:
        op.work["smem"] = smem
        op.xfer["shared->matrix unit" if on_matrix else "shared->registers"] = smem
    a.mark_written(op, (s.c.buffer,))
    return [op]


def _vec_unit(a: Analyzer) -> str:
    core = _core(a.hw, a.profile.vector_core or a.profile.matrix_core)
    u = next((u for u in core.units if u.kind == "vector"), None)
    return u.name if u else "vector"


def _gemm_outputs(a: Analyzer) -> set:
    """uids of the buffers some ``T.gemm`` of the launch accumulates into (MMA fragment layout)."""
    if a.gemm_outputs is None:
        a.gemm_outputs = {st.c.buffer.uid for st in walk_stmts(list(a.launch.body)) if isinstance(st, N.Gemm)}
    return a.gemm_outputs


def _mma_reduce_threads(a: Analyzer, s: N.Reduce, extent: int) -> tuple[float, float]:
    """(threads sharing one output, butterfly steps through shared memory) of a reduction of an MMA
    accumulator (``row_stat_layout="mma"``).

    The accumulator is ``R × C`` (its root buffer; a ``T.reshape`` view that keeps the last dimension
    splits the rows). Warps split the rows in 16-row tiles (``m_warps = min(warps, R / 16)``, the rest
    split the columns); within a warp a 16 × 8 tile is held by 8 lane groups (rows) × 4 lanes (column
    pairs). A reduction over the columns is shared by 4 lanes × ``n_warps``; one over ``e`` consecutive
    rows by ``min(8, e / 2)`` lane groups × ``min(m_warps, e / 16)`` warps. The warp factor is the part of
    the butterfly with offsets of a warp or more (shared memory, two barriers a step)."""
    ws = a.warp_size
    root = _root(s.src.buffer)
    rshape = root.static_shape() or ()
    C = int(rshape[-1]) if rshape else 1
    R = 1
    for d in rshape[:-1]:
        R *= int(d)
    warps = max(1, a.threads // ws)
    m_warps = max(1, min(warps, R // 16))
    n_warps = max(1, warps // m_warps)
    vshape = [_static(e) for e in s.src.buffer.shape]
    last = s.dim == len(vshape) - 1 or (vshape and vshape[-1] != C)
    if last:
        lanes, wsh = min(4, max(1, extent // 2)), min(n_warps, max(1, C // 8))
    else:
        stride = 1
        for d in vshape[s.dim + 1:-1]:
            stride *= int(d)
        rows = extent * stride
        lanes = min(8, max(1, rows // 2)) if stride == 1 else min(8, max(1, extent))
        wsh = min(m_warps, max(1, rows // 16))
    return float(lanes * wsh), (math.log2(wsh) if wsh > 1 else 0.0)


def _chain(a: Analyzer, seq: float, steps: float, smem_steps: float) -> float | None:
    """Physical dependent latency (cycles) of ``seq`` butterfly all-reduces of ``steps`` steps, ``smem_steps``
    of them through shared memory (profile ``chain_latency``; None when off). A shuffle step waits the
    shared-memory crossbar's latency (the hardware file's shared-memory latency) and a dependent ALU op; a
    step through shared memory the load of the partner's value after the barrier that orders it behind the
    store, and the op (its two barriers are the op's ``syncs``). Rows separated by those barriers run one after
    another; shuffle-only rows are independent and overlap, each later row adding its issue (a shuffle and an
    op a step)."""
    if not a.profile.chain_latency:
        return None
    lat = _smem_latency(a)
    shfl = max(0.0, steps - smem_steps)
    if steps <= 0:
        return 0.0
    one = steps * (lat + ALU_DEPENDENT_CYCLES)
    if smem_steps > 0:
        return seq * one
    return one + max(0.0, seq - 1.0) * 2.0 * shfl


#: cycles from a dependent FP32 ALU instruction's issue to its result: 4 since Volta (Jia et al., "Dissecting the
#: NVIDIA Volta GPU Architecture via Microbenchmarking", 2018, table 4.1; Turing/Ampere/Hopper keep it)
ALU_DEPENDENT_CYCLES = 4.0


def _smem_latency(a: Analyzer) -> float:
    core = _core(a.hw, a.profile.vector_core or a.profile.matrix_core)
    for b in core.buffers:
        if "shared" in b.scopes and b.latency_cycles:
            return float(b.latency_cycles)
    return 0.0


def _butterfly_slots(a: Analyzer, outputs: float, P: float, steps: float, smem_steps: float) -> float:
    """Issue slots (thread instructions) of TileLang's butterfly ``AllReduce`` for ``outputs`` values shared by
    ``P`` threads each. Profile ``reduce_issue_all_threads``: every one of the ``P`` threads runs every step — a
    shuffle and the op, or a store, a load and the op for a step through shared memory (``tl::AllReduce``'s
    ``run``); otherwise a shuffle and an op per output and step (one thread's share, the older count)."""
    if a.profile.reduce_issue_all_threads:
        return outputs * P * (2.0 * steps + smem_steps)
    return outputs * 2.0 * steps


def reduce_cross(a: Analyzer, s: N.Reduce) -> tuple[float, float, float, float | None]:
    """The cross-thread part of a register reduction: (issue slots, barriers, latency cycles, physical
    latency cycles or None: :func:`_chain`).

    ``P`` threads share a row. ``reduce_layout="rows"``: ``P = threads / rows``; ``log2(min(P, warp))``
    shuffle steps (a shuffle and an op per output), and when ``P`` exceeds a warp a barrier and
    ``P / warp`` per-warp partials read back in sequence. ``reduce_layout="flat"`` (TileLang): a
    fragment no gemm writes is bound to threads row-major, ``v`` consecutive elements each (``v`` =
    the widest load of the profile in the fragment's dtype), so ``P = min(threads, row / v)``; the
    butterfly all-reduce runs once per row a thread holds (``rows · P / threads`` in sequence), each
    ``log2(P)`` dependent steps of which those with offset ≥ warp go through shared memory behind two
    barriers. A gemm accumulator keeps the ``"rows"`` rule."""
    if not (a.profile.fragment_registers and _scope(s.src.buffer) == "reg"):
        return 0.0, 0.0, 0.0, None
    Ed = float(max(1, _elems(s.dst)))
    ws = float(a.warp_size)
    shape = s.src.tile_shape()
    row = _static(shape[s.dim]) if shape and s.dim < len(shape) else None
    if a.profile.row_stat_layout == "mma" and row and _root(s.src.buffer).uid in _gemm_outputs(a):
        ext = s.src.extents[s.dim] if s.dim < len(s.src.extents) else None
        P, smem_steps = _mma_reduce_threads(a, s, int(_static(ext)) if ext is not None else int(row))
        seq = max(1.0, Ed * P / a.threads)
        steps = math.log2(P) if P > 1 else 0.0
        return (_butterfly_slots(a, Ed, P, steps, smem_steps), seq * 2.0 * smem_steps,
                seq * steps * a.profile.reduce_step_cycles, _chain(a, seq, steps, smem_steps))
    lay = a.layouts.reduce.get(id(s)) if a.layouts is not None else None
    if lay is not None:  # TileLang's inferred layouts (analysis/layout_infer): AllReduce<P·scale, scale> per slot
        P, scale, calls = (float(x) for x in lay)
        seq = max(1.0, calls)
        steps = math.log2(P) if P > 1 else 0.0
        smem_steps = float(sum(1 for j in range(int(steps)) if scale * (1 << j) >= ws))
        outputs = seq * a.threads / max(1.0, P)
        return (_butterfly_slots(a, outputs, P, steps, smem_steps), seq * 2.0 * smem_steps,
                seq * steps * a.profile.reduce_step_cycles, _chain(a, seq, steps, smem_steps))
    if a.profile.reduce_layout == "flat" and row and s.src.buffer.uid not in _gemm_outputs(a):
        v = max(1.0, a.vec_bytes / _size(s.src.dtype))
        if a.profile.column_vector_rows and column_vector_paired(a, _root(s.src.buffer).uid, s.dim):
            v = 1.0  # laid out as its 1-D column vector: one column per thread (owner_rules.column_vector_paired)
        P = float(min(a.threads, max(1, 2 ** int(math.log2(max(1.0, float(row) / v))))))
        seq = max(1.0, Ed * P / a.threads)  # rows one thread reduces, one after another
        steps = math.log2(P) if P > 1 else 0.0
        smem_steps = math.log2(P / ws) if P > ws else 0.0
        return (_butterfly_slots(a, Ed, P, steps, smem_steps), seq * 2.0 * smem_steps,
                seq * steps * a.profile.reduce_step_cycles, _chain(a, seq, steps, smem_steps))
    per_row = max(1.0, a.threads / Ed)
    steps = math.log2(min(ws, per_row)) if per_row > 1 else 0.0
    slots = Ed * 2.0 * steps
    syncs = 1.0 if per_row > ws else 0.0
    chain = steps + (per_row / ws if per_row > ws else 0.0)
    return slots, syncs, chain * a.profile.reduce_step_cycles, _chain(a, 1.0, steps, 1.0 if per_row > ws else 0.0)


@COST_RULES.register(N.Reduce)
def _reduce(a: Analyzer, s: N.Reduce):
    side = "vector"
    op = a.new_op("compute", s, side, (s.src.buffer, s.dst.buffer), (s.dst.buffer,), f"reduce_{s.kind}")
    a.round_trip(op, (s.src.buffer,))
    E = float(_elems(s.src))
    vd = _vec_dtype(s.src.dtype)
    slots = E * (2.0 if s.kind in ("absmax", "abssum") else 1.0) * replication(a, s.src.buffer)
    if id(s) not in a.deferred_reduces:  # deferred: the cross-thread part runs after the loop
        cs, op.syncs, op.latency_cycles, op.chain_cycles = reduce_cross(a, s)
        slots += cs
    if _scope(s.src.buffer) == "shared":
        op.work["smem"] = E * _size(s.src.dtype)
    op.work[f"vector:{vd}"] = slots
    op.flops[(_vec_unit(a), vd)] = E
    a.mark_written(op, (s.dst.buffer,))
    return [op]


def replication(a: Analyzer, buf: N.Buffer) -> float:
    """How many threads hold each element of register fragment ``buf`` under TileLang's inferred layouts (1 without
    them): the thread-local work on it is done by every holder."""
    if a.layouts is None or _root(buf).uid not in a.layouts.slots or not a.profile.fragment_layout_loop_work:
        return 1.0
    shp = _root(buf).static_shape() or (1,)
    n = 1
    for d in shp:
        n *= int(d)
    return max(1.0, a.layouts.slots[_root(buf).uid] * a.threads / max(1, n))


def reduce_finish(a: Analyzer, s: N.Reduce):
    """The cross-thread part of a deferred loop reduction, once after its loop."""
    op = a.new_op("compute", s, "vector", (s.dst.buffer,), (s.dst.buffer,), f"reduce_{s.kind} (after the loop)")
    slots, op.syncs, op.latency_cycles, op.chain_cycles = reduce_cross(a, s)
    op.work[f"vector:{_vec_dtype(s.src.dtype)}"] = slots
    a.mark_written(op, (s.dst.buffer,))
    return op


@COST_RULES.register(N.Cumsum)
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


@COST_RULES.register(N.Fill)
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


@COST_RULES.register(N.Atomic)
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
    if val_buf is None and a.launch.thread_vars:  # an element atomic of per-thread code: every thread
        E *= a.threads
    op.work["vector:float32"] = 2.0 * E
    if _scope(dst.buffer) == "shared":
        op.work["smem"] = 2.0 * E * _size(dst.dtype)
    a.mark_written(op, (dst.buffer,))
    return [op]
