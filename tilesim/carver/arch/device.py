"""Device descriptions for the roller (``tilelang.carver.arch.CUDA`` / ``CDNA``), read from the hardware model.

Contract
--------
``CUDA(target="cuda")`` describes the GPU the roller plans for: with a CUDA GPU, its SM count, shared memory
per block and compute capability come from the device (:mod:`.driver`); without one, from the hardware model
the simulator uses (``TILESIM_HW``, else the H200) through :mod:`tilesim.hw`. Every other figure the roller
reads (registers per SM, warps per SM, L2 size, DRAM bandwidth, tensor-core peak per dtype) comes from that
model. Attributes keep TileLang's names (``smem_cap``, ``compute_max_core``, ``warp_size``, ``reg_cap``,
``compute_capability``, ``sm_version``, ``platform``, ``l2_cache_size_bytes``) and add ``model`` (the model)
and ``max_warps_per_sm``, ``max_blocks_per_sm``, ``dram_bytes_per_s``.

``CDNA(target)`` (AMD) is a ``KernelTypeError``: tilesim has no AMD hardware model to plan against.
"""

from __future__ import annotations

from ...errors import KernelTypeError
from . import driver

__all__ = ["TileDevice", "CUDA", "CDNA", "is_cuda_arch", "is_hopper_arch", "is_ampere_arch"]


class TileDevice:
    """What a roller reads from a device (see the subclasses)."""

    platform = "unknown"
    smem_cap = 0
    compute_max_core = 0
    warp_size = 32
    reg_cap = 0
    compute_capability = ""
    sm_version = 0


class CUDA(TileDevice):
    """An NVIDIA GPU as the roller sees it (the device, or the simulator's hardware model)."""

    def __init__(self, target="cuda"):
        self.target = target
        model = driver.model()
        self.model = model
        self.platform = "CUDA"
        self.name = driver.get_device_name()
        self.compute_capability = driver.get_compute_version().replace(".", "")
        self.sm_version = int(self.compute_capability)
        self.compute_max_core = driver.get_num_sms()
        self.smem_cap = driver.get_max_dynamic_shared_size_bytes()
        occ = model.primary_core.occupancy
        self.warp_size = int(occ.warp_size_count or 32)
        self.reg_cap = int(occ.registers_count or 65536)
        self.max_warps_per_sm = int(occ.max_warps_count or 64)
        self.max_blocks_per_sm = int(occ.max_blocks_count or 32)
        self.max_threads_per_block = int(occ.max_threads_per_block_count or 1024)
        self.max_regs_per_thread = int(occ.max_registers_per_thread_count or 255)
        self.l2_cache_size_bytes = int(sum(c.bytes or 0 for c in model.caches if c.name != "l1"))
        self.dram_bytes_per_s = float(model.dram_bandwidth)

    def tensor_flops_per_s(self, dtype) -> float | None:
        """Dense tensor-core FLOP/s of the whole GPU for inputs of ``dtype`` (``None``: not stated)."""
        core = self.model.primary_core
        for unit in core.units:
            if unit.kind == "matrix":
                peak = self.model.unit_peak_flops(core, unit, str(dtype))
                return None if peak is None else float(peak)
        return None

    def __repr__(self) -> str:
        return f"CUDA({self.target!r}: {self.name}, {self.compute_max_core} SMs, sm_{self.compute_capability})"


class CDNA(TileDevice):
    """AMD CDNA: refused (no AMD hardware model)."""

    def __init__(self, target="hip"):
        raise KernelTypeError(f"carver.arch.CDNA({target!r}): tilesim has no AMD hardware model to plan for",
                              hint="use carver.arch.CUDA('cuda') (the simulator's NVIDIA model)")


def is_cuda_arch(arch) -> bool:
    return isinstance(arch, CUDA)


def is_ampere_arch(arch) -> bool:
    return is_cuda_arch(arch) and 80 <= arch.sm_version < 90


def is_hopper_arch(arch) -> bool:
    return is_cuda_arch(arch) and arch.sm_version == 90
