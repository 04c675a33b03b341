"""Automatic warp specialisation: ``T.annotate_ws_schedule(T.WSSchedule(...))`` and ``with T.ws_op(name):``.

Contract
--------
TileLang's automatic warp specialisation takes a kernel written as plain tile code plus a *schedule*: warp
roles (``T.WSRole(name, warps_lo, warps_hi, max_nreg)``), pipelines of multi-versioned buffers with a
full/empty barrier pair each (``T.WSPipeline(name, buffers, depth)``), and per scheduled loop the sequence of
ops each role runs (``T.WSScope(loop_id, {role: [op_id | T.WSSync.*(...), ...]})``; ``T.WSScope.ROOT`` is
the kernel's top level). Ops and loops are named by ``with T.ws_op("id"):`` or ``annotations={T.WSID: "id"}``
on ``T.copy``/``T.gemm``/loops. The compiler materialises the schedule into a warp-specialised program that
computes **the same values** as the code as written (TileLang's own example says so: the pipelined loop is
"exactly equivalent" to the plain one).

tilesim therefore runs the code as written: ``T.annotate_ws_schedule`` checks the schedule (types, roles
within its warps, pipelines over on-chip buffers with a positive depth, scopes naming known roles and
pipelines) and changes no value; ``T.ws_op`` runs its body. The simulator costs the kernel as written (its
declared threads), not the materialised warp-specialised form. The objects below are plain Python values
built at trace time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ._marker import marker

__all__ = ["WSID", "WSRole", "WSPipeline", "WSSync", "WSSyncOp", "WSScope", "WSSchedule", "annotate_ws_schedule",
           "ws_op"]

#: the annotation key naming a tile op or loop for a schedule (``annotations={T.WSID: "copy_A"}``)
WSID = "tilesim.ws_id"


class _TraceTime:
    __tilesim_trace_time__ = True  # built at trace time, also from buffers


@dataclass(frozen=True)
class WSRole(_TraceTime):
    """Warps ``[warps_lo, warps_hi)`` of the block play role ``name`` (``max_nreg``: their register cap)."""

    name: str
    warps_lo: int
    warps_hi: int
    max_nreg: int | None = None


@dataclass(frozen=True)
class WSPipeline(_TraceTime):
    """``depth`` versions of ``buffers`` guarded by one full/empty barrier pair named ``name``."""

    name: str
    buffers: tuple
    depth: int = 1

    def __init__(self, name, buffers, depth=1):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "buffers", tuple(buffers))
        object.__setattr__(self, "depth", depth)


@dataclass(frozen=True)
class WSSyncOp(_TraceTime):
    """One synchronisation of a pipeline at a software-pipeline ``stage``."""

    kind: str
    pipeline: str
    stage: int = 0


class WSSync(_TraceTime):
    """The four synchronisations of a pipeline: the producer acquires an empty version and commits it full;
    the consumer waits for a full version and releases it."""

    @staticmethod
    def producer_acquire(pipeline, stage=0):
        return WSSyncOp("producer_acquire", pipeline, stage)

    @staticmethod
    def producer_commit(pipeline, stage=0):
        return WSSyncOp("producer_commit", pipeline, stage)

    @staticmethod
    def consumer_wait(pipeline, stage=0):
        return WSSyncOp("consumer_wait", pipeline, stage)

    @staticmethod
    def consumer_release(pipeline, stage=0):
        return WSSyncOp("consumer_release", pipeline, stage)


@dataclass(frozen=True)
class WSScope(_TraceTime):
    """The op sequence of each role inside the scheduled loop ``name`` (``WSScope.ROOT``: the top level)."""

    ROOT = "__root__"
    name: str
    body: dict = field(default_factory=dict)


@dataclass(frozen=True)
class WSSchedule(_TraceTime):
    """A whole schedule: the warps of the specialised block, its roles, pipelines and scopes."""

    num_warps: int | None = None
    roles: tuple = ()
    pipelines: tuple = ()
    scopes: tuple = ()

    def __init__(self, num_warps=None, roles=(), pipelines=(), scopes=()):
        object.__setattr__(self, "num_warps", num_warps)
        object.__setattr__(self, "roles", tuple(roles))
        object.__setattr__(self, "pipelines", tuple(pipelines))
        object.__setattr__(self, "scopes", tuple(scopes))


@marker()
def annotate_ws_schedule(schedule):
    """Attach a warp-specialisation schedule to the kernel (checked; values are those of the code as written)."""


@marker()
def ws_op(name):
    """``with T.ws_op("id"):`` names the statements of its body as one op of a schedule; runs the body."""
