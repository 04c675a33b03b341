"""Tensor-core gemms of the Numba backend as warp instruction streams: ``mma.sync`` turns and the ``wgmma`` K loop.

Contract
--------
Used by ``tile_rules._gemm`` for profiles with ``mma_sync_issue`` (``numba_tc``, docs/simulator.md §6c/§6d); every
other profile leaves the fields read here at their defaults and never reaches this module.

* :func:`wgmma_lowered` — whether the Numba backend puts a gemm on ``wgmma.mma_async`` when the profile's
  ``wgmma_stream`` is on: the dtype/shape rules of ``tilesim.backends.cuda.tile_wgmma.plan_shapes`` (fp16/bf16 pairs or
  fp8 pairs, fp8 K-major only, whole warpgroups, ``M`` a multiple of 64 per warpgroup, ``N`` a multiple of 16 up to
  256 per warpgroup tile, ``K`` a multiple of 16 (fp8: 32), rows of a multiple of 32 bytes), both operands whole shared
  buffers, a float32 register accumulator. A test checks it against ``plan_shapes`` itself.
* :func:`matrix_cycles` — core cycles one gemm keeps the core's matrix unit at ``fraction`` of its peak rate.
* :func:`tensor_turns` — the gemm's matrix time at ``fraction`` of peak, as both ``matrix`` work (the busiest-resource
  bound) and ``issue`` work (lane slots at the schedulers' rate): co-resident blocks in phase (``mma_phase_locked``)
  take turns at the tensor cores as they take turns at issue, so a block's K step is its own stream plus the other
  blocks' tensor and issue time (``sim/device.simulate_launch``).
* :func:`wgmma_stream` — the ``wgmma`` K loop of one gemm per k-block and warp: ``wgmma_iter_instr`` instructions
  (descriptors, fences, ``wait_group 1``, the barrier, stage and loop control; SASS count of the executed path,
  ``benchmarks/wgmma_loop_sass.py --fast-path``) as the ``mma.sync`` stream is costed (``warp_issue_cycles`` of
  scheduler time each, ``warp_cpi - warp_issue_cycles`` more on the warp's own chain), plus :func:`tensor_turns` at the
  profile's ``wgmma_peak_fraction`` (the probe's HGMMA/QGMMA rate). The group in flight hides its own latency behind the
  next k-block's issue, so nothing of the group is added to the chain beyond its turn.
"""

from __future__ import annotations

from ..ir import nodes as N
from .node_helpers import _core, _scope, _size

_WG_KIND = {"float16": "f16", "bfloat16": "bf16", "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2",
            "float8_e4m3": "e4m3"}


def matrix_key(dtype: str) -> str:
    """The hardware file's matrix-rate key of an operand dtype (fp8 kinds share ``float8``)."""
    return "float8" if dtype.startswith("float8") else dtype


def wgmma_lowered(s: N.Gemm, M: int, Nn: int, K: int, threads: int) -> bool:
    """The Numba backend's ``wgmma`` eligibility of gemm ``s`` (C tile ``M x Nn``, depth ``K``; module docstring)."""
    if _scope(s.a.buffer) != "shared" or _scope(s.b.buffer) != "shared" or s.c.dtype != "float32":
        return False
    ka, kb = _WG_KIND.get(s.a.dtype), _WG_KIND.get(s.b.dtype)
    fp8 = ka in ("e4m3", "e5m2") and kb in ("e4m3", "e5m2")
    if not (fp8 or (ka in ("f16", "bf16") and ka == kb)):
        return False
    if fp8 and (s.trans_a or not s.trans_b):
        return False
    if threads % 128:
        return False
    nwg = threads // 128
    if M % (64 * nwg) or Nn % 16 or Nn > 256 or (M // (64 * nwg)) * Nn > 256 or K % (32 if fp8 else 16):
        return False
    for r in (s.a, s.b):
        shape = r.buffer.static_shape() if hasattr(r.buffer, "static_shape") else None
        if not shape or len(shape) != 2 or (int(shape[1]) * _size(r.buffer.dtype)) % 32:
            return False
    return True


def matrix_cycles(a, flops: float, dtype: str, fraction: float) -> float:
    """Core cycles of ``flops`` on the core's matrix unit at ``fraction`` of the unit's peak (``dtype``: the hardware
    file's key, e.g. ``bfloat16``, ``float8``)."""
    p, hw = a.profile, a.hw
    core = _core(hw, p.matrix_core)
    mu = next((u for u in core.units if u.kind == "matrix"), None)
    vu = next((u for u in core.units if u.kind == "vector"), None)
    fpc = (mu.flops_per_cycle.get(dtype) if mu else None) or 0.0
    if not fpc or fraction <= 0:
        return 0.0
    clock_ratio = hw.unit_clock_hz(core, vu) / hw.unit_clock_hz(core, mu) if vu else 1.0
    return flops / (fpc * fraction) * clock_ratio


def tensor_turns(a, op, flops: float, mdt: str, hw_dtype: str, fraction: float, lane_slot_cycles: float) -> float:
    """Charge ``op`` the gemm's matrix time at ``fraction`` of peak (module docstring); returns its core cycles."""
    cyc = matrix_cycles(a, flops, hw_dtype, fraction)
    if cyc <= 0:
        return 0.0
    eff = a.hw.efficiency("matrix", hw_dtype, default=1.0) or 1.0
    op.work[f"matrix:{mdt}"] = flops * min(1.0, max(1e-3, eff)) / fraction
    if lane_slot_cycles > 0:
        op.work["issue"] = op.work.get("issue", 0.0) + cyc / lane_slot_cycles
    return cyc


def wgmma_stream(a, op, warps: int) -> None:
    """The per-k-block instruction stream of a ``wgmma`` K loop (module docstring), on ``op``."""
    p = a.profile
    lanes = p.wgmma_iter_instr * p.warp_issue_cycles * warps * a.warp_size
    op.work["vector:float32"] = lanes
    op.work["issue"] = lanes
    op.latency_cycles = max(0.0, p.wgmma_iter_instr * (p.warp_cpi - p.warp_issue_cycles))
