"""Checking and execution options of the NumPy interpreter (one frozen, keyword-only object)."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import KernelTypeError


@dataclass(frozen=True, kw_only=True)
class InterpOptions:
    """How the interpreter runs a kernel.

    Attributes:
        mode: ``"batched"`` runs a launch over chunks of blocks at once (a leading block axis on every
            on-chip buffer); ``"serial"`` runs one block at a time in launch order (the readable
            definition; tests hold the two equal).
        uninit: what uninitialised outputs and allocations hold: ``"nan"`` (floats NaN, integers a
            sentinel, the default: a kernel that reads memory it never wrote shows it), ``"zero"``, ``"one"``
            (the sanitizer's fallback compares runs under three fills), ``"empty"`` (whatever
            ``numpy.empty`` returns, like ``torch.empty``), or ``"check"``: memory is filled as with
            ``"nan"`` and every on-chip buffer and tilesim-allocated output carries a per-element
            "initialised" mask; the first read of an element nobody wrote raises
            ``KernelRuntimeError`` at the reading statement (``interp/shadow.py``), and so does an
            ``out_idx`` output left partly unwritten.
        oob: out-of-range **global** accesses: ``"zero"`` (TileLang: reads give 0, writes are skipped),
            ``"error"`` (raise ``KernelRuntimeError`` at the access's source line, tile copies at
            tensor edges included), or ``"check"`` (the sanitizer's rule: tile copies and ``T.Parallel``
            accesses overhanging a tensor edge are masked as TileLang masks them; a scalar access, a
            serial-loop index or a gather through loaded indices out of range raises, naming the
            buffer, the index and the line). On-chip out-of-range accesses always raise.
        races: report two blocks writing the same global element, whatever the kinds of store
            (plain, tile copy, atomic), unless all writes to it are atomics of one kind.
        tf32: round float32 gemm operands to TF32, as NVIDIA tensor cores do for float32 gemms.
        chunk_bytes: memory budget for the chunks of blocks in flight (bounds peak memory on big grids).
        threads: how many chunks of one launch may run at once on threads. ``0`` (the default,
            auto): up to the number of usable CPUs (at most 8), and only for launches big enough to
            gain (chunks of several MiB of tiles: NumPy and BLAS release the GIL in their large
            calls, while small chunks lose more to GIL hand-offs than they gain). ``1``: chunks run
            one after another. ``n >= 2``: up to ``n`` threads on every launch that allows them.
            Results are bitwise the same either way. Launches with atomics, ``races=True``,
            ``uninit="check"`` and ``mode="serial"`` always run on one thread. See ``interp/chunks.py``.
        fuse_gemm_loops: run the canonical tiled-GEMM K loop (copy A tile, copy B tile, gemm) as one
            product per group of blocks over the whole K range (``interp/gemm_loop.py``): the same
            values up to the BLAS summation order, several times faster. ``False``: step by step.
        fresh: uids of the global tensors tilesim allocated for this run (``JITKernel.run`` sets it to the
            ``out_idx`` outputs when ``uninit="check"``): they start unset in the initialised mask, while
            tensors the caller passed are initialised by definition. Users leave it empty.
    """

    mode: str = "batched"
    uninit: str = "nan"
    oob: str = "zero"
    races: bool = False
    tf32: bool = False
    chunk_bytes: int = 256 * 2**20
    threads: int = 0
    fuse_gemm_loops: bool = True
    fresh: frozenset = frozenset()

    def __post_init__(self):
        if self.mode not in ("batched", "serial"):
            raise KernelTypeError(f"InterpOptions.mode must be 'batched' or 'serial', got {self.mode!r}")
        if self.uninit not in ("nan", "zero", "one", "empty", "check"):
            raise KernelTypeError(f"InterpOptions.uninit must be 'nan', 'zero', 'one', 'empty' or 'check', "
                                  f"got {self.uninit!r}")
        if self.oob not in ("zero", "error", "check"):
            raise KernelTypeError(f"InterpOptions.oob must be 'zero', 'error' or 'check', got {self.oob!r}")
        if isinstance(self.chunk_bytes, bool) or not isinstance(self.chunk_bytes, int) or self.chunk_bytes <= 0:
            raise KernelTypeError(f"InterpOptions.chunk_bytes must be a positive int, got {self.chunk_bytes!r}")
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 0:
            raise KernelTypeError(f"InterpOptions.threads must be an int >= 0 (0 = one per usable CPU, "
                                  f"1 = no threads), got {self.threads!r}")


#: Integer sentinel written into uninitialised integer memory when ``uninit="nan"``.
INT_SENTINEL = -0x5A5A5A5A
