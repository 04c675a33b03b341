"""The per-block cost program the analysis produces and the simulator schedules.

Contract
--------
* Every *amount* is a Python float or a NumPy array broadcastable over the launch's block axes
  ``(bx, by, bz)`` (size 1 on axes it does not depend on). After :func:`compress` the block axes are
  *block classes*: runs of block indices with identical costs, with :attr:`LaunchProgram.counts`.
* :class:`Op` is one tile operation of one block (per execution): ``work`` by resource, ``flops`` by
  (unit, dtype), bytes moved by level pair (``xfer``), global accesses for the L2 reuse model, its
  issue ``side`` (``matrix``/``vector``), its ``kind`` (``compute``, ``load`` = synchronous global
  read, ``async`` = asynchronous global → on-chip copy, ``store`` = global write) and ``weight``
  (expected executions, e.g. an ``if``'s taken fraction).
* :class:`Loop` repeats a body ``trip`` times (a per-block mean); ``kind`` ``pipelined`` with
  ``stages`` lets the simulator overlap async copies with compute.
* Resources of ``work``: ``matrix:<dtype>`` (FLOPs), ``vector:<dtype>`` (element operations),
  ``sfu`` (results), ``smem`` (shared-memory bytes), ``operand`` (matrix operand bytes over a data
  path, NPUs), ``global`` (bytes requested from L2/DRAM), ``roundtrip`` (cube↔vector bytes through
  global memory).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..ir import nodes as N

__all__ = ["GAccess", "Op", "Loop", "LaunchProgram", "compress", "walk_ops"]


@dataclass
class GAccess:
    """A global-memory access of one op: bytes per execution, the block axes its address uses."""

    buffer: N.Buffer
    bytes: object
    write: bool
    deps: frozenset  # block axes (0, 1, 2) the address depends on
    data_dependent: bool = False


@dataclass
class Op:
    kind: str
    label: str
    node: str
    loc: object
    side: str
    reads: frozenset
    writes: frozenset
    work: dict = field(default_factory=dict)
    flops: dict = field(default_factory=dict)
    xfer: dict = field(default_factory=dict)
    gaccess: list = field(default_factory=list)
    sfu_funcs: dict = field(default_factory=dict)
    latency: str = ""
    syncs: float = 0.0
    #: a dependent chain the op waits for besides memory, in core clock cycles (the cross-thread steps of
    #: a block reduction: shuffles, then the per-warp partials read back from shared memory)
    latency_cycles: float = 0.0
    #: the same chain with physical step latencies (profile ``chain_latency``; None: ``latency_cycles``), used
    #: only for the per-block critical-path bound of the simulator (docs/simulator.md §3h)
    chain_cycles: float | None = None
    #: a synchronous load whose addresses come from another global load (a gather through a block table or an
    #: index list): it first waits that index load (profile ``gather_index_latency``)
    gather: bool = False
    #: dependent latency rounds of a synchronous load issued by few threads (profile ``replicated_owner_loops``:
    #: each owner thread keeps ``owner_load_bytes_in_flight`` bytes outstanding; 1 = one latency)
    load_rounds: float = 1.0
    #: a gather whose vector chunks wait their index load and their data one chunk after another (profile
    #: ``serial_gathers``: TileLang's bounds guards around each chunk's index and data loads); 1 = all together
    gather_rounds: float = 1.0
    weight: object = 1.0
    #: filled by the simulator's reuse model: DRAM bytes per execution
    dram: object = 0.0


@dataclass
class Loop:
    trip: object
    kind: str
    stages: int
    body: list
    label: str
    loc: object
    weight: object = 1.0


@dataclass
class LaunchProgram:
    """One launch: grid, threads, the block program and its on-chip footprint."""

    launch: N.Launch
    grid: tuple  # (gx, gy, gz)
    threads: int
    body: list
    shared_bytes: dict  # buffer name -> bytes (including pipeline multi-buffering)
    fragment_bytes: dict  # buffer name -> bytes (registers or on-chip buffer)
    local_bytes: dict
    side_of_buffer: dict  # buffer name -> "matrix"/"vector" (which core kind holds it, NPUs)
    swizzle: tuple | None
    has_async_copies: bool
    global_buffers: dict  # uid -> (Buffer, tensor bytes)
    notes: list
    #: peak bytes of register fragments live at once over the block program (``footprint.peak_live_bytes``)
    register_peak_bytes: float | None = None
    #: bytes one thread loads in the largest synchronous global -> on-chip tile copy (0: none)
    sync_load_bytes_per_thread: float = 0.0
    #: asynchronous copies inside a pipelined loop: the ``tensorcore`` profile adds a producer warpgroup
    #: (TileLang warp-specialises only pipelined loops; a lone TMA copy is issued by the block's threads)
    warp_specialized: bool = True
    #: block classes after :func:`compress`: per axis (run starts, run lengths)
    runs: tuple = ()
    counts: object = 1.0

    @property
    def num_blocks(self) -> int:
        return int(np.prod(self.grid))


def walk_ops(body):
    """Every :class:`Op` in a body, depth first."""
    for n in body:
        if isinstance(n, Loop):
            yield from walk_ops(n.body)
        else:
            yield n


def _amounts(body):
    """Every amount held by the nodes of ``body`` (for compression), as (holder, key, value)."""
    for n in body:
        if isinstance(n, Loop):
            yield n, "trip", None
            yield n, "weight", None
            yield from _amounts(n.body)
        else:
            yield n, "weight", None
            for d in (n.work, n.flops, n.xfer, n.sfu_funcs):
                for k in list(d):
                    yield d, k, "dict"
            for g in n.gaccess:
                yield g, "bytes", None


def _get(holder, key, kind):
    return holder[key] if kind == "dict" else getattr(holder, key)


def _set(holder, key, kind, value):
    if kind == "dict":
        holder[key] = value
    else:
        setattr(holder, key, value)


def compress(prog: LaunchProgram) -> LaunchProgram:
    """Replace full block axes by block classes (runs of identical cost) in every amount."""
    items = list(_amounts(prog.body))
    arrays = [(h, k, kd, _get(h, k, kd)) for h, k, kd in items]
    runs = []
    for axis in range(3):
        g = prog.grid[axis]
        change = np.zeros(max(g - 1, 0), dtype=bool)
        for _, _, _, v in arrays:
            if isinstance(v, np.ndarray) and v.ndim == 3 and v.shape[axis] > 1:
                d = np.diff(v, axis=axis) != 0
                other = tuple(a for a in range(3) if a != axis)
                change |= np.any(d, axis=other)
        starts = np.concatenate([[0], np.nonzero(change)[0] + 1]).astype(np.int64)
        lengths = np.diff(np.concatenate([starts, [g]])).astype(np.float64)
        runs.append((starts, lengths))
    for h, k, kd, v in arrays:
        if isinstance(v, np.ndarray) and v.ndim == 3:
            for axis in range(3):
                if v.shape[axis] > 1:
                    v = np.take(v, runs[axis][0], axis=axis)
            _set(h, k, kd, v)
    prog.runs = tuple(runs)
    c0, c1, c2 = (r[1] for r in runs)
    prog.counts = c0[:, None, None] * c1[None, :, None] * c2[None, None, :]
    return prog

