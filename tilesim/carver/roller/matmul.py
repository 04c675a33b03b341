"""The roller for matrix products: candidate tilings ranked by a roofline estimate on the device's figures.

Contract
--------
``matmul_hints(arch, M, N, K, in_dtype, accum_dtype, out_dtype, topk) -> list[Hint]`` enumerates tilings a
tensor-core GEMM kernel can use and returns the ``topk`` with the smallest estimated time, best first (ties
broken by the shorter compute time, less shared memory, squarer warp tiles (fewer shared-memory reads per MMA), fewer threads, then by the tiling itself, so the order is deterministic). ``arch`` is a
:class:`~tilesim.carver.arch.CUDA` (figures from the device or the hardware model, see there).

Candidates: ``block_M, block_N`` in 16..256 (powers of two), warp tiles of at least the MMA shape (16x16)
with 1..16 warps (at most ``arch.max_threads_per_block`` threads), ``block_K`` a multiple of the MMA depth
(256 / dtype bits: 16 for 16-bit, 32 for 8-bit, 8 for tf32) up to 128, and the deepest pipeline (1..4
stages) whose ``stages * (block_M + block_N) * block_K`` input bytes fit the shared memory per block.
A tiling is kept only if its accumulator fits half the registers a thread may hold.

Estimate (seconds): blocks per SM = the fewest allowed by shared memory, registers (accumulator + 32 per
thread), warps and the block limit; ``waves = ceil(blocks / (SMs * blocks_per_SM))``; one K step of an SM
takes the longer of its tensor work ``blocks_per_SM * 2*bM*bN*bK / (tensor peak / SMs)`` and the DRAM
latency divided by the pipeline depth (what the stages in flight hide); compute = ``waves * K steps *
step`` (padding to whole tiles counts as work);
memory = the larger of the compulsory DRAM bytes (A, B once, C once) over the DRAM bandwidth and the tile
re-reads (A once per column of blocks, B once per row) over the L2 bandwidth; the time is
``max(compute, memory)`` with a pipeline, their sum without one. The plan rasterizes (column panels) when B
does not fit half the L2, with panels whose A slices fit there.
"""

from __future__ import annotations

import math

from ...errors import KernelTypeError
from ...language.types import DType
from .hint import Hint
from .rasterization import NoRasterization, Rasterization2DColumn

__all__ = ["matmul_hints"]

_SIZES = (16, 32, 64, 128, 256)
_MMA_MN = 16


def _bits(dtype) -> int:
    return DType(str(dtype)).bits


def _tensor_peak(arch, in_dtype) -> float:
    name = str(in_dtype)
    for candidate in (name, "tf32" if name == "float32" else None, "float8" if "float8" in name else None):
        if candidate is not None:
            peak = arch.tensor_flops_per_s(candidate)
            if peak:
                return peak
    raise KernelTypeError(f"the hardware model of {arch.name} states no tensor-core rate for {name} inputs",
                          hint="use float16/bfloat16/float8/int8 inputs, or a model that states the rate")


def _estimate(arch, M, N, K, bm, bn, bk, warps, stages, in_b, acc_b, out_b, peak, l2_bw, latency):
    sms = arch.compute_max_core
    threads = warps * 32
    kpad = math.ceil(K / bk) * bk
    smem = stages * (bm + bn) * bk * in_b
    acc_regs = bm * bn * acc_b // 4 // threads
    regs = (acc_regs + 32) * threads
    per_sm = int(min(arch.smem_cap // max(smem, 1), arch.reg_cap // regs, arch.max_warps_per_sm // warps,
                     arch.max_blocks_per_sm))
    if per_sm < 1:
        return None
    gm, gn = math.ceil(M / bm), math.ceil(N / bn)
    blocks = gm * gn
    per_sm = min(per_sm, math.ceil(blocks / sms))
    waves = math.ceil(blocks / (sms * per_sm))
    step = max(per_sm * 2.0 * bm * bn * bk / (peak / sms), latency / stages)
    compute = waves * (kpad // bk) * step
    compulsory = (M * K + N * K) * in_b + M * N * out_b
    rereads = (M * K * gn + N * K * gm) * in_b + M * N * out_b
    memory = max(compulsory / arch.dram_bytes_per_s, rereads / l2_bw)
    seconds = max(compute, memory) if stages > 1 else compute + memory
    return {"seconds": seconds, "compute_s": compute, "memory_s": memory, "blocks_per_sm": per_sm,
            "waves": waves, "smem_bytes": smem, "threads": threads}


def matmul_hints(arch, M: int, N: int, K: int, in_dtype="float16", accum_dtype="float32", out_dtype="float16",
                 topk: int = 10) -> list[Hint]:
    """The ``topk`` best tilings of an ``M x N x K`` product on ``arch`` (see the module docstring)."""
    if min(M, N, K) <= 0:
        raise KernelTypeError(f"matmul_hints needs positive M, N, K, got {M}, {N}, {K}")
    in_b, acc_b, out_b = _bits(in_dtype) / 8, _bits(accum_dtype) / 8, _bits(out_dtype) / 8
    depth = max(8, 256 // _bits(in_dtype))
    peak = _tensor_peak(arch, in_dtype)
    l2_bw = max((c.bandwidth_bytes_per_s or 0) for c in arch.model.caches) if arch.model.caches else 0
    l2_bw = l2_bw or arch.dram_bytes_per_s
    kmax = math.ceil(K / depth) * depth
    latency = (arch.model.memory_latency_cycles or 0) / arch.model.clock_hz()
    scored = []
    for bm in _SIZES:
        for bn in _SIZES:
            for wm in (s for s in _SIZES if _MMA_MN <= s <= bm):
                for wn in (s for s in _SIZES if _MMA_MN <= s <= bn):
                    warps = (bm // wm) * (bn // wn)
                    if warps > 16 or warps * 32 > arch.max_threads_per_block:
                        continue
                    if wm * wn * acc_b / 4 / 32 > arch.max_regs_per_thread // 2:
                        continue
                    for bk in (b for b in (8, 16, 32, 64, 128) if b % depth == 0 and b <= max(kmax, depth)):
                        stages = max((s for s in (1, 2, 3, 4) if s * (bm + bn) * bk * in_b <= arch.smem_cap),
                                     default=0)
                        if stages == 0:
                            continue
                        est = _estimate(arch, M, N, K, bm, bn, bk, warps, stages, in_b, acc_b, out_b, peak, l2_bw,
                                        latency)
                        if est is not None:
                            scored.append((est["seconds"], est["compute_s"], est["smem_bytes"], 1 / wm + 1 / wn, warps, (bm, bn, wm, wn, bk), stages,
                                           est))
    scored.sort(key=lambda t: t[:6])
    hints = []
    for *_, (bm, bn, wm, wn, bk), stages, est in scored[:max(int(topk), 0)]:
        h = Hint()
        h.arch = arch
        h.block, h.warp, h.rstep, h.pipeline_stage, h.estimate = [bm, bn], [wm, wn], [bk], stages, est
        h.thread = [bm // wm, (bn // wn) * 32]
        h.rasterization_plan = _raster(arch, M, N, K, bm, in_b)
        hints.append(h)
    return hints


def _raster(arch, M, N, K, bm, in_b):
    if N * K * in_b <= arch.l2_cache_size_bytes / 2:
        return NoRasterization()
    panel = int(arch.l2_cache_size_bytes / 2 // max(bm * K * in_b, 1))
    return Rasterization2DColumn(max(1, min(panel, 16)))
