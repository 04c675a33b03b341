"""Builder of ``T.annotate_ws_schedule`` and the ``with T.ws_op(...)`` statement (see
:mod:`tilesim.language.ws_schedule` for the semantics: the schedule is checked and changes no value).

Errors are ``KernelTypeError`` located at the call, naming the part of the schedule at fault.
"""

from __future__ import annotations

from ..errors import KernelSyntaxError, KernelTypeError
from ..ir import nodes as N
from ..language.ws_schedule import WSPipeline, WSRole, WSSchedule, WSScope, WSSyncOp
from .builders import builder

_ON_CHIP = ("shared", "shared.dyn", "tmem", "shared.tmem")


@builder("annotate_ws_schedule")
def _b_annotate_ws_schedule(tr, loc, schedule):
    if not tr.in_launch():
        raise KernelSyntaxError("T.annotate_ws_schedule outside `with T.Kernel(...)`", loc)
    if not isinstance(schedule, WSSchedule):
        raise KernelTypeError(f"T.annotate_ws_schedule takes a T.WSSchedule, got {type(schedule).__name__}", loc)
    warps = schedule.num_warps
    if warps is not None and (not isinstance(warps, int) or warps <= 0):
        raise KernelTypeError(f"T.WSSchedule: num_warps must be a positive int, got {warps!r}", loc)
    roles = {}
    for r in schedule.roles:
        if not isinstance(r, WSRole):
            raise KernelTypeError(f"T.WSSchedule: roles holds a {type(r).__name__}, not a T.WSRole", loc)
        if not (0 <= r.warps_lo < r.warps_hi and (warps is None or r.warps_hi <= warps)):
            raise KernelTypeError(f"T.WSRole {r.name!r}: warps [{r.warps_lo}, {r.warps_hi}) are not inside the "
                                  f"schedule's {warps} warps", loc)
        roles[r.name] = r
    pipes = {}
    for p in schedule.pipelines:
        if not isinstance(p, WSPipeline):
            raise KernelTypeError(f"T.WSSchedule: pipelines holds a {type(p).__name__}, not a T.WSPipeline", loc)
        if not isinstance(p.depth, int) or p.depth < 1:
            raise KernelTypeError(f"T.WSPipeline {p.name!r}: depth must be a positive int, got {p.depth!r}", loc)
        for b in p.buffers:
            if not isinstance(b, N.Buffer) or b.scope not in _ON_CHIP:
                raise KernelTypeError(f"T.WSPipeline {p.name!r}: {getattr(b, 'name', b)!r} is not a shared or "
                                      f"tensor-memory buffer", loc)
        pipes[p.name] = p
    for sc in schedule.scopes:
        if not isinstance(sc, WSScope) or not isinstance(sc.body, dict):
            raise KernelTypeError("T.WSSchedule: scopes hold T.WSScope(name, {role: [ops]})", loc)
        for role, ops in sc.body.items():
            if role not in roles:
                raise KernelTypeError(f"T.WSScope {sc.name!r}: unknown role {role!r}", loc,
                                      hint=f"roles: {', '.join(roles) or 'none'}")
            for op in ops:
                if isinstance(op, WSSyncOp):
                    if op.pipeline not in pipes:
                        raise KernelTypeError(f"T.WSScope {sc.name!r}: {op.kind} of unknown pipeline {op.pipeline!r}",
                                              loc, hint=f"pipelines: {', '.join(pipes) or 'none'}")
                elif not isinstance(op, str):
                    raise KernelTypeError(f"T.WSScope {sc.name!r}: an op is a T.ws_op/T.WSID name or a T.WSSync "
                                          f"call, got {type(op).__name__}", loc)


def with_ws_op(tr, node, call):
    """``with T.ws_op(name):`` — the body, traced in place."""
    args, kwargs = tr.call_args(call)
    name = args[0] if args else kwargs.get("name")
    if not isinstance(name, str) or len(args) + len(kwargs) != 1:
        raise KernelTypeError("T.ws_op takes one op name (a str)", tr.loc(call))
    tr.visit_body(node.body)


@builder("ws_op")
def _b_ws_op(tr, loc, name):
    raise KernelSyntaxError("T.ws_op is used as `with T.ws_op(\"name\"):`", loc,
                            hint="the with-body is the op the schedule names")
