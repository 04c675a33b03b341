"""Checking and execution options of the NumPy interpreter (one frozen, keyword-only object)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import KernelTypeError


@dataclass(frozen=True, kw_only=True)
class InterpOptions:
    """How the interpreter runs a kernel.

    Attributes:
        mode: ``"batched"`` runs a launch over chunks of blocks at once (a leading block axis on every
            on-chip buffer); ``"serial"`` runs one block at a time in launch order (the readable
            definition; tests hold the two equal).
        uninit: what uninitialised outputs and allocations hold: ``"nan"`` (floats NaN, integers a
            sentinel, the default: a kernel that reads memory it never wrote shows it), ``"zero"``, or
            ``"empty"`` (whatever ``numpy.empty`` returns, like ``torch.empty``).
        oob: out-of-range **global** accesses: ``"zero"`` (TileLang: reads give 0, writes are skipped)
            or ``"error"`` (raise ``KernelRuntimeError`` at the access's source line). On-chip
            out-of-range accesses always raise.
        races: report two blocks writing the same global element without an atomic.
        tf32: round float32 gemm operands to TF32, as NVIDIA tensor cores do for float32 gemms.
        chunk_bytes: memory budget for one chunk of blocks (bounds peak memory on big grids).
    """

    mode: str = "batched"
    uninit: str = "nan"
    oob: str = "zero"
    races: bool = False
    tf32: bool = False
    chunk_bytes: int = 256 * 2**20

    def __post_init__(self):
        if self.mode not in ("batched", "serial"):
            raise KernelTypeError(f"InterpOptions.mode must be 'batched' or 'serial', got {self.mode!r}")
        if self.uninit not in ("nan", "zero", "empty"):
            raise KernelTypeError(f"InterpOptions.uninit must be 'nan', 'zero' or 'empty', got {self.uninit!r}")
        if self.oob not in ("zero", "error"):
            raise KernelTypeError(f"InterpOptions.oob must be 'zero' or 'error', got {self.oob!r}")
        if self.chunk_bytes <= 0:
            raise KernelTypeError("InterpOptions.chunk_bytes must be positive")


#: Integer sentinel written into uninitialised integer memory when ``uninit="nan"``.
INT_SENTINEL = -0x5A5A5A5A
