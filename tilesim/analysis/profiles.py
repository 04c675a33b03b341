"""Lowering profiles: which hardware unit runs each tile op, and how copies and pipelines are lowered.

A profile holds *lowering* facts (what a compiler emits), never hardware numbers: rates, sizes,
latencies and efficiencies all come from the hardware model (``hwmodels``). The counting conventions
below (instruction sequences of math functions, operand re-reads of a warp partition) are properties
of the generated code.

Profiles
--------
``tensorcore``  what the production TileLang compiler emits on NVIDIA GPUs (Hopper style): ``T.gemm``
                on the tensor cores (fp32 operands as TF32), global → shared copies asynchronous
                (TMA/cp.async) and overlapped with compute up to ``num_stages``, a producer warpgroup
                added to kernels with pipelined copies (warp specialisation), wgmma operand reads
                (64-row slabs re-read B).
``numba``       tilesim's Numba CUDA backend: ``T.gemm`` as an FP32 FMA loop on the CUDA cores with
                operands read from shared memory, copies done by the threads (load, store, barrier), no
                asynchronous copies and no overlap; shared memory past 48 KiB through one dynamic allocation, up to
                sm_90's 227 KiB opt-in limit (the backend's ``caps.DYNAMIC_SMEM_LIMIT``). Models the CUDA-core
                gemm (``tensor_cores=False``); the backend's default tensor-core gemm is not profiled yet.
``numba_tc``    the Numba backend's tensor-core lowering; by name it follows the backend's ``wgmma`` switch (on by default
                for the H200 since the twelfth session: then it is ``numba_tc_wgmma``). As a profile object: the
                ``mma.sync`` path (``TILESIM_CUDA_WGMMA=0``): as ``numba``, but fp16/bf16/fp8 ``T.gemm`` as
                ``mma.sync`` + ``ldmatrix`` warp instruction streams on TileLang's warp grid, pipelined ``T.copy`` as
                ``cp.async`` issued by the threads (docs/simulator.md §6c).
``numba_tc_wgmma`` the same with ``tilesim.cuda_wgmma`` on (the default; ``TILESIM_CUDA_WGMMA=0`` makes ``numba_tc``
                the ``mma.sync`` profile): eligible gemms of a ``cp.async`` pipeline on the backend's ``wgmma`` K loop (§6d).
``ascend``      Ascend 910B (AIC + 2 AIV): ``T.gemm`` on the cube core (operands L1 → L0A/L0B through
                MTE1), every other op on the vector cores; a tile produced on one side and consumed on
                the other makes a round trip through global memory (L2), as the hardware requires.
``mlu``         Cambricon MLU (IPU cores): gemm on the core's matrix unit from NRAM/WRAM, vector ops on
                the same core, DMA copies asynchronous and software-pipelined per ``num_stages``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from ..errors import KernelTypeError

__all__ = ["LoweringProfile", "PROFILES", "get_profile", "MATH_COST", "PRECISE_MATH_COST"]

#: Instruction sequence of each math intrinsic as (SFU ops, ALU slots) per element. Functions not
#: listed are one ALU slot. GPU ``exp`` is ``ex2(x * log2 e)``; ``sigmoid`` is ``1 / (1 + exp(-x))``;
#: ``tanh`` has a native approximate instruction; ``erf`` is a polynomial.
MATH_COST = MappingProxyType({
    "exp": (1, 1), "exp2": (1, 0), "exp10": (1, 1), "log": (1, 1), "log2": (1, 0), "log10": (1, 1),
    "log1p": (1, 2), "expm1": (1, 2), "sqrt": (1, 0), "rsqrt": (1, 0), "tanh": (1, 0),
    "sigmoid": (2, 2), "sin": (1, 1), "cos": (1, 1), "tan": (2, 2), "erf": (0, 12), "atan": (0, 10),
    "asin": (0, 10), "acos": (0, 10), "sinh": (2, 3), "cosh": (2, 3), "pow": (2, 2), "fmod": (0, 6),
})

#: What changes without fast math (``LoweringProfile.precise_math``; TileLang's default: nvcc runs without
#: ``--use_fast_math`` unless ``tl.enable_fast_math`` is set, and TVM's CUDA rules emit ``tanhf``/``sqrtf`` and a
#: plain ``/``, while ``exp``/``log`` become ``__expf``/``__logf`` either way). (SFU ops, ALU slots) per element
#: of the fast path, counted in the SASS nvcc's ptxas emits for sm_90 (libdevice ``tanhf``: ``MUFU.EX2`` and
#: ``MUFU.RCP`` with both branches' polynomials and a select; ``sqrtf``: ``MUFU.RSQ``, two Newton FMAs, the
#: range check and its branch). ``"div"``: IEEE ``div.rn.f32``: ``MUFU.RCP``, ``FCHK``, five FMAs and the
#: branch around the slow path.
PRECISE_MATH_COST = MappingProxyType({"tanh": (2, 14), "sqrt": (1, 8), "div": (1, 9)})


@dataclass(frozen=True)
class LoweringProfile:
    """How tile ops are lowered onto a hardware model's cores and units.

    Attributes:
        name: profile name.
        matrix_core: core kind running ``T.gemm`` ("" = the model's primary core kind).
        vector_core: core kind running element-wise/reduction work ("" = ``matrix_core``).
        gemm_unit: unit kind of ``T.gemm``: ``"matrix"`` or ``"vector"`` (FMA loop).
        matrix_dtype_map: dtype substitutions on the matrix unit (fp32 → tf32 on tensor cores).
        gemm_operands: how operand re-reads are counted: ``"wgmma"`` (64-row slabs re-read B),
            ``"warps"`` (each warp of the partition reads its A rows and B columns), ``"fma"`` (each
            thread reads a micro-tile's row and column per k step from shared memory), ``"path"``
            (operands cross a data path once, e.g. Ascend MTE1 L1 → L0A/L0B).
        wgmma_dtypes: operand dtypes that use ``"wgmma"``; others fall back to ``"warps"``.
        matrix_dtypes: when not empty, only gemms of these operand dtypes run on the matrix unit; the others
            take the FMA path (``gemm_operands`` ``"fma"`` on the vector unit), as the Numba backend lowers them.
        gemm_policy: when set, the warp partition the lowering uses whatever the kernel's ``policy`` says
            (the Numba backend's tensor-core gemm stacks every warp along M: ``"FullRow"``).
        async_copy: global → on-chip copies are asynchronous (TMA/cp.async/MTE/DMA).
        overlap: pipelined loops overlap copies with compute up to ``num_stages``.
        producer_threads: threads added for a producer warpgroup when a kernel has async copies.
        producer_registers_per_thread: registers a producer thread keeps (``setmaxnreg.dec``).
        consumer_registers_per_thread: registers a consumer thread of a warp-specialised kernel
            takes (``setmaxnreg.inc``); 0: its fragments decide.
        register_overhead_per_thread: registers a thread uses beside its share of fragments.
        warpgroup_warps: warps of one consumer warpgroup; several warpgroups of a block overlap
            their phases on different units (0: no such overlap).
        wgmma_rows: rows of one warpgroup MMA instruction (operand B is re-read per row slab).
        mma_shape: (rows, columns) of one warp-level MMA instruction (the finest warp partition).
        vector_load_bytes: bytes one thread moves per load/store instruction in tile copies.
        fragment_registers: fragments live in registers (GPU); False: in an on-chip buffer.
        vector_flops_per_slot: FLOPs the unit's ``flops_per_cycle`` counts per element operation
            (2 on GPUs, whose FP32 peak counts an FMA as two; 1 on NPUs, which count element ops).
        cross_unit_round_trip: a tile passed between the matrix and vector core kinds goes through
            global memory (Ascend's split cube/vector design).
        sync_per_shared_write: a barrier after threads write shared memory that others read.
        sync_per_pipelined_iteration: barrier/mbarrier waits per pipelined iteration.
        max_shared_bytes_per_block: a backend limit below the hardware's (Numba static shared memory).
        gemm_operand_issue: ``"fma"`` gemms: each operand element a thread loads from shared memory
            (and its conversion to fp32 when narrower) takes an issue slot beside the FMAs (Numba's
            micro-tile loop: per k, S0 + S1 ``ld.shared`` (+ ``cvt``) and S0·S1 FMAs).
        gemm_issue_fraction: achieved fraction of the FMA/load issue rate of such a gemm loop (1 = all
            issue slots used; below 1: loop control, address arithmetic and scheduling stalls).
        element_slot_factor: issue slots per element operation of non-gemm tile code, relative to the
            rule tables' count (Numba's int64 flat-index arithmetic, per-element guards and loops).
        register_streaming: the liveness estimate streams element-wise temporaries and hand-offs
            (``footprint.peak_live_bytes``): what nvcc does with fully unrolled fragment code.
        row_stat_layout: per-thread layout of a row statistic of a 2-D fragment: ``"square"`` (the
            Numba backend's square-ish thread tile) or ``"mma"`` (MMA accumulator rows: two per lane
            of a 16-row tile, the warps splitting the rows).
        register_min_overhead_per_thread: registers a thread cannot give up inside its hot loop (loop
            counters, thread index, descriptors and barrier phases); the rest of the overhead is
            addresses the compiler rematerialises or spills outside the loop for free.
        sync_loads_little: a launch without asynchronous copies reaches at most ``bytes in flight per
            thread × resident threads × cores / loaded DRAM latency`` (Little's law; the loads of one tile
            copy or ``T.Parallel`` in flight together), ``Machine.dram_bw_for``.
        barrier_per_warp: a block barrier costs ``overheads.sync_cycles`` (measured in a 1024-thread
            block) times the fraction of those 32 warps that arrive (``engine._barrier_scale``).
        async_hit_latency: an asynchronous copy whose bytes L2 serves waits its data path's latency less
            the DRAM−L2 latency difference (the path latency is that of a DRAM access).
        bank_conflicts: element-level shared-memory accesses pay their bank conflicts and partial
            wavefronts (``tilesim.analysis.banks``).
        spill_traffic_factor: local-memory bytes moved per spilled register byte per hot-loop
            iteration, beyond one store and one load (1 = just those two; larger when each spill
            also serialises asynchronous matrix instructions, as around wgmma accumulators).
        spill_l1: spilled registers are L1 traffic (the core's ``l1`` cache level less the resident
            blocks' shared memory) when the hot loop's MMA accumulators fit under the register cap and
            the spilled bytes fit there (``sim.registers.with_spills``); else L2 requests.
        sync_load_bytes_in_flight_per_thread: bytes one thread has outstanding from global memory
            when copies are synchronous loads (no cp.async/TMA); bounds DRAM throughput by Little's
            law: ``bytes in flight × resident threads per core × active cores / DRAM latency``.
            None: not limited (asynchronous copies, modelled by their data path).
        register_estimate: how registers per thread are estimated for occupancy: ``"sum"`` (every
            fragment of the block at once) or ``"liveness"`` (the peak of fragments live at the same
            time over the block program, plus each register-tile gemm's operand micro-tile;
            ``footprint.peak_live_bytes``).
        unroll_max_trip: a serial loop with a compile-time trip count up to this, no nested loop and
            no barrier in its body (after deferred reductions) is unrolled by the compiler with its
            loads hoisted, so the iterations' memory latencies overlap (the loop's kind becomes
            ``"unrolled"``). 0: never.
        defer_loop_reductions: a ``T.reduce_*(x, acc, clear=False)`` directly in a serial loop, with
            register source and destination and ``acc`` not otherwise used in the loop, costs only its
            per-thread part per iteration; the cross-thread part runs once after the loop (what the
            Numba backend's ``tile_reduce.DEFER_LOOP_REDUCTIONS`` emits).
        reduce_step_cycles: latency of one dependent step of a cross-thread reduction (a shuffle and
            an op; a per-warp partial read back from shared memory and an op): a block reduction over
            ``P`` threads per row waits ``log2(min(P, 32)) + P / 32`` such steps (second term when
            ``P`` > 32). 0: not modelled.
        reduce_layout: which threads share a row of a reduced register fragment. ``"rows"``: the
            block's threads split evenly over the rows (``threads / rows``). ``"flat"`` (TileLang): a
            fragment no gemm writes is bound row-major, ``vector_load_bytes`` of consecutive elements per
            thread, so a row is shared by ``min(threads, row / v)`` threads; TileLang's butterfly
            ``AllReduce`` goes through shared memory with two barriers for every step whose offset is a
            warp or more, once per row a thread holds (``analysis/tile_rules.reduce_cross``).
        precise_math: fp32 ``tanh``, ``sqrt`` and ``/`` cost the instruction sequences nvcc emits without
            ``--use_fast_math`` (:data:`PRECISE_MATH_COST`: libdevice ``tanhf``/``sqrtf``, IEEE division),
            not the approximate single instructions of :data:`MATH_COST`.
        phase_locked_issue: with ``k > 1`` blocks resident per core, a block's time in the wave
            quantisation is its critical path plus the other ``k - 1`` blocks' CUDA-core issue time
            (``vector`` busy): identical blocks started together wait for memory together and issue
            together, so their instruction bursts queue at the schedulers instead of filling each other's
            waits (``sim/device.simulate_launch``). Off: ``max(critical path, k × busiest resource)``.
        serial_block_launch: a core starts its blocks one after another, ``overheads.block_launch_cycles``
            each (the hardware file's number is a rate: empty blocks' kernel time × SM clock × SMs / blocks),
            so block launches are a per-core resource (``launch`` busy) in the fluid and wave-quantisation
            bounds: tens of thousands of tiny blocks cost their launches even when 32 are resident. Off:
            the launch only lengthens each block's critical path (co-resident blocks launch in parallel).
        chain_latency: the per-block critical path of dependent serial work with physical latencies
            (``sim/device.simulate_launch``, docs/simulator.md §3h): each cross-thread reduction step waits
            a shuffle or shared-memory round trip (the file's shared-memory latency) plus a dependent ALU
            op (:data:`ALU_DEPENDENT_CYCLES`) instead of the fitted ``reduce_step_cycles`` (whose value
            reflects co-resident warps hiding it), and the launch takes ``max(time, rounds × chain)``
            where rounds are the waves of the slowest blocks. Off: no such bound.
        single_stage_sync: a ``T.Pipelined`` loop of ``num_stages`` ≤ 1 is not software-pipelined: its global →
            shared copies (``T.copy``, ``T.Parallel``) are synchronous loads by the block's threads, with no
            copy engine and no producer warpgroup (TileLang 0.1.15's generated source of the DSA indexer at
            ``num_stages=1``: vector loads and stores by all 128 threads, ``__launch_bounds__(128, 1)``).
            Off: asynchronous copies in any pipelined loop.
        parallel_copies_sync: a ``T.Parallel`` loop that loads global memory into shared memory is synchronous
            (the block's threads load into registers and store) even inside a ``T.Pipelined`` loop: TileLang
            0.1.15 makes only ``T.copy`` asynchronous (TMA, with a producer warpgroup); none of the 55 generated
            sources of the fifth sealed set holds a ``cp.async``, and the paged-decode, MLA-decode and DSA sparse
            kernels, whose pipelined loops load through ``T.Parallel`` (gathered through a block table or an index
            list), run at ``__launch_bounds__(threads, 1)`` with no ``setmaxnreg`` (docs/simulator.md §3j).
        guarded_copies_sync: a copy inside a ``T.Pipelined`` loop under an ``if`` that is not taken in every block
            and iteration (evaluated over the blocks and sampled iterations; a hinted fraction counts as not
            always) is synchronous, by the block's threads, and adds no producer warpgroup
            (``node_helpers.guarded_copy``). Off: such copies are asynchronous as any other.
        reduce_issue_all_threads: a cross-thread reduction's issue slots are those of every thread that shares
            an output (``tile_rules._butterfly_slots``: ``outputs × P × (2·steps + steps through shared
            memory)``), not one thread's. Off: ``outputs × 2 × steps``.
        gather_index_latency: a synchronous ``T.Parallel`` load whose addresses read another global tensor (paged
            KV through a block table, sparse attention through an index list) waits that index load's L2 latency
            before its own (``Op.gather``, ``sim/engine``). Off: one memory latency.
        replicated_owner_loops: a ``T.Parallel`` that TileLang lays out after a replicated 1-D index fragment runs on
            that fragment's owner threads only (``analysis/owner_rules``); its synchronous loads then take
            ``ceil(bytes per owner / owner_load_bytes_in_flight)`` memory latencies in sequence (``Op.load_rounds``).
        tma_full_box: an asynchronous (TMA) copy spends the data path's per-core rate on its whole box, the
            out-of-bounds part included: the TMA engine writes the full box into shared memory (zero-filled past
            the tensor's edge) and the mbarrier waits for the full box's bytes — TileLang's generated skinny GEMM
            (M = 4, 64-row tile) arms ``expect_transaction(8192)`` for the A box of which 512 bytes exist. DRAM and
            L2 still carry only the in-bounds bytes. Off: the path's rate is spent on the in-bounds bytes only.
        tma_l2_scale: the L2 bandwidth that asynchronous (TMA) copies draw, as a multiple of the hardware file's L2
            bandwidth (measured with ``ld.global.cg`` from every SM: 7.94 TB/s on the H200). The tuned GEMMs show more:
            the 2K×2K×16K 128×128 GEMM moves 2.15 GB through L2 in 228 µs (≥ 9.4 TB/s). 1.0: the file's value.
        column_vector_rows: a register fragment written in a ``T.Parallel`` from a 1-D fragment read at the reduced
            dimension's variable (a router's ``b[i, e] = s[i, e] + bias[e]``) is laid out one column per thread, so
            its row reductions are shared by ``min(threads, row)`` threads (``owner_rules.column_vector_paired``; the
            sigmoid routers' generated sources). Off: the flat rule's ``row / vector``.
        fragment_layout_inference: in a launch without a gemm, register fragments take the layouts of TileLang's
            free-mode layout inference (``analysis/layout_infer.py``: each tile op tried as the root, conflicts
            skipped, fewest register slots per thread wins): a fragment's registers are its slots per thread
            (replication included) and a reduction runs ``tl::AllReduce<P·scale, scale>`` once per destination
            slot. Off: the flat rule.
        fragment_layout_loop_work: with ``fragment_layout_inference``, a ``T.Parallel`` point (and a reduction's
            thread-local step) runs on every thread that holds it under the inferred layouts (replicated work).
        serial_gathers: with ``gather_index_latency``, a gathered ``T.Parallel`` load (paged decode's
            ``K_cache[BlockTable[b, (base + i) // bs], ...]``) costs one index latency and one data latency per 16-byte
            chunk of a thread, in sequence: TileLang wraps each chunk's block-table and data loads in bounds guards
            (its generated paged decode re-reads the entry four times per chunk, in 64-bit arithmetic), and nvcc issues
            the next chunk's loads only after the branch that stores this one. Only when the index load's own address
            keeps a data-dependent offset once block indices of extent 1 are 0 (``lo = bs * ceildiv(seq_len, splits)``
            with more than one split): with one split the entry is the same for a chunk's threads and nvcc hoists it
            (the generated split-1 kernels test ``it < 32`` only). Off: one index latency for the op.
        owner_load_bytes_in_flight: bytes one such owner thread keeps outstanding (16 loads of 16 bytes: the
            registers an unrolled 256-load loop can hold beside the fragments; not measured).
        cp_async: asynchronous copies are ``cp.async`` issued by the block's threads (the Numba backend,
            docs/cuda-backend.md "cp.async pipelining"): only ``T.copy`` global → shared inside a ``T.Pipelined``
            loop of ≥ 2 stages is asynchronous (with ``single_stage_sync``), its latency is a global load's (L2
            or DRAM by the reuse model, no TMA data path), each thread issues ``cp_async_chunk_instr`` warp
            instructions per 16-byte chunk (an op on the threads' timeline), and launches without asynchronous
            copies keep the synchronous Little's-law bound. Off: TMA-style copies (``tensorcore``).
        cp_async_chunk_instr: instructions a thread issues per 16-byte ``cp.async`` chunk (address arithmetic,
            edge predicate, the ``LDGSTS``), counted in the sm_90 SASS (docs/simulator.md §6c); also the chunk code
            of synchronous tile copies in the second model.
        cp_async_inside_chunk_instr: with static shapes, per chunk of a tile wholly inside the tensor (the backend
            skips the per-chunk bounds since 2026-12-02 12:40; SASS count), weighted by the copy's in-bounds share,
            plus ``cp_async_tile_check_instr`` per tile and thread (the one inside check). 0: every chunk costs
            ``cp_async_chunk_instr`` (the lowering the fits' rows were timed on).
        mma_sync_issue: a ``T.gemm`` on the matrix unit is a stream of warp instructions (``mma.sync`` + ``ldmatrix``
            on TileLang's warp grid, ``tilesim.warp_partition``; all warps along M when the grid does not fit),
            costed as issue slots of the core's schedulers (32 lane slots per warp instruction, the ``vector`` rate)
            and as a per-warp dependent chain of ``warp_cpi`` cycles per instruction (``Op.latency_cycles``); the
            matrix FLOPs still occupy the matrix unit. Off: FLOPs on the matrix unit only.
        warp_cpi: cycles one warp takes per instruction of the ``mma.sync`` main loop when nothing else issues
            (dependent HMMA/ldmatrix/address chains; fitted, docs/simulator.md §6c).
        warp_issue_cycles: when set (the second model), every instruction of those streams — the gemm's and the
            16-byte chunk code of its tile copies, ``cp.async`` or synchronous — holds its scheduler this many
            cycles (``issue`` work, 32 lane slots per cycle and warp) and adds ``warp_cpi - warp_issue_cycles`` to
            its warp's own chain; 0: the first model (``warp_cpi`` chain against the block's one-per-cycle issue).
        mma_phase_locked: co-resident blocks' ``issue`` work takes turns at the schedulers: a block's time in the
            wave quantisation is its critical path plus the other ``k - 1`` blocks' ``issue`` time
            (``sim/device.simulate_launch``), so a warp's K step is ``instructions × (warp_cpi + warp_issue_cycles ×
            (warps per scheduler − 1))``: one warp per scheduler is latency-bound, many are issue-bound.
        ldsm_extra_instr: address instructions per ``ldmatrix`` (SASS count).
        mma_fp8_extra_instr: extra instructions per HMMA of an fp8 ``mma.sync.m16n8k32``, which ptxas emulates on
            sm_90 with two f16 HMMAs, ``F2FP`` unpacks and ``FADD`` instructions (SASS count: 8 ``F2FP`` + 4 ``FADD``
            per ``m16n8k32``): all take issue slots; ``mma_fp8_chain_instr`` of them (the ``FADD`` instructions, which wait for
            the HMMA results) are also on the warp's dependent chain, the unpacks are not.
        mma_fp8_chain_instr: the part of ``mma_fp8_extra_instr`` on the dependent chain (per HMMA).
        loop_iter_instr: instructions per warp and iteration of a pipelined loop holding a gemm (stage index
            selection, the wait and barrier; SASS count).
        mma_operand_registers: the liveness register estimate adds, at each ``mma.sync`` gemm, two k steps' A and B
            fragments per thread (4 registers per m16 tile and 2 per n8 tile of the warp) and
            ``mma_register_overhead_per_thread`` (``ldmatrix`` lane addresses, ``cp.async`` chunk offsets, unrolled
            index arithmetic; fitted to the driver's counts).
        mma_matrix_fraction: with ``mma_sync_issue``, an ``mma.sync`` gemm's HMMAs run at this fraction of the matrix
            unit's peak and co-resident blocks take turns at the tensor cores (``analysis/mma_stream.tensor_turns``:
            the matrix time is both ``matrix`` and ``issue`` work); fitted (docs/simulator.md §6d). 0: FLOPs at the
            file's matrix rate, no turns (the lowering of §6c, whose integer work hid the HMMA pipe).
        wgmma_stream: a gemm the Numba backend lowers to ``wgmma`` with ``tilesim.cuda_wgmma`` on
            (``mma_stream.wgmma_lowered``) inside a pipelined loop is its ``wgmma`` K loop: ``wgmma_iter_instr``
            instructions per warp and k-block as the ``mma.sync`` stream is costed, plus the group's tensor turn at
            ``wgmma_peak_fraction`` of the unit's peak (``mma_stream.wgmma_stream``). Other gemms stay ``mma.sync``.
        wgmma_peak_fraction: (hardware dtype key, fraction of the matrix unit's peak) that HGMMA/QGMMA reach
            (measured by the wgmma probe, not fitted).
        wgmma_iter_instr: instructions per warp and k-block of the ``wgmma`` K loop beside its ``cp.async`` chunks
            (SASS count of the executed path, ``benchmarks/wgmma_loop_sass.py --fast-path``).
    """

    name: str
    matrix_core: str = ""
    vector_core: str = ""
    gemm_unit: str = "matrix"
    matrix_dtype_map: tuple[tuple[str, str], ...] = ()
    gemm_operands: str = "warps"
    wgmma_dtypes: tuple[str, ...] = ()
    matrix_dtypes: tuple[str, ...] = ()
    gemm_policy: str = ""
    async_copy: bool = True
    overlap: bool = True
    producer_threads: int = 0
    producer_registers_per_thread: int = 0
    consumer_registers_per_thread: int = 0
    register_overhead_per_thread: int = 0
    warpgroup_warps: int = 0
    wgmma_rows: int = 64
    mma_shape: tuple[int, int] = (16, 8)
    vector_load_bytes: int = 16
    fragment_registers: bool = True
    vector_flops_per_slot: float = 2.0
    cross_unit_round_trip: bool = False
    sync_per_shared_write: bool = True
    sync_per_pipelined_iteration: int = 1
    max_shared_bytes_per_block: int | None = None
    gemm_operand_issue: bool = False
    gemm_issue_fraction: float = 1.0
    element_slot_factor: float = 1.0
    register_estimate: str = "sum"
    unroll_max_trip: int = 0
    defer_loop_reductions: bool = False
    reduce_step_cycles: float = 0.0
    reduce_layout: str = "rows"
    sync_load_bytes_in_flight_per_thread: float | None = None
    register_streaming: bool = False
    row_stat_layout: str = "square"
    register_min_overhead_per_thread: int = 0
    spill_traffic_factor: float = 1.0
    spill_l1: bool = False
    bank_conflicts: bool = False
    sync_loads_little: bool = False
    async_hit_latency: bool = False
    barrier_per_warp: bool = False
    precise_math: bool = False
    phase_locked_issue: bool = False
    serial_block_launch: bool = False
    chain_latency: bool = False
    single_stage_sync: bool = False
    parallel_copies_sync: bool = False
    guarded_copies_sync: bool = False
    reduce_issue_all_threads: bool = False
    gather_index_latency: bool = False
    replicated_owner_loops: bool = False
    owner_load_bytes_in_flight: float = 256.0
    tma_full_box: bool = False
    tma_l2_scale: float = 1.0
    column_vector_rows: bool = False
    fragment_layout_inference: bool = False
    fragment_layout_loop_work: bool = False
    serial_gathers: bool = False
    cp_async: bool = False
    cp_async_chunk_instr: float = 0.0
    cp_async_inside_chunk_instr: float = 0.0
    cp_async_tile_check_instr: float = 0.0
    mma_sync_issue: bool = False
    warp_cpi: float = 0.0
    ldsm_extra_instr: float = 0.0
    mma_fp8_extra_instr: float = 0.0
    mma_fp8_chain_instr: float = 0.0
    warp_issue_cycles: float = 0.0
    mma_phase_locked: bool = False
    loop_iter_instr: float = 0.0
    mma_operand_registers: bool = False
    mma_register_overhead_per_thread: int = 0
    mma_matrix_fraction: float = 0.0
    wgmma_stream: bool = False
    wgmma_peak_fraction: tuple[tuple[str, float], ...] = ()
    wgmma_iter_instr: float = 0.0
    notes: tuple[str, ...] = field(default=())

    def matrix_dtype(self, dtype: str) -> str:
        for a, b in self.matrix_dtype_map:
            if a == dtype:
                return b
        return dtype


#: ``numba_tc``'s fitted values (docs/simulator.md §6c: ``python benchmarks/numba_tc_profile_check.py --fit``)
TC_WARP_CPI = 3.0
TC_WARP_ISSUE = 0.75
TC_REGISTER_OVERHEAD = 28
#: ``numba_tc``'s HMMA rate as a fraction of the matrix unit's peak, fitted on the TRAIN rows of the eleventh
#: session's lowering (docs/simulator.md §6d: ``python benchmarks/numba_tc_drift.py --fit``)
TC_MMA_FRACTION = 0.675
#: SASS counts of the ``mma.sync`` main loop after AQ's integer forms (2026-12-02, docs/simulator.md §6d; the GEMM
#: 4096^3 128x128x32/s4 K step: 64 HMMA + 16 LDSM at immediate offsets + 8 LDGSTS + 80 others = 168)
TC_SASS = dict(ldsm_extra_instr=0.0, loop_iter_instr=38.0, cp_async_inside_chunk_instr=5.0,
               cp_async_tile_check_instr=5.0)
#: the same counts of the lowering §6c was fitted on (before AQ's integer forms): for rows timed on it
TC_SASS_BEFORE_INT_FORMS = dict(ldsm_extra_instr=4.0, loop_iter_instr=90.0, cp_async_inside_chunk_instr=18.0,
                                cp_async_tile_check_instr=22.0, mma_matrix_fraction=0.0)
#: HGMMA / QGMMA rates measured by the wgmma probe (reports/measurements/wgmma_probe_20261202T1300Z.json: 947.5 and
#: 1891.1 TFLOP/s on the H200) over the file's dense peaks (989.4 / 1978.9 TFLOP/s)
TC_WGMMA_PEAK = (("float16", 0.958), ("bfloat16", 0.958), ("float8", 0.956))

_PROFILES = {
    "tensorcore": LoweringProfile(
        name="tensorcore", gemm_unit="matrix", matrix_dtype_map=(("float32", "tf32"),),
        gemm_operands="wgmma", wgmma_dtypes=("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int8"),
        async_copy=True, overlap=True, producer_threads=128, producer_registers_per_thread=24,
        consumer_registers_per_thread=240,
        # per-thread registers beyond the live fragments: 16 picked (2026-12-02) from {16, 32} on the TRAIN
        # configurations of sim_split_h200_2026-12-02.json with TileLang's own counts (cuobjdump;
        # tilelang_h200_validation_registers_20261201T233900Z.json): 96/80/88/40 vs real 96/80/83/31 (was +16..+25)
        register_overhead_per_thread=16, warpgroup_warps=4,
        # issue 15: registers by liveness as nvcc allocates them (streamed element-wise temporaries,
        # MMA row-statistic layout); past the per-thread cap (255, or setmaxnreg's 240 in
        # warp-specialised kernels) the excess is spilled and costed, never refused
        register_estimate="liveness", register_streaming=True, row_stat_layout="mma",
        register_min_overhead_per_thread=16,
        # fitted (issue 15) on the one spilling TRAIN point of reports/measurements/sim_split_h200_2026-12-01.json
        # (first registry run, 256x128 bf16 GEMM at 128 threads: 1035 us): `benchmarks/sim_holdout_h200.py
        # --only train --set spill_traffic_factor=F`, linear in F, 3.3 reproduces it
        spill_traffic_factor=3.3, bank_conflicts=True,
        # 2026-12-02 (Z2): spilled CUDA-core state beside resident MMA accumulators stays in L1 when it
        # fits in what shared memory leaves of the combined array (sim/registers.with_spills; not fitted)
        spill_l1=True, sync_loads_little=True, async_hit_latency=True,
        # issue 15 (2026-12-02): a barrier costs in proportion to the warps that arrive (not fitted: the
        # 1024-thread measurement scaled; the DSA indexer's 256 named barriers per iteration among 128
        # threads need it) and reductions of MMA accumulators take the MMA layout's threads
        barrier_per_warp=True,
        # TileLang's fragment layout (row-major thread binding) and butterfly AllReduce (issue 15,
        # 2026-12-02); the step latency picked on the TRAIN split of sim_split_h200_2026-12-02.json from
        # {0, 10, 20, 40} cycles (`benchmarks/sim_holdout_h200.py --only train --set reduce_step_cycles=R`)
        reduce_layout="flat", reduce_step_cycles=10.0,
        # 2026-12-02 (AH, docs/simulator.md §3f): nvcc without --use_fast_math (TileLang's default) and
        # co-resident identical blocks in phase (their instruction bursts take turns); nothing fitted
        precise_math=True, phase_locked_issue=True,
        # 2026-12-02 (AJ, docs/simulator.md §3h): a core launches its blocks one at a time (the measured
        # block_launch_cycles is a rate); nothing fitted
        serial_block_launch=True,
        # 2026-12-02 (AN, docs/simulator.md §3j): lowering read from TileLang's generated sources — copies under a
        # guard or through T.Parallel are synchronous (the producer decision then matches all 60 sources), gathers
        # wait their index load, a T.Parallel laid out after a replicated index fragment runs on its owner threads
        # (the DSA sparse prefill: 16 of 256) — and the per-block critical-path bound of §3h. Off at the tenth
        # session's merge (small development-set gain, a criterion picked after the comparisons); ON since the
        # sixth sealed set, whose predictions for both forms were committed before it was timed, decided
        # (docs/simulator.md §3k: median 9.0 -> 8.8 %, p90 47.8 -> 31.0 % on 51 held-out points);
        # owner_load_bytes_in_flight (256) is not measured
        guarded_copies_sync=True, parallel_copies_sync=True, gather_index_latency=True, replicated_owner_loops=True,
        chain_latency=True,
        # 2026-12-02 (AR, docs/simulator.md §3l): a TMA box past the tensor's edge costs the engine its zero fill
        # (the generated skinny GEMM's expect_transaction is the full box); nothing fitted; on by the criterion
        # written before the comparison (mean p90 over the six development sets 35.4 -> 35.0 %, no median worse)
        tma_full_box=True,
        # 2026-12-02 (AV, docs/simulator.md §3n): register fragments of gemm-free launches take the layouts of
        # TileLang's free-mode layout inference (analysis/layout_infer.py; registers, AllReduce shapes, replicated
        # work); nothing fitted; on by the criterion written before the comparison (db44cda: mean p90 over the
        # development sets 37.6 -> 35.9 %, no median worse)
        fragment_layout_inference=True, fragment_layout_loop_work=True,
        # 2026-12-02 (AV, §3n): a gathered T.Parallel load waits index + data per 16-byte chunk, one chunk after another
        # (TileLang's bounds guards around paged decode's block-table loads); nothing fitted; on by the criterion of
        # 93d7f55 (mean p90 35.9 -> 30.3 %, no median worse)
        serial_gathers=True,
        notes=("TileLang on Hopper: TMA copies + warp-specialised producer, wgmma for 16/8-bit operands",)),
    "numba": LoweringProfile(
        name="numba", gemm_unit="vector", gemm_operands="fma", async_copy=False, overlap=False,
        producer_threads=0, max_shared_bytes_per_block=227 * 1024, gemm_operand_issue=True,
        # lowering facts of tilesim's Numba backend (tilesim/backends/cuda): register fragments by
        # liveness, deferred loop reductions (tile_reduce.DEFER_LOOP_REDUCTIONS), short static loops
        # unrolled by NVVM with their loads hoisted
        register_estimate="liveness", defer_loop_reductions=True, unroll_max_trip=16,
        # fitted on the TRAIN split of run 5b (reports/measurements/numba_h200_20261130T010421Z.json) by
        # `benchmarks/numba_profile_validation.py --fit`: the register overhead to the driver's register
        # counts, the rest to the measured times; docs/simulator.md §6. Refitted 2026-12-01 (issue 15) after
        # the H200 file's shared efficiencies were refitted to real TileLang (vector 0.76 -> 0.878, DRAM
        # 0.823 -> 0.892, a timed-launch overhead): was gemm_issue_fraction 0.92, reduce_step_cycles 80
        register_overhead_per_thread=12, gemm_issue_fraction=0.8, element_slot_factor=4.5,
        reduce_step_cycles=60.0,
        # a cap on the loads of one tile copy a thread keeps in flight (four 16-byte vectors); not
        # binding on the measured kernels (16, 32 and 64 B give the same fit)
        sync_load_bytes_in_flight_per_thread=64,
        notes=("Numba CUDA: past 48 KiB of shared memory through the dynamic opt-in (run on the H200 2026-12-01)",
               "gemm on the CUDA cores (tensor_cores=False)")),
    "ascend": LoweringProfile(
        name="ascend", matrix_core="aic", vector_core="aiv", gemm_unit="matrix", gemm_operands="path",
        matrix_dtype_map=(("float32", "float32"),), async_copy=True, overlap=True, fragment_registers=False,
        vector_flops_per_slot=1.0, cross_unit_round_trip=True, sync_per_shared_write=False,
        sync_per_pipelined_iteration=1,
        notes=("cube and vector cores exchange tiles through global memory/L2",)),
    "mlu": LoweringProfile(
        name="mlu", gemm_unit="matrix", gemm_operands="path", async_copy=True, overlap=True,
        fragment_registers=False, vector_flops_per_slot=1.0, sync_per_shared_write=False,
        sync_per_pipelined_iteration=1,
        notes=("IPU: DMA into NRAM/WRAM, matrix and vector units of one core",)),
}
# the Numba backend's default lowering (tensor cores since 2026-12-01, cp.async pipelines and TileLang's warp grid
# since 2026-12-02): fp16/bf16/fp8 gemms as mma.sync + ldmatrix instruction streams of each warp, every other gemm
# and all else as "numba". The instruction counts are the sm_90 SASS of the generated main loops; warp_cpi and the
# register overhead are fitted on the TRAIN rows of benchmarks/numba_tc_holdout.py (docs/simulator.md §6c)
_PROFILES["numba_tc"] = replace(
    _PROFILES["numba"], name="numba_tc", gemm_unit="matrix", gemm_operands="warps", matrix_dtype_map=(),
    matrix_dtypes=("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"), gemm_policy="",
    async_copy=True, overlap=True, single_stage_sync=True, cp_async=True, cp_async_chunk_instr=48.0,
    mma_sync_issue=True, mma_fp8_extra_instr=6.0, mma_fp8_chain_instr=2.0, mma_matrix_fraction=TC_MMA_FRACTION,
    warp_issue_cycles=TC_WARP_ISSUE, mma_phase_locked=True, **TC_SASS,
    mma_operand_registers=True, warp_cpi=TC_WARP_CPI, mma_register_overhead_per_thread=TC_REGISTER_OVERHEAD,
    notes=_PROFILES["numba"].notes[:1] + ("fp16/bf16/fp8 gemm on mma.sync tensor cores, cp.async pipelines "
                                          "(the backend's default, TILESIM_CUDA_WGMMA=0)",))
# the same backend with tilesim.cuda_wgmma on (TILESIM_CUDA_WGMMA=1): eligible gemms of a cp.async pipeline on AP's
# wgmma K loop (one group in flight, 32-bit chunk addresses: 2.5 SASS instructions per 16-byte chunk, no tile check),
# every other gemm as numba_tc (docs/simulator.md §6d). Nothing fitted: SASS counts and the probe's rates.
_PROFILES["numba_tc_wgmma"] = replace(
    _PROFILES["numba_tc"], name="numba_tc_wgmma", wgmma_stream=True, wgmma_peak_fraction=TC_WGMMA_PEAK,
    wgmma_iter_instr=127.0, cp_async_inside_chunk_instr=2.5, cp_async_tile_check_instr=0.0,
    notes=_PROFILES["numba"].notes[:1] + ("wgmma K loop for eligible fp16/bf16/fp8 gemms (tilesim.cuda_wgmma on)",))
PROFILES = MappingProxyType(_PROFILES)


def wgmma_switch_on() -> bool:
    """The Numba backend's ``tilesim.cuda_wgmma`` default as its ``caps.wgmma_default`` reads it for the H200 the
    ``numba`` profiles model (compute capability 9.0): on unless ``TILESIM_CUDA_WGMMA=0``."""
    return os.environ.get("TILESIM_CUDA_WGMMA", "") != "0"


def get_profile(profile) -> LoweringProfile:
    """A profile by name (``tensorcore``, ``numba``, ``numba_tc``, ``numba_tc_wgmma``, ``ascend``, ``mlu``) or the object
    itself. ``numba_tc`` follows the backend's switch: with ``TILESIM_CUDA_WGMMA`` on it is ``numba_tc_wgmma``."""
    if isinstance(profile, LoweringProfile):
        return profile
    if str(profile) == "numba_tc" and wgmma_switch_on():
        return PROFILES["numba_tc_wgmma"]  # the backend lowers with wgmma: predict that lowering
    try:
        return PROFILES[str(profile)]
    except KeyError:
        raise KernelTypeError(f"unknown lowering profile {profile!r}",
                              hint="use one of: " + ", ".join(PROFILES)) from None


def default_profile(hw) -> str:
    """The natural profile of a hardware model: its device family decides."""
    names = {c.name for c in hw.core_kinds}
    if "aic" in names:
        return "ascend"
    if "ipu" in names or "mlu" in hw.name.lower():
        return "mlu"
    return "tensorcore"
