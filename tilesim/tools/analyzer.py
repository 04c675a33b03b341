"""``tilelang.tools.Analyzer``: a kernel's FLOPs, global-memory bytes and a time estimate, without running it.

Contract
--------
``Analyzer.analysis(fn, device) -> AnalysisResult`` (also ``Analyzer(fn, device).ir_pass().calculate()``,
TileLang's two-step form).

* ``fn``: a ``PrimFunc`` (what ``kernel.get_tir(...)`` returns), or anything with a ``prim_func`` (a compiled
  kernel). Every symbolic dimension must be bound (``get_tir``'s keywords); otherwise a ``KernelError`` from
  the cost analysis names the missing one.
* ``device``: ``tilelang.carver.arch.CUDA(...)`` (its ``model`` is the hardware model), a hardware-model name
  (``"a100_sxm4_80gb"``, ...) or a loaded model; ``None`` is the simulator's default model.

``AnalysisResult`` keeps TileLang's five fields with TileLang's meanings, computed by tilesim's cost analysis:

* ``total_flops``: the FLOPs of every ``T.gemm`` (``2·M·N·K`` per call, over every loop iteration and block) —
  matrix work only, as TileLang counts it;
* ``total_global_bytes``: every byte the kernel moves between global memory and the chip, each access counted
  (a tile read by two blocks counts twice; L2 hits included). TileLang's tool counts whole ``T.copy`` tiles;
  tilesim counts what moves — edge tiles clipped to the tensor — and the direct global accesses of
  ``T.Parallel`` loops too, so the two agree on kernels that move data only with ``T.copy`` on shapes the tiles
  divide;
* ``expected_tflops`` / ``expected_bandwidth_GBps``: the device's peak matrix rate for the gemms' dtypes
  (TFLOP/s; ``None`` when the model states none or the kernel has no gemm) and its DRAM bandwidth (GB/s);
* ``estimated_time``: TileLang's roofline, ``max(bytes / bandwidth, flops / peak)`` in seconds.

tilesim adds ``simulated_time`` (the cycle-approximate simulator's time on that device, seconds) and ``bound``
(what limits it, as ``kernel.simulate`` reports). No value of the kernel is computed; nothing runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import KernelTypeError
from ..hw import resolve
from ..ir import nodes as N
from ..sim import simulate

__all__ = ["Analyzer", "AnalysisResult"]


@dataclass(frozen=True)
class AnalysisResult:
    """FLOPs, bytes and time estimates of one kernel on one device (see the module docstring)."""

    total_flops: int
    total_global_bytes: int
    estimated_time: float
    expected_tflops: float | None
    expected_bandwidth_GBps: float
    simulated_time: float = 0.0
    bound: str = ""


def _prim_func(fn):
    pf = getattr(fn, "prim_func", fn)
    if not isinstance(pf, N.PrimFunc):
        raise KernelTypeError(f"Analyzer: expected a PrimFunc (kernel.get_tir(...)) or a compiled kernel, "
                              f"got {type(fn).__name__}",
                              hint="pass my_kernel.get_tir(<config keywords>) or a compiled kernel")
    return pf


def _hardware(device):
    if device is None or isinstance(device, str):
        return resolve(device or "h200_sxm_141gb")
    model = getattr(device, "model", None)
    if model is not None:
        return model
    if hasattr(device, "primary_core"):  # a loaded hardware model
        return device
    raise KernelTypeError(f"Analyzer: unknown device {device!r}",
                          hint="pass tilelang.carver.arch.CUDA('cuda'), a hardware-model name or None")


class Analyzer:
    """TileLang's analyzer interface over tilesim's simulator."""

    def __init__(self, fn, device=None):
        self.fn = _prim_func(fn)
        self.device = device
        self.hw = _hardware(device)
        self.report = None

    def ir_pass(self) -> Analyzer:
        """Run the cost analysis and the simulation (TileLang's first step)."""
        self.report = simulate(self.fn, self.hw)
        return self

    def calculate(self) -> AnalysisResult:
        """The figures of :class:`AnalysisResult` from the analysis :meth:`ir_pass` ran."""
        if self.report is None:
            self.ir_pass()
        rep, hw = self.report, self.hw
        core = hw.primary_core
        matrix = {u.name: u for u in core.units if u.kind == "matrix"}
        gemm = {}
        for key, v in rep.flops.items():
            unit, dtype = key.split(":", 1)
            if unit in matrix:
                gemm[(unit, dtype)] = gemm.get((unit, dtype), 0.0) + v
        flops = sum(gemm.values())
        bandwidth = float(hw.memory.bandwidth_bytes_per_s)
        compute_s, peaks = 0.0, []
        for (unit, dtype), f in gemm.items():
            peak = hw.unit_peak_flops(core, matrix[unit], dtype)
            if peak:
                peak = float(peak)
                compute_s += f / peak
                peaks.append(peak)
        global_bytes = rep.bytes.get("l2") or (rep.bytes["dram read"] + rep.bytes["dram write"])
        return AnalysisResult(
            total_flops=int(round(flops)), total_global_bytes=int(round(global_bytes)),
            estimated_time=max(global_bytes / bandwidth, compute_s),
            expected_tflops=round(max(peaks) / 1e12, 1) if peaks else None,
            expected_bandwidth_GBps=bandwidth / 1e9, simulated_time=rep.time_s, bound=rep.bound)

    @classmethod
    def analysis(cls, fn, device=None) -> AnalysisResult:
        """``Analyzer(fn, device).ir_pass().calculate()``."""
        return cls(fn, device).ir_pass().calculate()

