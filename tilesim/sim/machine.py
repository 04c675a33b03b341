"""What the simulator reads from a hardware model, resolved once per (model, profile).

Every number here comes from the hardware model: unit rates (``flops_per_cycle`` × clock × the
calibrated efficiency fraction), buffer bandwidths, data-path rates and latencies, DRAM/L2 bandwidth
and latency, launch/block/barrier overheads, occupancy limits. A number the model does not state is
treated as "no limit" (a rate) or "no cost" (a latency) and listed in :attr:`Machine.assumptions`,
so a report says what it could not model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..analysis.profiles import LoweringProfile
from ..errors import KernelTypeError
from ..hw import Hardware

__all__ = ["Machine", "hw_dtype"]

INF = math.inf

_HW_DTYPE = {"float8_e4m3fn": "float8", "float8_e5m2": "float8", "float4_e2m1fn": "int4", "uint8": "int8"}


def hw_dtype(dtype: str) -> str:
    """The hardware-model dtype key of a tilesim dtype."""
    return _HW_DTYPE.get(dtype, dtype)


def _clip(x, default=1.0):
    if x is None:
        return default
    return min(1.0, max(1e-3, float(x)))


@dataclass
class Machine:
    hw: Hardware
    profile: LoweringProfile
    assumptions: list = field(default_factory=list)

    def __post_init__(self):
        hw, p = self.hw, self.profile
        self.mcore = hw.core_kind(p.matrix_core) if p.matrix_core else hw.primary_core
        self.vcore = hw.core_kind(p.vector_core) if p.vector_core else self.mcore
        #: cores that take blocks (one block slot per AIC on Ascend)
        self.core = self.mcore
        self.n_cores = int(self.core.count)
        #: vector cores per block (two AIV per AIC on Ascend)
        self.vec_per_block = max(1, round(self.vcore.count / self.mcore.count)) if self.vcore is not self.mcore else 1
        self.clock = hw.unit_clock_hz(self.core)
        self.separate_sides = self.vcore is not self.mcore
        occ = self.core.occupancy
        #: threads that issue together (1 where the model has no warps: NPUs)
        self.warp_size = int(occ.warp_size_count) if occ is not None and occ.warp_size_count else 1
        self._rates: dict = {}
        ov = hw.overheads
        self.launch_s = (ov.kernel_launch_latency_s or 0.0) + (ov.timed_launch_overhead_s or 0.0)
        if ov.kernel_launch_latency_s is None:
            self.assumptions.append("kernel launch latency unknown: taken as 0")
        self.block_launch_s = (ov.block_launch_cycles or 0.0) / self.clock
        self.sync_s = (ov.sync_cycles or 0.0) / self.clock
        if ov.sync_cycles is None:
            self.assumptions.append("barrier cost unknown: taken as 0")
        mem = hw.memory
        self.dram_bw = mem.bandwidth_bytes_per_s * _clip(hw.efficiency("dram", default=1.0))
        l2 = hw.l2
        self.l2_bytes = float(l2.bytes) if l2 is not None and l2.bytes else 0.0
        if l2 is not None and l2.bandwidth_bytes_per_s:
            self.l2_bw = hw.bandwidth("l2") * _clip(hw.efficiency("l2", default=1.0))
        else:
            self.l2_bw = INF
            self.assumptions.append("L2 bandwidth unknown: only DRAM bandwidth limits global traffic")
        dram_lat = hw.memory_latency_cycles
        l2_lat = l2.latency_cycles if l2 is not None else None
        self.dram_lat_s = (dram_lat or 0.0) / hw.clock_hz()
        loaded = mem.loaded_latency_cycles
        #: DRAM latency under load (Little's law of synchronous loads in profiles that ask for it)
        self.dram_loaded_lat_s = loaded / hw.clock_hz() if loaded else self.dram_lat_s
        self.l2_lat_s = (l2_lat if l2_lat is not None else (dram_lat or 0.0)) / hw.clock_hz()
        if dram_lat is None:
            self.assumptions.append("DRAM latency unknown: taken as 0")
        # per-core global data paths
        self.load_path = self._path(self.mcore, src=("dram", "l2"))
        self.vload_path = self._path(self.vcore, src=("dram", "l2"))
        self.store_path = self._path(self.vcore, dst=("dram", "l2"))
        self.mstore_path = self._path(self.mcore, dst=("dram", "l2"))

    # ------------------------------------------------------------------ data paths
    def _path(self, core, src=None, dst=None):
        for dp in core.data_paths:
            if (src and dp.src in src) or (dst and dp.dst in dst):
                rate = dp.bytes_per_cycle * self.hw.unit_clock_hz(core) if dp.bytes_per_cycle else INF
                lat = dp.latency_cycles / self.hw.unit_clock_hz(core) if dp.latency_cycles else None
                return rate, lat, dp.name
        return INF, None, None

    def dram_bw_for(self, resident_threads: float, cores: float, load_bytes_per_thread: float = 0.0,
                    async_copies: bool = True) -> float:
        """Device DRAM bandwidth reachable by ``resident_threads`` per core on ``cores`` cores.

        Profiles without asynchronous copies issue synchronous loads: a thread has the loads of one
        tile copy outstanding (``load_bytes_per_thread``, the launch's largest), at most
        ``sync_load_bytes_in_flight_per_thread`` bytes (the profile's cap); by Little's law the
        achieved rate is at most ``bytes in flight × threads × cores / DRAM latency``.

        Profiles with ``sync_loads_little`` apply the same bound to a launch without asynchronous
        copies (``async_copies`` False: every global read is a synchronous load by the threads), with
        no per-thread cap below the tile copy's bytes and the memory's *loaded* latency.
        """
        p = self.profile
        if p.sync_loads_little and not async_copies:
            lat = self.dram_loaded_lat_s
            if lat <= 0 or load_bytes_per_thread <= 0:
                return self.dram_bw
            bif = load_bytes_per_thread
            if p.sync_load_bytes_in_flight_per_thread is not None:
                bif = min(bif, p.sync_load_bytes_in_flight_per_thread)
            return min(self.dram_bw, bif * resident_threads * cores / lat)
        bif = p.sync_load_bytes_in_flight_per_thread
        if bif is None or (p.async_copy and (async_copies or not p.cp_async)) or self.dram_lat_s <= 0:
            return self.dram_bw
        if load_bytes_per_thread > 0:
            bif = min(bif, load_bytes_per_thread)
        return min(self.dram_bw, bif * resident_threads * cores / self.dram_lat_s)

    def path_rate(self, side: str) -> float:
        if side == "matrix":
            return self.load_path[0]
        return self.vload_path[0] * self.vec_per_block

    def async_latency(self, side: str):
        """Latency of an asynchronous global → on-chip copy (data path's, else None)."""
        return (self.load_path if side == "matrix" else self.vload_path)[1]

    def roundtrip(self):
        """(bytes/s per block, latency s) of a cube↔vector round trip through global memory."""
        w_rate = min(self.mstore_path[0], self.store_path[0] * self.vec_per_block)
        r_rate = min(self.load_path[0], self.vload_path[0] * self.vec_per_block)
        rate = 1.0 / (1.0 / w_rate + 1.0 / r_rate) if w_rate < INF or r_rate < INF else INF
        lat = (self.mstore_path[1] or self.l2_lat_s) + (self.load_path[1] or self.l2_lat_s)
        return rate * 2.0, lat  # rate per byte of the (write + read) pair

    # ------------------------------------------------------------------ unit rates
    def rate(self, resource: str) -> float:
        r = self._rates.get(resource)
        if r is None:
            r = self._rates[resource] = self._rate(resource)
        return r

    def _unit(self, core, kind):
        return next((u for u in core.units if u.kind == kind), None)

    def _rate(self, resource: str) -> float:
        hw, p = self.hw, self.profile
        kind, _, dtype = resource.partition(":")
        if kind == "matrix":
            u = self._unit(self.mcore, "matrix")
            key = hw_dtype(dtype)
            fpc = u.flops_per_cycle.get(key) if u else None
            if fpc is None:
                known = ", ".join(k for k, v in (u.flops_per_cycle.items() if u else ()) if v)
                raise KernelTypeError(f"T.gemm on {dtype} has no known rate on {hw.name}'s "
                                      f"{u.name if u else 'matrix'} unit (known: {known or 'none'})",
                                      hint="use a supported dtype or another hardware model")
            eff = _clip(hw.efficiency("matrix", key, default=1.0))
            return fpc * hw.unit_clock_hz(self.mcore, u) * eff
        if kind == "vector":
            u = self._unit(self.vcore, "vector")
            if u is None:
                return INF
            key = hw_dtype(dtype) if dtype else "float32"
            fpc = u.flops_per_cycle.get(key) or u.flops_per_cycle.get("float32")
            if fpc is None:
                return INF
            eff = _clip(hw.efficiency("vector", key if u.flops_per_cycle.get(key) else "float32", default=1.0))
            return fpc / p.vector_flops_per_slot * hw.unit_clock_hz(self.vcore, u) * eff * self.vec_per_block
        if kind == "issue":  # warp-instruction issue of mma.sync streams: the schedulers' lane slots, as vector
            return self.rate("vector:float32")
        if kind == "sfu":
            u = self._unit(self.vcore, "sfu")
            if u is None:
                return self.rate("vector:float32")
            fpc = u.flops_per_cycle.get("float32") or next((v for v in u.flops_per_cycle.values() if v), None)
            if fpc is None:
                return INF
            eff = _clip(hw.efficiency("vector", "float32", default=1.0))
            return fpc * hw.unit_clock_hz(self.vcore, u) * eff * self.vec_per_block
        if kind == "smem":
            core = self.vcore if self.separate_sides else self.mcore
            try:
                buf = hw.buffer_for_scope("shared", core.name)
            except Exception:  # noqa: BLE001
                return INF
            bpc = buf.read_bytes_per_cycle or buf.write_bytes_per_cycle
            if not bpc:
                return INF
            return bpc * hw.unit_clock_hz(core) * (self.vec_per_block if self.separate_sides else 1)
        if kind == "operand":
            rates = [dp.bytes_per_cycle for dp in self.mcore.data_paths
                     if dp.bytes_per_cycle and dp.src not in ("dram", "l2") and dp.dst not in ("dram", "l2")
                     and dp.dst in {b.name for b in self.mcore.buffers if not b.scopes}]
            return min(rates) * hw.unit_clock_hz(self.mcore) if rates else INF
        raise KeyError(resource)

    # ------------------------------------------------------------------ names
    def resource_name(self, key: str, sfu_top: str | None = None) -> str:
        if key == "matrix":
            u = self._unit(self.mcore, "matrix")
            name = u.name if u else "matrix"
            return {"tensor": "tensor core", "cube": "cube unit"}.get(name, f"{name} matrix unit")
        if key == "vector":
            u = self._unit(self.vcore, "vector")
            return "CUDA cores" if u is not None and u.name == "cuda" else (f"{u.name} unit" if u else "vector unit")
        if key == "sfu":
            return f"{sfu_top} on SFU" if sfu_top else "SFU"
        return {"smem": "shared-memory bandwidth", "operand": "matrix operand path (L1→L0)",
                "l2": "L2 bandwidth", "dram": "DRAM bandwidth", "path": "per-core load path",
                "roundtrip": "cube↔vector traffic through global memory",
                "launch": "block launches (one at a time per core)"}.get(key, key)
